"""The ledger: per tenant, cost centre and pool resource, the accelerator-hours admitted, in
quota and borrowed, idle, and their cost; what nobody held; the capacity it all adds up to.

Exact arithmetic: usage is summed in accelerator-seconds (Decimal), then each row is rounded
once to HOURS (a micro-hour, 3.6 ms: finer than the seconds Kubernetes records). In-quota and
borrowed come from a sweep over time of the tenant's total on the pool resource against its
nominal quota: borrowed is exactly the part above nominal, while it is above. A rate is the
pool's `pricePerAcceleratorHour` times the resource's share of a device (a MIG slice: its
compute slices over the GPU's, as compile weighs them; a vNPU template its share of the NPU; a
HAMi vGPU slot 1/deviceSplitCount, while HAMi's memory and core units, views of the same
devices, carry no rate: declarations.equivalents), rounded to RATE; cost = hours x rate,
exact. Unallocated = capacity hours minus the rows' hours of that pool resource, so

    sum(rows' cost) + unallocated cost = capacity hours x rate = capacity cost

holds to the last digit for every priced pool resource (`closure` checks it).

`reclaimed`: per tenant and resource, the Workloads `gpugov reclaim` deactivated in the window and
the hours they held idle from the warning to the deactivation (usage.reclaimed); part of the rows'
admitted (and idle) hours, not added to them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from itertools import pairwise
from typing import Any

from gpugov.catalog import mig_resource_name
from gpugov.declarations.equivalents import device_equivalents, hami_views
from gpugov.declarations.model import GPUPool, Model, Tenant
from gpugov.kube.resources import is_accelerator
from gpugov.usage.reclaimed import Reclaimed
from gpugov.usage.segments import Segment
from gpugov.usage.window import Window, seconds

HOURS = Decimal("0.000001")
RATE = Decimal("0.000001")
SECONDS_PER_HOUR = Decimal(3600)


def decimal_string(value: Decimal) -> str:
    """A plain decimal string (no exponent), trailing zeros after the point removed."""
    text = f"{value:f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def to_hours(accelerator_seconds: Decimal) -> Decimal:
    return (accelerator_seconds / SECONDS_PER_HOUR).quantize(HOURS, rounding=ROUND_HALF_EVEN)


@dataclass(frozen=True)
class Row:
    tenant: str
    department: str | None
    cost_center: str | None
    pool: str
    resource: str
    unit: str
    admitted_hours: Decimal
    in_quota_hours: Decimal
    borrowed_hours: Decimal
    idle_hours: Decimal
    rate: Decimal | None
    cost: Decimal | None


@dataclass(frozen=True)
class PoolHours:
    pool: str
    resource: str
    hours: Decimal
    rate: Decimal | None
    cost: Decimal | None


@dataclass(frozen=True)
class ReclaimedRow:
    """What `gpugov reclaim` took back from a tenant on one accelerator resource (usage.reclaimed)."""

    tenant: str
    resource: str
    deactivations: int
    hours: Decimal  # held idle from the warning to the deactivation


@dataclass(frozen=True)
class BudgetLine:
    """A declared budget against what its holder spent this period (usage.budget), whatever the
    ledger's own window: in accelerator-hours, or in money for a cost budget."""

    holder: str  # "tenant 'a'" / "department 'b'"
    period: str  # 2026-12, 2026-W49
    since: str  # the period's start, UTC
    spent: Decimal  # in `unit`
    budget: Decimal
    percent: Decimal
    action: str  # none | hold
    held: bool  # spent, with action hold
    unit: str = "accelerator-hours"  # or a cost budget's currency
    cost: bool = False  # a cost budget: spent and budget are money
    currency: str | None = None  # a cost budget's ISO 4217 code, where its pools' prices name one

    def to_json(self, number: Any) -> dict[str, Any]:
        """An hours budget as spent_hours / budget_hours; a cost budget as spent_cost / budget_cost
        and its currency, as the rows carry theirs."""
        amounts = ({"spent_cost": number(self.spent), "budget_cost": number(self.budget)} if self.cost
                   else {"spent_hours": number(self.spent), "budget_hours": number(self.budget)})
        return {"holder": self.holder, "period": self.period, "since": self.since, **amounts,
                **({"currency": self.currency} if self.cost and self.currency else {}),
                "percent": number(self.percent), "action": self.action, "held": self.held}


@dataclass(frozen=True)
class Ledger:
    cluster: str
    window: Window
    rows: tuple[Row, ...]
    unallocated: tuple[PoolHours, ...]
    capacity: tuple[PoolHours, ...]
    notes: tuple[str, ...] = ()
    currencies: tuple[tuple[str, str], ...] = ()  # (pool, ISO 4217 code of its price) where the pool declares one
    reclaimed: tuple[ReclaimedRow, ...] = ()
    budgets: tuple[BudgetLine, ...] = ()  # spent / budget per period, where budgets are declared

    def currency(self, pool: str) -> str | None:
        return dict(self.currencies).get(pool)

    def to_json(self) -> dict[str, Any]:
        """The documented shape `gpugov capacity --usage` reads: every number a decimal string (exact);
        a row or pool entry of a pool whose price declares its currency carries it (`currency`)."""
        def number(value: Decimal | None) -> str | None:
            return None if value is None else decimal_string(value)

        def priced(entry: dict[str, Any], pool: str) -> dict[str, Any]:
            code = self.currency(pool)
            return {**entry, "currency": code} if code else entry

        data = {
            "window": {"since": self.window.since.strftime("%Y-%m-%dT%H:%M:%SZ"),
                       "until": self.window.until.strftime("%Y-%m-%dT%H:%M:%SZ")},
            "complete": True,
            "cluster": self.cluster,
            "rows": [{"tenant": r.tenant, "department": r.department, "cost_center": r.cost_center, "pool": r.pool,
                      "resource": r.resource, "unit": r.unit, "admitted_hours": number(r.admitted_hours),
                      "in_quota_hours": number(r.in_quota_hours), "borrowed_hours": number(r.borrowed_hours),
                      "idle_hours": number(r.idle_hours), "rate": number(r.rate), "cost": number(r.cost)}
                     for r in self.rows],
            "unallocated": [{"pool": u.pool, "resource": u.resource, "hours": number(u.hours), "cost": number(u.cost)}
                            for u in self.unallocated],
            "capacity": [{"pool": c.pool, "resource": c.resource, "hours": number(c.hours), "rate": number(c.rate),
                          "cost": number(c.cost)} for c in self.capacity],
            "reclaimed": [{"tenant": r.tenant, "resource": r.resource, "deactivations": r.deactivations,
                           "hours": number(r.hours)} for r in self.reclaimed],
            "budgets": [b.to_json(number) for b in self.budgets],
        }
        for section in ("rows", "unallocated", "capacity"):
            data[section] = [priced(entry, entry["pool"]) for entry in data[section]]
        return data


def unit_of(pool: GPUPool | None, resource: str) -> str:
    """The unit as declared: accelerator-hours for whole devices, slice-hours of the MIG profile."""
    if pool is not None:
        for profile in pool.model.mig_profiles.values():
            if mig_resource_name(profile.name) == resource:
                return f"{profile.name}-slice-hours"
        if resource == pool.model.resource:
            return "accelerator-hours"
    return f"{resource}-hours"


def rate_of(pool: GPUPool | None, resource: str) -> Decimal | None:
    if pool is None or pool.price_per_hour is None:
        return None
    if pool.hami_units is not None and resource in hami_views(pool) and resource != pool.hami_units.count:
        return None  # HAMi's memory and cores are views of the devices its vGPU slots are charged for
    weight = device_equivalents(pool).get(resource)
    if weight is None:
        return None
    return (pool.price_per_hour * weight).quantize(RATE, rounding=ROUND_HALF_EVEN)


def cost_center_of(model: Model, tenant: Tenant | None) -> str | None:
    """The tenant's own cost centre, else its nearest department's that has one."""
    if tenant is None:
        return None
    if tenant.cost_center:
        return tenant.cost_center
    for name in [tenant.department, *model.ancestors(tenant.department or "")]:
        department = model.departments.get(name or "")
        if department is not None and department.cost_center:
            return department.cost_center
    return None


def nominal(model: Model, tenant: str, pool: str, resource: str) -> Decimal:
    declared = model.tenants.get(tenant)
    if declared is None:
        return Decimal(0)
    return sum((rq.nominal for q in declared.quotas if q.pool == pool for rq in q.resources if rq.resource == resource),
               Decimal(0))


def in_quota_and_borrowed(found: Iterable[Segment], quota: Decimal) -> tuple[Decimal, Decimal]:
    """(total, borrowed) accelerator-seconds of one tenant's segments on one pool resource."""
    changes: dict[Any, Decimal] = defaultdict(Decimal)
    for s in found:
        changes[s.start] += s.amount
        changes[s.end] -= s.amount
    total = borrowed = Decimal(0)
    held = Decimal(0)
    times = sorted(changes)
    for at, following in pairwise(times):
        held += changes[at]
        span = seconds(following - at)
        total += held * span
        borrowed += max(Decimal(0), held - quota) * span
    return total, borrowed


def cluster_pools(model: Model, cluster: str) -> dict[str, GPUPool]:
    return {name: pool for name, pool in sorted(model.pools.items()) if model.pool_cluster(pool) == cluster}


def ledger(model: Model, cluster: str, window: Window, found: list[Segment],
           idle_seconds: dict[tuple[str, str, str], Decimal] | None = None, notes: Iterable[str] = (),
           reclaimed: Iterable[Reclaimed] = ()) -> Ledger:
    pools = cluster_pools(model, cluster)
    idle_seconds = idle_seconds or {}
    by_row: dict[tuple[str, str, str], list[Segment]] = defaultdict(list)
    for s in found:
        by_row[(s.tenant, s.pool, s.resource)].append(s)
    # Tenants with quota appear even when they held nothing: a guarantee unused is part of the story.
    for tenant in model.tenants.values():
        for quota in tenant.quotas:
            for rq in quota.resources:
                if quota.pool in pools and is_accelerator(rq.resource) and rq.resource in pools[quota.pool].capacity:
                    by_row.setdefault((tenant.name, quota.pool, rq.resource), [])
    extra = list(notes)
    rows = []
    for (tenant_name, pool_name, resource), segments in sorted(by_row.items()):
        pool = pools.get(pool_name)
        if pool is None:
            extra.append(f"tenant {tenant_name} held {resource} on {pool_name}, which is no declared pool of "
                         f"cluster {cluster}: it has no price and no capacity")
        total, borrowed = in_quota_and_borrowed(segments, nominal(model, tenant_name, pool_name, resource))
        admitted_hours, borrowed_hours = to_hours(total), to_hours(borrowed)
        idle_hours = min(to_hours(idle_seconds.get((tenant_name, pool_name, resource), Decimal(0))), admitted_hours)
        rate = rate_of(pool, resource)
        tenant = model.tenants.get(tenant_name)
        rows.append(Row(tenant_name, tenant.department if tenant else None, cost_center_of(model, tenant), pool_name,
                        resource, unit_of(pool, resource), admitted_hours, admitted_hours - borrowed_hours,
                        borrowed_hours, idle_hours, rate, None if rate is None else admitted_hours * rate))
    capacity, unallocated = [], []
    for pool_name, pool in pools.items():
        for resource, amount in pool.capacity.items():
            if not is_accelerator(resource):
                continue
            rate = rate_of(pool, resource)
            hours = to_hours(amount * window.seconds)
            capacity.append(PoolHours(pool_name, resource, hours, rate, None if rate is None else hours * rate))
            used = sum((r.admitted_hours for r in rows if r.pool == pool_name and r.resource == resource), Decimal(0))
            left = hours - used
            if left < 0:
                extra.append(f"pool {pool_name} {resource}: {decimal_string(used)} hours admitted, more than its "
                             f"declared capacity of {decimal_string(hours)} over the window")
            unallocated.append(PoolHours(pool_name, resource, left, None, None if rate is None else left * rate))
    currencies = tuple(sorted((name, pool.currency) for name, pool in pools.items() if pool.currency))
    taken = tuple(ReclaimedRow(r.tenant, r.resource, r.deactivations, to_hours(r.accelerator_seconds))
                  for r in reclaimed)
    return Ledger(cluster, window, tuple(rows), tuple(unallocated), tuple(capacity), tuple(extra), currencies, taken)


def closure(book: Ledger) -> list[str]:
    """Every priced pool resource whose rows + unallocated do not add up to its capacity (hours
    and cost); empty when the ledger closes."""
    broken = []
    for cap in book.capacity:
        rows = [r for r in book.rows if r.pool == cap.pool and r.resource == cap.resource]
        left = next(u for u in book.unallocated if u.pool == cap.pool and u.resource == cap.resource)
        hours = sum((r.admitted_hours for r in rows), Decimal(0)) + left.hours
        if hours != cap.hours:
            broken.append(f"{cap.pool} {cap.resource}: {hours} hours != capacity {cap.hours}")
        if cap.cost is not None:
            cost = sum((r.cost or Decimal(0) for r in rows), Decimal(0)) + (left.cost or Decimal(0))
            if cost != cap.cost:
                broken.append(f"{cap.pool} {cap.resource}: cost {cost} != capacity cost {cap.cost}")
    return broken
