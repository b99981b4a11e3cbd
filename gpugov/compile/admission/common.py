"""What every admission policy shares: the ValidatingAdmissionPolicy and binding shapes, the workload
kinds that carry pod templates and where their pods and labels are read (class 5 of the threat model:
every policy reads each kind, `WORKLOAD_KINDS`), the trusted controllers' matchCondition, CEL literals
and the size budget past which a policy's maps are split into shards."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gpugov.compile.common import Object, Scope, metadata
from gpugov.declarations.model import Decl
from gpugov.kube.names import (
    KUEUE_PRIORITY_LABEL,
    KUEUE_QUEUE_LABEL,
)
from gpugov.kube.objects import LABEL_COMPONENT, LABEL_TENANT
from gpugov.kube.resources import is_accelerator

API = "admissionregistration.k8s.io/v1"


SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease", "kueue-system")


_RULES = [
    {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["jobs"]},
    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]},
]


# json.dumps's encoder, made once: sharding the queue-access maps sizes a literal per namespace
_CEL_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False)


def _cel(value: Any) -> str:
    """A CEL literal of a JSON-shaped value (CEL's string, list and map syntax is JSON's)."""
    return _CEL_ENCODER.encode(value)


def _pod_spec(expr: str = "object") -> str:
    return f"({expr}.kind == 'Job' ? {expr}.spec.template.spec : {expr}.spec)"


LABELS = {LABEL_COMPONENT: "admission"}


def _source(scope: Scope) -> Decl:
    """The declaration a policy is traced to: the Cluster, or (implicit cluster) the first tenant."""
    return scope.cluster if scope.cluster.declared else scope.tenants[min(scope.tenants)]


def _policy(scope: Scope, name: str, spec: dict[str, Any]) -> Object:
    meta = metadata(name, _source(scope), LABELS)
    return {"apiVersion": API, "kind": "ValidatingAdmissionPolicy", "metadata": meta, "spec": spec}


def _binding(scope: Scope, name: str, namespace_selector: dict[str, Any] | None = None) -> Object:
    spec: dict[str, Any] = {"policyName": name, "validationActions": ["Deny"]}
    if namespace_selector:
        spec["matchResources"] = {"namespaceSelector": namespace_selector}
    return {
        "apiVersion": API,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": metadata(name, _source(scope), LABELS),
        "spec": spec,
    }


@dataclass(frozen=True)
class WorkloadKind:
    """A kind whose objects carry pods, and where gpugov reads them.

    ``pod_specs``: CEL for the list of its pod specs (of ``object``). ``labels``: where the queue label
    is read from (Kueue reads it from the object itself; for the kinds Kueue does not integrate, and
    for Deployments and StatefulSets run through the pod integration, from the pod template, whose
    labels every pod gets). ``suspend``: the field through which Kueue holds it. ``parent``: Kueue's
    webhooks skip an object that names one of these as its owner. ``queued``: it runs (a template
    kind such as TrainingRuntime does not, and needs no queue itself)."""

    group: str
    resource: str
    kind: str
    pod_specs: str
    labels: str = "metadata.labels"
    suspend: str = ""
    parent: bool = True
    queued: bool = True
    version: str = "*"
    integration: str = ""


_TEMPLATE = "[object.spec.template.spec]"


_TEMPLATE_LABELS = "spec.template.metadata.labels"


def _ray(cluster: str) -> str:
    return (f"(has({cluster}.headGroupSpec) ? [{cluster}.headGroupSpec.template.spec] : []) + "
            f"(has({cluster}.workerGroupSpecs) ? {cluster}.workerGroupSpecs.map(w, w.template.spec) : [])")


def _replica_specs(field: str) -> str:
    return f"has(object.spec.{field}) ? object.spec.{field}.map(k, object.spec.{field}[k].template.spec) : []"


def _kubeflow(resource: str, kind: str, field: str, version: str = "*") -> WorkloadKind:
    return WorkloadKind("kubeflow.org", resource, kind, _replica_specs(field), suspend="spec.runPolicy.suspend",
                        version=version, integration=f"kubeflow.org/{kind.lower()}")


_JOBSET_TEMPLATE = (
    "has(object.spec.template) && has(object.spec.template.spec) && has(object.spec.template.spec.replicatedJobs) ? "
    "object.spec.template.spec.replicatedJobs.map(r, r.template.spec.template.spec) : []"
)


WORKLOAD_KINDS: tuple[WorkloadKind, ...] = (
    WorkloadKind("", "pods", "Pod", "[object.spec]", parent=False, version="v1", integration="pod"),
    WorkloadKind("batch", "jobs", "Job", _TEMPLATE, suspend="spec.suspend", version="v1", integration="batch/job"),
    WorkloadKind("batch", "cronjobs", "CronJob", "[object.spec.jobTemplate.spec.template.spec]",
                 labels="spec.jobTemplate.metadata.labels", version="v1"),
    WorkloadKind("apps", "deployments", "Deployment", _TEMPLATE, labels=_TEMPLATE_LABELS, version="v1"),
    WorkloadKind("apps", "statefulsets", "StatefulSet", _TEMPLATE, labels=_TEMPLATE_LABELS, version="v1"),
    WorkloadKind("apps", "replicasets", "ReplicaSet", _TEMPLATE, labels=_TEMPLATE_LABELS, version="v1"),
    WorkloadKind("apps", "daemonsets", "DaemonSet", _TEMPLATE, labels=_TEMPLATE_LABELS, version="v1"),
    WorkloadKind("jobset.x-k8s.io", "jobsets", "JobSet",
                 "has(object.spec.replicatedJobs) ? object.spec.replicatedJobs.map(r, r.template.spec.template.spec)"
                 " : []", suspend="spec.suspend", integration="jobset.x-k8s.io/jobset"),
    WorkloadKind("ray.io", "rayclusters", "RayCluster", _ray("object.spec"), suspend="spec.suspend",
                 integration="ray.io/raycluster"),
    WorkloadKind("ray.io", "rayjobs", "RayJob",
                 f"(has(object.spec.rayClusterSpec) ? {_ray('object.spec.rayClusterSpec')} : []) + "
                 "(has(object.spec.submitterPodTemplate) ? [object.spec.submitterPodTemplate.spec] : [])",
                 suspend="spec.suspend", integration="ray.io/rayjob"),
    _kubeflow("pytorchjobs", "PyTorchJob", "pytorchReplicaSpecs"),
    _kubeflow("tfjobs", "TFJob", "tfReplicaSpecs"),
    _kubeflow("xgboostjobs", "XGBoostJob", "xgbReplicaSpecs"),
    _kubeflow("paddlejobs", "PaddleJob", "paddleReplicaSpecs"),
    _kubeflow("jaxjobs", "JAXJob", "jaxReplicaSpecs"),
    _kubeflow("mpijobs", "MPIJob", "mpiReplicaSpecs"),
    # A TrainJob's pods come from its runtime; what the tenant writes is the trainer (resourcesPerNode,
    # env) and podSpecOverrides, checked as pod specs of their own.
    WorkloadKind("trainer.kubeflow.org", "trainjobs", "TrainJob",
                 "(has(object.spec.trainer) ? [{'containers': [object.spec.trainer]}] : []) + "
                 "(has(object.spec.podSpecOverrides) ? object.spec.podSpecOverrides : [])",
                 suspend="spec.suspend", integration="trainer.kubeflow.org/trainjob"),
    WorkloadKind("trainer.kubeflow.org", "trainingruntimes", "TrainingRuntime", _JOBSET_TEMPLATE, parent=False,
                 queued=False),
    WorkloadKind("leaderworkerset.x-k8s.io", "leaderworkersets", "LeaderWorkerSet",
                 "[object.spec.leaderWorkerTemplate.workerTemplate.spec] + "
                 "(has(object.spec.leaderWorkerTemplate.leaderTemplate) ? "
                 "[object.spec.leaderWorkerTemplate.leaderTemplate.spec] : [])",
                 integration="leaderworkerset.x-k8s.io/leaderworkerset"),
)


# Kinds whose children Kueue's webhooks skip besides those above (Kueue's own Workload, AppWrapper).
OTHER_PARENT_KINDS = ("Workload", "AppWrapper", "SparkApplication")


PARENT_KINDS = tuple(sorted({k.kind for k in WORKLOAD_KINDS if k.parent} | set(OTHER_PARENT_KINDS)))


# Labels and annotations of Kueue's that a tenant may change after creation; every other
# kueue.x-k8s.io key is Kueue's bookkeeping (`kueue.x-k8s.io/managed`, the prebuilt Workload...).
TENANT_KUEUE_KEYS = (KUEUE_QUEUE_LABEL, KUEUE_PRIORITY_LABEL)


# Environment variables through which a device runtime hands devices to a container without a
# resource request (NVIDIA Container Toolkit, Ascend Docker Runtime, Habana).
DEVICE_ENV = (
    "NVIDIA_VISIBLE_DEVICES", "NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_MIG_MONITOR_DEVICES", "NVIDIA_IMEX_CHANNELS",
    "ASCEND_VISIBLE_DEVICES", "HABANA_VISIBLE_DEVICES",
)


def _workload_rules(operations: tuple[str, ...], kinds: tuple[WorkloadKind, ...] = WORKLOAD_KINDS,
                    subresources: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """One admission rule per API group, in the order of WORKLOAD_KINDS."""
    groups: dict[tuple[str, str], list[str]] = {}
    for kind in kinds:
        resources = groups.setdefault((kind.group, kind.version), [])
        resources.append(kind.resource)
        resources.extend(f"{kind.resource}/{sub}" for sub in subresources if kind.kind == "Pod")
    return [
        {"apiGroups": [group], "apiVersions": [version], "operations": list(operations), "resources": resources}
        for (group, version), resources in groups.items()
    ]


def _guarded(root: str, path: str, empty: str) -> str:
    """``root.path`` where every step may be absent, else ``empty``."""
    parts = path.split(".")
    guards = [f"has({root}.{'.'.join(parts[: i + 1])})" for i in range(len(parts))]
    return f"({' && '.join(guards)} ? {root}.{path} : {empty})"


def _by_kind(choose: Any, default: str, root: str = "object", kinds: tuple[WorkloadKind, ...] = WORKLOAD_KINDS) -> str:
    """A CEL expression that picks ``choose(kind)`` by ``root.kind`` (equal choices grouped)."""
    grouped: dict[str, list[str]] = {}
    for kind in kinds:
        grouped.setdefault(choose(kind), []).append(kind.kind)
    expr = default
    for choice, names in reversed(list(grouped.items())):
        expr = f"({root}.kind in {_cel(names)} ? ({choice}) : {expr})"
    return expr


def _labels_expr(root: str = "object", kinds: tuple[WorkloadKind, ...] = WORKLOAD_KINDS) -> str:
    """The labels a workload's queue label is read from (see WorkloadKind.labels)."""
    return _by_kind(lambda k: _guarded(root, k.labels, "{}"), "{}", root, kinds)


def _pod_specs_expr(kinds: tuple[WorkloadKind, ...] = WORKLOAD_KINDS) -> str:
    return _by_kind(lambda k: k.pod_specs, "[]", kinds=kinds)


def _containers(ps: str, ephemeral: bool = False) -> str:
    names = ["containers", "initContainers", *(["ephemeralContainers"] if ephemeral else [])]
    return " + ".join(f"(has({ps}.{n}) ? {ps}.{n} : [])" for n in names)


def _team(scope: Scope) -> str:
    return ", ".join(scope.model.limits.platform_team) or "the platform team"


def _not_trusted(scope: Scope) -> dict[str, str]:
    """The matchCondition that leaves the trusted controllers (Guardrails.isolation) alone."""
    isolation = scope.model.limits.isolation
    # On a fleet's worker (issue #43) the manager's MultiKueue creates the Jobs and their prebuilt
    # Workloads as Kueue does on one cluster: its user is trusted as Kueue is (compile.fleet).
    fleet_users = {f.manager_user for f in scope.model.fleets_with_worker(scope.cluster.name)}
    users, groups = sorted(set(isolation.trusted_users) | fleet_users), sorted(isolation.trusted_groups)
    return {
        "name": "not-a-trusted-controller",
        "expression": f"!(request.userInfo.username in {_cel(users)}) && "
        f"!request.userInfo.groups.exists(g, g in {_cel(groups)})",
    }


# The API server refuses a CEL expression over 100,000 code points; the queue maps grow with the
# tenants (about 110 per queue), so past this budget they are split over several policies.
CEL_BUDGET = 60_000


def _names_selector(operator: str, namespaces: list[str]) -> dict[str, Any]:
    return {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": operator, "values": namespaces}]}


def _cut(sizes: dict[str, int]) -> list[list[str]]:
    """The namespaces of `sizes` (namespace -> its code points in the largest literal), in order, cut
    where a shard would pass CEL_BUDGET."""
    shards: list[list[str]] = [[]]
    size = 0
    for namespace in sorted(sizes):
        if shards[-1] and size + sizes[namespace] > CEL_BUDGET:
            shards.append([])
            size = 0
        shards[-1].append(namespace)
        size += sizes[namespace]
    return shards


def accelerator_resources(scope: Scope) -> list[str]:
    """The accelerators the cluster's policies hold: its pools' and, on a fleet's manager (which has no pool
    of its own), its workers' pools' too, which the fleet's ClusterQueues stand for (issue #43)."""
    pools = list(scope.pools.values())
    for fleet in scope.model.fleets_managed_by(scope.cluster.name):
        workers = set(fleet.worker_names())
        pools += [pool for pool in scope.model.pools.values() if pool.cluster in workers]
    names = {resource for pool in pools for resource in pool.capacity if is_accelerator(resource)}
    return sorted(names)


def _asks(c: str = "c") -> str:
    """CEL: container ``c`` requests or limits an accelerator (a TrainJob's trainer: resourcesPerNode)."""
    res = f"(has({c}.resources) ? {c}.resources : (has({c}.resourcesPerNode) ? {c}.resourcesPerNode : {{}}))"
    return (f"((has({res}.limits) && {res}.limits.exists(r, r in variables.accelerators)) || "
            f"(has({res}.requests) && {res}.requests.exists(r, r in variables.accelerators)))")


def tenant_namespaces_selector() -> dict[str, Any]:
    """The namespaces compile labels as a tenant's (tenants cannot relabel them: no namespace writes)."""
    return {"matchExpressions": [{"key": LABEL_TENANT, "operator": "Exists"}]}


def allowances(scope: Scope) -> tuple[dict[str, list[str]], dict[str, list[str]], dict[str, list[str]]]:
    """namespace -> what Tenant.allow grants there beyond the default: volume sources, inline CSI
    drivers, Service types; only namespaces of tenants that declare something."""
    volumes: dict[str, list[str]] = {}
    drivers: dict[str, list[str]] = {}
    types: dict[str, list[str]] = {}
    for tenant in scope.tenants.values():
        for namespace in tenant.namespaces:
            for table, values in ((volumes, tenant.allow.volumes), (drivers, tenant.allow.csi_drivers),
                                  (types, tenant.allow.service_types)):
                if values:
                    table[namespace] = sorted(values)
    return dict(sorted(volumes.items())), dict(sorted(drivers.items())), dict(sorted(types.items()))


def _in_namespace(table: dict[str, list[str]]) -> str:
    return f"(request.namespace in {_cel(table)} ? {_cel(table)}[request.namespace] : [])" if table else "[]"
