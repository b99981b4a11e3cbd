"""Fleets (issue #43): clusters that Kueue's MultiKueue runs as one pool.

A Fleet names a manager, its workers and the tenants that dispatch across them with a quota on the whole
fleet. MultiKueue copies a workload admitted on the manager to a worker, where it must find the same
namespace and LocalQueue and is admitted again under the worker's own quota: so every worker must deploy
each fleet tenant with quota, every member must be a Kueue cluster, and the fleet quota must fit in what
the workers let the tenant hold together. The manager runs none of the fleet's jobs (its ClusterQueue
for a fleet tenant is the fleet's). The credentials that reach a worker are a Secret's name only
(GG184 in declarations.schema finds a Secret or kubeconfig in the repository).
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

from gpugov.declarations.model import Fleet, FleetTenant, Model, Tenant
from gpugov.findings import Finding, Level, make, rule
from gpugov.i18n import Text
from gpugov.kube.quantity import format_quantity
from gpugov.policy.checks import check

FLEET_REFERENCE = rule(
    "GG180",
    "fleet-unknown-reference",
    Level.ERROR,
    "A Fleet names a manager, worker or tenant that is not declared.",
    "Name a declared Cluster as manager and as each worker, and a declared Tenant in spec.tenants.",
)
FLEET_NOT_KUEUE = rule(
    "GG181",
    "fleet-member-not-kueue",
    Level.ERROR,
    "A Fleet's manager or worker is not a Kueue cluster (Volcano has no MultiKueue): nothing would dispatch "
    "to it or admit there.",
    "Keep Volcano clusters out of fleets; a fleet's manager and workers are clusters with backend kueue.",
)
FLEET_WORKER_WITHOUT_TENANT = rule(
    "GG182",
    "fleet-worker-without-tenant",
    Level.ERROR,
    "A fleet tenant has no quota on a worker (or its spec.clusters leaves the worker out): the worker has "
    "none of its namespaces, LocalQueues or ClusterQueue, so a workload dispatched there is never admitted.",
    "Give the tenant quota in a pool of every worker of the fleet, or take the worker out of the fleet.",
)
FLEET_QUOTA_UNHOLDABLE = rule(
    "GG183",
    "fleet-quota-unholdable",
    Level.ERROR,
    "A tenant's fleet quota of accelerators is more than its quotas on the workers let it hold together "
    "(nominal plus what it may borrow, at most what the pools have), or its worker pools offer different "
    "accelerator resources: admitted on the manager, such work would wait on every worker.",
    "Lower the fleet quota to what the workers hold for the tenant, or raise its quotas on the workers.",
)
FLEET_MANAGER_RUNS_JOBS = rule(
    "GG185",
    "fleet-manager-runs-jobs",
    Level.ERROR,
    "A fleet's manager is also one of its workers, or a fleet tenant holds quota in a pool of the manager: "
    "the manager's ClusterQueue of a fleet tenant is the fleet's and runs no job itself.",
    "Keep the manager out of spec.workers and the fleet tenants' quotas off the manager's pools.",
)
FLEET_TENANT_TWICE = rule(
    "GG186",
    "fleet-tenant-twice",
    Level.ERROR,
    "A tenant is listed twice in one Fleet or in two Fleets, or a cluster twice among a fleet's workers: one "
    "LocalQueue dispatches through one fleet.",
    "List each tenant in one fleet, once, and each worker once.",
)

ACCELERATORS = "accelerators"


@check
def check_fleets(model: Model) -> Iterator[Finding]:
    first_fleet: dict[str, Fleet] = {}
    for fleet in model.fleets.values():
        yield from _members(model, fleet)
        seen: set[str] = set()
        for entry in fleet.tenants:
            where = fleet.at("tenants", entry.index, "tenant")
            if entry.tenant in seen or first_fleet.get(entry.tenant, fleet) is not fleet:
                other = first_fleet.get(entry.tenant, fleet)
                yield make(FLEET_TENANT_TWICE, Text("tenant '{tenant}' already dispatches through fleet '{fleet}'",
                                                    tenant=entry.tenant, fleet=other.name), where)
                continue
            seen.add(entry.tenant)
            first_fleet[entry.tenant] = fleet
            tenant = model.tenants.get(entry.tenant)
            if tenant is None:
                yield make(FLEET_REFERENCE, Text("fleet '{fleet}': tenant '{tenant}' is not declared",
                                                 fleet=fleet.name, tenant=entry.tenant), where)
                continue
            yield from _tenant_on_members(model, fleet, entry, tenant)


def _members(model: Model, fleet: Fleet) -> Iterator[Finding]:
    members = [(fleet.manager, fleet.at("manager"))]
    seen: set[str] = set()
    for worker in fleet.workers:
        where = fleet.at("workers", worker.index, "cluster")
        if worker.cluster == fleet.manager:
            yield make(FLEET_MANAGER_RUNS_JOBS, Text("cluster '{cluster}' is the fleet's manager and one of its "
                                                     "workers", cluster=worker.cluster), where, fleet.at("manager"))
            continue
        if worker.cluster in seen:
            yield make(FLEET_TENANT_TWICE, Text("worker '{cluster}' is listed twice", cluster=worker.cluster), where)
            continue
        seen.add(worker.cluster)
        members.append((worker.cluster, where))
    for name, where in members:
        cluster = model.clusters.get(name)
        if cluster is None:
            yield make(FLEET_REFERENCE, Text("fleet '{fleet}': cluster '{cluster}' is not declared",
                                             fleet=fleet.name, cluster=name), where)
        elif cluster.backend != "kueue":
            yield make(FLEET_NOT_KUEUE, Text("fleet '{fleet}': cluster '{cluster}' is scheduled by {backend}, "
                                             "which has no MultiKueue", fleet=fleet.name, cluster=name,
                                             backend=cluster.backend), where, cluster.name_at())


def _worker_clusters(model: Model, fleet: Fleet) -> list[str]:
    return [w.cluster for w in fleet.workers if w.cluster in model.clusters and w.cluster != fleet.manager]


def _tenant_on_members(model: Model, fleet: Fleet, entry: FleetTenant, tenant: Tenant) -> Iterator[Finding]:
    where = fleet.at("tenants", entry.index, "tenant")
    for quota in tenant.quotas:
        pool = model.pools.get(quota.pool)
        if pool is not None and model.pool_cluster(pool) == fleet.manager:
            yield make(FLEET_MANAGER_RUNS_JOBS, Text("tenant '{tenant}' holds quota in pool '{pool}' on the fleet's "
                                                     "manager '{manager}'", tenant=tenant.name, pool=pool.name,
                                                     manager=fleet.manager), where, pool.name_at())
    workers = _worker_clusters(model, fleet)
    for worker in fleet.workers:
        if worker.cluster not in workers:
            continue
        pools = _pools_on(model, tenant, worker.cluster)
        deployed = worker.cluster in tenant.clusters if tenant.clusters else bool(pools)
        if not pools or not deployed:
            yield make(FLEET_WORKER_WITHOUT_TENANT,
                       Text("tenant '{tenant}' has no quota on worker '{cluster}': it has none of the tenant's "
                            "namespaces or queues", tenant=tenant.name, cluster=worker.cluster),
                       where, fleet.at("workers", worker.index, "cluster"))
    yield from _holdable(model, fleet, entry, tenant, workers)


def _pools_on(model: Model, tenant: Tenant, cluster: str) -> list[str]:
    return [q.pool for q in tenant.quotas
            if q.pool in model.pools and model.pool_cluster(model.pools[q.pool]) == cluster]


def fleet_accelerator_resources(model: Model, fleet: Fleet, tenant: Tenant) -> set[str]:
    """The accelerator resource names the tenant's `accelerators` quotas on the fleet's workers stand for."""
    workers = set(_worker_clusters(model, fleet))
    found: set[str] = set()
    for quota in tenant.quotas:
        pool = model.pools.get(quota.pool)
        if pool is not None and model.pool_cluster(pool) in workers:
            found.update(rq.resource for rq in quota.resources if rq.key == ACCELERATORS)
    return found


def worker_room(model: Model, tenant: Tenant, workers: list[str]) -> Decimal:
    """The accelerators the tenant can hold on the workers together: per pool its nominal quota, plus what it
    may borrow there (its borrowingLimit, or the whole pool without one) when it may borrow at all."""
    borrows = bool(tenant.department) and not model.never_borrows(tenant)
    total = Decimal(0)
    for quota in tenant.quotas:
        pool = model.pools.get(quota.pool)
        if pool is None or model.pool_cluster(pool) not in workers:
            continue
        for rq in quota.resources:
            if rq.key != ACCELERATORS:
                continue
            capacity = pool.capacity.get(rq.resource, Decimal(0))
            if not borrows:
                most = rq.nominal
            elif rq.borrowing_limit is None:
                most = max(capacity, rq.nominal)
            else:
                most = rq.nominal + rq.borrowing_limit
            total += min(most, capacity)
    return total


def _holdable(model: Model, fleet: Fleet, entry: FleetTenant, tenant: Tenant, workers: list[str]) -> Iterator[Finding]:
    where = fleet.at("tenants", entry.index, "quota", ACCELERATORS)
    resources = fleet_accelerator_resources(model, fleet, tenant)
    if len(resources) > 1:
        yield make(FLEET_QUOTA_UNHOLDABLE, Text("tenant '{tenant}': its worker pools offer different accelerators "
                                                "({resources}), one fleet quota cannot stand for them",
                                                tenant=tenant.name, resources=", ".join(sorted(resources))), where)
        return
    wanted = dict(entry.quota).get(ACCELERATORS, Decimal(0))
    room = worker_room(model, tenant, workers)
    if wanted > room:
        yield make(FLEET_QUOTA_UNHOLDABLE, Text("tenant '{tenant}': fleet quota {wanted} accelerators, but its "
                                                "quotas on the workers hold {room} together", tenant=tenant.name,
                                                wanted=format_quantity(wanted), room=format_quantity(room)), where)
