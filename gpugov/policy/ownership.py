"""Every tenant has owners and a cost centre, as the guardrails require."""

from __future__ import annotations

from collections.abc import Iterator

from gpugov.declarations.model import Model
from gpugov.findings import Finding, Level, make, rule
from gpugov.policy import check

OWNER_MISSING = rule(
    "GG070",
    "owner-missing",
    Level.ERROR,
    "A tenant names no owner (user or group), so nobody can be asked about its quota.",
    "Add spec.owners.users or spec.owners.groups.",
)
COST_CENTER_MISSING = rule(
    "GG071",
    "cost-center-missing",
    Level.ERROR,
    "A tenant has no cost centre, so its GPU use cannot be charged back.",
    "Add spec.costCenter.",
)


@check
def check_ownership(model: Model) -> Iterator[Finding]:
    limits = model.limits
    for tenant in model.tenants.values():
        if limits.require_owner and tenant.owners.empty:
            yield make(OWNER_MISSING, f"tenant '{tenant.name}' has no owners", tenant.name_at())
        if limits.require_cost_center and not tenant.cost_center:
            yield make(
                COST_CENTER_MISSING,
                f"tenant '{tenant.name}' has no costCenter",
                tenant.name_at(),
            )
