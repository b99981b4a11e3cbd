"""Quota over time (issue #27): grants and recurring windows, and the model they make at an instant.

A QuotaGrant adds resources to a tenant's nominal quota in a pool from one instant until another; a
QuotaWindow moves resources of a pool from a donor's nominal quota to a recipient's on some weekdays
between two local clock times. `model_at(model, t)` is the organisation as it holds at `t`: a pure
function of the declarations and the instant (nothing here reads the clock; the CLI reads it once per
command and passes it down). Between two boundaries (a grant's start or end, a window's opening or
closing) the model does not change, so what is compiled for any instant of a segment is the same,
byte for byte: `segment` names that span, and the objects carry it (gpugov.io/desired-at).
"""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from gpugov.declarations.model import (
    Department,
    Holder,
    Model,
    PoolQuota,
    QuotaGrant,
    QuotaWindow,
    ResourceQuota,
    Tenant,
)
from gpugov.declarations.schema import WEEKDAYS
from gpugov.findings import Locator
from gpugov.i18n import Text

WEEK = timedelta(days=7)
HORIZON = timedelta(days=90)  # how far ahead validate checks every boundary


def holder_words(holder: Holder) -> Text:
    """str(holder) (tenant 'a', department 'b') in the reader's language, for a finding's message."""
    if holder.kind == "Tenant":
        return Text("tenant '{tenant}'", tenant=holder.name)
    return Text("department '{department}'", department=holder.name)


def parse_instant(text: str) -> datetime | None:
    """An RFC 3339 instant with a zone (the schema's pattern) as an aware datetime; None when it is
    no date (30 February) or has no zone."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def zone(name: str) -> ZoneInfo | None:
    """The IANA time zone, None when the system's zoneinfo does not know it (GG175)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def build_grant(name: str, doc: Locator, spec: dict[str, Any], resources: tuple[ResourceQuota, ...]) -> QuotaGrant:
    until = spec.get("until")
    return QuotaGrant(
        name,
        doc,
        tenant=spec["tenant"],
        pool=spec["pool"],
        resources=resources,
        starts=parse_instant(spec["from"]),
        ends=parse_instant(until) if until else None,
        ends_declared=until is not None,
        reason=spec["reason"],
        approved_by=tuple(spec["approvedBy"]),
    )


def _holder(entry: dict[str, str]) -> Holder:
    return Holder("Tenant", entry["tenant"]) if "tenant" in entry else Holder("Department", entry["department"])


def build_window(name: str, doc: Locator, spec: dict[str, Any], resources: tuple[ResourceQuota, ...]) -> QuotaWindow:
    """A window from its spec with the schema's defaults filled in (schema.defaulted)."""
    return QuotaWindow(
        name,
        doc,
        pool=spec["pool"],
        donor=_holder(spec["donor"]),
        recipient=_holder(spec["recipient"]),
        resources=resources,
        weekdays=tuple(sorted(WEEKDAYS.index(day) for day in spec["weekdays"])),
        start=time.fromisoformat(spec["start"]),
        end=time.fromisoformat(spec["end"]),
        time_zone=spec["timeZone"],
        reason=spec["reason"],
        approved_by=tuple(spec["approvedBy"]),
    )


def grant_active(grant: QuotaGrant, at: datetime) -> bool:
    if grant.starts is None or (grant.ends_declared and grant.ends is None):
        return False  # an instant that is no date applies nowhere (GG175 says so)
    return grant.starts <= at and (grant.ends is None or at < grant.ends)


def _openings(window: QuotaWindow, first: date, last: date) -> list[tuple[datetime, datetime]]:
    """(opens, closes) of every opening on a local day from `first` to `last`, in UTC."""
    tz = zone(window.time_zone)
    if tz is None:
        return []
    spans = []
    day = first
    while day <= last:
        if day.weekday() in window.weekdays:
            closes_on = day + timedelta(days=1) if window.end <= window.start else day
            opens = datetime.combine(day, window.start, tz).astimezone(UTC)
            closes = datetime.combine(closes_on, window.end, tz).astimezone(UTC)
            spans.append((opens, closes))
        day += timedelta(days=1)
    return spans


def _around(window: QuotaWindow, at: datetime, before: timedelta, after: timedelta) -> list[tuple[datetime, datetime]]:
    # Local days a day wider than asked: a zone's offset moves the local date by up to a day.
    return _openings(window, (at - before).date() - timedelta(days=1), (at + after).date() + timedelta(days=1))


def window_open(window: QuotaWindow, at: datetime) -> bool:
    return any(opens <= at < closes for opens, closes in _around(window, at, timedelta(days=1), timedelta(0)))


def boundaries(model: Model, start: datetime, end: datetime) -> list[datetime]:
    """Every instant in [start, end] where the model changes: grants' starts and ends, windows'
    openings and closings, sorted and in UTC."""
    found: set[datetime] = set()
    for grant in model.grants.values():
        found.update(t for t in (grant.starts, grant.ends) if t is not None)
    for window in model.windows.values():
        for span in _around(window, start, timedelta(0), end - start):
            found.update(span)
    return sorted(t.astimezone(UTC) for t in found if start <= t <= end)


def segment(model: Model, at: datetime) -> tuple[datetime | None, datetime | None]:
    """The span around `at` in which nothing changes: (the last boundary at or before it, the first
    after it); None where there is none. A window opens at least once a week, so a week around
    `at` holds its boundaries on either side."""
    near = boundaries(model, at - WEEK - timedelta(days=1), at + WEEK + timedelta(days=1))
    grants = [t for g in model.grants.values() for t in (g.starts, g.ends) if t is not None]
    everything = sorted({*near, *(t.astimezone(UTC) for t in grants)})
    before = [t for t in everything if t <= at]
    after = [t for t in everything if t > at]
    return (before[-1] if before else None, after[0] if after else None)


def rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def desired_at(model: Model) -> str | None:
    """The value of gpugov.io/desired-at for a model at an instant: the ISO 8601 interval in which
    its quotas hold (`start/end`, `..` for an open end), so applying it again anywhere inside that
    span changes nothing. None for a model without a timeline or without an instant."""
    if model.instant is None or not model.has_timeline:
        return None
    start, end = segment(model, model.instant)
    return f"{rfc3339(start) if start else '..'}/{rfc3339(end) if end else '..'}"


def _added(quotas: tuple[PoolQuota, ...], pool: str, change: tuple[ResourceQuota, ...], sign: int) -> tuple[PoolQuota, ...]:
    """`quotas` with `change`'s nominals added (sign 1) or taken (sign -1, never below zero) in `pool`."""
    entries = list(quotas)
    index = next((i for i, q in enumerate(entries) if q.pool == pool), None)
    if index is None:
        if sign < 0:
            return quotas  # nothing to take: policy reports the window (GG174)
        entries.append(PoolQuota(pool, len(entries), ()))
        index = len(entries) - 1
    resources = {rq.key: rq for rq in entries[index].resources}
    for rq in change:
        held = resources.get(rq.key) or ResourceQuota(rq.key, rq.resource, Decimal(0))
        nominal = max(held.nominal + sign * rq.nominal, Decimal(0))
        lending = None if held.lending_limit is None else min(held.lending_limit, nominal)  # Kueue: lending <= nominal
        resources[rq.key] = replace(held, nominal=nominal, lending_limit=lending)
    entries[index] = replace(entries[index], resources=tuple(resources.values()))
    return tuple(entries)


def model_at(model: Model, at: datetime) -> Model:
    """The model as it holds at `at`: every grant active then added, every window open then applied.
    The declarations' own objects are not changed; a model without a timeline comes back as a copy
    that only records the instant."""
    tenants: dict[str, Tenant] = dict(model.tenants)
    departments: dict[str, Department] = dict(model.departments)

    def change(holder: Holder, pool: str, resources: tuple[ResourceQuota, ...], sign: int) -> None:
        table: dict[str, Any] = tenants if holder.kind == "Tenant" else departments
        decl = table.get(holder.name)
        if decl is not None:
            table[holder.name] = replace(decl, quotas=_added(decl.quotas, pool, resources, sign))

    for grant in sorted(model.grants.values(), key=lambda g: g.name):
        if grant_active(grant, at):
            change(Holder("Tenant", grant.tenant), grant.pool, grant.resources, 1)
    for window in sorted(model.windows.values(), key=lambda w: w.name):
        if window_open(window, at):
            change(window.donor, window.pool, window.resources, -1)
            change(window.recipient, window.pool, window.resources, 1)
    effective = copy.copy(model)
    effective.tenants, effective.departments, effective.instant = tenants, departments, at
    effective.declared = model.declared or model
    return effective
