"""gpugov running in the cluster: the drift CronJob and the NVML agent DaemonSet.

Emitted when the Cluster declares `operations.image` (an image holding gpugov with its
cluster, notify and agent extras, and this repository at /config: the repository's
Dockerfile builds it). Each gets its own ServiceAccount; the drift checker's ClusterRole
may only get, list and watch, and only the kinds it reads: those compile emits for this
cluster, plus nodes, pods and namespaces.

The two agree by construction: the agent listens on AGENT_PORT and publishes it as a
hostPort, so it answers on each node's own address; the CronJob reads it there
(`--agent-url http://{node_ip}:9402/snapshot.json`, the Node's InternalIP), on the nodes the
DaemonSet's nodeSelector picks. Alerts: the CronJob takes its environment from the optional
Secret NOTIFY_SECRET (GPUGOV_NOTIFY names the sinks, GPUGOV_*_WEBHOOK_URL / _SECRET their
settings); without that Secret drift runs and fails the Job, but sends nothing. What was sent
is kept in the ConfigMap NOTIFY_STATE (a Job's pod keeps no files), which the drift
ServiceAccount may get and patch, and no other ConfigMap.

The reclaim CronJob (issue #26) runs `gpugov reclaim --apply` where a tenant of the cluster has a
reclaim idle policy and the Cluster names its Prometheus (`operations.prometheus`); without the
metric every workload would be 'unknown', so without the URL none is emitted. Its ServiceAccount
may get, list and watch Workloads and Pods (cluster-wide: everything is read before anything is
decided), and patch Workloads and create Events only in the namespaces of the tenants whose idle
policy it applies (a RoleBinding in each): nothing else (on Volcano: batch/v1 Jobs instead of Workloads).
Its alert state lives in an emptyDir, not a
ConfigMap: each warning and deactivation happens once (the Workload's annotations say so), so there
is nothing to deduplicate across runs.

The budget CronJob (issue #27) runs `gpugov budget --apply` where a declared budget covers a tenant of
a Kueue cluster, with drift's notification settings (the Secret) and an alert-state ConfigMap of its
own. Its ServiceAccount may list Workloads, get and patch the tenants' ClusterQueues by name (the
stopPolicy of a spent hold budget), and get and patch that ConfigMap: nothing else. On Volcano it lists
nodes and pods instead, gets and patches the tenants' Queues by name (gpugov-budget's mark) and creates
Commands (CloseQueue, OpenQueue) in the operations namespace only.

Each is a CronOperation: a ServiceAccount, its Grants (a ClusterRole bound cluster-wide or in some
namespaces) and the CronJob.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpugov.compile.admission.device_sources import DEVICE_LIST_MOUNT
from gpugov.compile.common import Backend, Object, Scope, metadata
from gpugov.kube.kinds import KINDS, WORKLOAD
from gpugov.kube.names import KUEUE_API, VOLCANO_API
from gpugov.kube.objects import LABEL_COMPONENT, LABEL_TENANT

DRIFT = "gpugov-drift"
AGENT = "gpugov-agent"
AGENT_PORT = 9402
AGENT_DEVICES = "all-gpus"  # the agent's volume naming every device to the NVIDIA runtime
AGENT_NODE_SELECTOR = {"nvidia.com/gpu.present": "true"}  # GPU Feature Discovery's label
AGENT_URL = f"http://{{node_ip}}:{AGENT_PORT}/snapshot.json"  # drift's --agent-url for the DaemonSet below
NOTIFY_SECRET = "gpugov-notify"  # optional: GPUGOV_NOTIFY and the sinks' GPUGOV_* settings
NOTIFY_STATE = f"{DRIFT}-notify-state"  # ConfigMap: what the CronJob last sent (deduplication)
RECLAIM = "gpugov-reclaim"
RECLAIM_STATE_DIR = "/var/run/gpugov"  # the reclaim pod's emptyDir (its notify state)
READ_VERBS = ["get", "list", "watch"]
RBAC = "rbac.authorization.k8s.io"
CLUSTER_QUEUE = KINDS[(KUEUE_API, "ClusterQueue")]
ALWAYS_READ = (("v1", "Node"), ("v1", "Pod"), ("v1", "Namespace"))


def _meta(scope: Scope, name: str, component: str, namespaced: bool = True) -> dict[str, Any]:
    cluster = scope.cluster
    return metadata(name, cluster, {LABEL_COMPONENT: component}, cluster.operations_namespace if namespaced else None)


def reader_rules(kinds: set[tuple[str, str]]) -> list[dict[str, Any]]:
    by_group: dict[str, set[str]] = {}
    for key in sorted(kinds | set(ALWAYS_READ)):
        kind = KINDS[key]
        by_group.setdefault(kind.group, set()).add(kind.plural)
    return [{"apiGroups": [group], "resources": sorted(plurals), "verbs": list(READ_VERBS)}
            for group, plurals in sorted(by_group.items())]


def _hardened(container: dict[str, Any]) -> dict[str, Any]:
    container["securityContext"] = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}}
    return container


@dataclass(frozen=True)
class Grant:
    """A ClusterRole of one operation and where it holds: cluster-wide (a ClusterRoleBinding) or, with
    `namespaces`, only there (a RoleBinding in each). A `state` grant also emits, before its role, the
    empty ConfigMap of its name in the operations namespace: the alert state its rules let it write."""

    role: str
    rules: list[dict[str, Any]]
    namespaces: tuple[str, ...] | None = None
    state: bool = False


def state_grant(scope: Scope, name: str) -> Grant:
    """The alert state of a CronJob (its pods keep no files): one ConfigMap it may get and patch, and no
    other (a ClusterRole bound in the operations namespace only), emitted empty: the command owns its data."""
    return Grant(name, [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [name],
                         "verbs": ["get", "patch"]}], (scope.cluster.operations_namespace,), state=True)


@dataclass(frozen=True)
class CronOperation:
    """gpugov run on a schedule in the cluster: a ServiceAccount, its grants, and the CronJob that runs
    `args` as it (one container of the operations image, never two runs at once, never retried)."""

    name: str  # the ServiceAccount's and the CronJob's
    component: str
    schedule: str
    args: list[str]
    grants: tuple[Grant, ...]
    env: tuple[dict[str, Any], ...] = ()
    notify: bool = False  # takes the sinks' settings from the optional Secret NOTIFY_SECRET
    volumes: tuple[tuple[str, str, dict[str, Any]], ...] = ()  # (name, mount path, volume source)

    def container(self, scope: Scope) -> dict[str, Any]:
        container: dict[str, Any] = {"name": self.component, "image": scope.cluster.operations_image,
                                     "args": list(self.args)}
        if self.env:
            container["env"] = [dict(e) for e in self.env]
        if self.notify:
            container["envFrom"] = [{"secretRef": {"name": NOTIFY_SECRET, "optional": True}}]
        if self.volumes:
            container["volumeMounts"] = [{"name": name, "mountPath": path} for name, path, _ in self.volumes]
        container["resources"] = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
        return _hardened(container)

    def objects(self, scope: Scope) -> list[Object]:
        cluster, component = scope.cluster, self.component
        subjects = [{"kind": "ServiceAccount", "name": self.name, "namespace": cluster.operations_namespace}]
        found: list[Object] = [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(scope, self.name, component)}]
        for grant in self.grants:
            if grant.state:
                found.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(scope, grant.role, component)})
            found.append({"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole",
                          "metadata": _meta(scope, grant.role, component, namespaced=False), "rules": grant.rules})
            role_ref = {"apiGroup": RBAC, "kind": "ClusterRole", "name": grant.role}
            if grant.namespaces is None:
                found.append({"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding",
                              "metadata": _meta(scope, grant.role, component, namespaced=False),
                              "roleRef": role_ref, "subjects": subjects})
            found += [{"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding",
                       "metadata": metadata(grant.role, cluster, {LABEL_COMPONENT: component}, namespace),
                       "roleRef": dict(role_ref), "subjects": [dict(s) for s in subjects]}
                      for namespace in grant.namespaces or ()]
        pod: dict[str, Any] = {"serviceAccountName": self.name, "restartPolicy": "Never",
                               "securityContext": {"runAsNonRoot": True, "runAsUser": 65532},
                               "containers": [self.container(scope)]}
        if self.volumes:
            pod["volumes"] = [{"name": name, **source} for name, _, source in self.volumes]
        found.append({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": _meta(scope, self.name, component),
                      "spec": {"schedule": self.schedule, "concurrencyPolicy": "Forbid",
                               "jobTemplate": {"spec": {"backoffLimit": 0, "template": {"spec": pod}}}}})
        return found


def drift_objects(scope: Scope, kinds: set[tuple[str, str]]) -> list[Object]:
    cluster = scope.cluster
    args = ["drift", "/config", "--cluster", cluster.name, "--backend", scope.backend.value, "--format", "json"]
    if cluster.run_agent:
        args += ["--agent-url", AGENT_URL]
    state = f"configmap:{cluster.operations_namespace}/{NOTIFY_STATE}"
    return CronOperation(DRIFT, "drift", cluster.drift_schedule, args,
                         (Grant(f"{DRIFT}-reader", reader_rules(kinds) + _workload_reader(scope)),
                          state_grant(scope, NOTIFY_STATE)),
                         env=({"name": "GPUGOV_NOTIFY_STATE", "value": state},), notify=True).objects(scope)


def _workload_reader(scope: Scope) -> list[dict[str, Any]]:
    """On Kueue, drift reads the Workloads too: which running pod no admitted Workload holds (GD027)."""
    if scope.backend != "kueue":
        return []
    return [{"apiGroups": [WORKLOAD.group], "resources": [WORKLOAD.plural], "verbs": list(READ_VERBS)}]


def reclaim_namespaces(scope: Scope) -> list[str]:
    """The namespaces of this cluster's tenants that declare an idle policy: where reclaim may act."""
    found = set()
    for tenant in scope.tenants.values():
        policy = scope.model.reclaim_policy(tenant)
        if policy is not None and policy.idle is not None:
            found.update(tenant.namespaces)
    return sorted(found)


def reclaim_objects(scope: Scope) -> list[Object]:
    """The reclaim CronJob and its least RBAC; none without an idle policy or a declared Prometheus."""
    cluster = scope.cluster
    namespaces = reclaim_namespaces(scope)
    if not namespaces or not cluster.prometheus_url:
        return []
    # on Volcano the subjects are the tenants' batch/v1 Jobs, patched in place, and Volcano Jobs, marked and
    # aborted by Volcano's AbortJob Command in their namespace (gpugov.reclaim.volcano)
    groups = [WORKLOAD.group] if scope.backend is Backend.KUEUE else ["batch", "batch.volcano.sh"]
    plural = WORKLOAD.plural if scope.backend is Backend.KUEUE else "jobs"
    reader = [{"apiGroups": [g], "resources": [plural], "verbs": list(READ_VERBS)} for g in groups]
    reader.append({"apiGroups": [""], "resources": ["pods"], "verbs": list(READ_VERBS)})
    actor = [{"apiGroups": [g], "resources": [plural], "verbs": ["patch"]} for g in groups]
    if scope.backend is Backend.VOLCANO:
        actor.append({"apiGroups": ["bus.volcano.sh"], "resources": ["commands"], "verbs": ["create"]})
    actor.append({"apiGroups": [""], "resources": ["events"], "verbs": ["create"]})
    return CronOperation(
        RECLAIM, "reclaim", cluster.reclaim_schedule,
        ["reclaim", "/config", "--cluster", cluster.name, "--prometheus", cluster.prometheus_url, "--apply",
         "--format", "json"],
        # reads everywhere (everything is read before anything is decided); acts only where an idle policy
        # applies: a tenant without one keeps its Workloads out of reach
        (Grant(f"{RECLAIM}-reader", reader), Grant(f"{RECLAIM}-actor", actor, tuple(namespaces))),
        env=({"name": "GPUGOV_NOTIFY_STATE", "value": f"{RECLAIM_STATE_DIR}/notify-state.json"},), notify=True,
        volumes=(("state", RECLAIM_STATE_DIR, {"emptyDir": {"sizeLimit": "1Mi"}}),),
    ).objects(scope)


TIMELINE = "gpugov-timeline"
TIMELINE_SCHEDULE = "*/5 * * * *"  # a grant's start or a window's opening takes effect within five minutes
# What a boundary changes: the quota objects. The timeline CronJob applies only these (apply --only-quotas).
QUOTA_KINDS = frozenset({(KUEUE_API, "ClusterQueue"), (KUEUE_API, "Cohort"), (VOLCANO_API, "Queue"),
                         ("v1", "ResourceQuota")})


def timeline_objects(scope: Scope) -> list[Object]:
    """Where quotas change with time (issue #27): a CronJob that applies the quotas of the instant it
    runs at (`gpugov apply --at now --only-quotas --no-prune`; idempotent: inside one span the objects
    are the same), its ServiceAccount reading what apply checks first (gpugov's kinds, the identity
    record) and patching only the quota objects. None without a QuotaGrant or QuotaWindow."""
    if not scope.model.has_timeline:
        return []
    cluster = scope.cluster
    writes: dict[str, set[str]] = {}
    for key in sorted(QUOTA_KINDS):
        writes.setdefault(KINDS[key].group, set()).add(KINDS[key].plural)
    rules = [*reader_rules(set(KINDS)),
             *({"apiGroups": [group], "resources": sorted(plurals), "verbs": ["patch"]}
               for group, plurals in sorted(writes.items()))]
    return CronOperation(TIMELINE, "timeline", TIMELINE_SCHEDULE,
                         ["apply", "/config", "--cluster", cluster.name, "--backend", scope.backend.value, "--at",
                          "now", "--only-quotas", "--no-prune"],
                         (Grant(TIMELINE, rules),)).objects(scope)


BUDGET = "gpugov-budget"
BUDGET_STATE = f"{BUDGET}-notify-state"  # its own: two CronJobs rewriting one ConfigMap would drop each other's


def budget_queues(scope: Scope, objects: list[Object]) -> list[str]:
    """The tenants' ClusterQueues compile emits for this cluster: those `gpugov budget --apply` reads
    and may hold or release (cli/budget.py hold_queues). Every tenant's, not only those of a hold budget:
    a Hold it set must still be released after the budget's action or the budget itself is changed."""
    return sorted(o["metadata"]["name"] for o in objects
                  if o["kind"] == "ClusterQueue" and LABEL_TENANT in (o["metadata"].get("labels") or {}))


def budget_objects(scope: Scope, objects: list[Object]) -> list[Object]:
    """The budget CronJob (issue #27): `gpugov budget --apply` with drift's notification settings, its
    ServiceAccount listing Workloads (the usage ledger needs all of them), getting and patching only the
    tenants' ClusterQueues by name (stopPolicy), and writing only its own alert-state ConfigMap (on Volcano:
    _volcano_budget_objects). None where no declared budget covers a tenant of this cluster."""
    if scope.backend not in (Backend.KUEUE, Backend.VOLCANO) or not any(
            set(tenants) & set(scope.tenants) for _, _, tenants in scope.model.budget_holders()):
        return []
    cluster = scope.cluster
    if scope.backend is Backend.VOLCANO:
        return _volcano_budget_objects(scope, objects)
    rules: list[dict[str, Any]] = [{"apiGroups": [WORKLOAD.group], "resources": [WORKLOAD.plural], "verbs": ["list"]}]
    queues = budget_queues(scope, objects)
    if queues:  # never an empty resourceNames: that would be every ClusterQueue
        rules.append({"apiGroups": [CLUSTER_QUEUE.group], "resources": [CLUSTER_QUEUE.plural], "resourceNames": queues,
                      "verbs": ["get", "patch"]})
    state = f"configmap:{cluster.operations_namespace}/{BUDGET_STATE}"
    return CronOperation(BUDGET, "budget", cluster.budget_schedule,
                         ["budget", "/config", "--cluster", cluster.name, "--backend", scope.backend.value, "--apply",
                          "--format", "json"],
                         (Grant(BUDGET, rules), state_grant(scope, BUDGET_STATE)),
                         env=({"name": "GPUGOV_NOTIFY_STATE", "value": state},), notify=True).objects(scope)


def _volcano_budget_objects(scope: Scope, objects: list[Object]) -> list[Object]:
    """On Volcano: list nodes and pods (the ledger of the pods Volcano bound), get and patch only the
    tenants' Queues by name (gpugov-budget's mark), and create, list and delete Commands in the operations
    namespace only (CloseQueue and OpenQueue aimed at those Queues; a Command there can reach no Job of a
    tenant; its own pending ones are read, and one going the wrong way deleted, before it sends another)."""
    cluster = scope.cluster
    queue = KINDS[(VOLCANO_API, "Queue")]
    rules: list[dict[str, Any]] = [{"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["list"]}]
    queues = sorted(o["metadata"]["name"] for o in objects
                    if o["kind"] == "Queue" and LABEL_TENANT in (o["metadata"].get("labels") or {}))
    if queues:  # never an empty resourceNames: that would be every Queue
        rules.append({"apiGroups": [queue.group], "resources": [queue.plural], "resourceNames": queues,
                      "verbs": ["get", "patch"]})
    commands = Grant(f"{BUDGET}-commands", [{"apiGroups": ["bus.volcano.sh"], "resources": ["commands"],
                                            "verbs": ["create", "delete", "list"]}], (cluster.operations_namespace,))
    state = f"configmap:{cluster.operations_namespace}/{BUDGET_STATE}"
    return CronOperation(BUDGET, "budget", cluster.budget_schedule,
                         ["budget", "/config", "--cluster", cluster.name, "--backend", scope.backend.value, "--apply",
                          "--format", "json"],
                         (Grant(BUDGET, rules), commands, state_grant(scope, BUDGET_STATE)),
                         env=({"name": "GPUGOV_NOTIFY_STATE", "value": state},), notify=True).objects(scope)


def agent_objects(scope: Scope) -> list[Object]:
    cluster = scope.cluster
    labels = {"app.kubernetes.io/name": AGENT}
    container = {
        "name": "agent",
        "image": cluster.operations_image,
        "args": ["agent", "--listen", f"0.0.0.0:{AGENT_PORT}"],
        "env": [
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            # The NVIDIA container runtime mounts the driver's NVML for "utility" only.
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
        ],
        # hostPort: the agent answers on the node's own address, where drift reads it (AGENT_URL)
        "ports": [{"name": "metrics", "containerPort": AGENT_PORT, "hostPort": AGENT_PORT}],
        "resources": {"requests": {"cpu": "20m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        # Where the toolkit refuses the variable from unprivileged containers (compile.gpu_operator), it
        # reads the device list from mounts of the host's /dev/null under its device-list path: "all".
        "volumeMounts": [{"name": AGENT_DEVICES, "mountPath": f"{DEVICE_LIST_MOUNT}/all", "readOnly": True}],
    }
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(scope, AGENT, "agent")},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": _meta(scope, AGENT, "agent"), "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {
                "serviceAccountName": AGENT,
                "automountServiceAccountToken": False,
                "runtimeClassName": "nvidia",
                "nodeSelector": dict(AGENT_NODE_SELECTOR),
                "tolerations": [{"operator": "Exists"}],  # GPU pools are tainted for their tenants
                "containers": [_hardened(container)],
                "volumes": [{"name": AGENT_DEVICES, "hostPath": {"path": "/dev/null", "type": "CharDevice"}}],
            }},
        }},
    ]


def operations_objects(scope: Scope, objects: list[Object]) -> list[Object]:
    cluster = scope.cluster
    if not cluster.operations_image:
        return []
    namespace: Object = {"apiVersion": "v1", "kind": "Namespace",
                         "metadata": _meta(scope, cluster.operations_namespace, "operations", namespaced=False)}
    result = [namespace]
    agent = agent_objects(scope) if cluster.run_agent else []
    kinds = {(o["apiVersion"], o["kind"]) for o in [*objects, namespace, *agent]}
    kinds |= {("v1", "ServiceAccount"), ("v1", "ConfigMap"), ("rbac.authorization.k8s.io/v1", "ClusterRole"),
              ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"), ("rbac.authorization.k8s.io/v1", "RoleBinding"),
              ("batch/v1", "CronJob")}
    reclaim = reclaim_objects(scope) if scope.backend in (Backend.KUEUE, Backend.VOLCANO) else []
    return [*result, *drift_objects(scope, kinds), *agent, *reclaim, *timeline_objects(scope),
            *budget_objects(scope, objects)]
