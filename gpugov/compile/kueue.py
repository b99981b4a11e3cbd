"""Kueue backend (kueue.x-k8s.io/v1beta2).

How declarations map to Kueue:
- GPUPool -> ResourceFlavor (nodeLabels = the pool label, or the pool's nodeSelector for
  selector-only pools, none for a pool whose nodeSelector is empty: every node; nodeTaints = pool taints, tolerations = the matching tolerations so
  admitted pods tolerate the pool) and a Topology of the same name: the pool's topology
  levels, or kubernetes.io/hostname alone. Every flavor is topology-aware on purpose: Kueue
  refuses a TAS flavor to a workload without a topology request unless EVERY flavor of its
  ClusterQueue is a TAS flavor (flavorassigner checkPodSetAndFlavorMatchForTAS, "supports only
  TopologyAwareScheduling"); with all of them TAS, ordinary jobs get implied TAS and use any
  pool, and topology-aware jobs can still ask for a block. Kueue refuses a TAS flavor without
  nodeLabels, so in a cluster with a pool that selects every node no flavor is TAS (no Topology;
  a declared topology there is an error, GG057). A Cluster with topologyAwareScheduling: false
  (what `gpugov import` writes for a cluster whose flavors have no topologyName) has no TAS flavor
  either: Kueue then admits by quota alone, as it did before import (declared levels: GG058).
- Department -> Cohort (parentName = parent department; the department's own quotas are the
  cohort's resourceGroups, i.e. extra shared quota, with their share of the pools' cpu/memory as
  for tenants; fairSharing.weight).
- Tenant -> ClusterQueue named after the tenant: cohortName = its department,
  namespaceSelector = exactly its namespaces (always explicit: null would admit none),
  preemption and queueingStrategy from SchedulingPolicy, fairSharing.weight.
  Resource groups: ONE group per queue covering every accelerator resource plus cpu and
  memory, so Kueue assigns a single flavor (pool) to a pod's whole request; a pod's GPU and
  CPU can never land on two pools' node labels. Flavors: the tenant's own pools in declared
  order (its preference), then every other pool its cohort tree has quota in, listed with
  nominalQuota 0 so the tenant can borrow there. cpu/memory that a quota leaves undeclared
  get the tenant's share of the pool's CPU/memory, in proportion to its share of the pool's
  accelerators in GPU equivalents (a MIG slice counts its compute slices) (so CPU-heavy work is held by its own tenant's quota instead of being admitted
  to GPU nodes it cannot fit on); flavorFungibility.whenCanBorrow = TryNextFlavor, so a tenant
  uses its nominal quota on a later pool before it borrows on an earlier one.
  A tenant whose queues admit a non-preemptible priority class, in a cohort that reclaims
  with `Any`, never borrows (borrowingLimit 0 everywhere, no borrow-only flavors): Kueue
  reclaims from any workload of a borrowing ClusterQueue, whatever its priority.
- Tenant queue -> LocalQueue in its namespace pointing at the tenant's ClusterQueue; the
  allowed priority classes are recorded in an annotation.
- PriorityClass -> WorkloadPriorityClass (value, description).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from gpugov.compile import fleet
from gpugov.compile.common import (
    LABEL_DEPARTMENT,
    LABEL_POOL,
    LABEL_PRIORITY_CLASS,
    Object,
    Scope,
    metadata,
    resource_order,
    tenant_labels,
)
from gpugov.declarations.model import GPUPool, PoolQuota, Tenant
from gpugov.kube.names import KUEUE_API
from gpugov.kube.objects import ANNOTATION_ALLOWED_PRIORITY_CLASSES
from gpugov.kube.quantity import format_quantity


def flavor_node_labels(pool: GPUPool) -> dict[str, str]:
    """The flavor's nodeLabels: none for a pool that selects every node (nodeSelector {})."""
    if pool.every_node:
        return {}
    if pool.nodes or not pool.node_selector:
        return {LABEL_POOL: pool.name}
    return dict(pool.node_selector)


def topology_aware(scope: Scope) -> bool:
    """Whether the cluster's flavors are topology-aware: not where a pool selects every node, whose flavor Kueue
    refuses a topology without nodeLabels ("at least one nodeLabel is required when topology is set"), since a
    queue mixing TAS and other flavors would give ordinary workloads only the others (GG057)."""
    return scope.cluster.topology_aware_scheduling and not any(pool.every_node for pool in scope.pools.values())


def resource_flavor(pool: GPUPool, tas: bool = True) -> Object:
    spec: dict[str, Any] = {}
    if labels := flavor_node_labels(pool):  # none: Kueue's flavor matches every node
        spec["nodeLabels"] = labels
    if pool.taints:
        spec["nodeTaints"] = [{"key": t.key, "value": t.value, "effect": t.effect} for t in pool.taints]
        spec["tolerations"] = [
            {"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect} for t in pool.taints
        ]
    if tas:
        spec["topologyName"] = pool.name
    return {
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": metadata(pool.name, pool, {LABEL_POOL: pool.name}),
        "spec": spec,
    }


HOSTNAME_LEVEL = "kubernetes.io/hostname"


def topology_levels(pool: GPUPool) -> tuple[str, ...]:
    """The declared levels (validate keeps hostname lowest), or the node level alone."""
    return pool.topology_levels or (HOSTNAME_LEVEL,)


def topology(pool: GPUPool) -> Object:
    return {
        "apiVersion": KUEUE_API,
        "kind": "Topology",
        "metadata": metadata(pool.name, pool, {LABEL_POOL: pool.name}),
        "spec": {"levels": [{"nodeLabel": level} for level in topology_levels(pool)]},
    }


def _quota_entry(name: str, amount: Decimal, borrowing: Decimal | None, lending: Decimal | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "nominalQuota": format_quantity(amount)}
    if borrowing is not None:
        entry["borrowingLimit"] = format_quantity(borrowing)
    if lending is not None:
        entry["lendingLimit"] = format_quantity(lending)
    return entry


def _resource_group(
    flavors: list[str],
    covered: list[str],
    quotas: tuple[PoolQuota, ...],
    default_for: dict[str, dict[str, Decimal]],
    never_borrow: bool = False,
    borrow_only_flavors: dict[tuple[str, ...], dict[str, dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """One resourceGroup; each flavor lists every covered resource in coveredResources order.

    ``never_borrow``: every resource gets borrowingLimit 0 unless one is declared (validate
    refuses a declared one above 0 for such tenants, GG063)."""
    default_borrowing = Decimal(0) if never_borrow else None
    declared = {(q.pool, rq.resource): rq for q in quotas for rq in q.resources}
    covered_set = set(covered)
    declaring = {pool for pool, resource in declared if resource in covered_set}  # flavors with a covered quota
    group_flavors = []
    borrow_only = None if borrow_only_flavors is None else borrow_only_flavors.setdefault(tuple(covered), {})
    for flavor in flavors:
        defaults = default_for.get(flavor)
        if defaults is None and flavor not in declaring:
            # A pool listed only to borrow from: every resource at nominal 0 (the common,
            # large case: one entry per pool and covered resources, shared by every queue
            # that lists it: Scope.borrow_only_flavors).
            if borrow_only is not None:
                entry = borrow_only.get(flavor)
                if entry is None:
                    entry = borrow_only[flavor] = {
                        "name": flavor, "resources": [{"name": resource, "nominalQuota": "0"} for resource in covered]}
                group_flavors.append(entry)
                continue
            resources = [{"name": resource, "nominalQuota": "0"} for resource in covered]
        else:
            resources = []
            for resource in covered:
                rq = declared.get((flavor, resource))
                if rq is not None:
                    borrowing = default_borrowing if rq.borrowing_limit is None else rq.borrowing_limit
                    resources.append(_quota_entry(resource, rq.nominal, borrowing, rq.lending_limit))
                else:
                    fallback = (defaults or {}).get(resource, Decimal(0))
                    resources.append(_quota_entry(resource, fallback, default_borrowing, None))
        group_flavors.append({"name": flavor, "resources": resources})
    return {"coveredResources": covered, "flavors": group_flavors}


def _resource_groups_key(flavors: list[str], covered: list[str], quotas: tuple[PoolQuota, ...],
                         default_for: dict[str, dict[str, Decimal]], never_borrow: bool) -> tuple[Any, ...]:
    """Everything _resource_group reads. Quantities go in by their text, so that equal keys mean the
    same inputs as written, not merely equal values (Decimal 1 == 1.0): equal keys, equal groups."""
    return (
        tuple(flavors), tuple(covered), never_borrow,
        tuple((q.pool, tuple((rq.resource, str(rq.nominal), str(rq.borrowing_limit), str(rq.lending_limit))
                             for rq in q.resources)) for q in quotas),
        tuple((pool, tuple((r, str(amount)) for r, amount in amounts.items())) for pool, amounts in default_for.items()),
    )


def accelerator_share(scope: Scope, quota: PoolQuota) -> Decimal:
    """The tenant's part of a pool's accelerators, in GPU equivalents, at most 1."""
    weights, whole = scope.pool_equivalents(quota.pool)
    if not whole:
        return Decimal(0)
    own = sum((rq.nominal * weights.get(rq.resource, Decimal(0)) for rq in quota.resources), Decimal(0))
    return min(own / whole, Decimal(1))


def cpu_memory_share(scope: Scope, quota: PoolQuota) -> dict[str, Decimal]:
    """Undeclared cpu/memory in proportion to the accelerator share: whole millicores of CPU,
    whole Mi of memory, rounded down so the tenants' parts never add up to more than the pool."""
    capacity = scope.pools[quota.pool].capacity
    share = accelerator_share(scope, quota)
    result = {}
    for resource, unit in (("cpu", Decimal("0.001")), ("memory", Decimal(2**20))):
        if resource in capacity:
            result[resource] = (capacity[resource] * share / unit).to_integral_value(rounding="ROUND_FLOOR") * unit
    return result


def queue_flavors(scope: Scope, tenant: Tenant) -> tuple[list[str], list[str]]:
    """(flavors in preference order, covered resources in canonical order) of a tenant's queue.

    Own pools first in declared order; then every other pool the tenant's cohort tree holds
    quota in, so it can borrow there. Worked out once per scope and tenant (fresh lists each call)."""
    known = scope.queue_flavors_cache.get(tenant.name)
    if known is None:
        known = scope.queue_flavors_cache[tenant.name] = _queue_flavors(scope, tenant)
    return list(known[0]), list(known[1])


def _queue_flavors(scope: Scope, tenant: Tenant) -> tuple[list[str], list[str]]:
    own = [q.pool for q in scope.quotas[tenant.name]]
    resources = {rq.resource for q in scope.quotas[tenant.name] for rq in q.resources}
    borrowable: frozenset[str] = frozenset()
    if tenant.department and not scope.model.never_borrows(tenant):
        offer_pools, offer_resources = scope.cohort_offers.get(
            scope.root_of(tenant.department), (frozenset(), frozenset())
        )
        borrowable = offer_pools
        resources |= offer_resources
    flavors = own + sorted(pool for pool in borrowable if pool not in own)
    if flavors:
        resources |= {"cpu", "memory"}
    return flavors, sorted(resources, key=resource_order)


def cluster_queue(scope: Scope, tenant: Tenant) -> Object:
    policy = scope.model.policy
    quotas = scope.quotas[tenant.name]
    flavors, covered = queue_flavors(scope, tenant)
    # Undeclared cpu/memory on an own pool: the tenant's share of it (see module doc).
    defaults = {quota.pool: cpu_memory_share(scope, quota) for quota in quotas}
    preemption: dict[str, Any] = {
        "reclaimWithinCohort": policy.reclaim_within_cohort,
        "withinClusterQueue": policy.within_cluster_queue,
    }
    borrow: dict[str, Any] = {"policy": policy.borrow_within_cohort}
    threshold = borrow_threshold(scope)
    if policy.borrow_within_cohort != "Never" and threshold is not None:
        borrow["maxPriorityThreshold"] = threshold
    preemption["borrowWithinCohort"] = borrow
    spec: dict[str, Any] = {}
    if tenant.department:
        spec["cohortName"] = tenant.department
    if tenant.namespaces:  # a lending queue (no namespaces) has none: a null selector admits no namespace
        spec["namespaceSelector"] = {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(tenant.namespaces)}
            ]
        }
    spec["queueingStrategy"] = policy.queueing_strategy
    spec["preemption"] = preemption
    # Use nominal quota on a later pool before borrowing on an earlier one, unless the tenant declares otherwise.
    spec["flavorFungibility"] = {"whenCanBorrow": "TryNextFlavor", **dict(tenant.flavor_fungibility)}
    if flavors:
        never_borrow = scope.model.never_borrows(tenant)
        key = _resource_groups_key(flavors, covered, quotas, defaults, never_borrow)
        groups = scope.resource_groups.get(key)
        if groups is None:
            groups = scope.resource_groups[key] = [
                _resource_group(flavors, covered, quotas, defaults, never_borrow=never_borrow,
                                borrow_only_flavors=scope.borrow_only_flavors)
            ]
        spec["resourceGroups"] = groups
    spec["fairSharing"] = {"weight": str(tenant.weight or 1)}
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": metadata(tenant.name, tenant, tenant_labels(tenant)),
        "spec": spec,
    }


def borrow_threshold(scope: Scope) -> int | None:
    """Borrowing may only preempt preemptible work: cap victims at the highest preemptible value."""
    classes = scope.model.priority_classes.values()
    if not any(not pc.preemptible for pc in classes):
        return None
    preemptible = [pc.value for pc in classes if pc.preemptible]
    return max(preemptible) if preemptible else None


def cohort(scope: Scope, name: str) -> Object:
    department = scope.departments[name]
    spec: dict[str, Any] = {}
    if department.parent:
        spec["parentName"] = department.parent
    quotas = scope.department_quotas.get(name, ())
    if quotas:
        flavors = [q.pool for q in quotas]
        # The department's own accelerators come with their share of the pools' CPU and memory,
        # as a tenant's do: shared GPUs without CPU could never be used.
        defaults = {quota.pool: cpu_memory_share(scope, quota) for quota in quotas}
        resources = {rq.resource for q in quotas for rq in q.resources} | {r for d in defaults.values() for r in d}
        covered = sorted(resources, key=resource_order)
        spec["resourceGroups"] = [_resource_group(flavors, covered, quotas, defaults)]
    if department.weight is not None:
        spec["fairSharing"] = {"weight": str(department.weight)}
    return {
        "apiVersion": KUEUE_API,
        "kind": "Cohort",
        "metadata": metadata(name, department, {LABEL_DEPARTMENT: name}),
        "spec": spec,
    }


def local_queues(tenant: Tenant) -> list[Object]:
    objects = []
    for queue in tenant.queues:
        annotations = {}
        if queue.priority_classes:
            annotations[ANNOTATION_ALLOWED_PRIORITY_CLASSES] = ",".join(queue.priority_classes)
        objects.append(
            {
                "apiVersion": KUEUE_API,
                "kind": "LocalQueue",
                "metadata": metadata(queue.name, tenant, tenant_labels(tenant), queue.namespace, annotations),
                "spec": {"clusterQueue": tenant.name},
            }
        )
    return objects


def workload_priority_classes(scope: Scope) -> list[Object]:
    objects = []
    for name, pc in sorted(scope.model.priority_classes.items()):
        obj: Object = {
            "apiVersion": KUEUE_API,
            "kind": "WorkloadPriorityClass",
            "metadata": metadata(name, pc, {LABEL_PRIORITY_CLASS: name}),
            "value": pc.value,
        }
        if pc.description:
            obj["description"] = pc.description
        objects.append(obj)
    return objects


def compile_kueue(scope: Scope) -> list[Object]:
    objects: list[Object] = []
    tas = topology_aware(scope)
    for pool in scope.pools.values():
        objects.append(resource_flavor(pool, tas))
        if tas:
            objects.append(topology(pool))
    objects.extend(cohort(scope, name) for name in scope.departments)
    objects.extend(fleet.manager_objects(scope))
    for tenant in scope.tenants.values():
        dispatched = fleet.fleet_tenant(scope, tenant)
        objects.append(fleet.fleet_cluster_queue(scope, *dispatched, tenant) if dispatched
                       else cluster_queue(scope, tenant))
        objects.extend(local_queues(tenant))
    objects.extend(fleet.worker_objects(scope))
    objects.extend(workload_priority_classes(scope))
    return objects
