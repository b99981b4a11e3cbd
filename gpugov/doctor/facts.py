"""What the doctor reads from a cluster, as plain data: the edge (gpugov.cluster.inventory)
fills a Facts, the checks (checks.py) only look at it.

Each source is read whole or not at all; a source that could not be read is named in
`unreadable` with the reason, and every check that needs it reports "could not check".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]

# Every source a check can name, and what it is (the README's "reads" column uses these words).
SOURCES = {
    "crds": "CustomResourceDefinitions by name (apiextensions.k8s.io/v1)",
    "apiservices": "APIServices by name (apiregistration.k8s.io/v1)",
    "kueue-config": "ConfigMap <kueue-namespace>/kueue-manager-config, key controller_manager_config.yaml",
    "volcano-config": "ConfigMap volcano-system/volcano-scheduler-configmap, key volcano-scheduler.conf",
    "volcano-queues": "Volcano Queues (scheduling.volcano.sh/v1beta1) and their status, and the PodGroups' queues",
    "kueue-services": "Services in the Kueue namespace",
    "clusterqueues": "ClusterQueues (kueue.x-k8s.io/v1beta2) and their status",
    "cohorts": "Cohorts (kueue.x-k8s.io/v1beta2)",
    "nodes": "Nodes: labels and status.allocatable",
    "daemonsets": "DaemonSets in all namespaces",
    "clusterpolicies": "GPU Operator ClusterPolicies (nvidia.com/v1)",
    "admission": "ValidatingAdmissionPolicies and bindings by name",
    "namespaces": "the tenants' Namespaces by name (their Pod Security labels)",
    "external-ips": "the API server's answer to a server-side dry run (nothing is created) of a Service with "
    "externalIPs in the first tenant namespace",
    "rbac": "gpugov's tenant ClusterRoles and ClusterRoleBindings by name, the RoleBindings of the tenants' namespaces",
    "multikueue": "a fleet manager's AdmissionChecks and MultiKueueClusters (kueue.x-k8s.io/v1beta2) by name",
    "pods": "running Pods (only with --dcgm-metrics)",
    "kueue-metrics": "the Kueue /metrics text at --kueue-metrics URL",
    "dcgm-metrics": "the DCGM exporter /metrics text at --dcgm-metrics URL",
}
API_SOURCES = tuple(s for s in SOURCES if not s.endswith("-metrics"))

KUEUE_CONFIGMAP = "kueue-manager-config"
KUEUE_CONFIG_KEY = "controller_manager_config.yaml"


@dataclass(frozen=True)
class FactsRequest:
    """What to read: derived from the desired state and the command's options."""

    crd_names: tuple[str, ...]
    apiservice_names: tuple[str, ...]
    kueue_namespace: str
    admission: tuple[tuple[str, str], ...]  # (kind, name)
    kueue_metrics_url: str | None = None
    dcgm_metrics_url: str | None = None
    namespaces: tuple[str, ...] = ()  # the tenants' namespaces (compile's Namespace objects)
    rbac: tuple[tuple[str, str], ...] = ()  # (kind, name) of the tenant roles' cluster-scoped objects
    volcano: bool = False  # the cluster runs Volcano: read its scheduler configuration, Queues and PodGroups
    multikueue: tuple[tuple[str, str], ...] = ()  # (kind, name): a fleet manager's AdmissionChecks and MultiKueueClusters

    @property
    def read_pods(self) -> bool:
        return self.dcgm_metrics_url is not None


@dataclass
class Facts:
    crds: dict[str, Obj] = field(default_factory=dict)  # name -> CRD, those found
    apiservices: dict[str, Obj] = field(default_factory=dict)
    kueue_configmap: Obj | None = None
    volcano_configmap: Obj | None = None
    volcano_queues: list[Obj] = field(default_factory=list)
    podgroups: list[Obj] = field(default_factory=list)
    kueue_services: list[Obj] = field(default_factory=list)
    clusterqueues: list[Obj] = field(default_factory=list)
    cohorts: list[Obj] = field(default_factory=list)
    nodes: list[Obj] = field(default_factory=list)
    daemonsets: list[Obj] = field(default_factory=list)
    clusterpolicies: list[Obj] = field(default_factory=list)
    admission: dict[tuple[str, str], Obj] = field(default_factory=dict)  # (kind, name) -> object, those found
    namespaces: dict[str, Obj] = field(default_factory=dict)  # name -> Namespace, those found
    rbac: dict[tuple[str, str], Obj] = field(default_factory=dict)  # (kind, name) -> object, those found
    rolebindings: list[Obj] = field(default_factory=list)  # every RoleBinding of the tenants' namespaces
    multikueue: dict[tuple[str, str], Obj] = field(default_factory=dict)  # (kind, name) -> object, those found
    pods: list[Obj] | None = None  # running pods; None when not read
    kueue_metrics: str | None = None  # /metrics text; None when no URL was given
    dcgm_metrics: str | None = None
    # the refusal of a dry-run Service with externalIPs in a tenant namespace, "" when it was admitted; None: not asked
    external_ips: str | None = None
    unreadable: dict[str, str] = field(default_factory=dict)  # source -> why it could not be read
