"""The capacity report of one cluster: what exists, what is guaranteed, what may be lent, how much
is used, and advice.

Every quota number comes from what compile reads: the cluster's Scope (the tenants' and
departments' quotas on its pools, `Scope.capacity_of` for the declared capacity) and, for what a
tenant may hold at most and may lend, Kueue's own arithmetic over compile's cohort tree (`gpugov.reach`,
the one computation `gpugov why`, `queue`, `guide` and `plan` read too) or, on Volcano, the capability compile
gives its queue (`compile.core.accelerator_ceiling`). The expected MIG
geometry is compile's mig-parted config. Live numbers come from the Nodes (allocatable,
GFD labels); usage from a `gpugov usage` ledger. Pure: no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from gpugov.app.desired import DesiredState
from gpugov.capacity.ledger import Ledger
from gpugov.capacity.nodes import GPU_PRODUCT, MIG_CONFIG, MIG_STATE, Node, allocatable, gfd_gpu_count, labels, name
from gpugov.capacity.nodes import pool_nodes as live_pool_nodes
from gpugov.catalog import mig_resource_name
from gpugov.compile.common import Backend, Scope, resource_order
from gpugov.compile.core import accelerator_ceiling
from gpugov.compile.mig import ALL_DISABLED
from gpugov.declarations.equivalents import device_equivalents
from gpugov.declarations.model import GPUPool, ResourceQuota
from gpugov.drift.hardware import mig_geometry
from gpugov.drift.usage import is_known_accelerator
from gpugov.i18n import Joined, Text
from gpugov.kube.objects import Object
from gpugov.kube.resources import is_accelerator
from gpugov.reach import tenant_rooms

CHRONIC_BORROWER_SHARE = Decimal("0.5")  # borrowed hours at least half of the hours it used
NEAR_EXHAUSTION = Decimal("0.9")  # used hours at least 90% of the pool's capacity hours
# Idle hours at least a fifth of the hours a tenant used: more than a reclaim policy lets stand, which
# warns after its window and frees the cards after its grace (issue #26).
IDLE_TOLERATED_SHARE = Decimal("0.2")
ZERO = Decimal(0)


@dataclass(frozen=True)
class ResourceLine:
    resource: str
    declared: Decimal  # physical capacity the declarations give (nodes x accelerators, MIG layouts)
    live: Decimal | None  # allocatable summed over the pool's nodes (with a cluster)
    guaranteed: Decimal  # sum of nominal quotas (tenants and departments)
    borrowable: Decimal  # nominal its holders in a cohort may lend to others
    unassigned: Decimal  # declared capacity in nobody's nominal quota
    ratio: Decimal | None  # guaranteed / declared: the oversubscription ratio
    ratio_limit: Decimal  # Guardrails capacityRatio for the pool


@dataclass(frozen=True)
class MigLine:
    profile: str
    resource: str
    declared: Decimal  # what the declared layouts give
    guaranteed: Decimal
    carvable: Decimal | None  # what the nodes' nvidia.com/mig.config carves (with a cluster)


@dataclass(frozen=True)
class NodeLine:
    name: str
    product: str | None
    gpus: int | None  # nvidia.com/gpu.count
    mig_config: str | None
    mig_state: str | None


@dataclass(frozen=True)
class PoolReport:
    name: str
    model: str
    per_node: int
    nodes_declared: int
    nodes_live: int | None
    gpus_declared: int
    gpus_live: int | None  # GFD's count over the pool's nodes
    price_per_hour: Decimal | None
    resources: tuple[ResourceLine, ...]
    mig: tuple[MigLine, ...]
    nodes: tuple[NodeLine, ...]


@dataclass(frozen=True)
class TenantLine:
    tenant: str
    department: str | None
    resource: str
    nominal: Decimal
    ceiling: Decimal  # the most it can hold: Kueue's maximum over the cohort tree (capacity.reach), Volcano's capability
    lendable: Decimal

    @property
    def borrowable(self) -> Decimal:
        return max(self.ceiling - self.nominal, ZERO)


@dataclass(frozen=True)
class UsageLine:
    tenant: str
    pool: str
    resource: str
    nominal: Decimal
    guaranteed_hours: Decimal
    admitted_hours: Decimal
    in_quota_hours: Decimal
    borrowed_hours: Decimal
    idle_hours: Decimal
    cost: Decimal | None
    currency: str | None = None  # the declared pool's spec.currency

    @property
    def use(self) -> Decimal | None:
        """Share of the guarantee used in the window."""
        return self.in_quota_hours / self.guaranteed_hours if self.guaranteed_hours else None


@dataclass(frozen=True)
class PoolUsageLine:
    pool: str
    resource: str
    capacity_hours: Decimal
    admitted_hours: Decimal
    borrowed_hours: Decimal
    idle_hours: Decimal
    unallocated_hours: Decimal

    @property
    def utilisation(self) -> Decimal | None:
        return self.admitted_hours / self.capacity_hours if self.capacity_hours else None


@dataclass(frozen=True)
class Advice:
    kind: str
    subject: str
    text: str


@dataclass(frozen=True)
class Window:
    since: datetime
    until: datetime
    hours: Decimal
    source: str


@dataclass(frozen=True)
class ClusterReport:
    cluster: str
    backend: str
    live: bool
    pools: tuple[PoolReport, ...]
    tenants: tuple[TenantLine, ...]
    window: Window | None
    usage: tuple[UsageLine, ...]
    pool_usage: tuple[PoolUsageLine, ...]
    advice: tuple[Advice, ...]


ADVICE_ORDER = (
    "oversubscribed", "unassigned", "live-short", "mig-carve", "mig-state", "mig-config",
    "near-exhaustion", "never-used", "chronic-borrower", "idle-over-policy", "ledger-unknown",
)


def q(value: Decimal) -> str:
    """A Decimal as plain text: no exponent, no trailing zeros (30, 0.9375, 1.5)."""
    text = format(value.normalize(), "f")
    return "0" if text in ("-0", "") else text


def hours_text(value: Decimal) -> str:
    """Hours for people: two decimals at most (15.825555... h reads 15.83); JSON keeps the exact value."""
    return q(value.quantize(Decimal("0.01")))


def money(value: Decimal | None, currency: str | None = None) -> str:
    """A cost for people: two decimals and the currency of the pool's price (spec.currency), where it
    declares one; "–" for none."""
    if value is None:
        return "–"
    return f"{value.quantize(Decimal('0.01')):f}" + (f" {currency}" if currency else "")


def ratio_text(value: Decimal | None, places: int = 4) -> str:
    return "" if value is None else q(value.quantize(Decimal(1).scaleb(-places)))


def ratio_display(value: Decimal | None) -> str:
    """A ratio with two decimals, for people (1.00, 0.94)."""
    return "" if value is None else f"{value:.2f}"


def percent(value: Decimal | None) -> str:
    return "" if value is None else f"{(value * 100).quantize(Decimal('0.1'))}%"


def _accelerators(resources: Iterable[str]) -> list[str]:
    return sorted((r for r in resources if is_accelerator(r)), key=resource_order)


def _lendable(rq: ResourceQuota, in_cohort: bool) -> Decimal:
    """What a holder's quota may lend to its cohort: all of the nominal unless a lendingLimit caps it."""
    if not in_cohort:
        return ZERO
    return rq.nominal if rq.lending_limit is None else min(rq.lending_limit, rq.nominal)


def _holdings(scope: Scope) -> list[tuple[str, str, str, ResourceQuota, bool]]:
    """(kind, holder, pool, quota, in a cohort) for every quota of the cluster, departments first."""
    holdings = []
    for department, quotas in scope.department_quotas.items():
        holdings.extend(("department", department, q_.pool, rq, True) for q_ in quotas for rq in q_.resources)
    for tenant, quotas in scope.quotas.items():
        in_cohort = bool(scope.tenants[tenant].department)
        holdings.extend(("tenant", tenant, q_.pool, rq, in_cohort) for q_ in quotas for rq in q_.resources)
    return holdings


def _profile_of(pool: GPUPool, resource: str) -> str:
    for profile in pool.model.mig_profiles:
        if mig_resource_name(profile) == resource:
            return profile
    return resource.removeprefix("nvidia.com/mig-")


def _carve(pool: GPUPool, nodes: list[Node], geometry: dict[str, dict[str, int]]) -> tuple[dict[str, Decimal], list[str]]:
    """MIG devices the nodes' nvidia.com/mig.config selects, and configs gpugov does not define."""
    carved: dict[str, Decimal] = defaultdict(Decimal)
    unknown = []
    for node in nodes:
        config = labels(node).get(MIG_CONFIG)
        if config is None or config == ALL_DISABLED:
            continue
        if config not in geometry:
            unknown.append(f"{name(node)} ({config})")
            continue
        gpus = gfd_gpu_count(node) or pool.per_node
        for profile, count in geometry[config].items():
            carved[mig_resource_name(profile)] += count * gpus
    return carved, unknown


def _pool_report(
    scope: Scope, pool: GPUPool, nodes: list[Node] | None, geometry: dict[str, dict[str, int]],
    guaranteed: dict[tuple[str, str], Decimal], borrowable: dict[tuple[str, str], Decimal], advice: list[Advice],
) -> PoolReport:
    declared = scope.capacity_of(frozenset({pool.name}))
    members = live_pool_nodes(pool, nodes) if nodes is not None else None
    resources = set(_accelerators(declared))
    if members is not None:
        for node in members:
            resources.update(r for r in ((node.get("status") or {}).get("allocatable") or {}) if is_known_accelerator(r))
    lines = []
    limit = scope.model.limits.ratio_for(pool.name)
    for resource in sorted(resources, key=resource_order):
        have = declared.get(resource, ZERO)
        held = guaranteed.get((pool.name, resource), ZERO)
        live = sum((allocatable(n, resource) for n in members), ZERO) if members is not None else None
        line = ResourceLine(resource, have, live, held, borrowable.get((pool.name, resource), ZERO),
                            max(have - held, ZERO), held / have if have else None, limit)
        lines.append(line)
        subject = f"{pool.name} {resource}"
        # Advice texts are Texts: English in JSON and HTML, the reader's language in markdown (issue #30).
        if line.ratio is not None and line.ratio > 1:
            text = Text("pool {pool}: {held} {resource} guaranteed on {capacity} (ratio {ratio}, Guardrails allow "
                        "{limit}): the guarantees cannot all be honoured at once", pool=pool.name, held=q(held),
                        resource=resource, capacity=q(have), ratio=ratio_display(line.ratio), limit=q(limit))
            advice.append(Advice("oversubscribed", subject, text))
        if line.unassigned and scope.backend is Backend.KUEUE:
            text = Text("pool {pool}: {free} of {capacity} {resource} are in nobody's nominal quota, and Kueue admits "
                        "nothing onto them: give them to a department as shared quota or to a tenant", pool=pool.name,
                        free=q(line.unassigned), capacity=q(have), resource=resource)
            advice.append(Advice("unassigned", subject, text))
        if live is not None and live < have:
            text = Text("pool {pool}: its nodes advertise {live} {resource}, the declarations {capacity} (nodes "
                        "missing, unhealthy or laid out differently)", pool=pool.name, live=q(live), resource=resource,
                        capacity=q(have))
            advice.append(Advice("live-short", subject, text))
    mig: list[MigLine] = []
    node_lines: list[NodeLine] = []
    if members is not None:
        node_lines = [NodeLine(name(n), labels(n).get(GPU_PRODUCT), gfd_gpu_count(n), labels(n).get(MIG_CONFIG),
                               labels(n).get(MIG_STATE)) for n in members]
    if pool.uses_mig:
        carved, unknown = _carve(pool, members, geometry) if members is not None else ({}, [])
        profiles = {r for r in declared if r.startswith("nvidia.com/mig-")} | set(carved)
        for resource in sorted(profiles):
            line = MigLine(_profile_of(pool, resource), resource, declared.get(resource, ZERO),
                           guaranteed.get((pool.name, resource), ZERO),
                           carved.get(resource, ZERO) if members is not None else None)
            mig.append(line)
            if line.carvable is not None and line.carvable != line.declared:
                text = Text("pool {pool}: the nodes' nvidia.com/mig.config carves {carvable} {profile}, the declared "
                            "layouts {declared} ({guaranteed} guaranteed)", pool=pool.name, carvable=q(line.carvable),
                            profile=line.profile, declared=q(line.declared), guaranteed=q(line.guaranteed))
                advice.append(Advice("mig-carve", f"{pool.name} {line.profile}", text))
        if unknown:
            text = Text("pool {pool}: nodes select MIG configs gpugov's mig-parted ConfigMap does not define, not "
                        "counted: {nodes}", pool=pool.name, nodes=", ".join(unknown))
            advice.append(Advice("mig-config", pool.name, text))
        no_state = Text("no state")
        failing = [Text("{node} ({state})", node=n.name, state=n.mig_state or no_state) for n in node_lines
                   if n.mig_state != "success"]
        if failing:
            text = Text("pool {pool}: nvidia.com/mig.config.state is not success on {nodes}, so their layout may not "
                        "be what the label says", pool=pool.name, nodes=Joined(", ", failing))
            advice.append(Advice("mig-state", pool.name, text))
    nodes_declared = len(pool.nodes) if pool.nodes else (pool.node_count or 0)
    gpus_live = None
    if members is not None and pool.model.vendor == "nvidia":  # GFD labels NVIDIA nodes only
        counts = [gfd_gpu_count(n) for n in members]
        gpus_live = sum(c for c in counts if c is not None)
    return PoolReport(
        pool.name, pool.model.name, pool.per_node, nodes_declared, None if members is None else len(members),
        nodes_declared * pool.per_node, gpus_live, pool.price_per_hour, tuple(lines), tuple(mig), tuple(node_lines),
    )


def _tenant_lines(scope: Scope, objects: list[Object]) -> list[TenantLine]:
    """Per tenant and accelerator resource: nominal, ceiling, lendable. On Kueue the ceiling is
    Kueue's own maximum (potentialAvailable) and the lendable what its queue passes up to its cohort,
    both over compile's ClusterQueues and Cohorts (gpugov.reach, the numbers `gpugov why` reads),
    summed over its pools; on Volcano the ceiling is the capability compile gives the tenant's queue."""
    lines = []
    rooms = tenant_rooms(objects) if scope.backend is Backend.KUEUE else {}
    for tenant in scope.tenants.values():
        nominal: dict[str, Decimal] = defaultdict(Decimal)
        lendable: dict[str, Decimal] = defaultdict(Decimal)
        ceiling: dict[str, Decimal] = defaultdict(Decimal)
        if scope.backend is Backend.KUEUE:
            for (_, resource), room in (rooms.get(tenant.name) or {}).items():
                ceiling[resource] += room.maximum
                lendable[resource] += room.lends
        else:
            ceiling.update(accelerator_ceiling(scope, tenant) or {})
            for quota in scope.quotas[tenant.name]:
                for rq in quota.resources:
                    lendable[rq.resource] += _lendable(rq, bool(tenant.department))
        for quota in scope.quotas[tenant.name]:
            for rq in quota.resources:
                nominal[rq.resource] += rq.nominal
        for resource in _accelerators(set(ceiling) | set(nominal)):
            lines.append(TenantLine(tenant.name, tenant.department, resource, nominal.get(resource, ZERO),
                                    ceiling.get(resource, nominal.get(resource, ZERO)), lendable.get(resource, ZERO)))
    return lines


def _usage(scope: Scope, ledger: Ledger, advice: list[Advice]) -> tuple[list[UsageLine], list[PoolUsageLine]]:
    hours = ledger.hours
    nominal: dict[tuple[str, str, str], Decimal] = defaultdict(Decimal)
    for tenant, quotas in scope.quotas.items():
        for quota in quotas:
            for rq in quota.resources:
                nominal[(tenant, quota.pool, rq.resource)] += rq.nominal
    sums: dict[tuple[str, str, str], list[Decimal]] = {}
    costs: dict[tuple[str, str, str], Decimal | None] = {}
    unknown: set[str] = set()
    for row in ledger.rows:
        key = (row.tenant, row.pool, row.resource)
        if row.tenant not in scope.tenants:
            unknown.add(f"tenant {row.tenant}")
        if row.pool not in scope.pools:
            unknown.add(f"pool {row.pool}")
        totals = sums.setdefault(key, [ZERO, ZERO, ZERO, ZERO])
        for index, value in enumerate((row.admitted_hours, row.in_quota_hours, row.borrowed_hours, row.idle_hours)):
            totals[index] += value
        if row.cost is not None:
            costs[key] = (costs.get(key) or ZERO) + row.cost
        else:
            costs.setdefault(key, None)
    lines = []
    for key in sorted(set(sums) | {k for k, v in nominal.items() if v and is_accelerator(k[2])}):
        admitted, in_quota, borrowed, idle = sums.get(key, [ZERO] * 4)
        held = nominal.get(key, ZERO)
        declared = scope.pools.get(key[1])
        line = UsageLine(*key, held, held * hours, admitted, in_quota, borrowed, idle, costs.get(key),
                         declared.currency if declared is not None else None)
        lines.append(line)
        tenant, pool, resource = key
        subject = f"{tenant} {pool} {resource}"
        if held and not admitted and is_accelerator(resource):
            text = Text("{tenant} holds {held} {resource} on {pool} and used none of it in the {hours} h window: lower "
                        "or drop the guarantee so others can have it", tenant=tenant, held=q(held), resource=resource,
                        pool=pool, hours=hours_text(hours))
            advice.append(Advice("never-used", subject, text))
        if borrowed and borrowed >= CHRONIC_BORROWER_SHARE * admitted:
            average = (borrowed / hours).quantize(Decimal("0.01"))
            text = Text("{tenant} borrowed {borrowed} of its {admitted} {resource}-hours on {pool} ({share}), "
                        "{average} on average: a larger nominal quota would guarantee what it keeps borrowing",
                        tenant=tenant, borrowed=q(borrowed), admitted=q(admitted), resource=resource, pool=pool,
                        share=percent(borrowed / admitted), average=average)
            advice.append(Advice("chronic-borrower", subject, text))
    unallocated: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for entry in ledger.unallocated:
        unallocated[(entry.pool, entry.resource)] += entry.hours
    pools = []
    for entry in sorted(ledger.capacity, key=lambda e: (e.pool, resource_order(e.resource))):
        rows = [line for line in lines if (line.pool, line.resource) == (entry.pool, entry.resource)]
        line = PoolUsageLine(entry.pool, entry.resource, entry.hours, sum((r.admitted_hours for r in rows), ZERO),
                             sum((r.borrowed_hours for r in rows), ZERO), sum((r.idle_hours for r in rows), ZERO),
                             unallocated.get((entry.pool, entry.resource), ZERO))
        pools.append(line)
        if entry.pool not in scope.pools:
            unknown.add(f"pool {entry.pool}")
        if line.utilisation is not None and line.utilisation >= NEAR_EXHAUSTION:
            text = Text("pool {pool}: {share} of its {resource}-hours were used in the window: near exhaustion, new "
                        "guarantees or borrowing will queue; add nodes", pool=entry.pool,
                        share=percent(line.utilisation), resource=entry.resource)
            advice.append(Advice("near-exhaustion", f"{entry.pool} {entry.resource}", text))
    advice += _idle_advice(scope, lines, hours)
    if unknown:
        text = Text("the ledger names what the declarations of cluster {cluster} lack: {names} (counted as read)",
                    cluster=scope.cluster.name, names=", ".join(sorted(unknown)))
        advice.append(Advice("ledger-unknown", ledger.source, text))
    return lines, pools


def _duration(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _idle_advice(scope: Scope, lines: list[UsageLine], hours: Decimal) -> list[Advice]:
    """Tenants whose idle hours (the ledger's) are at least IDLE_TOLERATED_SHARE of the hours they used,
    in device-hours (a MIG slice-hour weighs its share of the GPU), named with what their reclaim idle
    policy does about it: none declared, notify only, or deactivate (then idle time outlives it:
    exemptions, snoozes or a long window)."""
    idle: dict[str, Decimal] = defaultdict(Decimal)
    used: dict[str, Decimal] = defaultdict(Decimal)
    for line in lines:
        pool = scope.pools.get(line.pool)
        weight = device_equivalents(pool).get(line.resource) if pool is not None else None
        if is_accelerator(line.resource) and weight:
            idle[line.tenant] += line.idle_hours * weight
            used[line.tenant] += line.admitted_hours * weight
    advice = []
    for tenant in sorted(idle):
        if not idle[tenant] or idle[tenant] < IDLE_TOLERATED_SHARE * used[tenant]:
            continue
        declared = scope.model.tenants.get(tenant)
        policy = scope.model.reclaim_policy(declared) if declared is not None else None
        said = Text("{tenant} held accelerators idle for {idle} of the {used} device-hours it used in the {hours} h "
                    "window ({share})", tenant=tenant, idle=hours_text(idle[tenant]), used=hours_text(used[tenant]),
                    hours=hours_text(hours), share=percent(idle[tenant] / used[tenant]))
        if policy is None or policy.idle is None:
            text = Text("{said} and declares no reclaim idle policy: declare reclaim.idle (Guardrails or the tenant)",
                        said=said)
        elif policy.idle.action != "deactivate":
            text = Text("{said}; its reclaim idle policy only notifies (action: {action}): action: deactivate frees "
                        "the cards after the grace", said=said, action=policy.idle.action)
        else:
            text = Text("{said}, more than its reclaim idle policy tolerates (warn after {window} below {percent}%, "
                        "deactivate {grace} later): check its exemptions and snoozes, or shorten the window",
                        said=said, window=_duration(policy.idle.window), percent=q(policy.idle.below_percent),
                        grace=_duration(policy.idle.grace))
        advice.append(Advice("idle-over-policy", tenant, text))
    return advice


def cluster_report(state: DesiredState, nodes: list[Node] | None = None, ledger: Ledger | None = None) -> ClusterReport:
    """The report of one compiled cluster; `nodes` (live Node objects) and `ledger` add live and used numbers."""
    scope = state.scope
    guaranteed: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    borrowable: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    rooms = tenant_rooms(state.objects) if scope.backend is Backend.KUEUE else {}
    for kind, holder, pool, rq, in_cohort in _holdings(scope):
        guaranteed[(pool, rq.resource)] += rq.nominal
        room = (rooms.get(holder) or {}).get((pool, rq.resource)) if kind == "tenant" else None
        borrowable[(pool, rq.resource)] += room.lends if room is not None else _lendable(rq, in_cohort)
    geometry = mig_geometry(state.objects)
    advice: list[Advice] = []
    pools = [_pool_report(scope, pool, nodes, geometry, guaranteed, borrowable, advice) for pool in scope.pools.values()]
    usage: list[UsageLine] = []
    pool_usage: list[PoolUsageLine] = []
    window = None
    if ledger is not None:
        usage, pool_usage = _usage(scope, ledger, advice)
        window = Window(ledger.since, ledger.until, ledger.hours, ledger.source)
    advice.sort(key=lambda a: (ADVICE_ORDER.index(a.kind), a.subject))
    return ClusterReport(state.cluster, state.backend.value, nodes is not None, tuple(pools), tuple(_tenant_lines(scope, state.objects)),
                         window, tuple(usage), tuple(pool_usage), tuple(advice))
