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
policy it applies (a RoleBinding in each): nothing else. Its alert state lives in an emptyDir, not a
ConfigMap: each warning and deactivation happens once (the Workload's annotations say so), so there
is nothing to deduplicate across runs.
"""

from __future__ import annotations

from typing import Any

from gpugov.compile.common import Backend, Object, Scope, metadata
from gpugov.kube.kinds import KINDS, WORKLOAD
from gpugov.kube.names import KUEUE_API, VOLCANO_API
from gpugov.kube.objects import LABEL_COMPONENT

DRIFT = "gpugov-drift"
AGENT = "gpugov-agent"
AGENT_PORT = 9402
AGENT_NODE_SELECTOR = {"nvidia.com/gpu.present": "true"}  # GPU Feature Discovery's label
AGENT_URL = f"http://{{node_ip}}:{AGENT_PORT}/snapshot.json"  # drift's --agent-url for the DaemonSet below
NOTIFY_SECRET = "gpugov-notify"  # optional: GPUGOV_NOTIFY and the sinks' GPUGOV_* settings
NOTIFY_STATE = f"{DRIFT}-notify-state"  # ConfigMap: what the CronJob last sent (deduplication)
RECLAIM = "gpugov-reclaim"
RECLAIM_STATE_DIR = "/var/run/gpugov"  # the reclaim pod's emptyDir (its notify state)
READ_VERBS = ["get", "list", "watch"]
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


def drift_objects(scope: Scope, kinds: set[tuple[str, str]]) -> list[Object]:
    cluster = scope.cluster
    ns = cluster.operations_namespace
    args = ["drift", "/config", "--cluster", cluster.name, "--backend", scope.backend.value, "--format", "json"]
    if cluster.run_agent:
        args += ["--agent-url", AGENT_URL]
    container = _hardened({
        "name": "drift",
        "image": cluster.operations_image,
        "args": args,
        "env": [{"name": "GPUGOV_NOTIFY_STATE", "value": f"configmap:{ns}/{NOTIFY_STATE}"}],
        "envFrom": [{"secretRef": {"name": NOTIFY_SECRET, "optional": True}}],
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
    })
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(scope, DRIFT, "drift")},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": _meta(scope, f"{DRIFT}-reader", "drift", namespaced=False), "rules": reader_rules(kinds)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": _meta(scope, f"{DRIFT}-reader", "drift", namespaced=False),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"{DRIFT}-reader"},
         "subjects": [{"kind": "ServiceAccount", "name": DRIFT, "namespace": ns}]},
        # The alert state: one ConfigMap the drift ServiceAccount may write (a ClusterRole bound
        # in this namespace only, by a RoleBinding), emitted empty: drift owns its data.
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(scope, NOTIFY_STATE, "drift")},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": _meta(scope, NOTIFY_STATE, "drift", namespaced=False),
         "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [NOTIFY_STATE],
                    "verbs": ["get", "patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": _meta(scope, NOTIFY_STATE, "drift"),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NOTIFY_STATE},
         "subjects": [{"kind": "ServiceAccount", "name": DRIFT, "namespace": ns}]},
        {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": _meta(scope, DRIFT, "drift"), "spec": {
            "schedule": cluster.drift_schedule,
            "concurrencyPolicy": "Forbid",
            "jobTemplate": {"spec": {"backoffLimit": 0, "template": {"spec": {
                "serviceAccountName": DRIFT,
                "restartPolicy": "Never",
                "securityContext": {"runAsNonRoot": True, "runAsUser": 65532},
                "containers": [container],
            }}}},
        }},
    ]


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
    ns = cluster.operations_namespace
    rbac = "rbac.authorization.k8s.io"
    subjects = [{"kind": "ServiceAccount", "name": RECLAIM, "namespace": ns}]
    reader, actor = f"{RECLAIM}-reader", f"{RECLAIM}-actor"
    container = _hardened({
        "name": "reclaim",
        "image": cluster.operations_image,
        "args": ["reclaim", "/config", "--cluster", cluster.name, "--prometheus", cluster.prometheus_url,
                 "--apply", "--format", "json"],
        "env": [{"name": "GPUGOV_NOTIFY_STATE", "value": f"{RECLAIM_STATE_DIR}/notify-state.json"}],
        "envFrom": [{"secretRef": {"name": NOTIFY_SECRET, "optional": True}}],
        "volumeMounts": [{"name": "state", "mountPath": RECLAIM_STATE_DIR}],
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
    })
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(scope, RECLAIM, "reclaim")},
        {"apiVersion": f"{rbac}/v1", "kind": "ClusterRole", "metadata": _meta(scope, reader, "reclaim", namespaced=False),
         "rules": [{"apiGroups": [WORKLOAD.group], "resources": [WORKLOAD.plural],
                    "verbs": list(READ_VERBS)},
                   {"apiGroups": [""], "resources": ["pods"], "verbs": list(READ_VERBS)}]},
        {"apiVersion": f"{rbac}/v1", "kind": "ClusterRoleBinding",
         "metadata": _meta(scope, reader, "reclaim", namespaced=False),
         "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": reader}, "subjects": subjects},
        {"apiVersion": f"{rbac}/v1", "kind": "ClusterRole", "metadata": _meta(scope, actor, "reclaim", namespaced=False),
         "rules": [{"apiGroups": [WORKLOAD.group], "resources": [WORKLOAD.plural],
                    "verbs": ["patch"]},
                   {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]},
        # bound only where an idle policy applies: a tenant without one keeps its Workloads out of reach
        *({"apiVersion": f"{rbac}/v1", "kind": "RoleBinding",
           "metadata": metadata(actor, cluster, {LABEL_COMPONENT: "reclaim"}, namespace),
           "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": actor}, "subjects": subjects}
          for namespace in namespaces),
        {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": _meta(scope, RECLAIM, "reclaim"), "spec": {
            "schedule": cluster.reclaim_schedule,
            "concurrencyPolicy": "Forbid",
            "jobTemplate": {"spec": {"backoffLimit": 0, "template": {"spec": {
                "serviceAccountName": RECLAIM,
                "restartPolicy": "Never",
                "securityContext": {"runAsNonRoot": True, "runAsUser": 65532},
                "containers": [container],
                "volumes": [{"name": "state", "emptyDir": {"sizeLimit": "1Mi"}}],
            }}}},
        }},
    ]


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
    rbac = "rbac.authorization.k8s.io"
    subjects = [{"kind": "ServiceAccount", "name": TIMELINE, "namespace": cluster.operations_namespace}]
    writes: dict[str, set[str]] = {}
    for key in sorted(QUOTA_KINDS):
        writes.setdefault(KINDS[key].group, set()).add(KINDS[key].plural)
    container = _hardened({
        "name": "timeline",
        "image": cluster.operations_image,
        "args": ["apply", "/config", "--cluster", cluster.name, "--backend", scope.backend.value, "--at", "now",
                 "--only-quotas", "--no-prune"],
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
    })
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(scope, TIMELINE, "timeline")},
        {"apiVersion": f"{rbac}/v1", "kind": "ClusterRole", "metadata": _meta(scope, TIMELINE, "timeline", namespaced=False),
         "rules": [*reader_rules(set(KINDS)),
                   *({"apiGroups": [group], "resources": sorted(plurals), "verbs": ["patch"]}
                     for group, plurals in sorted(writes.items()))]},
        {"apiVersion": f"{rbac}/v1", "kind": "ClusterRoleBinding",
         "metadata": _meta(scope, TIMELINE, "timeline", namespaced=False),
         "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": TIMELINE}, "subjects": subjects},
        {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": _meta(scope, TIMELINE, "timeline"), "spec": {
            "schedule": TIMELINE_SCHEDULE,
            "concurrencyPolicy": "Forbid",
            "jobTemplate": {"spec": {"backoffLimit": 0, "template": {"spec": {
                "serviceAccountName": TIMELINE,
                "restartPolicy": "Never",
                "securityContext": {"runAsNonRoot": True, "runAsUser": 65532},
                "containers": [container],
            }}}},
        }},
    ]


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
    reclaim = reclaim_objects(scope) if scope.backend is Backend.KUEUE else []
    return [*result, *drift_objects(scope, kinds), *agent, *reclaim, *timeline_objects(scope)]
