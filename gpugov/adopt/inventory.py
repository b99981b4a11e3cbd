"""The cluster objects an import reads, sorted by kind, with Kueue v1beta1 spelled as v1beta2.

Kueue v1beta1 and v1beta2 differ, for what import reads, only in the ClusterQueue's cohort
field (`cohort` -> `cohortName`) and two renamed flavorFungibility values (Borrow, Preempt ->
MayStopSearch), as Kueue's own conversion (apis/kueue/v1beta1/clusterqueue_conversion.go) does.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpugov.kube.names import KUEUE_GROUP, SCHEDULING_API, VOLCANO_API

KUEUE_VERSIONS = ("v1beta1", "v1beta2")
KUEUE_KINDS = ("ResourceFlavor", "ClusterQueue", "Cohort", "LocalQueue", "WorkloadPriorityClass", "Topology")
# Kueue kinds a declarations repo has no place for: each one found is a gap.
UNSUPPORTED_KUEUE_KINDS = ("AdmissionCheck", "ProvisioningRequestConfig", "MultiKueueConfig", "MultiKueueCluster")

Obj = dict[str, Any]
POD_PRIORITY_API = SCHEDULING_API  # scheduling.k8s.io/v1: the PriorityClasses Volcano orders jobs by
VOLCANO_CONF = "volcano-scheduler.conf"  # gpugov.compile.volcano_scheduler.CONFIG_KEY


@dataclass
class Inventory:
    flavors: dict[str, Obj] = field(default_factory=dict)
    cluster_queues: dict[str, Obj] = field(default_factory=dict)
    cohorts: dict[str, Obj] = field(default_factory=dict)
    local_queues: dict[tuple[str, str], Obj] = field(default_factory=dict)  # (namespace, name)
    priority_classes: dict[str, Obj] = field(default_factory=dict)
    topologies: dict[str, Obj] = field(default_factory=dict)
    nodes: dict[str, Obj] = field(default_factory=dict)
    namespaces: dict[str, Obj] = field(default_factory=dict)
    # ConfigMaps holding a mig-parted config (NVIDIA GPU Operator's mig-manager), (namespace, name) ->
    # the ConfigMap with its parsed config under "mig-parted"; nodes select one of its mig-configs by
    # their nvidia.com/mig.config label.
    mig_parted: dict[tuple[str, str], Obj] = field(default_factory=dict)
    # gpugov's tenant RoleBindings (gpugov-tenant-owners, -members, -viewers), (namespace, name) -> RoleBinding:
    # the subjects a tenant's spec.owners, members and viewers bind.
    role_bindings: dict[tuple[str, str], Obj] = field(default_factory=dict)
    # gpugov's in-cluster operations it applied before (Cluster spec.operations), name -> CronJob or DaemonSet:
    # gpugov-drift, gpugov-agent, gpugov-reclaim, gpugov-budget.
    operations: dict[str, Obj] = field(default_factory=dict)
    # Guardrails.platformTeam as gpugov's admission messages name it (gpugov-pool-placement); None: not read.
    platform_team: list[str] | None = None
    unsupported: list[str] = field(default_factory=list)  # "AdmissionCheck name"
    nodes_known: bool = False  # the source lists nodes (a live cluster, or a folder with Node objects)
    # Volcano (gpugov.adopt.volcano): its Queues by name, the scheduling.k8s.io PriorityClasses, the PodGroups
    # (whose spec.queue says which namespaces submit to which Queue) and the scheduler's configuration ConfigMap.
    volcano_queues: dict[str, Obj] = field(default_factory=dict)
    pod_priority_classes: dict[str, Obj] = field(default_factory=dict)
    podgroups: dict[tuple[str, str], Obj] = field(default_factory=dict)  # (namespace, name)
    volcano_conf: Obj | None = None  # the ConfigMap holding volcano-scheduler.conf
    # What gpugov-volcano-pod-priority (applied by gpugov before) lets each namespace's pods name:
    # namespace -> classes, and "" -> the classes any other namespace may name. None: no such policy read.
    pod_priorities: dict[str, list[str]] | None = None

    @property
    def has_kueue(self) -> bool:
        return bool(self.cluster_queues or self.flavors or self.cohorts or self.local_queues)

    @property
    def has_volcano(self) -> bool:
        """Volcano Queues besides the two its controllers make alone (root, default)."""
        return bool(set(self.volcano_queues) - {"root", "default"})


def _to_v1beta2(obj: Obj) -> Obj:
    obj = copy.deepcopy(obj)
    if obj["kind"] == "ClusterQueue":
        spec = obj.setdefault("spec", {})
        if "cohort" in spec:
            spec.setdefault("cohortName", spec.pop("cohort"))
        fungibility = spec.get("flavorFungibility") or {}
        for key in ("whenCanBorrow", "whenCanPreempt"):
            if fungibility.get(key) in ("Borrow", "Preempt"):
                fungibility[key] = "MayStopSearch"
    return obj


RBAC = "rbac.authorization.k8s.io"
TENANT_PERSONAS = ("owner", "member", "viewer")  # gpugov.compile.roles: binding gpugov-tenant-<persona>s


def tenant_binding(obj: Obj) -> str | None:
    """The persona of one of gpugov's tenant RoleBindings (gpugov-tenant-<persona>s binding ClusterRole
    gpugov-tenant-<persona>), else None."""
    ref = obj.get("roleRef") or {}
    for persona in TENANT_PERSONAS:
        if obj["metadata"]["name"] == f"gpugov-tenant-{persona}s" and ref.get("kind") == "ClusterRole" and \
                ref.get("name") == f"gpugov-tenant-{persona}":
            return persona
    return None


# gpugov.compile.operations: the CronJobs and the agent DaemonSet spec.operations compiles to.
OPERATIONS = ("gpugov-drift", "gpugov-agent", "gpugov-reclaim", "gpugov-budget")
OPERATION_KINDS = (("batch/v1", "CronJob"), ("apps/v1", "DaemonSet"))
ADMISSION = "admissionregistration.k8s.io/v1"
PLACEMENT = "gpugov-pool-placement"  # gpugov.compile.admission.placement
NO_TEAM = "the platform team"  # what gpugov's messages say where Guardrails.platformTeam names nobody


def platform_team(obj: Obj) -> list[str] | None:
    """Guardrails.platformTeam from gpugov-pool-placement's messages ("...; ask <team, team>)"); [] where they ask
    the platform team unnamed, None where no message says."""
    from gpugov.compile.admission.placement import ASK

    for validation in (obj.get("spec") or {}).get("validations") or []:
        text = str(validation.get("messageExpression") or "")
        if ASK in text and text.endswith(")'"):
            team = text.split(ASK, 1)[1][:-2]
            return [] if team == NO_TEAM else team.split(", ")
    return None


POD_PRIORITY_POLICY = "gpugov-volcano-pod-priority"  # gpugov.compile.admission.volcano.VOLCANO_POD_PRIORITY


def pod_priorities(obj: Obj) -> dict[str, list[str]] | None:
    """The perNamespace and anywhere variables of gpugov-volcano-pod-priority (CEL literals of JSON's syntax)."""
    found: dict[str, Any] = {}
    for variable in (obj.get("spec") or {}).get("variables") or []:
        if variable.get("name") in ("perNamespace", "anywhere"):
            try:
                found[variable["name"]] = json.loads(str(variable.get("expression")))
            except ValueError:
                return None
    per_namespace, anywhere = found.get("perNamespace"), found.get("anywhere")
    if not isinstance(per_namespace, dict) or not isinstance(anywhere, list):
        return None
    return {**{str(k): [str(c) for c in v] for k, v in per_namespace.items() if isinstance(v, list)},
            "": [str(c) for c in anywhere]}


def asked_team(obj: Obj) -> list[str] | None:
    """Guardrails.platformTeam from any of gpugov's admission policies: their messages end "...; ask <team, team>)"
    ([] where they ask the platform team unnamed), None where no message says."""
    for validation in (obj.get("spec") or {}).get("validations") or []:
        text = str(validation.get("messageExpression") or "")
        if "; ask " in text and text.endswith(")'"):
            team = text.rsplit("; ask ", 1)[1][:-2]
            return [] if team == NO_TEAM else team.split(", ")
    return None


def mig_parted_config(obj: Obj) -> Obj | None:
    """The parsed mig-parted config (version, mig-configs) a ConfigMap holds in one of its data keys, else None."""
    for text in (obj.get("data") or {}).values():
        if not isinstance(text, str) or "mig-configs" not in text:
            continue
        try:
            parsed = yaml.safe_load(text)
        except yaml.YAMLError:
            continue
        if isinstance(parsed, dict) and isinstance(parsed.get("mig-configs"), dict):
            return parsed
    return None


def _expand(objects: list[Any]) -> list[Obj]:
    """Objects with `<Kind>List` documents (kubectl get -o yaml) opened up."""
    flat: list[Obj] = []
    for obj in objects:
        if not isinstance(obj, dict):
            continue
        if str(obj.get("kind", "")).endswith("List") and isinstance(obj.get("items"), list):
            flat.extend(_expand(obj["items"]))
        elif isinstance(obj.get("metadata"), dict) and obj["metadata"].get("name"):
            flat.append(obj)
    return flat


def inventory(objects: list[Any], nodes_known: bool | None = None) -> Inventory:
    """Sort raw objects into an Inventory; a later object of the same kind and name replaces an earlier one."""
    inv = Inventory()
    placement, other_team = False, None  # the team gpugov-pool-placement names (Kueue), else another policy
    for obj in _expand(objects):
        group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
        kind, name = obj.get("kind"), obj["metadata"]["name"]
        if group == KUEUE_GROUP and version in KUEUE_VERSIONS:
            if kind in UNSUPPORTED_KUEUE_KINDS:
                inv.unsupported.append(f"{kind} {name}")
                continue
            if kind not in KUEUE_KINDS:
                continue
            obj = _to_v1beta2(obj)
            if kind == "ResourceFlavor":
                inv.flavors[name] = obj
            elif kind == "ClusterQueue":
                inv.cluster_queues[name] = obj
            elif kind == "Cohort":
                inv.cohorts[name] = obj
            elif kind == "LocalQueue":
                inv.local_queues[(obj["metadata"].get("namespace") or "default", name)] = obj
            elif kind == "WorkloadPriorityClass":
                inv.priority_classes[name] = obj
            else:
                inv.topologies[name] = obj
        elif obj.get("apiVersion") == "v1" and kind == "Node":
            inv.nodes[name] = obj
        elif obj.get("apiVersion") == "v1" and kind == "Namespace":
            inv.namespaces[name] = obj
        elif obj.get("apiVersion") == f"{RBAC}/v1" and kind == "RoleBinding" and tenant_binding(obj):
            inv.role_bindings[(obj["metadata"].get("namespace") or "default", name)] = obj
        elif (obj.get("apiVersion"), kind) in OPERATION_KINDS and name in OPERATIONS and \
                (obj["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by") == "gpugov":
            inv.operations[name] = obj
        elif obj.get("apiVersion") == ADMISSION and kind == "ValidatingAdmissionPolicy" and name == PLACEMENT:
            inv.platform_team = platform_team(obj)
            placement = True
        elif obj.get("apiVersion") == ADMISSION and kind == "ValidatingAdmissionPolicy" and \
                (obj["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by") == "gpugov":
            other_team = other_team if other_team is not None else asked_team(obj)
            if name == POD_PRIORITY_POLICY:
                inv.pod_priorities = pod_priorities(obj)
        elif obj.get("apiVersion") == "v1" and kind == "ConfigMap" and (config := mig_parted_config(obj)) is not None:
            inv.mig_parted[(obj["metadata"].get("namespace") or "default", name)] = {**obj, "mig-parted": config}
        elif obj.get("apiVersion") == "v1" and kind == "ConfigMap" and VOLCANO_CONF in (obj.get("data") or {}):
            inv.volcano_conf = obj
        elif obj.get("apiVersion") == VOLCANO_API and kind == "Queue":
            inv.volcano_queues[name] = obj
        elif obj.get("apiVersion") == VOLCANO_API and kind == "PodGroup":
            inv.podgroups[(obj["metadata"].get("namespace") or "default", name)] = obj
        elif obj.get("apiVersion") == POD_PRIORITY_API and kind == "PriorityClass":
            inv.pod_priority_classes[name] = obj
    if not placement and other_team is not None:  # Volcano: no placement policy, the others ask the same team
        inv.platform_team = other_team
    inv.nodes_known = bool(inv.nodes) if nodes_known is None else nodes_known
    return inv
