"""GPU-hour budgets (issue #27): what a tenant or department spent of its budget this period.

Spent = the accelerator-hours the usage ledger admitted since the period began (UTC: the 1st of
the month, or Monday), each pool resource weighed by its share of a device (a MIG slice its
compute slices, a HAMi vGPU slot 1/deviceSplitCount; HAMi's memory and core units, views of the
same devices, weigh nothing), as the ledger prices them. A cost budget (`cost` instead of
`acceleratorHours`) spends the ledger's cost of the same rows, in the currency of the holder's pools
(validate refuses pools of different currencies, GG176). A department spends what the tenants
below it (at any depth) spend. Pure: the ledger rows and the model in, the statuses out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal

from gpugov.declarations.equivalents import device_equivalents, hami_views
from gpugov.declarations.model import Budget, Holder, Model
from gpugov.declarations.timeline import holder_words
from gpugov.findings import Finding, Level, make, rule
from gpugov.i18n import Text, localized
from gpugov.queueing.workload import Workload
from gpugov.usage.attribution import Attribution
from gpugov.usage.ledger import HOURS, BudgetLine, Row, decimal_string, ledger
from gpugov.usage.segments import segments
from gpugov.usage.window import Window

BUDGET_ALERT = rule("GD050", "budget-threshold", Level.WARNING,
                    "A tenant or department has spent an alert threshold of its GPU-hour or cost budget this "
                    "period.",
                    "Raise spec.budget.acceleratorHours (or cost) in Git, or slow down until the period renews.")
BUDGET_SPENT = rule("GD051", "budget-spent", Level.ERROR,
                    "A tenant or department has spent its whole GPU-hour or cost budget this period (with action "
                    "hold: its ClusterQueues admit nothing new until the period renews).",
                    "Raise spec.budget.acceleratorHours (or cost) in Git; what runs is never evicted.")
HOLD = "hold"
HOURS_UNIT = "accelerator-hours"
NO_CURRENCY = "price units"  # a cost budget over pools whose price names no currency


def unit_words(unit: str) -> str:
    """A budget's unit as the reader reads it: accelerator-hours, price units, or a currency's code."""
    words = {HOURS_UNIT: Text("accelerator-hours"), NO_CURRENCY: Text("price units")}
    return localized(words[unit]) if unit in words else unit


@dataclass(frozen=True)
class Period:
    label: str  # 2026-12 or 2026-W49
    since: datetime
    until: datetime  # the next period's start


def period_of(kind: str, now: datetime) -> Period:
    """The UTC calendar month or ISO week that holds `now`."""
    now = now.astimezone(UTC)
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if kind == "week":
        start = day - timedelta(days=day.weekday())
        year, week, _ = start.isocalendar()
        return Period(f"{year}-W{week:02d}", start, start + timedelta(days=7))
    start = day.replace(day=1)
    following = (start + timedelta(days=32)).replace(day=1)
    return Period(f"{start:%Y-%m}", start, following)


@dataclass(frozen=True)
class BudgetStatus:
    holder: Holder
    budget: Budget
    period: Period
    spent: Decimal  # in the budget's unit: accelerator-hours, or money for a cost budget
    tenants: tuple[str, ...]  # whose ClusterQueues a hold stops: the tenant, or a department's tenants
    currency: str | None = None  # a cost budget's: the ISO 4217 code of its pools' prices, where they name one

    @property
    def unit(self) -> str:
        """What spent and the budget count: accelerator-hours, or the currency of a cost budget."""
        if self.budget.cost is None:
            return HOURS_UNIT
        return self.currency or NO_CURRENCY

    @property
    def percent(self) -> Decimal:
        return (self.spent * 100 / self.budget.amount).quantize(Decimal("0.1"), rounding=ROUND_HALF_EVEN)

    @property
    def crossed(self) -> tuple[int, ...]:
        """The alert thresholds reached (spent >= threshold% of the budget), ascending."""
        return tuple(t for t in self.budget.alerts if self.spent * 100 >= self.budget.amount * t)

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.budget.amount

    @property
    def hold(self) -> bool:
        return self.exhausted and self.budget.action == HOLD

    def line(self) -> BudgetLine:
        """For the ledger's budgets section (`gpugov usage`)."""
        return BudgetLine(holder_words(self.holder), self.period.label, f"{self.period.since:%Y-%m-%dT%H:%M:%SZ}", self.spent,
                          self.budget.amount, self.percent, self.budget.action, self.hold, self.unit,
                          self.budget.cost is not None, self.currency)

    def alert_message(self, threshold: int) -> str:
        """Stable for one holder, period and threshold: the deduplication key of its notification."""
        per = {"month": Text("a month"), "week": Text("a week")}.get(self.budget.period, f"a {self.budget.period}")
        # the share as one field: a "%" followed by " of" in a message reads to gettext as a printf conversion
        fields = {"holder": holder_words(self.holder), "share": f"{threshold}%", "period": self.period.label,
                  "amount": decimal_string(self.budget.amount), "unit": self.unit, "per": per}
        if self.budget.cost is None:
            return Text("{holder} reached {share} of its GPU-hour budget for {period} ({amount} {unit} {per})",
                        **fields)
        return Text("{holder} reached {share} of its cost budget for {period} ({amount} {unit} {per})", **fields)


def device_hours(model: Model, row: Row) -> Decimal:
    """A ledger row's admitted hours in whole-device hours (0 for what is no device: HAMi's views)."""
    pool = model.pools.get(row.pool)
    if pool is None:
        return Decimal(0)
    if pool.hami_units is not None and row.resource in hami_views(pool) and row.resource != pool.hami_units.count:
        return Decimal(0)
    weight = device_equivalents(pool).get(row.resource)
    return Decimal(0) if weight is None else (row.admitted_hours * weight).quantize(HOURS, rounding=ROUND_HALF_EVEN)


def budget_holders(model: Model) -> list[tuple[Holder, Budget, tuple[str, ...]]]:
    """Every declared budget: (holder, budget, the tenants it covers), tenants before departments, by name."""
    return model.budget_holders()


def budget_currency(model: Model, tenants: tuple[str, ...]) -> str | None:
    """The currency a cost budget over these tenants counts in: that of their priced pools (validate
    refuses several, GG176); None where no priced pool names one."""
    codes = sorted({pool.currency for pool in model.budget_pools(tenants)
                    if pool.price_per_hour is not None and pool.currency})
    return codes[0] if codes else None


def budget_statuses(model: Model, rows_by_period: dict[str, Iterable[Row]], now: datetime) -> list[BudgetStatus]:
    """Each declared budget against the ledger rows of its period (`rows_by_period[budget.period]`:
    the rows of a ledger whose window is period_of(budget.period, now) up to now)."""
    hours_by_period: dict[str, dict[str, Decimal]] = {}
    cost_by_period: dict[str, dict[str, Decimal]] = {}
    for kind, rows in rows_by_period.items():
        hours: dict[str, Decimal] = {}
        cost: dict[str, Decimal] = {}
        for row in rows:
            hours[row.tenant] = hours.get(row.tenant, Decimal(0)) + device_hours(model, row)
            cost[row.tenant] = cost.get(row.tenant, Decimal(0)) + (row.cost or Decimal(0))  # unpriced: GG177
        hours_by_period[kind], cost_by_period[kind] = hours, cost
    statuses = []
    for holder, budget, tenants in budget_holders(model):
        by_tenant = (hours_by_period if budget.cost is None else cost_by_period).get(budget.period, {})
        total = sum((by_tenant.get(t, Decimal(0)) for t in tenants), Decimal(0))
        currency = budget_currency(model, tenants) if budget.cost is not None else None
        statuses.append(BudgetStatus(holder, budget, period_of(budget.period, now), total, tenants, currency))
    return statuses


def held_tenants(statuses: Iterable[BudgetStatus]) -> frozenset[str]:
    """The tenants whose ClusterQueues a spent `hold` budget (their own or a department's) stops."""
    return frozenset(t for s in statuses if s.hold for t in s.tenants)


@dataclass(frozen=True)
class Alert:
    key: str  # holder/period/threshold: each is notified once (gpugov budget keeps one dedup entry per key)
    finding: Finding


def alerts(model: Model, statuses: Iterable[BudgetStatus]) -> list[Alert]:
    """One finding per threshold crossed this period, at the budget's line in the declaration."""
    found = []
    for status in statuses:
        holder = status.holder
        decl = model.tenants.get(holder.name) if holder.kind == "Tenant" else model.departments.get(holder.name)
        where = decl.at("budget") if decl is not None else None
        for threshold in status.crossed:
            spent = BUDGET_SPENT if threshold >= 100 else BUDGET_ALERT
            found.append(Alert(f"{holder.kind}/{holder.name}/{status.period.label}/{threshold}",
                               make(spent, status.alert_message(threshold), where, holder=str(holder),
                                    period=status.period.label, threshold=str(threshold))))
    return found


class UnplacedAdmission(ValueError):
    """An admission of this period that cannot be placed in a pool: the spend would be short."""


def period_rows(model: Model, cluster: str, workloads: list[Workload], rules: Attribution,
                now: datetime) -> dict[str, tuple[Row, ...]]:
    """The ledger rows of each period a declared budget renews in, from its start up to `now`."""
    rows: dict[str, tuple[Row, ...]] = {}
    for kind in sorted({budget.period for _, budget, _ in budget_holders(model)}):
        period = period_of(kind, now)
        window = Window(period.since, max(period.since, now.astimezone(UTC).replace(microsecond=0)))
        found, unplaced = segments(workloads, window, now, rules.tenant_of, rules.offers)
        if unplaced:
            first = unplaced[0]
            raise UnplacedAdmission(f"{len(unplaced)} admission(s) of {period.label} cannot be placed in a pool, e.g. "
                           f"{first.workload} ({first.seconds} s): {first.why}")
        rows[kind] = ledger(model, cluster, window, found).rows
    return rows


def volcano_period_rows(model: Model, cluster: str, pods: list[dict], nodes: list[dict],
                        now: datetime) -> dict[str, tuple[Row, ...]]:
    """As period_rows, on a Volcano cluster: the ledger rows of each budget period from the pods Volcano
    bound (gpugov.usage.volcano, as `gpugov usage` counts them), read once for every period."""
    from gpugov.usage.volcano import pod_segments

    owners = model.tenant_of_namespace()
    rows: dict[str, tuple[Row, ...]] = {}
    for kind in sorted({budget.period for _, budget, _ in budget_holders(model)}):
        period = period_of(kind, now)
        window = Window(period.since, max(period.since, now.astimezone(UTC).replace(microsecond=0)))
        rows[kind] = ledger(model, cluster, window, pod_segments(pods, nodes, window, now, owners)).rows
    return rows
