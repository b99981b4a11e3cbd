"""Quotas fit the hardware: guaranteed sums within capacity, sane limits, offered resources."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from decimal import Decimal

from gpugov.declarations.model import ACCELERATOR_CORES, ACCELERATOR_MEMORY, Decl, Department, Model, PoolQuota, Tenant
from gpugov.findings import Finding, Level, make, rule
from gpugov.kube.quantity import format_quantity
from gpugov.policy import check

OVER_CAPACITY = rule(
    "GG030",
    "quota-exceeds-capacity",
    Level.ERROR,
    "The nominal quotas of a pool's tenants and departments add up to more than its capacity times the guardrail ratio. "
    "Reported on each quota that contributes, so a pull request's annotation lands on the line it changed.",
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
    "A quota names a resource the pool does not offer (e.g. a MIG profile none of its layouts creates).",
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
            if rq.resource in ("cpu", "memory", "pods"):
                continue
            unit = pool.quota_unit(rq.key) if pool else None
            for name, value in (("nominal", rq.nominal), ("borrowingLimit", rq.borrowing_limit),
                                ("lendingLimit", rq.lending_limit)):
                if value is not None and value != value.to_integral_value():
                    amount = f"{format_quantity(value * unit)}, not a whole number of {rq.resource} units of " \
                        f"{format_quantity(unit)}" if unit else f"{value.normalize()}, not a whole number of {rq.resource}"
                    yield make(
                        FRACTIONAL_DEVICE,
                        f"{owner.name}: {name} of {rq.key} in pool '{quota.pool}' is {amount}",
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
                if rq.resource in ("cpu", "memory", "pods"):
                    continue
                seen = first.setdefault((cluster, rq.resource), quota.pool)
                if seen != quota.pool:
                    yield make(
                        VOLCANO_POOLS_MERGED,
                        f"{kind} '{owner.name}' holds {rq.resource} in pools '{seen}' and '{quota.pool}' of Volcano "
                        f"cluster '{cluster}': its Queue's deserved {rq.resource} would merge them",
                        owner.at("quotas", quota.index, "pool"),
                    )


def _owners_of_quota(model: Model) -> Iterator[tuple[Decl, PoolQuota, bool]]:
    for owner, quota in model.quota_holders():
        yield owner, quota, isinstance(owner, Department)


@check
def check_offered(model: Model) -> Iterator[Finding]:
    for owner, quota in model.quota_holders():
        pool = model.pools.get(quota.pool)
        if pool is None:
            continue
        for rq in quota.resources:
            if rq.resource not in pool.capacity and rq.resource not in ("cpu", "memory", "pods"):
                offered = ", ".join(pool.capacity) or "nothing"
                why = f"offers no {rq.resource} (it offers {offered})"
                if rq.key in (ACCELERATOR_MEMORY, ACCELERATOR_CORES) and pool.hami is None:
                    why = f"is not shared through HAMi (spec.sharing.hami), so it has no {rq.key}"
                elif rq.key in (ACCELERATOR_MEMORY, ACCELERATOR_CORES):
                    why = f"is shared through HAMi, but {pool.model.name} has no HAMi resource for {rq.key}"
                yield make(
                    NOT_OFFERED,
                    f"{owner.name}: pool '{pool.name}' {why}",
                    owner.at("quotas", quota.index, "resources", rq.key, key=True),
                )


@check
def check_capacity(model: Model) -> Iterator[Finding]:
    """One finding per contributing quota, at its own line, the pool as the related location:
    the quota a pull request raised is among them, wherever the pool is declared."""
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
        names = ", ".join(f"{c[1].name} {shown(c[0])}" for c in top[:5])
        if len(top) > 5:
            names += f" and {len(top) - 5} more"
        summary = (
            f"pool '{pool_name}' {resource}, whose nominal quotas add up to {shown(total)}; capacity is "
            f"{shown(pool.capacity[resource])} x ratio {ratio} = {shown(allowed)} ({names})"
        )
        for amount, owner, quota, key in top:
            kind = "department" if isinstance(owner, Department) else "tenant"
            whole = f" (its {key} are whole devices)" if key != _key_of(quota, resource) else ""
            yield make(
                OVER_CAPACITY,
                f"{kind} '{owner.name}' holds {shown(amount)}{whole} of {summary}",
                owner.at("quotas", quota.index, "resources", key),
                pool.name_at(),
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
                    f"{owner.name}: {rq.key} in pool '{quota.pool}' lends "
                    f"{format_quantity(rq.lending_limit)} of a nominal {format_quantity(rq.nominal)}",
                    owner.at(*where, "lendingLimit"),
                )
            has_limit = rq.borrowing_limit is not None or rq.lending_limit is not None
            if has_limit and not is_department and not getattr(owner, "department", None):
                yield make(
                    BORROW_WITHOUT_COHORT,
                    f"tenant '{owner.name}' has no department, so {rq.key} in pool "
                    f"'{quota.pool}' cannot borrow or lend",
                    owner.at(*where),
                )
            if has_limit and is_department and not getattr(owner, "parent", None):
                yield make(
                    DEPARTMENT_LIMIT_ON_ROOT,
                    f"department '{owner.name}' has no parent, so {rq.key} in pool "
                    f"'{quota.pool}' cannot set borrowing or lending limits",
                    owner.at(*where),
                )
    for owner, quota, _ in _owners_of_quota(model):
        earlier = [q for q in owner.quotas if q.pool == quota.pool and q.index < quota.index]  # type: ignore[attr-defined]
        if earlier:
            yield make(
                DUPLICATE_POOL_QUOTA,
                f"{owner.name}: pool '{quota.pool}' is listed twice in quotas",
                owner.at("quotas", quota.index, "pool"),
                owner.at("quotas", earlier[0].index, "pool"),
            )
