"""Where import reads objects from: a folder of YAML (a GitOps repository, a kustomize build)
or a live cluster (Kueue's objects, or Volcano's) through the raw, checked API reads of gpugov.cluster.rest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gpugov.adopt.inventory import (
    ADMISSION,
    KUEUE_GROUP,
    PLACEMENT,
    POD_PRIORITY_API,
    RBAC,
    VOLCANO_CONF,
    Inventory,
    inventory,
    mig_parted_config,
)
from gpugov.kube.kinds import Kind
from gpugov.kube.names import VOLCANO_API
from gpugov.kube.objects import MANAGED_BY, MANAGER

SUFFIXES = (".yaml", ".yml", ".json")
# Read from a cluster, newest Kueue version the server serves first.
KUEUE_PLURALS = {
    "ResourceFlavor": "resourceflavors",
    "ClusterQueue": "clusterqueues",
    "Cohort": "cohorts",
    "LocalQueue": "localqueues",
    "WorkloadPriorityClass": "workloadpriorityclasses",
    "Topology": "topologies",
    "AdmissionCheck": "admissionchecks",
}
NAMESPACED = {"LocalQueue"}


class SourceError(Exception):
    """The folder cannot be read as YAML (exit 2)."""


def read_folder(folder: Path) -> Inventory:
    """Every object in the YAML and JSON files under `folder` (a file of several documents too)."""
    if not folder.is_dir():
        raise SourceError(f"{folder}: not a directory")
    objects: list[Any] = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in SUFFIXES):
        if any(part.startswith(".") for part in path.relative_to(folder).parts):
            continue
        try:
            objects.extend(d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None)
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise SourceError(f"{path}: not YAML: {str(exc).splitlines()[0]}") from None
    return inventory(objects)


def read_cluster(api_client: Any, backend: str | None = None) -> Inventory:
    """Kueue's objects (v1beta2, else v1beta1), Nodes, Namespaces, mig-parted ConfigMaps, gpugov's tenant
    RoleBindings, its placement policy and its operations (CronJobs, the agent's DaemonSet) of a live cluster.

    And, where it serves Volcano's scheduling.volcano.sh/v1beta1: its Queues, PodGroups, PriorityClasses and
    the scheduler's configuration ConfigMap. A cluster serving both is read for both unless `backend` names
    one; which one the import converts is then decided by what it holds (gpugov.adopt.run.backend_of, which
    refuses a cluster holding queues of both without a backend).

    CheckIncomplete (exit 3) when the cluster cannot be read or serves neither Kueue nor the backend asked for;
    a Kueue kind the served version lacks (Cohort, Topology on an old Kueue) reads as none."""
    from gpugov.cluster.rest import Api, list_all, served_versions
    from gpugov.sources import CheckIncomplete

    api = Api(api_client)
    served = served_versions(api)
    version = next((v for v in ("v1beta2", "v1beta1") if f"{KUEUE_GROUP}/{v}" in served), None)
    volcano = VOLCANO_API in served
    if backend == "volcano" and not volcano:
        raise CheckIncomplete(f"GET {api.host}/apis: the server serves no {VOLCANO_API} (is Volcano installed?)")
    if backend == "kueue" and version is None:
        raise CheckIncomplete(f"GET {api.host}/apis: the server serves no {KUEUE_GROUP} version (is Kueue installed?)")
    if version is None and not volcano:
        raise CheckIncomplete(f"GET {api.host}/apis: the server serves no {KUEUE_GROUP} version nor {VOLCANO_API} "
                              "(is Kueue or Volcano installed?)")
    version = None if backend == "volcano" else version
    volcano = volcano and backend != "kueue"
    objects: list[Any] = []
    for kind in (Kind("v1", "Node", "nodes", False), Kind("v1", "Namespace", "namespaces", False)):
        objects.extend(list_all(api, kind))
    # The mig-parted configs the nodes' nvidia.com/mig.config labels name (only those ConfigMaps are kept), and
    # Volcano's scheduler configuration.
    objects.extend(c for c in list_all(api, Kind("v1", "ConfigMap", "configmaps", True))
                   if mig_parted_config(c) or (volcano and VOLCANO_CONF in (c.get("data") or {})))
    # gpugov's placement policy, whose messages name the platform team (Guardrails.platformTeam).
    objects.extend(list_all(api, Kind(ADMISSION, "ValidatingAdmissionPolicy", "validatingadmissionpolicies", False),
                            field_selector=f"metadata.name={PLACEMENT}"))
    # gpugov's in-cluster operations (Cluster spec.operations): its CronJobs and the agent's DaemonSet.
    for kind in (Kind("batch/v1", "CronJob", "cronjobs", True), Kind("apps/v1", "DaemonSet", "daemonsets", True)):
        objects.extend(list_all(api, kind, label_selector=f"{MANAGED_BY}={MANAGER}"))
    # gpugov's tenant RoleBindings: the owners, members and viewers of the tenants it applied before.
    objects.extend(list_all(api, Kind(f"{RBAC}/v1", "RoleBinding", "rolebindings", True),
                            label_selector=f"{MANAGED_BY}={MANAGER}"))
    if volcano:
        # gpugov's other admission policies, whose messages name the platform team too (no placement policy there).
        objects.extend(list_all(api, Kind(ADMISSION, "ValidatingAdmissionPolicy", "validatingadmissionpolicies", False),
                                label_selector=f"{MANAGED_BY}={MANAGER}"))
        for kind in (Kind(VOLCANO_API, "Queue", "queues", False), Kind(VOLCANO_API, "PodGroup", "podgroups", True),
                     Kind(POD_PRIORITY_API, "PriorityClass", "priorityclasses", False)):
            objects.extend(list_all(api, kind))
    if version is None:
        return inventory(objects, nodes_known=True)
    group_version = f"{KUEUE_GROUP}/{version}"
    answer = api.call("GET", f"/apis/{group_version}")
    if not answer.ok or answer.body is None or not isinstance(answer.body.get("resources"), list):
        raise answer.not_an_api(f"APIResourceList of {group_version}")
    plurals = {str(r.get("name")) for r in answer.body["resources"] if isinstance(r, dict)}
    for name, plural in KUEUE_PLURALS.items():
        if plural in plurals:  # a kind this Kueue version lacks (Cohort, Topology before v0.11) is none
            objects.extend(list_all(api, Kind(group_version, name, plural, name in NAMESPACED)))
    return inventory(objects, nodes_known=True)
