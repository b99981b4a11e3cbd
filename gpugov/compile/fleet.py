"""A fleet's objects (issue #43): Kueue's MultiKueue wired from the declarations.

On the **manager**: per fleet a ResourceFlavor without node labels (the manager has no nodes for the
fleet), one MultiKueueCluster per worker naming the worker's kubeconfig Secret (its name only: the
platform team creates the Secret, key `kubeconfig`, in Kueue's namespace), the MultiKueueConfig that
lists them, the AdmissionCheck of controller kueue.x-k8s.io/multikueue that points at it, and for each
fleet tenant its ClusterQueue (named after the tenant, as everywhere) holding the fleet quota and
requiring the admission check. The tenant's namespaces, roles and LocalQueues are compiled as on any
cluster, so its jobs queue on the manager; Kueue reserves the fleet quota there and MultiKueue copies
the workload to the workers, keeping it on the first that admits it.

On each **worker**: the tenant is compiled as usual from its quotas there (namespaces, LocalQueues of the
same names, its ClusterQueue), and the manager's identity (Fleet spec.managerUser) gets only what
MultiKueue's clients do with it (kueue pkg/controller/admissionchecks/multikueue): watch Workloads,
batch Jobs and Pods in every namespace (its watches are cluster-wide, filtered by the origin label; the
sandbox's worker refused the connection without the Pod watch), and create,
update and delete them, and update Workloads' status, only in the fleet tenants' namespaces (a
RoleBinding per namespace). Never Secrets, Pods or any other kind. The tenant's own people are bound only
as viewers there (compile.core): they follow their jobs on a worker but cannot submit around the
manager's fleet quota.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from gpugov.compile.common import Object, Scope, metadata, resource_order, tenant_labels
from gpugov.declarations.model import Fleet, FleetTenant, Tenant
from gpugov.kube.names import KUEUE_API, KUEUE_GROUP
from gpugov.kube.objects import LABEL_COMPONENT
from gpugov.kube.quantity import format_quantity

MULTIKUEUE_CONTROLLER = f"{KUEUE_GROUP}/multikueue"
RBAC = "rbac.authorization.k8s.io"
WATCH_ROLE = "gpugov-multikueue-watch"  # cluster-wide: MultiKueue's watches have no namespace
DISPATCH_ROLE = "gpugov-multikueue-dispatch"  # per fleet tenant namespace: what it writes
LABEL_FLEET = "gpugov.io/fleet"
ACCELERATORS = "accelerators"


def fleet_labels(fleet: Fleet) -> dict[str, str]:
    return {LABEL_FLEET: fleet.name, LABEL_COMPONENT: "fleet"}


def admission_check_name(fleet: Fleet) -> str:
    return f"gpugov-fleet-{fleet.name}"


def flavor_name(fleet: Fleet) -> str:
    return f"gpugov-fleet-{fleet.name}"


def fleet_tenant(scope: Scope, tenant: Tenant) -> tuple[Fleet, FleetTenant] | None:
    """The fleet this cluster manages that `tenant` dispatches through, and its entry there."""
    for fleet in scope.model.fleets_managed_by(scope.cluster.name):
        for entry in fleet.tenants:
            if entry.tenant == tenant.name:
                return fleet, entry
    return None


def worker_fleets(scope: Scope, tenant: Tenant) -> list[Fleet]:
    """The fleets that dispatch `tenant`'s work to this cluster."""
    return [f for f in scope.model.fleets_with_worker(scope.cluster.name) if tenant.name in f.tenant_names()]


def accelerator_resource(scope: Scope, fleet: Fleet, tenant: Tenant) -> str | None:
    """The resource the tenant's `accelerators` quotas stand for on the fleet's workers (one, GG183)."""
    workers = set(fleet.worker_names())
    for quota in tenant.quotas:
        pool = scope.model.pools.get(quota.pool)
        if pool is not None and scope.model.pool_cluster(pool) in workers:
            for rq in quota.resources:
                if rq.key == ACCELERATORS:
                    return rq.resource
    return None


def manager_objects(scope: Scope) -> list[Object]:
    """The MultiKueue wiring of every fleet this cluster manages (the ClusterQueues come from compile.kueue)."""
    objects: list[Object] = []
    for fleet in scope.model.fleets_managed_by(scope.cluster.name):
        labels = fleet_labels(fleet)
        objects.append({"apiVersion": KUEUE_API, "kind": "ResourceFlavor",
                        "metadata": metadata(flavor_name(fleet), fleet, labels), "spec": {}})
        for worker in fleet.workers:
            objects.append({
                "apiVersion": KUEUE_API,
                "kind": "MultiKueueCluster",
                "metadata": metadata(worker.cluster, fleet, labels),
                "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret",
                                                          "location": worker.kubeconfig_secret}}},
            })
        objects.append({"apiVersion": KUEUE_API, "kind": "MultiKueueConfig",
                        "metadata": metadata(fleet.name, fleet, labels),
                        "spec": {"clusters": fleet.worker_names()}})
        objects.append({
            "apiVersion": KUEUE_API,
            "kind": "AdmissionCheck",
            "metadata": metadata(admission_check_name(fleet), fleet, labels),
            "spec": {"controllerName": MULTIKUEUE_CONTROLLER,
                     "parameters": {"apiGroup": KUEUE_GROUP, "kind": "MultiKueueConfig", "name": fleet.name}},
        })
    return objects


def fleet_cluster_queue(scope: Scope, fleet: Fleet, entry: FleetTenant, tenant: Tenant) -> Object:
    """The manager's ClusterQueue of a fleet tenant: the fleet quota, no cohort (nothing to borrow on a
    cluster that runs nothing), and MultiKueue's admission check."""
    policy = scope.model.policy
    quota = dict(entry.quota)
    resource = accelerator_resource(scope, fleet, tenant) or "nvidia.com/gpu"
    amounts: dict[str, Decimal] = {resource: quota[ACCELERATORS], "cpu": quota["cpu"], "memory": quota["memory"]}
    covered = sorted(amounts, key=resource_order)
    spec: dict[str, Any] = {}
    if tenant.namespaces:
        spec["namespaceSelector"] = {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(tenant.namespaces)}]}
    spec["queueingStrategy"] = policy.queueing_strategy
    spec["preemption"] = {"withinClusterQueue": policy.within_cluster_queue}
    spec["resourceGroups"] = [{
        "coveredResources": covered,
        "flavors": [{"name": flavor_name(fleet),
                     "resources": [{"name": r, "nominalQuota": format_quantity(amounts[r])} for r in covered]}],
    }]
    spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": admission_check_name(fleet)}]}
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": metadata(tenant.name, tenant, {**tenant_labels(tenant), LABEL_FLEET: fleet.name}),
        "spec": spec,
    }


def worker_objects(scope: Scope) -> list[Object]:
    """What the manager's identity may do on this worker, per fleet that dispatches here."""
    objects: list[Object] = []
    fleets = scope.model.fleets_with_worker(scope.cluster.name)
    if not fleets:
        return objects
    first = fleets[0]
    objects.append(_role(first, WATCH_ROLE, [
        {"apiGroups": [KUEUE_GROUP], "resources": ["workloads"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
        # MultiKueue watches every integration it adapts (Kueue's pod integration among them) before it calls a
        # worker connected; it only reads pods, and dispatches Jobs alone (no pod writes below).
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    ]))
    objects.append(_role(first, DISPATCH_ROLE, [
        {"apiGroups": [KUEUE_GROUP], "resources": ["workloads"], "verbs": ["create", "update", "delete"]},
        {"apiGroups": [KUEUE_GROUP], "resources": ["workloads/status"], "verbs": ["update", "patch"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "delete"]},
    ]))
    users = sorted({f.manager_user for f in fleets})
    objects.append({
        "apiVersion": f"{RBAC}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": metadata(WATCH_ROLE, first, fleet_labels(first)),
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": WATCH_ROLE},
        "subjects": [{"apiGroup": RBAC, "kind": "User", "name": user} for user in users],
    })
    for fleet in fleets:
        for name in fleet.tenant_names():
            tenant = scope.tenants.get(name)
            if tenant is None:
                continue
            for namespace in sorted(tenant.namespaces):
                objects.append({
                    "apiVersion": f"{RBAC}/v1",
                    "kind": "RoleBinding",
                    "metadata": metadata(DISPATCH_ROLE, fleet, {**tenant_labels(tenant), **fleet_labels(fleet)},
                                         namespace),
                    "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": DISPATCH_ROLE},
                    "subjects": [{"apiGroup": RBAC, "kind": "User", "name": fleet.manager_user}],
                })
    return objects


def _role(fleet: Fleet, name: str, rules: list[dict[str, Any]]) -> Object:
    return {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole",
            "metadata": metadata(name, fleet, fleet_labels(fleet)), "rules": rules}
