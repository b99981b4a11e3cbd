"""Quotas fit the hardware: guaranteed sums within capacity, sane limits, offered resources."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from decimal import Decimal

from gpugov.declarations.model import (
    ACCELERATOR_CORES,
    ACCELERATOR_MEMORY,
    Decl,
    Department,
    GPUPool,
    Model,
    PoolQuota,
    Tenant,
)
from gpugov.findings import Finding, Level, Location, make, rule
from gpugov.i18n import Joined, Text
from gpugov.kube.quantity import format_quantity
from gpugov.kube.resources import is_accelerator
from gpugov.policy.checks import change_check, check

OVER_CAPACITY = rule(
    "GG030",
    "quota-exceeds-capacity",
    Level.ERROR,
    "The nominal quotas of a pool's tenants and departments add up to more than its capacity times the guardrail ratio. "
    "Reported on each quota that contributes; with the base revision known (plan, validate --base) only where the "
    "change is: each quota it raised, and the hardware/ or Guardrails line that lowered the capacity, saying by how "
    "much (capacity 16 → 8), with the quotas related.",
    "Lower a quota, add nodes to the pool, or raise the pool's ratio in Guardrails.",
)
LENDING_OVER_NOMINAL = rule(
    "GG031",
    "lending-exceeds-nominal",
    Level.ERROR,
    "A lendingLimit is larger than the nominal quota (Kueue's webhook rejects it).",
    "lendingLimit may be at most nominal.",
)
BORROW_WITHOUT_COHORT = rule(
    "GG032",
    "limit-without-department",
    Level.ERROR,
    "A borrowingLimit or lendingLimit is set on a tenant without a department (no cohort to borrow from).",
    "Put the tenant in a department, or drop the limit.",
)
NOT_OFFERED = rule(
    "GG033",
    "resource-not-in-pool",
    Level.ERROR,
    "A quota names a resource the pool does not offer (e.g. a MIG profile none of its layouts creates); where a "
    "change to the pool took it away (a MIG relayout, with the base revision known), at the hardware/ line that did.",
    "Quota only what the pool's nodes provide: accelerators on whole-GPU nodes, profiles of its MIG layouts.",
)
DUPLICATE_POOL_QUOTA = rule(
    "GG034",
    "duplicate-pool-quota",
    Level.ERROR,
    "The same pool appears twice in one quotas list.",
    "Merge the two entries.",
)
DEPARTMENT_LIMIT_ON_ROOT = rule(
    "GG035",
    "limit-on-root-department",
    Level.ERROR,
    "A top-level department sets borrowingLimit or lendingLimit (Kueue: must be nil when parent is empty).",
    "Only sub-departments can limit borrowing from or lending to their parent.",
)
FRACTIONAL_DEVICE = rule(
    "GG037",
    "fractional-device",
    Level.ERROR,
    "A quota of whole devices or MIG instances (nominal, borrowingLimit or lendingLimit) is not a whole number: "
    "extended resources are integers, so the scheduler would be asked for e.g. 17500m GPUs.",
    "Use whole numbers of accelerators and MIG instances.",
)


@check
def check_whole_devices(model: Model) -> Iterator[Finding]:
    for owner, quota in model.quota_holders():
        pool = model.pools.get(quota.pool)
        for rq in quota.resources:
            if not is_accelerator(rq.resource):
                continue
            unit = pool.quota_unit(rq.key) if pool else None
            for name, value in (("nominal", rq.nominal), ("borrowingLimit", rq.borrowing_limit),
                                ("lendingLimit", rq.lending_limit)):
                if value is not None and value != value.to_integral_value():
                    amount = Text("{amount}, not a whole number of {resource} units of {unit}",
                                  amount=format_quantity(value * unit), resource=rq.resource,
                                  unit=format_quantity(unit)) if unit else \
                        Text("{amount}, not a whole number of {resource}", amount=value.normalize(), resource=rq.resource)
                    yield make(
                        FRACTIONAL_DEVICE,
                        Text("{owner}: {field} of {key} in pool '{pool}' is {amount}", owner=owner.name, field=name,
                             key=rq.key, pool=quota.pool, amount=amount),
                        owner.at("quotas", quota.index, "resources", rq.key),
                    )


VOLCANO_POOLS_MERGED = rule(
    "GG036",
    "volcano-pools-share-a-resource",
    Level.ERROR,
    "On a Volcano cluster a tenant or department holds quota of the same accelerator resource in two pools: "
    "a Volcano Queue has one deserved amount per resource name and no flavors, so the two quotas merge and "
    "either pool could be used for all of it.",
    "Give such a tenant quota in one of the pools only (or one tenant per pool), or run the cluster on Kueue.",
)


@check
def check_volcano_pools_distinct(model: Model) -> Iterator[Finding]:
    for owner_name, kind in sorted(
        [(n, "tenant") for n in model.tenants] + [(n, "department") for n in model.departments]
    ):
        owner: Tenant | Department = model.tenants[owner_name] if kind == "tenant" else model.departments[owner_name]
        first: dict[tuple[str, str], str] = {}
        for quota in owner.quotas:
            pool = model.pools.get(quota.pool)
            cluster = model.pool_cluster(pool) if pool else None
            if pool is None or cluster is None or model.cluster(cluster).backend != "volcano":
                continue
            for rq in quota.resources:
                if not is_accelerator(rq.resource):
                    continue
                seen = first.setdefault((cluster, rq.resource), quota.pool)
                if seen != quota.pool:
                    yield make(
                        VOLCANO_POOLS_MERGED,
                        Text("{kind} '{owner}' holds {resource} in pools '{first}' and '{pool}' of Volcano cluster "
                             "'{cluster}': its Queue's deserved {resource} would merge them", kind=HOLDER_KINDS[kind],
                             owner=owner.name, resource=rq.resource, first=seen, pool=quota.pool, cluster=cluster),
                        owner.at("quotas", quota.index, "pool"),
                    )


HOLDER_KINDS = {"tenant": Text("tenant"), "department": Text("department")}  # the word, in the reader's language


def _owners_of_quota(model: Model) -> Iterator[tuple[Decl, PoolQuota, bool]]:
    for owner, quota in model.quota_holders():
        yield owner, quota, isinstance(owner, Department)


@change_check
def check_offered(model: Model, base: Model | None) -> Iterator[Finding]:
    """GG033 at the quota; where the base's pool offered the resource and a change to the pool took
    it away (a MIG relayout), once at the hardware/ line that did, the quotas related."""
    withdrawn: dict[tuple[str, str], list[tuple[Decl, Location]]] = defaultdict(list)
    for owner, quota in model.quota_holders():
        pool = model.pools.get(quota.pool)
        if pool is None:
            continue
        old_pool = base.pools.get(pool.name) if base is not None else None
        for rq in quota.resources:
            if rq.resource not in pool.capacity and is_accelerator(rq.resource) and old_pool is not None \
                    and rq.resource in old_pool.capacity and capacity_causes(old_pool, pool):
                withdrawn[(pool.name, rq.resource)].append(
                    (owner, owner.at("quotas", quota.index, "resources", rq.key, key=True)))
                continue
            if rq.resource not in pool.capacity and is_accelerator(rq.resource):
                offered = ", ".join(pool.capacity) or Text("nothing")
                why = Text("offers no {resource} (it offers {offered})", resource=rq.resource, offered=offered)
                if rq.key in (ACCELERATOR_MEMORY, ACCELERATOR_CORES) and pool.hami is None:
                    why = Text("is not shared through HAMi (spec.sharing.hami), so it has no {key}", key=rq.key)
                elif rq.key in (ACCELERATOR_MEMORY, ACCELERATOR_CORES):
                    why = Text("is shared through HAMi, but {model} has no HAMi resource for {key}",
                               model=pool.model.name, key=rq.key)
                yield make(
                    NOT_OFFERED,
                    Text("{owner}: pool '{pool}' {why}", owner=owner.name, pool=pool.name, why=why),
                    owner.at("quotas", quota.index, "resources", rq.key, key=True),
                )
    for (pool_name, resource), holders in sorted(withdrawn.items()):
        pool, old_pool = model.pools[pool_name], base.pools[pool_name]  # type: ignore[union-attr]
        causes = capacity_causes(old_pool, pool)
        offered = ", ".join(pool.capacity) or Text("nothing")
        fields = {"pool": pool_name, "resource": resource, "causes": Joined("; ", (text for _, text in causes)),
                  "offered": offered, "holders": ", ".join(owner.name for owner, _ in holders),
                  "capacity": format_quantity(old_pool.capacity[resource])}
        yield make(
            NOT_OFFERED,
            Text("pool '{pool}' no longer offers {resource} ({causes}; it offers {offered}), which {holders} holds "
                 "quota of (capacity {capacity} → 0)", **fields) if len(holders) == 1 else
            Text("pool '{pool}' no longer offers {resource} ({causes}; it offers {offered}), which {holders} hold "
                 "quota of (capacity {capacity} → 0)", **fields),
            causes[0][0],
            *[loc for loc, _ in causes[1:]],
            *[loc for _, loc in holders],
        )


def _base_charge(base: Model, owner: Decl, quota: PoolQuota, resource: str, key: str) -> Decimal:
    """What the same holder's quota entry on the same pool charged of `resource` (via `key`) in the base."""
    holders: dict[str, Department] | dict[str, Tenant] = (
        base.departments if isinstance(owner, Department) else base.tenants)
    old_owner = holders.get(owner.name)
    pool = base.pools.get(quota.pool)
    if old_owner is None or pool is None:
        return Decimal(0)
    return sum((c.amount for q in old_owner.quotas if q.pool == quota.pool for c in pool.charges(q)
                if c.resource == resource and c.key == key), Decimal(0))


def _removal_at(pool: GPUPool, old: GPUPool, removed: list[str]) -> Location:
    """The head's line beside the first removed node: the node that preceded it (in the diff's context)."""
    first = next(n.index for n in old.nodes if n.name == removed[0])
    kept = {n.name: n for n in pool.nodes}
    before = [kept[n.name] for n in old.nodes[:first] if n.name in kept]
    if before:
        return pool.at("nodes", before[-1].index)
    return pool.at("nodes", 0) if pool.nodes else pool.at("nodes", key=True)


def capacity_causes(old: GPUPool, pool: GPUPool) -> list[tuple[Location, str]]:
    """Where and how a pool's declaration changed what its nodes hold: the lines a pull request
    changed in hardware/, for findings about capacity (GG030, GG140)."""
    causes: list[tuple[Location, str]] = []
    if old.model.name != pool.model.name:
        causes.append((pool.at("accelerator", "model"),
                       Text("model {old} → {new}", old=old.model.name, new=pool.model.name)))
    if old.per_node != pool.per_node:
        causes.append((pool.at("acceleratorsPerNode"),
                       Text("acceleratorsPerNode {old} → {new}", old=old.per_node, new=pool.per_node)))
    if not pool.nodes and not old.nodes and old.node_count != pool.node_count:
        causes.append((pool.at("nodeCount"),
                       Text("nodeCount {old} → {new}", old=old.node_count or 0, new=pool.node_count or 0)))
    before, after = {n.name: n for n in old.nodes}, {n.name: n for n in pool.nodes}
    removed = [n.name for n in old.nodes if n.name not in after]
    added = [n for n in pool.nodes if n.name not in before]
    if removed:
        names = ", ".join(removed)
        causes.append((_removal_at(pool, old, removed), Text("nodes {nodes} removed", nodes=names) if len(removed) > 1
                       else Text("node {nodes} removed", nodes=names)))
    if added:
        names = ", ".join(n.name for n in added)
        causes.append((pool.at("nodes", added[0].index), Text("nodes {nodes} added", nodes=names) if len(added) > 1
                       else Text("node {nodes} added", nodes=names)))
    for node in pool.nodes:
        was = before.get(node.name)
        for field_name, old_layout, new_layout in (("migLayout", was.mig_layout if was else None, node.mig_layout),
                                                   ("vnpuLayout", was.vnpu_layout if was else None, node.vnpu_layout)):
            if was is not None and old_layout != new_layout:
                causes.append((pool.at("nodes", node.index, field_name),
                               Text("node {node} {field} {old} → {new}", node=node.name, field=field_name,
                                    old=old_layout or Text("none"), new=new_layout or Text("none"))))
    for field_name, old_layouts, new_layouts in (("migLayouts", old.mig_layouts, pool.mig_layouts),
                                                 ("vnpuLayouts", old.vnpu_layouts, pool.vnpu_layouts)):
        for name in sorted(set(old_layouts) & set(new_layouts)):
            if old_layouts[name] != new_layouts[name]:
                causes.append((pool.at(field_name, name), Text("{field}.{name} changed", field=field_name, name=name)))
    if old.hami != pool.hami:
        causes.append((pool.at("sharing"), Text("sharing changed")))
    return causes


@change_check
def check_capacity(model: Model, base: Model | None) -> Iterator[Finding]:
    """One finding per contributing quota, at its own line, the pool as the related location:
    the quota a pull request raised is among them, wherever the pool is declared. With the base
    revision known, only where the change is: at each quota it raised, and at the hardware/ (or
    Guardrails) line that lowered the pool's capacity, saying by how much, every quota related."""
    over: dict[tuple[str, str], tuple[Decimal, Decimal, Decimal]] = {}
    for (pool_name, resource), total in model.guaranteed().items():
        ratio = model.limits.ratio_for(pool_name)
        allowed = model.pools[pool_name].capacity[resource] * ratio
        if total > allowed:
            over[(pool_name, resource)] = (total, allowed, ratio)
    if not over:
        return
    contributors: dict[tuple[str, str], list[tuple[Decimal, Decl, PoolQuota, str]]] = defaultdict(list)
    for owner, quota in model.quota_holders():
        pool = model.pools.get(quota.pool)
        for charge in pool.charges(quota) if pool else ():
            if (quota.pool, charge.resource) in over and charge.amount > 0:
                contributors[(quota.pool, charge.resource)].append((charge.amount, owner, quota, charge.key))
    for (pool_name, resource), (total, allowed, ratio) in over.items():
        pool = model.pools[pool_name]
        units = pool.hami_units
        unit = units.memory_unit if units and resource == units.memory else None

        def shown(amount: Decimal, unit: Decimal | None = unit) -> str:
            """HAMi memory as the size it is (72Gi), not as a count of MiB units."""
            return format_quantity(amount * unit) if unit else format_quantity(amount)

        top = sorted(contributors[(pool_name, resource)], key=lambda c: (-c[0], c[1].name))
        names: str = ", ".join(f"{c[1].name} {shown(c[0])}" for c in top[:5])
        if len(top) > 5:
            names = Text("{names} and {count} more", names=names, count=len(top) - 5)
        summary = Text("pool '{pool}' {resource}, whose nominal quotas add up to {total}; capacity is {capacity} x "
                       "ratio {ratio} = {allowed} ({holders})", pool=pool_name, resource=resource, total=shown(total),
                       capacity=shown(pool.capacity[resource]), ratio=ratio, allowed=shown(allowed), holders=names)
        quota_lines = [owner.at("quotas", quota.index, "resources", key) for _, owner, quota, key in top]
        reported = top
        old_pool = base.pools.get(pool_name) if base is not None else None
        if base is not None:
            reported = [c for c in top if c[0] > _base_charge(base, c[1], c[2], resource, c[3])]
        if base is not None and old_pool is not None:
            old_capacity, old_ratio = old_pool.capacity.get(resource, Decimal(0)), base.limits.ratio_for(pool_name)
            if old_capacity * old_ratio > allowed:
                causes = capacity_causes(old_pool, pool) if old_capacity > pool.capacity[resource] else []
                if old_ratio > ratio:
                    where = ("poolCapacityRatios", pool_name) if pool_name in model.limits.pool_capacity_ratios \
                        else ("capacityRatio",)
                    causes.append((model.limits.at(*where), Text("ratio {old} → {new}", old=old_ratio, new=ratio)))
                at = causes[0][0] if causes else pool.name_at()
                why = Joined("; ", (text for _, text in causes)) if causes else Text("its declaration changed")
                yield make(
                    OVER_CAPACITY,
                    Text("pool '{pool}' {resource} capacity {old} → {new} ({why}): its nominal quotas add up to "
                         "{total}, more than {new} x ratio {ratio} = {allowed} ({holders})", pool=pool_name,
                         resource=resource, old=shown(old_capacity), new=shown(pool.capacity[resource]), why=why,
                         total=shown(total), ratio=ratio, allowed=shown(allowed), holders=names),
                    at,
                    *[loc for loc, _ in causes[1:]],
                    *quota_lines,
                )
                if not reported:
                    continue
        for amount, owner, quota, key in reported or top:
            kind = HOLDER_KINDS["department" if isinstance(owner, Department) else "tenant"]
            fields = {"kind": kind, "owner": owner.name, "amount": shown(amount), "key": key, "summary": summary}
            yield make(
                OVER_CAPACITY,
                Text("{kind} '{owner}' holds {amount} (its {key} are whole devices) of {summary}", **fields)
                if key != _key_of(quota, resource) else Text("{kind} '{owner}' holds {amount} of {summary}", **fields),
                owner.at("quotas", quota.index, "resources", key),
                pool.name_at(),
            )


UNASSIGNED = rule(
    "GG140",
    "capacity-unassigned",
    Level.WARNING,
    "A change leaves more accelerators of a pool on a Kueue cluster in no tenant's or department's nominal quota "
    "than before, so Kueue admits nothing onto them (borrowing reaches only nominal quota). Needs the base revision "
    "(validate --base, plan); `gpugov capacity` reports what is unassigned at any time.",
    "Give them to a department as shared quota or to a tenant, or take the nodes out of the pool.",
)
DEVICE_NOUNS = {"nvidia": Text("GPUs"), "amd": Text("GPUs"), "huawei": Text("NPUs")}
DEVICES = Text("devices")  # a vendor without a noun of its own


def _lowered_quotas(model: Model, base: Model, pool: GPUPool, resource: str) -> list[Location]:
    """The quota lines of `pool` whose charge of `resource` the change lowered."""
    return [owner.at("quotas", quota.index, "resources", charge.key) for owner, quota in model.quota_holders()
            if quota.pool == pool.name for charge in pool.charges(quota)
            if charge.resource == resource and charge.amount < _base_charge(base, owner, quota, resource, charge.key)]


@change_check
def check_unassigned(model: Model, base: Model | None) -> Iterator[Finding]:
    """GG140 where the change makes it (the plan's "unassigned" line): at the hardware/ line that
    added capacity, else at the pool. HAMi memory and compute are shares of devices counted
    already, so only device counts (whole devices, MIG, vNPU, HAMi vGPUs) are reported."""
    if base is None:
        return  # no change to speak of: the standing state is `gpugov capacity`'s
    guaranteed, guaranteed_before = model.guaranteed(), base.guaranteed()
    for pool in sorted(model.pools.values(), key=lambda p: p.name):
        cluster = model.pool_cluster(pool)
        if cluster is None or model.cluster(cluster).backend != "kueue":
            continue
        units = pool.hami_units
        shares = {units.memory, units.cores} if units else set()
        old_pool = base.pools.get(pool.name)
        for resource, capacity in pool.capacity.items():
            if not is_accelerator(resource) or resource in shares or capacity <= 0:
                continue
            left = capacity - guaranteed.get((pool.name, resource), Decimal(0))
            if left <= 0:
                continue
            before = (old_pool.capacity.get(resource, Decimal(0)) - guaranteed_before.get((pool.name, resource), Decimal(0))
                      if old_pool is not None else Decimal(0))
            if left <= before:
                continue
            if resource == pool.model.resource and units is None:
                what: str = Text("{model} {devices} ({resource})", model=pool.model.name,
                                 devices=DEVICE_NOUNS.get(pool.model.vendor, DEVICES), resource=resource)
            else:
                what = resource
            causes = capacity_causes(old_pool, pool) if old_pool is not None else []
            if not causes and old_pool is not None and (lowered := _lowered_quotas(model, base, pool, resource)):
                causes = [(at, "") for at in [*lowered, pool.name_at()]]
            yield make(
                UNASSIGNED,
                Text("{left} of {capacity} {what} of pool '{pool}' are in no tenant's or department's nominal quota "
                     "(before this change: {before}): Kueue admits nothing onto them", left=format_quantity(left),
                     capacity=format_quantity(capacity), what=what, pool=pool.name,
                     before=format_quantity(max(before, Decimal(0)))),
                causes[0][0] if causes else pool.name_at(),
                *[loc for loc, _ in causes[1:]],
            )


def _key_of(quota: PoolQuota, resource: str) -> str | None:
    """The declared key of a resource in a quota entry (None when it is only charged, as HAMi memory)."""
    return next((rq.key for rq in quota.resources if rq.resource == resource), None)


@check
def check_limits(model: Model) -> Iterator[Finding]:
    for owner, quota, is_department in _owners_of_quota(model):
        for rq in quota.resources:
            where = ("quotas", quota.index, "resources", rq.key)
            if rq.lending_limit is not None and rq.lending_limit > rq.nominal and not is_department:
                yield make(
                    LENDING_OVER_NOMINAL,
                    Text("{owner}: {key} in pool '{pool}' lends {lending} of a nominal {nominal}", owner=owner.name,
                         key=rq.key, pool=quota.pool, lending=format_quantity(rq.lending_limit),
                         nominal=format_quantity(rq.nominal)),
                    owner.at(*where, "lendingLimit"),
                )
            has_limit = rq.borrowing_limit is not None or rq.lending_limit is not None
            if has_limit and not is_department and not getattr(owner, "department", None):
                yield make(
                    BORROW_WITHOUT_COHORT,
                    Text("tenant '{tenant}' has no department, so {key} in pool '{pool}' cannot borrow or lend",
                         tenant=owner.name, key=rq.key, pool=quota.pool),
                    owner.at(*where),
                )
            if has_limit and is_department and not getattr(owner, "parent", None):
                yield make(
                    DEPARTMENT_LIMIT_ON_ROOT,
                    Text("department '{department}' has no parent, so {key} in pool '{pool}' cannot set borrowing "
                         "or lending limits", department=owner.name, key=rq.key, pool=quota.pool),
                    owner.at(*where),
                )
    for owner, quota, _ in _owners_of_quota(model):
        earlier = [q for q in owner.quotas if q.pool == quota.pool and q.index < quota.index]  # type: ignore[attr-defined]
        if earlier:
            yield make(
                DUPLICATE_POOL_QUOTA,
                Text("{owner}: pool '{pool}' is listed twice in quotas", owner=owner.name, pool=quota.pool),
                owner.at("quotas", quota.index, "pool"),
                owner.at("quotas", earlier[0].index, "pool"),
            )
