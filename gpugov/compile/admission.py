"""Admission rules that make a tenant's queues binding (Kueue and Volcano).

Kueue itself checks neither which priority class a job asks for nor whether a GPU pod goes
through a queue at all. compile therefore emits native ValidatingAdmissionPolicies (CEL in
the apiserver, no webhook to run or to fail) with their bindings:

- ``gpugov-queue-access``: a Job or Pod labelled with a queue (``kueue.x-k8s.io/queue-name``)
  must name a queue declared for its namespace, and may only ask for the priority classes
  declared on that queue (none declared: the preemptible ones), through the
  ``kueue.x-k8s.io/priority-class`` label or the pod's
  ``priorityClassName`` (Kueue falls back to the pod's PriorityClass for a workload's
  priority, so that door is shut too). The message names the queue and its allowed classes.
- ``gpugov-accelerators-need-a-queue``: outside the system namespaces, a Job or Pod that
  requests an accelerator of the cluster's pools must carry a queue label; pods that a Job
  owns are left to the Job's own check (Kueue's job integration labels the Job, not its pods).

On **Volcano** the same two doors are shut with Volcano's own names:

- ``gpugov-volcano-queue-access``: a PodGroup (``spec.queue``), a Volcano Job (``spec.queue``)
  or a Pod (``scheduling.volcano.sh/queue-name`` annotation) in a tenant's namespace may only
  name that tenant's leaf Queue; elsewhere no gpugov Queue at all. Department (parent) Queues
  run no jobs, so no PodGroup may aim at one.
- ``gpugov-volcano-accelerators-need-volcano``: outside the system namespaces, a Pod or Job
  that requests an accelerator must be scheduled by ``volcano``.

The declarations are written into the CEL as literals, so the policy needs no parameter
objects and always matches the compiled queues.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from gpugov.compile.common import Object, Scope, metadata
from gpugov.declarations.model import Decl
from gpugov.declarations.schema import NETWORK_VOLUMES, PREBOUND_CLAIM
from gpugov.kube.names import (
    KUEUE_KEY_PREFIX,
    KUEUE_MAX_EXEC_TIME_LABEL,
    KUEUE_POD_GROUP_LABEL,
    KUEUE_PREBUILT_WORKLOAD_LABEL,
    KUEUE_PRIORITY_LABEL,
    KUEUE_QUEUE_LABEL,
    KUEUE_ROLE_HASH_ANNOTATION,
    VOLCANO_BATCH_GROUP,
    VOLCANO_GROUP,
    VOLCANO_QUEUE_ANNOTATION,
)
from gpugov.kube.objects import LABEL_COMPONENT, LABEL_TENANT
from gpugov.kube.resources import is_accelerator

API = "admissionregistration.k8s.io/v1"
QUEUE_ACCESS = "gpugov-queue-access"
NEED_A_QUEUE = "gpugov-accelerators-need-a-queue"
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease", "kueue-system")
_RULES = [
    {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["jobs"]},
    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]},
]


def _cel(value: Any) -> str:
    """A CEL literal of a JSON-shaped value (CEL's string, list and map syntax is JSON's)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _pod_spec(expr: str = "object") -> str:
    return f"({expr}.kind == 'Job' ? {expr}.spec.template.spec : {expr}.spec)"


def allowed_classes(scope: Scope) -> dict[str, list[str]]:
    """'namespace/queue' -> the priority classes declared on that queue; a queue that declares
    none may use every preemptible class (a non-preemptible one is only ever granted by name)."""
    preemptible = sorted(name for name, pc in scope.model.priority_classes.items() if pc.preemptible)
    return {
        f"{queue.namespace}/{queue.name}": sorted(queue.priority_classes) if queue.priority_classes else preemptible
        for tenant in scope.tenants.values()
        for queue in tenant.queues
    }


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


# --- the kinds that carry pod templates (issue #21 class 5) ----------------------------------------


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
    users, groups = sorted(isolation.trusted_users), sorted(isolation.trusted_groups)
    return {
        "name": "not-a-trusted-controller",
        "expression": f"!(request.userInfo.username in {_cel(users)}) && "
        f"!request.userInfo.groups.exists(g, g in {_cel(groups)})",
    }


def declared_queues(scope: Scope) -> dict[str, str]:
    """namespace -> 'queue, queue (tenants/x.yaml)': what a refused tenant may use instead."""
    found: dict[str, list[str]] = {}
    origin: dict[str, str] = {}
    for tenant in scope.tenants.values():
        for queue in tenant.queues:
            found.setdefault(queue.namespace, []).append(queue.name)
            origin[queue.namespace] = tenant.origin.rsplit(":", 1)[0]  # the file, not its line: moves are no change
    return {ns: f"{', '.join(sorted(names))} (declared in {origin[ns]})" for ns, names in sorted(found.items())}


# The API server refuses a CEL expression over 100,000 code points; the queue maps grow with the
# tenants (about 110 per queue), so past this budget they are split over several policies.
CEL_BUDGET = 60_000


def queue_access_policy(scope: Scope, namespaces: Collection[str] | None = None, name: str = QUEUE_ACCESS) -> Object:
    """The queue-access policy over the queues of `namespaces` (None: every tenant's)."""
    labels = _labels_expr()
    allowed, declared = allowed_classes(scope), declared_queues(scope)
    if namespaces is not None:
        allowed = {key: classes for key, classes in allowed.items() if key.split("/", 1)[0] in namespaces}
        declared = {ns: queues for ns, queues in declared.items() if ns in namespaces}
    return _policy(
        scope,
        name,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _workload_rules(("CREATE", "UPDATE"))},
            "matchConditions": [
                _not_trusted(scope),
                {"name": "has-queue", "expression": f"'{KUEUE_QUEUE_LABEL}' in {labels}"},
            ],
            "variables": [
                {"name": "allowed", "expression": _cel(allowed)},
                {"name": "declared", "expression": _cel(declared)},
                {"name": "labels", "expression": labels},
                {"name": "queue", "expression": f"request.namespace + '/' + variables.labels['{KUEUE_QUEUE_LABEL}']"},
                {
                    "name": "priorityClass",
                    "expression": f"'{KUEUE_PRIORITY_LABEL}' in variables.labels ? variables.labels['{KUEUE_PRIORITY_LABEL}'] : ''",
                },
                {"name": "podSpecs", "expression": _pod_specs_expr()},
                {
                    "name": "podPriorityClasses",
                    "expression": "variables.podSpecs.filter(ps, has(ps.priorityClassName))"
                    ".map(ps, ps.priorityClassName)",
                },
                {
                    "name": "ask",
                    "expression": _cel(f"; ask {_team(scope)} (declarations in Git: tenants/, policies/)"),
                },
            ],
            "validations": [
                {
                    "expression": "variables.queue in variables.allowed",
                    "messageExpression": "'queue ' + variables.queue + ' is not declared for namespace ' + "
                    "request.namespace + ' (gpugov: declared queues only); ' + (request.namespace in "
                    "variables.declared ? 'namespace ' + request.namespace + ' may use: ' + "
                    "variables.declared[request.namespace] : 'no tenant declares a queue in namespace ' + "
                    "request.namespace) + variables.ask",
                    "reason": "Forbidden",
                },
                {
                    "expression": "!(variables.queue in variables.allowed) || variables.priorityClass == '' || "
                    "variables.priorityClass in variables.allowed[variables.queue]",
                    "messageExpression": "'priority class ' + variables.priorityClass + ' is not allowed on queue ' + "
                    "variables.queue + '; allowed: ' + variables.allowed[variables.queue].join(', ') + variables.ask",
                    "reason": "Forbidden",
                },
                {
                    "expression": "!(variables.queue in variables.allowed) || "
                    "variables.podPriorityClasses.all(p, p in variables.allowed[variables.queue])",
                    "messageExpression": "'priorityClassName ' + variables.podPriorityClasses.filter(p, !(p in "
                    "variables.allowed[variables.queue]))[0] + ' is not allowed on queue ' + variables.queue + "
                    "'; allowed: ' + variables.allowed[variables.queue].join(', ') + variables.ask",
                    "reason": "Forbidden",
                },
            ],
        },
    )


def queue_access_objects(scope: Scope) -> list[Object]:
    """One queue-access policy bound everywhere while its maps fit CEL_BUDGET; past that, one policy a
    shard of tenant namespaces (bound to them by name) and gpugov-queue-access, with no queue at all,
    bound to every other namespace, so that a namespace no tenant declares still may use none."""
    shards = _namespace_shards(scope)
    if len(shards) == 1:
        return [queue_access_policy(scope), _binding(scope, QUEUE_ACCESS)]
    everyone = sorted(ns for shard in shards for ns in shard)
    objects = [queue_access_policy(scope, (), QUEUE_ACCESS),
               _binding(scope, QUEUE_ACCESS, _names_selector("NotIn", everyone))]
    for number, shard in enumerate(shards, start=1):
        name = f"{QUEUE_ACCESS}-{number}"
        objects += [queue_access_policy(scope, shard, name), _binding(scope, name, _names_selector("In", shard))]
    return objects


def _names_selector(operator: str, namespaces: list[str]) -> dict[str, Any]:
    return {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": operator, "values": namespaces}]}


def _namespace_shards(scope: Scope) -> list[list[str]]:
    """The tenant namespaces, in order, cut where the queue maps of a shard would pass CEL_BUDGET."""
    declared = declared_queues(scope)
    sizes = {namespace: len(_cel({namespace: queues})) for namespace, queues in declared.items()}
    allowed_sizes: dict[str, int] = {}
    for key, classes in allowed_classes(scope).items():
        namespace = key.split("/", 1)[0]
        allowed_sizes[namespace] = allowed_sizes.get(namespace, 0) + len(_cel({key: classes}))
    return _cut({ns: max(sizes.get(ns, 0), allowed_sizes.get(ns, 0)) for ns in set(sizes) | set(allowed_sizes)})


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
    names = {resource for pool in scope.pools.values() for resource in pool.capacity if is_accelerator(resource)}
    return sorted(names)


def _asks(c: str = "c") -> str:
    """CEL: container ``c`` requests or limits an accelerator (a TrainJob's trainer: resourcesPerNode)."""
    res = f"(has({c}.resources) ? {c}.resources : (has({c}.resourcesPerNode) ? {c}.resourcesPerNode : {{}}))"
    return (f"((has({res}.limits) && {res}.limits.exists(r, r in variables.accelerators)) || "
            f"(has({res}.requests) && {res}.requests.exists(r, r in variables.accelerators)))")


def need_a_queue_policy(scope: Scope) -> Object:
    """Every accelerator goes through a queue, for every kind that carries pods, on CREATE and on
    UPDATE (a queued workload cannot lose its queue label later). Only the trusted controllers'
    children are left to their parent's check: an ownerReference a tenant writes exempts nothing."""
    queued = tuple(k for k in WORKLOAD_KINDS if k.queued)
    return _policy(
        scope,
        NEED_A_QUEUE,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _workload_rules(("CREATE", "UPDATE"), queued)},
            "matchConditions": [
                _not_trusted(scope),
                {"name": "no-queue", "expression": f"!('{KUEUE_QUEUE_LABEL}' in {_labels_expr()})"},
                # on UPDATE only the loss of the queue label: a tenant may still label its Job's pods
                {"name": "created-or-unqueued", "expression": "request.operation == 'CREATE' || "
                 f"'{KUEUE_QUEUE_LABEL}' in {_labels_expr('oldObject')}"},
            ],
            "variables": [
                {"name": "accelerators", "expression": _cel(accelerator_resources(scope))},
                {"name": "podSpecs", "expression": _pod_specs_expr(queued)},
            ],
            "validations": [
                {
                    "expression": f"!variables.podSpecs.exists(ps, ({_containers('ps')}).exists(c, {_asks()}))",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    f"' requests accelerators without a queue: label it {KUEUE_QUEUE_LABEL}=<queue> (gpugov: every "
                    f"accelerator goes through a queue; the queues of each namespace are declared in tenants/; "
                    f"ask {_team(scope)})'",
                    "reason": "Forbidden",
                }
            ],
        },
    )


OWNERSHIP = "gpugov-workload-ownership"
LIFECYCLE = "gpugov-queue-lifecycle"
DEVICE_ACCESS = "gpugov-device-access"
POD_PRIORITY = "gpugov-pod-priority"


def ownership_policy(scope: Scope) -> Object:
    """Class 1: Kueue's webhooks (and gpugov's own checks before) skip a workload whose
    ownerReferences name a Job or another Kueue-managed parent; only a trusted controller may create
    or re-parent one, whatever the reference says (controller or not, real owner or not)."""
    added = ("object.metadata.ownerReferences.filter(o, o.kind in variables.parents && "
             "(request.operation == 'CREATE' || !has(oldObject.metadata.ownerReferences) || "
             "!oldObject.metadata.ownerReferences.exists(p, p.uid == o.uid)))")
    return _policy(
        scope,
        OWNERSHIP,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _workload_rules(("CREATE", "UPDATE"))},
            "matchConditions": [
                _not_trusted(scope),
                {"name": "names-an-owner", "expression": "has(object.metadata.ownerReferences)"},
            ],
            "variables": [
                {"name": "parents", "expression": _cel(list(PARENT_KINDS))},
                {"name": "claimed", "expression": added},
            ],
            "validations": [
                {
                    "expression": "variables.claimed.size() == 0",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "' names ' + variables.claimed[0].kind + ' ' + variables.claimed[0].name + ' as its owner: only "
                    "the controllers trusted in Guardrails.isolation.trustedControllers create the children of a ' + "
                    "variables.claimed[0].kind + ' (gpugov: a workload goes through its own queue; submit the ' + "
                    f"variables.claimed[0].kind + ' itself with a queue label; ask {_team(scope)})'",
                    "reason": "Forbidden",
                }
            ],
        },
    )


def _labels_or_empty(root: str, field: str) -> str:
    return f"(has({root}.metadata.{field}) ? {root}.metadata.{field} : {{}})"


# The pod templates whose pods Kueue's pod integration files by role: a Deployment's and a
# StatefulSet's, a LeaderWorkerSet's leader and workers (a Job's or JobSet's pods have a managed
# owner and are no pod group).
_ROLE_TEMPLATES = {
    "Deployment": ("spec.template.metadata.annotations",),
    "StatefulSet": ("spec.template.metadata.annotations",),
    "LeaderWorkerSet": ("spec.leaderWorkerTemplate.leaderTemplate.metadata.annotations",
                        "spec.leaderWorkerTemplate.workerTemplate.metadata.annotations"),
}


def _template_names_role() -> str:
    """CEL: a pod template of the object names the role its pods are filed under."""
    return " || ".join(f"(object.kind == '{kind}' && '{KUEUE_ROLE_HASH_ANNOTATION}' in {_guarded('object', path, '{}')})"
                       for kind, paths in _ROLE_TEMPLATES.items() for path in paths)


def lifecycle_policy(scope: Scope) -> Object:
    """Class 2: what a tenant may change once a workload exists. Kueue holds a queued workload
    through `suspend` (Jobs and the CRD kinds) or its scheduling gates (Pods), and tracks it through
    its own labels and annotations: only Kueue and the trusted controllers clear `suspend`, remove a
    kueue.x-k8s.io gate or change a kueue.x-k8s.io key other than the queue and priority labels (both
    still checked by gpugov-queue-access; removing the queue label by gpugov-accelerators-need-a-queue).
    A running Job may not grow, and pods that use accelerators stop within the declared grace period,
    so that what Kueue preempts, reclaims or stops gives its devices back.

    Plain pod groups: Kueue admits a group for its first pod of each role and takes a pod's role from
    its kueue.x-k8s.io/role-hash annotation when it carries one, so a tenant's 4-GPU pod filed under
    the role of its 1-GPU pod ran on the 1-GPU admission. Kueue's webhook writes the annotation on
    every Pod it gates, before this policy reads the Pod, so a forged one cannot be told apart: a
    tenant may not create a Pod that joins a pod group (the trusted controllers may; a tenant runs
    a group as an indexed Job, a JobSet or a StatefulSet), nor put the annotation in a pod template."""
    isolation = scope.model.limits.isolation
    suspendable = [k for k in WORKLOAD_KINDS if k.suspend]
    held = _by_kind(lambda k: _guarded("oldObject", k.suspend, "false") if k.suspend else "false", "false",
                    "oldObject", tuple(suspendable))
    held_now = _by_kind(lambda k: _guarded("object", k.suspend, "false") if k.suspend else "false", "false",
                        "object", tuple(suspendable))
    internal = f"k.contains('{KUEUE_KEY_PREFIX}') && !(k in {_cel(list(TENANT_KUEUE_KEYS))})"
    unchanged = ("variables.old{f}.all(k, !({internal}) || (k in variables.new{f} && variables.new{f}[k] == "
                 "variables.old{f}[k])) && variables.new{f}.all(k, !({internal}) || k in variables.old{f})")
    # A running Job that asks for more pods than its queue admitted: the Job controller starts them at
    # once, before Kueue's reconciler sees the Workload no longer matches and suspends the Job.
    parallelism = ("(has(object.spec.parallelism) ? object.spec.parallelism : 1) > "
                   "(has(oldObject.spec.parallelism) ? oldObject.spec.parallelism : 1)")
    gates = ("has(oldObject.spec.schedulingGates) ? oldObject.spec.schedulingGates.filter(g, "
             f"g.name.startsWith('{KUEUE_KEY_PREFIX}') && !(has(object.spec.schedulingGates) && "
             "object.spec.schedulingGates.exists(h, h.name == g.name))).map(g, g.name) : []")
    return _policy(
        scope,
        LIFECYCLE,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _workload_rules(("CREATE", "UPDATE"))},
            "matchConditions": [_not_trusted(scope)],
            "variables": [
                {"name": "update", "expression": "request.operation == 'UPDATE'"},
                {"name": "wasHeld", "expression": f"variables.update && {held}"},
                {"name": "isHeld", "expression": held_now},
                {"name": "oldLabels", "expression": f"variables.update ? {_labels_or_empty('oldObject', 'labels')} : {{}}"},
                {"name": "newLabels", "expression": _labels_or_empty("object", "labels")},
                {"name": "oldAnnotations",
                 "expression": f"variables.update ? {_labels_or_empty('oldObject', 'annotations')} : {{}}"},
                {"name": "newAnnotations", "expression": _labels_or_empty("object", "annotations")},
                {"name": "removedGates",
                 "expression": f"variables.update && object.kind == 'Pod' ? ({gates}) : []"},
                {"name": "grown", "expression": f"variables.update && object.kind == 'Job' && "
                 f"object.apiVersion.startsWith('batch/') && !variables.wasHeld && ({parallelism})"},
                {"name": "templateRoles", "expression": _template_names_role()},
                {"name": "accelerators", "expression": _cel(accelerator_resources(scope))},
                {"name": "maxGrace", "expression": str(isolation.max_termination_grace_seconds)},
                {"name": "lingering", "expression": f"({_pod_specs_expr()}).filter(ps, "
                 "has(ps.terminationGracePeriodSeconds) && ps.terminationGracePeriodSeconds > variables.maxGrace && "
                 f"({_containers('ps')}).exists(c, {_asks()})).map(ps, ps.terminationGracePeriodSeconds)"},
            ],
            "validations": [
                {
                    "expression": "!variables.wasHeld || variables.isHeld",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "' is held by Kueue until its queue admits it: only Kueue clears suspend (gpugov: a workload "
                    "runs when its queue admits it; the queue and its quota are declared in tenants/; ask "
                    f"{_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": "variables.removedGates.size() == 0",
                    "messageExpression": "'Pod ' + request.namespace + '/' + object.metadata.name + ' may not lose "
                    "its scheduling gate ' + variables.removedGates[0] + ': Kueue removes it when the queue admits "
                    f"the pod (gpugov: a workload runs when its queue admits it; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": "!variables.update || (" + unchanged.format(f="Labels", internal=internal) + ")",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "': the kueue.x-k8s.io labels other than the queue and priority class are Kueue\\'s own and "
                    f"may not change (gpugov; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": "!variables.update || ("
                    + unchanged.format(f="Annotations", internal=internal) + ")",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "': the kueue.x-k8s.io annotations are Kueue\\'s own and may not change (gpugov; ask "
                    f"{_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": "!variables.grown",
                    "messageExpression": "'Job ' + request.namespace + '/' + object.metadata.name + ' runs as its "
                    "queue admitted it: its parallelism may not grow while it runs (submit it again at the new size: "
                    f"its queue admits it anew; gpugov, ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": "variables.lingering.size() == 0",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "' sets terminationGracePeriodSeconds ' + string(variables.lingering[0]) + ' on pods that use "
                    "accelerators; at most ' + string(variables.maxGrace) + ': a preempted, reclaimed or stopped pod "
                    "keeps its devices that long (gpugov: Guardrails.isolation.maxTerminationGracePeriodSeconds; ask "
                    f"{_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": f"variables.update || object.kind != 'Pod' || !('{KUEUE_POD_GROUP_LABEL}' in "
                    "variables.newLabels)",
                    "messageExpression": "'Pod ' + request.namespace + '/' + object.metadata.name + ' may not join "
                    f"a pod group ({KUEUE_POD_GROUP_LABEL}): Kueue files each pod of a plain group under the role "
                    f"its {KUEUE_ROLE_HASH_ANNOTATION} annotation names, so one pod could run more than the group was "
                    "admitted for (gpugov: submit the group as an indexed Job, a JobSet or a StatefulSet; ask "
                    f"{_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": "!variables.templateRoles",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    f"' may not name its pods\\' role ({KUEUE_ROLE_HASH_ANNOTATION}): Kueue computes it from the "
                    "pod spec, and a named one files a larger pod under a smaller one\\'s admission (gpugov; ask "
                    f"{_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": f"variables.update || !('{KUEUE_PREBUILT_WORKLOAD_LABEL}' in variables.newLabels)",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    f"' may not name a prebuilt Workload ({KUEUE_PREBUILT_WORKLOAD_LABEL}): Kueue creates the Workload "
                    f"of a tenant\\'s job itself (gpugov; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
            ],
        },
    )


def device_access_policy(scope: Scope) -> Object:
    """Class 3: the side doors to accelerators and nodes that need no resource request, which Pod
    Security (privileged, hostPath, host namespaces: the namespace's enforce level) does not cover:
    the device runtimes' environment variables and their RuntimeClasses on a workload that requests
    no accelerator, and a pod spec that names its node (spec.nodeName skips kube-scheduler, so the
    nodes' NoSchedule taints, which keep CPU work off the accelerator servers, and the topology Kueue
    assigned stop holding; no controller of a tenant's kinds sets it in a template, and on a Pod
    only the scheduler's binding does, after creation). Ephemeral containers (kubectl debug) are
    checked too."""
    isolation = scope.model.limits.isolation
    env = f"({_containers('ps', ephemeral=True)}).exists(c, has(c.env) && c.env.exists(e, e.name in variables.deviceEnv))"
    env_from = (f"({_containers('ps', ephemeral=True)}).exists(c, has(c.envFrom) && c.envFrom.exists(f, has(f.prefix) "
                "&& f.prefix != '' && variables.deviceEnv.exists(n, n.startsWith(f.prefix))))")
    runtime = (f"has(ps.runtimeClassName) && ps.runtimeClassName in variables.deviceRuntimes && "
               f"!({_containers('ps')}).exists(c, {_asks()})")
    return _policy(
        scope,
        DEVICE_ACCESS,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _workload_rules(("CREATE", "UPDATE"), subresources=("ephemeralcontainers",))},
            "matchConditions": [_not_trusted(scope)],
            "variables": [
                {"name": "accelerators", "expression": _cel(accelerator_resources(scope))},
                {"name": "deviceEnv", "expression": _cel(list(DEVICE_ENV))},
                {"name": "deviceRuntimes", "expression": _cel(sorted(isolation.device_runtime_classes))},
                {"name": "podSpecs", "expression": _pod_specs_expr()},
            ],
            "validations": [
                {
                    "expression": f"!variables.podSpecs.exists(ps, {env} || {env_from})",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "' sets a device runtime variable (' + variables.deviceEnv.join(', ') + '), which hands "
                    "accelerators to a container without a resource request (gpugov: request accelerators through a "
                    f"queue; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": f"!variables.podSpecs.exists(ps, {runtime})",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "' names a device RuntimeClass (' + variables.deviceRuntimes.join(', ') + ') but requests no "
                    "accelerator (gpugov: Guardrails.isolation.deviceRuntimeClasses are for workloads that request "
                    f"accelerators through a queue; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    # A Pod's UPDATE keeps the node its binding set (nodeName cannot change by UPDATE).
                    "expression": "(object.kind == 'Pod' && request.operation == 'UPDATE') || "
                    "variables.podSpecs.all(ps, !has(ps.nodeName) || ps.nodeName == '')",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "' names its node (nodeName ' + variables.podSpecs.filter(ps, has(ps.nodeName) && ps.nodeName "
                    "!= '')[0].nodeName + '), which skips the scheduler and with it the nodes\\' taints: a tenant\\'s "
                    "pods are placed by kube-scheduler on the nodes their queue admitted them to (gpugov: leave "
                    f"nodeName out and ask for a pool through the queue; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
            ],
        },
    )


def pod_priority_policy(scope: Scope) -> Object:
    """Class 4: a pod's PriorityClass decides kube-scheduler's preemption on the node, whatever Kueue
    decided. A workload with a queue may name only its queue's classes (gpugov-queue-access); one
    without may name only Guardrails.isolation.podPriorityClasses (default none), never
    system-node-critical or an undeclared class."""
    allowed = sorted(scope.model.limits.isolation.pod_priority_classes)
    return _policy(
        scope,
        POD_PRIORITY,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _workload_rules(("CREATE", "UPDATE"))},
            "matchConditions": [
                _not_trusted(scope),
                {"name": "no-queue", "expression": f"!('{KUEUE_QUEUE_LABEL}' in {_labels_expr()})"},
            ],
            "variables": [
                {"name": "allowed", "expression": _cel(allowed)},
                {"name": "podSpecs", "expression": _pod_specs_expr()},
                {
                    "name": "named",
                    "expression": "variables.podSpecs.filter(ps, has(ps.priorityClassName) && "
                    "!(ps.priorityClassName in variables.allowed)).map(ps, ps.priorityClassName)",
                },
            ],
            "validations": [
                {
                    "expression": "variables.named.size() == 0",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "' may not use priorityClassName ' + variables.named[0] + ' without a queue; allowed: ' + "
                    "(variables.allowed.size() == 0 ? '(none)' : variables.allowed.join(', ')) + ' (gpugov: "
                    "Guardrails.isolation.podPriorityClasses; a queue\\'s classes are declared on the queue in "
                    f"tenants/; ask {_team(scope)})'",
                    "reason": "Forbidden",
                }
            ],
        },
    )


def _job_pod_need_a_queue_policy(scope: Scope) -> Object:
    """Volcano's base: a Job or Pod asking for accelerators (Job-owned pods left to their Job)."""
    pod_spec = _pod_spec()
    asks = "(has(c.resources) && ((has(c.resources.limits) && c.resources.limits.exists(r, r in variables.accelerators)) || (has(c.resources.requests) && c.resources.requests.exists(r, r in variables.accelerators))))"
    return _policy(
        scope,
        NEED_A_QUEUE,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [dict(rule, operations=["CREATE"]) for rule in _RULES]},
            "matchConditions": [
                {
                    "name": "no-queue",
                    "expression": f"!has(object.metadata.labels) || !('{KUEUE_QUEUE_LABEL}' in object.metadata.labels)",
                },
                {
                    "name": "not-a-job-pod",
                    "expression": "object.kind == 'Job' || !has(object.metadata.ownerReferences) || "
                    "!object.metadata.ownerReferences.exists(o, o.kind == 'Job')",
                },
            ],
            "variables": [
                {"name": "accelerators", "expression": _cel(accelerator_resources(scope))},
                {
                    "name": "containers",
                    "expression": f"{pod_spec}.containers + (has({pod_spec}.initContainers) ? {pod_spec}.initContainers : [])",
                },
            ],
            "validations": [
                {
                    "expression": f"!variables.containers.exists(c, {asks})",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    f"' requests accelerators without a queue: label it {KUEUE_QUEUE_LABEL}=<queue> (gpugov: every "
                    "accelerator goes through a queue)'",
                    "reason": "Forbidden",
                }
            ],
        },
    )


MAX_RUNTIME = "gpugov-max-runtime"
# Every kind that runs: Kueue reads the max-exec-time label where it reads the queue label (the object's
# own labels, or the pod template's that every pod of a Deployment gets). A CronJob's Jobs and a
# Deployment's Pods are created by trusted controllers and not checked themselves, so their parent's
# template is: checking only the kinds Kueue integrates let those children run unbounded.
MAX_RUNTIME_KINDS = tuple(k for k in WORKLOAD_KINDS if k.queued)


def _shown(seconds: int) -> str:
    """A limit in the largest unit that divides it: 86400 -> 1d, 5400 -> 90m."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def max_runtimes(scope: Scope) -> dict[str, dict[str, int]]:
    """namespace -> priority class ('*': a job naming no listed class) -> the most seconds a job there may
    ask for (issue #26: Guardrails.reclaim.maxRuntime, a tenant's over it); namespaces without a limit left out."""
    limits: dict[str, dict[str, int]] = {}
    for name in sorted(scope.tenants):
        tenant = scope.tenants[name]
        policy = scope.model.reclaim_policy(tenant)
        if policy is None or (policy.max_runtime_default is None and not policy.max_runtime):
            continue
        per_class = dict(policy.max_runtime)
        if policy.max_runtime_default is not None:
            per_class["*"] = policy.max_runtime_default
        for namespace in tenant.namespaces:
            limits[namespace] = per_class
    return limits


def max_runtime_policy(scope: Scope, limits: dict[str, dict[str, int]], name: str = MAX_RUNTIME) -> Object:
    """A job in a namespace with a declared maximum runtime must carry Kueue's max-exec-time label, at
    most that limit: Kueue then deactivates it once it has run that long. Refused, never defaulted: the
    built kube-apiserver serves no MutatingAdmissionPolicy (alpha, off by default), so the message says
    which label to set and to what."""
    label = KUEUE_MAX_EXEC_TIME_LABEL
    labels = _labels_expr(kinds=MAX_RUNTIME_KINDS)
    shown = {ns: {pc: _shown(sec) for pc, sec in per.items()} for ns, per in limits.items()}
    return _policy(
        scope,
        name,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _workload_rules(("CREATE", "UPDATE"), MAX_RUNTIME_KINDS)},
            "matchConditions": [
                _not_trusted(scope),
                {"name": "limited-namespace", "expression": f"request.namespace in {_cel(sorted(limits))}"},
                {"name": "has-queue", "expression": f"'{KUEUE_QUEUE_LABEL}' in {labels}"},
            ],
            "variables": [
                {"name": "limits", "expression": _cel(limits)},
                {"name": "shown", "expression": _cel(shown)},
                {"name": "labels", "expression": labels},
                {"name": "priorityClass", "expression": f"'{KUEUE_PRIORITY_LABEL}' in variables.labels ? "
                 f"variables.labels['{KUEUE_PRIORITY_LABEL}'] : ''"},
                {"name": "perClass", "expression": "variables.limits[request.namespace]"},
                {"name": "key", "expression": "variables.priorityClass in variables.perClass ? "
                 "variables.priorityClass : '*'"},
                {"name": "limit", "expression": "variables.key in variables.perClass ? "
                 "variables.perClass[variables.key] : -1"},
                {"name": "what", "expression": "'queue ' + request.namespace + '/' + "
                 f"variables.labels['{KUEUE_QUEUE_LABEL}'] + (variables.priorityClass == '' ? '' : "
                 "' (priority class ' + variables.priorityClass + ')') + ' allows at most ' + "
                 "string(variables.limit) + ' seconds (' + (variables.limit < 0 ? '' : "
                 "variables.shown[request.namespace][variables.key]) + ', reclaim.maxRuntime)'"},
                {"name": "asked", "expression": f"'{label}' in variables.labels ? variables.labels['{label}'] : ''"},
            ],
            "validations": [
                {
                    "expression": f"variables.limit < 0 || '{label}' in variables.labels",
                    "messageExpression": f"object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    f"' has no {label} label: ' + variables.what + '; set the label to at most ' + "
                    "string(variables.limit)",
                    "reason": "Forbidden",
                },
                {
                    "expression": f"variables.limit < 0 || !('{label}' in variables.labels) || "
                    "(variables.asked.matches('^[0-9]{1,10}$') && int(variables.asked) <= variables.limit)",
                    "messageExpression": f"object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    f"' asks {label}=' + variables.asked + ': ' + variables.what",
                    "reason": "Forbidden",
                },
            ],
        },
    )


VOLCANO_QUEUE_ACCESS = "gpugov-volcano-queue-access"
VOLCANO_NEED_VOLCANO = "gpugov-volcano-accelerators-need-volcano"
_VOLCANO_RULES = [
    {"apiGroups": [VOLCANO_GROUP], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
     "resources": ["podgroups"]},
    {"apiGroups": [VOLCANO_BATCH_GROUP], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["jobs"]},
    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]},
]


def volcano_queue_access_policy(scope: Scope) -> Object:
    own = {ns: tenant.name for tenant in scope.tenants.values() for ns in sorted(tenant.namespaces)}
    every = sorted({*scope.tenants, *scope.departments})
    queue = (
        f"object.kind == 'Pod' ? (has(object.metadata.annotations) && '{VOLCANO_QUEUE_ANNOTATION}' in "
        f"object.metadata.annotations ? object.metadata.annotations['{VOLCANO_QUEUE_ANNOTATION}'] : '') : "
        "(has(object.spec.queue) ? object.spec.queue : 'default')"
    )
    return _policy(
        scope,
        VOLCANO_QUEUE_ACCESS,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _VOLCANO_RULES},
            "variables": [
                {"name": "own", "expression": _cel(own)},
                {"name": "gpugovQueues", "expression": _cel(every)},
                {"name": "queue", "expression": queue},
            ],
            "validations": [
                {
                    "expression": "variables.queue == '' || (request.namespace in variables.own ? "
                    "variables.queue == variables.own[request.namespace] : !(variables.queue in variables.gpugovQueues))",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "' may not use Volcano queue ' + variables.queue + (request.namespace in variables.own ? "
                    "'; namespace ' + request.namespace + ' uses queue ' + variables.own[request.namespace] : "
                    "': it belongs to a gpugov tenant or department')",
                    "reason": "Forbidden",
                }
            ],
        },
    )


def volcano_need_volcano_policy(scope: Scope) -> Object:
    policy = _job_pod_need_a_queue_policy(scope)
    pod_spec = _pod_spec()
    spec = policy["spec"]
    policy["metadata"]["name"] = VOLCANO_NEED_VOLCANO
    spec["matchConditions"] = [
        {"name": "not-volcano", "expression": f"!has({pod_spec}.schedulerName) || {pod_spec}.schedulerName != 'volcano'"}
    ]
    spec["validations"][0]["messageExpression"] = (
        "object.kind + ' ' + request.namespace + '/' + object.metadata.name + ' requests accelerators but is not "
        "scheduled by volcano: set schedulerName: volcano and a queue (gpugov: every accelerator goes through a queue)'"
    )
    return policy


VOLCANO_POD_PRIORITY = "gpugov-volcano-pod-priority"


def volcano_priority_classes(scope: Scope) -> dict[str, list[str]]:
    """namespace -> the PriorityClasses its pods may name on Volcano: the classes of the namespace's
    declared queues (see allowed_classes) and Guardrails.isolation.podPriorityClasses."""
    extra = set(scope.model.limits.isolation.pod_priority_classes)
    per_namespace: dict[str, set[str]] = {}
    for key, classes in allowed_classes(scope).items():
        per_namespace.setdefault(key.split("/", 1)[0], set(extra)).update(classes)
    return {namespace: sorted(classes) for namespace, classes in sorted(per_namespace.items())}


def volcano_pod_priority_policy(scope: Scope) -> Object:
    """Class 4 on Volcano: its scheduler orders and preempts by the PriorityClass of a Pod, a PodGroup
    or a Volcano Job (and its tasks). Every pod is checked itself (Volcano's controllers are not
    trusted here), so whatever creates it, a tenant namespace names only its queues' classes and any
    other namespace only Guardrails.isolation.podPriorityClasses: never system-node-critical."""
    named = ("(has(object.spec.priorityClassName) ? [object.spec.priorityClassName] : []) + "
             "(object.kind == 'Job' && has(object.spec.tasks) ? object.spec.tasks.filter(t, has(t.template) && "
             "has(t.template.spec) && has(t.template.spec.priorityClassName)).map(t, t.template.spec.priorityClassName)"
             " : [])")
    return _policy(
        scope,
        VOLCANO_POD_PRIORITY,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _VOLCANO_RULES},
            "variables": [
                {"name": "perNamespace", "expression": _cel(volcano_priority_classes(scope))},
                {"name": "anywhere", "expression": _cel(sorted(scope.model.limits.isolation.pod_priority_classes))},
                {"name": "allowed", "expression": "request.namespace in variables.perNamespace ? "
                 "variables.perNamespace[request.namespace] : variables.anywhere"},
                {"name": "named", "expression": f"({named}).filter(n, !(n in variables.allowed))"},
            ],
            "validations": [
                {
                    "expression": "variables.named.size() == 0",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "' may not use priorityClassName ' + variables.named[0] + '; allowed here: ' + "
                    "(variables.allowed.size() == 0 ? '(none)' : variables.allowed.join(', ')) + ' (gpugov: the "
                    "classes of the namespace\\'s queues in tenants/, Guardrails.isolation.podPriorityClasses; "
                    f"ask {_team(scope)})'",
                    "reason": "Forbidden",
                }
            ],
        },
    )


# --- the device runtime's other doors (README: Threat model) ---------------------------------------

DEVICE_SOURCES = "gpugov-device-env-sources"
# Where the NVIDIA container runtime reads a container's device list under the device plugin's
# volume-mounts strategy: a tenant's own volume mounted there would name devices itself.
DEVICE_LIST_MOUNT = "/var/run/nvidia-container-devices"


def device_sources_policy(scope: Scope) -> Object:
    """What gpugov-device-access cannot see in a pod spec: a device variable that arrives through an
    `envFrom` without a prefix from a ConfigMap or Secret of the namespace (refused where it is written:
    no ConfigMap or Secret of a tenant namespace carries a key named as a device variable), and a volume
    mounted at the runtime's device-list path (the device plugin's volume-mounts strategy)."""
    keys = ("(has(object.data) && object.data.exists(k, k in variables.deviceEnv)) || (object.kind == 'ConfigMap' && "
            "has(object.binaryData) && object.binaryData.exists(k, k in variables.deviceEnv)) || (object.kind == "
            "'Secret' && has(object.stringData) && object.stringData.exists(k, k in variables.deviceEnv))")
    mounts = (f"({_containers('ps', ephemeral=True)}).exists(c, has(c.volumeMounts) && c.volumeMounts.exists(m, "
              f"m.mountPath.startsWith('{DEVICE_LIST_MOUNT}')))")
    where = "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
    return _policy(
        scope,
        DEVICE_SOURCES,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [
                *_workload_rules(("CREATE", "UPDATE"), subresources=("ephemeralcontainers",)),
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["configmaps", "secrets"]}]},
            "matchConditions": [_not_trusted(scope)],
            "variables": [
                {"name": "deviceEnv", "expression": _cel(list(DEVICE_ENV))},
                {"name": "podSpecs", "expression": _pod_specs_expr()},
            ],
            "validations": [
                {
                    "expression": f"!(object.kind in ['ConfigMap', 'Secret']) || !({keys})",
                    "messageExpression": where + "' carries a key named as a device runtime variable (' + "
                    "variables.deviceEnv.join(', ') + '): an envFrom without a prefix would hand accelerators to a "
                    f"container without a resource request (gpugov: request accelerators through a queue; ask "
                    f"{_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": f"!variables.podSpecs.exists(ps, {mounts})",
                    "messageExpression": where + f"' mounts a volume at {DEVICE_LIST_MOUNT}, where the container "
                    "runtime reads the devices the device plugin allocated (gpugov: request accelerators through a "
                    f"queue; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
            ],
        },
    )


# --- release and orphan (README: Threat model) -----------------------------------------------------

RELEASE = "gpugov-controller-release"


def release_policy(scope: Scope) -> Object:
    """A controlled object stays its controller's: a controller (the Job controller, a ReplicaSet, a
    StatefulSet, Kueue, JobSet, KubeRay...) claims its children by label selector and ownerReference, and
    releases a child whose labels no longer match, then starts a replacement; the released pod keeps its
    devices and is no Workload's. So on UPDATE of an object that has a controller reference, a tenant
    changes neither its labels (any label: a selector may use any key, with NotIn or DoesNotExist too) nor
    its ownerReferences. The trusted controllers (who set them) are left alone."""
    return _policy(
        scope,
        RELEASE,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _workload_rules(("UPDATE",))},
            "matchConditions": [
                _not_trusted(scope),
                {"name": "controlled", "expression": "has(oldObject.metadata.ownerReferences) && "
                 "oldObject.metadata.ownerReferences.exists(o, has(o.controller) && o.controller)"},
            ],
            "variables": [
                {"name": "controller", "expression": "oldObject.metadata.ownerReferences.filter(o, "
                 "has(o.controller) && o.controller)[0]"},
                {"name": "oldLabels", "expression": _guarded("oldObject", "metadata.labels", "{}")},
                {"name": "newLabels", "expression": _guarded("object", "metadata.labels", "{}")},
            ],
            "validations": [
                {
                    "expression": "variables.oldLabels == variables.newLabels",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "' belongs to ' + variables.controller.kind + ' ' + variables.controller.name + ': its labels "
                    "may not change, since its controller claims it by them and would release it, keeping its "
                    "accelerators outside any queue (gpugov: change the ' + variables.controller.kind + "
                    f"'\\'s template instead; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": "has(object.metadata.ownerReferences) && "
                    "object.metadata.ownerReferences == oldObject.metadata.ownerReferences",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "' belongs to ' + variables.controller.kind + ' ' + variables.controller.name + ': its "
                    "ownerReferences may not change (an orphan keeps its accelerators outside any queue; gpugov: "
                    f"delete the ' + variables.controller.kind + ' to stop it; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
            ],
        },
    )


# --- the rest of the namespace: storage and exposure (README: Threat model) -------------------------

VOLUMES = "gpugov-volumes"
SERVICE_EXPOSURE = "gpugov-service-exposure"
# Every Service type needs no declaration but these (ExternalName and ClusterIP expose nothing new).


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


def _claims_expr() -> str:
    """The claim specs a workload or PVC brings: a PVC's own (on UPDATE only once its volumeName is
    newly set by the sender: the PV controller binds it, and is trusted), a StatefulSet's
    volumeClaimTemplates, and every pod spec's ephemeral volumes' templates."""
    pvc = ("(object.kind == 'PersistentVolumeClaim' ? (request.operation == 'CREATE' || "
           "!has(oldObject.spec.volumeName) || oldObject.spec.volumeName == '' ? [object.spec] : []) : [])")
    sts = ("(object.kind == 'StatefulSet' && has(object.spec.volumeClaimTemplates) ? "
           "object.spec.volumeClaimTemplates.map(t, t.spec) : [])")
    ephemeral = ("variables.podSpecs.exists(ps, has(ps.volumes) && ps.volumes.exists(v, has(v.ephemeral) && "
                 "has(v.ephemeral.volumeClaimTemplate) && has(v.ephemeral.volumeClaimTemplate.spec) && "
                 "has(v.ephemeral.volumeClaimTemplate.spec.volumeName) && "
                 "v.ephemeral.volumeClaimTemplate.spec.volumeName != ''))")
    return f"{pvc} + {sts} + ({ephemeral} ? [{{'volumeName': 'ephemeral'}}] : [])"


def volumes_policy(scope: Scope) -> Object:
    """A tenant's pods keep to their own storage: no volume source that reaches network or node storage
    by address (nfs, iscsi, cephfs, rbd, glusterfs, hostPath... every source of core/v1 Volume but
    configMap, secret, emptyDir, downwardAPI, projected, persistentVolumeClaim, ephemeral, image and
    csi), no inline CSI volume of a driver the tenant is not allowed (nfs.csi.k8s.io reaches any
    export), and no claim that names an existing PersistentVolume (spec.volumeName: another team's
    released volume) or takes its data from another namespace (dataSourceRef.namespace), in every
    kind's pod specs, a StatefulSet's claim templates and a PVC itself; Tenant.allow lifts each.
    Pod Security restricted refuses the inline network sources too, baseline does not."""
    volumes, drivers, _ = allowances(scope)
    kinds = (*_workload_rules(("CREATE", "UPDATE")),
             {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
              "resources": ["persistentvolumeclaims"]})
    sources = " && ".join(f"(!has(v.{name}) || '{name}' in variables.allowedVolumes)" for name in NETWORK_VOLUMES)
    where = "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
    allow = ("(gpugov: Tenant.allow in tenants/ says what a tenant may do beyond the default, with a reason; "
             f"ask {_team(scope)})'")
    return _policy(
        scope,
        VOLUMES,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": list(kinds)},
            "matchConditions": [_not_trusted(scope)],
            "variables": [
                {"name": "allowedVolumes", "expression": _in_namespace(volumes)},
                {"name": "allowedDrivers", "expression": _in_namespace(drivers)},
                {"name": "podSpecs", "expression": _pod_specs_expr()},
                {"name": "claims", "expression": _claims_expr()},
            ],
            "validations": [
                {
                    "expression": f"variables.podSpecs.all(ps, !has(ps.volumes) || ps.volumes.all(v, {sources}))",
                    "messageExpression": where + "' mounts network or node storage by its address ("
                    f"{', '.join(NETWORK_VOLUMES)}), which reaches data beyond the tenant\\'s own claims; allowed "
                    "here: ' + (variables.allowedVolumes.size() == 0 ? '(none)' : "
                    "variables.allowedVolumes.join(', ')) + ' " + allow,
                    "reason": "Forbidden",
                },
                {
                    "expression": "variables.podSpecs.all(ps, !has(ps.volumes) || ps.volumes.all(v, !has(v.csi) || "
                    "v.csi.driver in variables.allowedDrivers))",
                    "messageExpression": where + "' names an inline CSI volume of driver ' + "
                    "variables.podSpecs.filter(ps, has(ps.volumes) && ps.volumes.exists(v, has(v.csi) && "
                    "!(v.csi.driver in variables.allowedDrivers)))[0].volumes.filter(v, has(v.csi) && "
                    "!(v.csi.driver in variables.allowedDrivers))[0].csi.driver + ', which the tenant is not "
                    "allowed (an inline CSI volume reaches whatever its attributes name); allowed here: ' + "
                    "(variables.allowedDrivers.size() == 0 ? '(none)' : variables.allowedDrivers.join(', ')) + ' "
                    + allow,
                    "reason": "Forbidden",
                },
                {
                    "expression": f"'{PREBOUND_CLAIM}' in variables.allowedVolumes || variables.claims.all(c, "
                    "!has(c.volumeName) || c.volumeName == '')",
                    "messageExpression": where + "' claims an existing PersistentVolume by name (volumeName), "
                    "which may hold another team\\'s data: let the claim get its own volume from a StorageClass "
                    + allow,
                    "reason": "Forbidden",
                },
                {
                    "expression": "variables.claims.all(c, !has(c.dataSourceRef) || !has(c.dataSourceRef.namespace) "
                    "|| c.dataSourceRef.namespace == '' || c.dataSourceRef.namespace == request.namespace)",
                    "messageExpression": where + "' takes a claim\\'s data from another namespace "
                    "(dataSourceRef.namespace) " + allow,
                    "reason": "Forbidden",
                },
            ],
        },
    )


def service_exposure_policy(scope: Scope) -> Object:
    """A tenant's Services expose only what is declared: never externalIPs (CVE-2020-8554: a Service
    that claims an address it does not own intercepts the cluster's traffic to it), and NodePort or
    LoadBalancer only where Tenant.allow.serviceTypes says so. Checked for everyone who writes a
    Service in a tenant namespace, trusted controllers too: KubeRay and the like create a tenant's
    Services from what the tenant wrote (a RayCluster's serviceType)."""
    _, _, types = allowances(scope)
    where = "'Service ' + request.namespace + '/' + object.metadata.name + "
    return _policy(
        scope,
        SERVICE_EXPOSURE,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["services"]}]},
            "variables": [{"name": "allowedTypes", "expression": _in_namespace(types)}],
            "validations": [
                {
                    "expression": "!has(object.spec.externalIPs) || object.spec.externalIPs.size() == 0",
                    "messageExpression": where + "' claims externalIPs (' + object.spec.externalIPs.join(', ') + "
                    "'): a Service may not take traffic for an address it does not own (CVE-2020-8554; gpugov: "
                    f"never admitted in a tenant namespace; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": "!has(object.spec.type) || object.spec.type in ['ClusterIP', 'ExternalName'] || "
                    "object.spec.type in variables.allowedTypes",
                    "messageExpression": where + "' is of type ' + object.spec.type + ', which exposes the "
                    "tenant outside the cluster; allowed here: ' + (variables.allowedTypes.size() == 0 ? "
                    "'ClusterIP' : 'ClusterIP, ' + variables.allowedTypes.join(', ')) + ' (gpugov: "
                    f"Tenant.allow.serviceTypes in tenants/, with a reason; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
            ],
        },
    )


def admission_objects(scope: Scope) -> list[Object]:
    if not scope.tenants:
        return []
    exempt = sorted({*SYSTEM_NAMESPACES, scope.cluster.mig_config_namespace, scope.cluster.operations_namespace})
    not_system = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": exempt}]}
    if scope.backend == "volcano":
        return [
            volcano_queue_access_policy(scope),
            _binding(scope, VOLCANO_QUEUE_ACCESS),
            volcano_need_volcano_policy(scope),
            _binding(scope, VOLCANO_NEED_VOLCANO, not_system),
            device_access_policy(scope),
            _binding(scope, DEVICE_ACCESS, not_system),
            volcano_pod_priority_policy(scope),
            _binding(scope, VOLCANO_POD_PRIORITY, not_system),
            *namespace_objects(scope),
        ]
    return [
        *queue_access_objects(scope),
        need_a_queue_policy(scope),
        _binding(scope, NEED_A_QUEUE, not_system),
        ownership_policy(scope),
        _binding(scope, OWNERSHIP, not_system),
        lifecycle_policy(scope),
        _binding(scope, LIFECYCLE, not_system),
        device_access_policy(scope),
        _binding(scope, DEVICE_ACCESS, not_system),
        pod_priority_policy(scope),
        _binding(scope, POD_PRIORITY, not_system),
        *_max_runtime_objects(scope, not_system),
        release_policy(scope),
        _binding(scope, RELEASE, not_system),
        *namespace_objects(scope),
    ]


def namespace_objects(scope: Scope) -> list[Object]:
    """Storage, exposure and the device variables' other sources, on every backend, bound to the tenant
    namespaces."""
    tenants = tenant_namespaces_selector()
    return [volumes_policy(scope), _binding(scope, VOLUMES, tenants),
            service_exposure_policy(scope), _binding(scope, SERVICE_EXPOSURE, tenants),
            device_sources_policy(scope), _binding(scope, DEVICE_SOURCES, tenants)]


def _max_runtime_objects(scope: Scope, not_system: dict[str, Any]) -> list[Object]:
    """The max-runtime policy, only where a reclaim policy declares a maximum runtime; past CEL_BUDGET,
    one a shard of the limited namespaces, each bound to its own."""
    limits = max_runtimes(scope)
    shards = _cut({ns: 2 * len(_cel({ns: per})) for ns, per in limits.items()})  # limits and how they read
    if len(shards) <= 1:
        return [max_runtime_policy(scope, limits), _binding(scope, MAX_RUNTIME, not_system)] if limits else []
    objects: list[Object] = []
    for number, shard in enumerate(shards, start=1):
        name = f"{MAX_RUNTIME}-{number}"
        objects += [max_runtime_policy(scope, {ns: limits[ns] for ns in shard}, name),
                    _binding(scope, name, _names_selector("In", shard))]
    return objects
