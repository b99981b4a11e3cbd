"""Budgets in money (issue #27): a `cost` budget counts the usage ledger's cost, so the pools it is
spent in must price in one currency, and a pool without a price spends nothing of it."""

from __future__ import annotations

from collections.abc import Iterator

from gpugov.declarations.model import Holder, Model
from gpugov.declarations.timeline import holder_words
from gpugov.findings import Finding, Level, Location, make, rule
from gpugov.i18n import Joined, Text
from gpugov.policy.checks import check

MIXED_CURRENCIES = rule(
    "GG176",
    "budget-mixed-currencies",
    Level.ERROR,
    "A cost budget covers pools whose prices are in different currencies (or some name none): its spend "
    "would add amounts of different money.",
    "Give the budget in acceleratorHours, or split it into budgets of tenants whose pools price in one currency.",
)
UNPRICED_POOL = rule(
    "GG177",
    "budget-unpriced-pool",
    Level.WARNING,
    "A cost budget covers a pool without pricePerAcceleratorHour: what its tenants use there costs nothing "
    "against the budget.",
    "Declare the pool's pricePerAcceleratorHour and currency, or give the budget in acceleratorHours.",
)
NONE = "none"  # a priced pool that names no currency, among others that do


def _where(model: Model, holder: Holder) -> Location | None:
    decl = model.tenants.get(holder.name) if holder.kind == "Tenant" else model.departments.get(holder.name)
    return decl.at("budget", "cost") if decl is not None else None


@check
def check_cost_budgets(model: Model) -> Iterator[Finding]:
    for holder, budget, tenants in model.budget_holders():
        if budget.cost is None:
            continue
        pools = model.budget_pools(tenants)
        priced = [pool for pool in pools if pool.price_per_hour is not None]
        currencies = sorted({pool.currency or NONE for pool in priced})
        if len(currencies) > 1:
            by_currency = Joined(", ", [Text("{currency} ({pools})", currency=code, pools=", ".join(
                pool.name for pool in priced if (pool.currency or NONE) == code)) for code in currencies])
            yield make(MIXED_CURRENCIES, Text("the cost budget of {holder} covers pools priced in different "
                                              "currencies: {currencies}", holder=holder_words(holder),
                                              currencies=by_currency), _where(model, holder))
        unpriced = [pool.name for pool in pools if pool.price_per_hour is None]
        if unpriced:
            yield make(UNPRICED_POOL, Text("the cost budget of {holder} covers pools without a price, where use "
                                           "costs nothing against it: {pools}", holder=holder_words(holder),
                                           pools=", ".join(unpriced)), _where(model, holder))
