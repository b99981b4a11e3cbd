"""Quotas fit the hardware: guaranteed sums within capacity, sane limits, offered resources."""

from __future__ import annotations

from collections.abc import Iterator

from gpugov.declarations.model import Decl, Department, Model, PoolQuota, Tenant
from gpugov.findings import Finding, Level, make, rule
from gpugov.kube.quantity import format_quantity
from gpugov.policy import check

OVER_CAPACITY = rule(
    "GG030",
    "quota-exceeds-capacity",
    Level.ERROR,
    "The nominal quotas of a pool's tenants and departments add up to more than its capacity times the guardrail ratio.",
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
        for rq in quota.resources:
            if rq.resource in ("cpu", "memory", "pods"):
                continue
            for name, value in (("nominal", rq.nominal), ("borrowingLimit", rq.borrowing_limit),
                                ("lendingLimit", rq.lending_limit)):
                if value is not None and value != value.to_integral_value():
                    yield make(
                        FRACTIONAL_DEVICE,
                        f"{owner.name}: {name} of {rq.key} in pool '{quota.pool}' is {value.normalize()}, "
                        f"not a whole number of {rq.resource}",
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
                yield make(
                    NOT_OFFERED,
                    f"{owner.name}: pool '{pool.name}' offers no {rq.resource} (it offers {offered})",
                    owner.at("quotas", quota.index, "resources", rq.key, key=True),
                )


@check
def check_capacity(model: Model) -> Iterator[Finding]:
    for (pool_name, resource), total in model.guaranteed().items():
        pool = model.pools[pool_name]
        ratio = model.limits.ratio_for(pool_name)
        allowed = pool.capacity[resource] * ratio
        if total <= allowed:
            continue
        contributors = [
            (rq.nominal, owner, quota, rq.key)
            for owner, quota in model.quota_holders()
            if quota.pool == pool_name
            for rq in quota.resources
            if rq.resource == resource
        ]
        top = sorted(contributors, key=lambda c: (-c[0], c[1].name))
        names = ", ".join(f"{c[1].name} {format_quantity(c[0])}" for c in top[:5])
        yield make(
            OVER_CAPACITY,
            f"pool '{pool_name}' {resource}: nominal quotas add up to {format_quantity(total)}, capacity is "
            f"{format_quantity(pool.capacity[resource])} x ratio {ratio} = {format_quantity(allowed)} ({names})",
            pool.doc.locate(("metadata", "name")),
            *[owner.at("quotas", quota.index, "resources", key) for _, owner, quota, key in top],
        )


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
