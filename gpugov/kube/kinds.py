"""Where each kind gpugov handles lives in the Kubernetes API: one table for the drift
checker's reads and for the read-only ClusterRole that compile gives it."""

from __future__ import annotations

from dataclasses import dataclass

from gpugov.kube.names import KUEUE_API, SCHEDULING_API, VOLCANO_API


@dataclass(frozen=True)
class Kind:
    api_version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def collection_path(self) -> str:
        """The cluster-wide list path (all namespaces for namespaced kinds)."""
        prefix = "/api/" if not self.group else "/apis/"
        return f"{prefix}{self.api_version}/{self.plural}"

    def object_path(self, name: str, namespace: str = "") -> str:
        prefix = "/api/" if not self.group else "/apis/"
        if self.namespaced:
            return f"{prefix}{self.api_version}/namespaces/{namespace}/{self.plural}/{name}"
        return f"{prefix}{self.api_version}/{self.plural}/{name}"


KINDS: dict[tuple[str, str], Kind] = {
    (k.api_version, k.kind): k
    for k in (
        Kind("v1", "Namespace", "namespaces", False),
        Kind("v1", "ConfigMap", "configmaps", True),
        Kind("v1", "ResourceQuota", "resourcequotas", True),
        Kind("v1", "ServiceAccount", "serviceaccounts", True),
        Kind("v1", "Node", "nodes", False),
        Kind("v1", "Pod", "pods", True),
        Kind("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", True),
        Kind("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", False),
        Kind("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", False),
        Kind(SCHEDULING_API, "PriorityClass", "priorityclasses", False),
        Kind("batch/v1", "CronJob", "cronjobs", True),
        Kind("apps/v1", "DaemonSet", "daemonsets", True),
        Kind("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies", False),
        Kind(
            "admissionregistration.k8s.io/v1",
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
            False,
        ),
        Kind(KUEUE_API, "ResourceFlavor", "resourceflavors", False),
        Kind(KUEUE_API, "Topology", "topologies", False),
        Kind(KUEUE_API, "Cohort", "cohorts", False),
        Kind(KUEUE_API, "MultiKueueCluster", "multikueueclusters", False),
        Kind(KUEUE_API, "MultiKueueConfig", "multikueueconfigs", False),
        Kind(KUEUE_API, "AdmissionCheck", "admissionchecks", False),
        Kind(KUEUE_API, "ClusterQueue", "clusterqueues", False),
        Kind(KUEUE_API, "LocalQueue", "localqueues", True),
        Kind(KUEUE_API, "WorkloadPriorityClass", "workloadpriorityclasses", False),
        Kind(VOLCANO_API, "Queue", "queues", False),
        # The GPU Operator's: gpugov patches its env settings (compile.gpu_operator), never owns it.
        Kind("nvidia.com/v1", "ClusterPolicy", "clusterpolicies", False),
    )
}


# Read, never written: not in KINDS (drift does not compare them, compile grants no role on them).
WORKLOAD = Kind(KUEUE_API, "Workload", "workloads", True)
PODGROUP = Kind(VOLCANO_API, "PodGroup", "podgroups", True)


# The order objects are applied in: namespaces and classes first, flavors and cohorts before the
# queues that use them, admission policies before the nodes whose labels they guard.
APPLY_ORDER = (
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "ConfigMap",
    "ResourceQuota",
    "RoleBinding",
    "PriorityClass",
    "WorkloadPriorityClass",
    "Topology",
    "ResourceFlavor",
    "Cohort",
    "ClusterQueue",
    "LocalQueue",
    "Queue",
    "CronJob",
    "DaemonSet",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "Node",
    "ClusterPolicy",
    # A fleet's MultiKueue wiring, last so that no other kind's manifest file is renumbered: a ClusterQueue
    # whose AdmissionCheck does not exist yet waits inactive until it does (Kueue reconciles it then).
    "MultiKueueCluster",
    "MultiKueueConfig",
    "AdmissionCheck",
)

# The order of dependence (prune goes through it backwards): a fleet's wiring before the ClusterQueues that
# name its AdmissionCheck, so those are deleted first.
_FLEET_ORDER = ("MultiKueueCluster", "MultiKueueConfig", "AdmissionCheck")
DEPENDENCY_ORDER = tuple(
    name for kind in APPLY_ORDER if kind not in _FLEET_ORDER
    for name in ((*_FLEET_ORDER, kind) if kind == "ClusterQueue" else (kind,))
)


def kind_of(obj: dict) -> Kind:
    return KINDS[(obj["apiVersion"], obj["kind"])]
