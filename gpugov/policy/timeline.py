"""Quota over time (issue #27): grants and windows refer to what exists, and the pools hold what they
guarantee at every instant from now on, not only now.

The model changes only at a boundary (a grant's start or end, a window's opening or closing). Between
two grant boundaries the grants in force are fixed and the windows repeat every week, so checking the
segment's first instant and every window boundary in its first eight days sees every state the
declarations make from `model.now` on (or, without a clock, at any time). A window moves quota inside
one pool, so it never raises what the pool guarantees: an overcommit is always some grant's, and it
is reported at the grant whose start made the overlap (the latest one in force), the others related.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from gpugov.declarations.model import Holder, Model, QuotaGrant, QuotaWindow, ResourceQuota
from gpugov.declarations.timeline import boundaries, grant_active, holder_words, model_at, rfc3339, zone
from gpugov.findings import Finding, Level, make, rule
from gpugov.i18n import Text
from gpugov.kube.quantity import format_quantity
from gpugov.policy.checks import check

TIMELINE_OVERCOMMIT = rule(
    "GG170",
    "grant-overcommits",
    Level.ERROR,
    "At some instant from now on, the grants in force raise what a pool guarantees above its capacity times the "
    "guardrail ratio (grants that overlap, or one too large). Reported at the resource line of the grant whose "
    "start makes the overlap, with the instant and the other grants in force.",
    "Shorten or move one of the grants so they do not overlap, lower one, or add capacity for the period.",
)
TIMELINE_REFERENCE = rule(
    "GG171",
    "timeline-unknown-reference",
    Level.ERROR,
    "A QuotaGrant or QuotaWindow names a tenant, department or pool that is not declared, or a resource the pool "
    "does not offer.",
    "Name a declared Tenant, Department and GPUPool, and a resource of that pool.",
)
GRANT_WITHOUT_END = rule(
    "GG172",
    "grant-without-end",
    Level.WARNING,
    "A QuotaGrant has no `until`: a temporary quota that never ends is a permanent one without the review.",
    "Give it an end (spec.until), or raise the tenant's quota in its spec.quotas instead.",
)
GRANT_EXPIRED = rule(
    "GG173",
    "grant-expired",
    Level.WARNING,
    "A QuotaGrant ended before now: it no longer changes any quota.",
    "Remove the grant's file (its history stays in Git).",
)
WINDOW_DONOR_SHORT = rule(
    "GG174",
    "window-takes-more-than-held",
    Level.ERROR,
    "A QuotaWindow moves more of a resource than its donor's nominal quota in the pool holds (without any grant).",
    "Move at most what the donor holds in that pool, or give the donor that quota.",
)
TIMELINE_BAD_TIME = rule(
    "GG175",
    "timeline-bad-time",
    Level.ERROR,
    "A grant's from/until is no date (e.g. 30 February), its until is not after its from, or a window's time "
    "zone is not an IANA zone this system knows.",
    "Write real instants in RFC 3339 with a zone, until after from, and a time zone such as Europe/Berlin.",
)

_SCAN = timedelta(days=8)  # a week of a segment, a day wider for a zone's offset
_REFERENCE = datetime(2000, 1, 3, tzinfo=UTC)  # a Monday: where a clockless check of windows alone looks


@check
def check_times(model: Model) -> Iterator[Finding]:
    for grant in model.grants.values():
        if grant.starts is None:
            yield make(TIMELINE_BAD_TIME, Text("grant '{grant}': from is no date", grant=grant.name), grant.at("from"))
        if grant.ends_declared and grant.ends is None:
            yield make(TIMELINE_BAD_TIME, Text("grant '{grant}': until is no date", grant=grant.name),
                       grant.at("until"))
        elif grant.starts and grant.ends and grant.ends <= grant.starts:
            yield make(TIMELINE_BAD_TIME, Text("grant '{grant}': until {until} is not after from {start}",
                                               grant=grant.name, until=rfc3339(grant.ends),
                                               start=rfc3339(grant.starts)), grant.at("until"))
        if not grant.ends_declared:
            yield make(GRANT_WITHOUT_END, Text("grant '{grant}' gives tenant '{tenant}' quota in pool '{pool}' with no "
                                               "end", grant=grant.name, tenant=grant.tenant, pool=grant.pool),
                       grant.at("from"))
        elif grant.ends and model.now and grant.ends <= model.now:
            yield make(GRANT_EXPIRED, Text("grant '{grant}' ended at {end}: remove it", grant=grant.name,
                                           end=rfc3339(grant.ends)),
                       grant.name_at())
    for window in model.windows.values():
        if zone(window.time_zone) is None:
            yield make(TIMELINE_BAD_TIME, Text("window '{window}': unknown time zone '{zone}'", window=window.name,
                                               zone=window.time_zone),
                       window.at("timeZone"))


def _holder_known(model: Model, holder: Holder) -> bool:
    return holder.name in (model.tenants if holder.kind == "Tenant" else model.departments)


def _resources(model: Model, decl: QuotaGrant | QuotaWindow) -> Iterator[Finding]:
    pool = model.pools.get(decl.pool)
    if pool is None:
        yield make(TIMELINE_REFERENCE, Text("{decl}: unknown pool '{pool}'", decl=decl.name, pool=decl.pool),
                   decl.at("pool"))
        return
    for rq in decl.resources:
        if rq.resource not in pool.capacity:
            yield make(TIMELINE_REFERENCE, Text("{decl}: pool '{pool}' offers no {resource} (it offers {offered})",
                                                decl=decl.name, pool=pool.name, resource=rq.resource,
                                                offered=", ".join(pool.capacity) or Text("nothing")), decl.at("resources", rq.key, key=True))


@check
def check_timeline_references(model: Model) -> Iterator[Finding]:
    for grant in model.grants.values():
        if grant.tenant not in model.tenants:
            yield make(TIMELINE_REFERENCE, Text("{decl}: unknown tenant '{tenant}'", decl=grant.name,
                                                tenant=grant.tenant), grant.at("tenant"))
        yield from _resources(model, grant)
    for window in model.windows.values():
        for role, holder in (("donor", window.donor), ("recipient", window.recipient)):
            if not _holder_known(model, holder):
                yield make(TIMELINE_REFERENCE, Text("{decl}: unknown {holder}", decl=window.name,
                                                    holder=holder_words(holder)), window.at(role, holder.kind.lower()))
        yield from _resources(model, window)


@check
def check_window_donors(model: Model) -> Iterator[Finding]:
    for window in model.windows.values():
        holder = window.donor
        decl = (model.tenants if holder.kind == "Tenant" else model.departments).get(holder.name)
        if decl is None or window.pool not in model.pools:
            continue  # GG171
        held = {rq.key: rq.nominal for q in decl.quotas if q.pool == window.pool for rq in q.resources}
        for rq in window.resources:
            if rq.nominal > held.get(rq.key, Decimal(0)):
                yield make(WINDOW_DONOR_SHORT, Text("window '{window}' moves {amount} {key} of pool '{pool}' from "
                                                    "{holder}, which holds {held}", window=window.name,
                                                    amount=format_quantity(rq.nominal), key=rq.key, pool=window.pool,
                                                    holder=holder_words(holder),
                                                    held=format_quantity(held.get(rq.key, Decimal(0)))),
                           window.at("resources", rq.key))


def instants_to_check(model: Model) -> list[datetime]:
    """Every instant whose state differs from the others' from model.now on (see the module's doc)."""
    edges = sorted({t for g in model.grants.values() for t in (g.starts, g.ends) if t is not None})
    if model.now is not None:
        first = model.now
    elif edges:
        first = edges[0] - _SCAN
    else:
        first = _REFERENCE
    starts = [first, *(t for t in edges if t > first)]
    found: set[datetime] = set()
    for index, start in enumerate(starts):
        end = min(starts[index + 1] if index + 1 < len(starts) else start + _SCAN, start + _SCAN)
        found.add(start)
        found.update(t for t in boundaries(model, start, end) if t < end)
    return sorted(found)


def _in_force(model: Model, at: datetime, pool: str, resource: str) -> list[tuple[QuotaGrant, ResourceQuota]]:
    return sorted(((g, rq) for g in model.grants.values() if g.pool == pool and grant_active(g, at)
                   for rq in g.resources if rq.resource == resource and rq.nominal > 0),
                  key=lambda pair: (pair[0].starts or at, pair[0].name))


@check
def check_capacity_over_time(model: Model) -> Iterator[Finding]:
    if not model.grants:
        return  # a window moves quota inside a pool: it never raises what the pool guarantees
    declared = model.guaranteed()
    reported: set[tuple[str, str, str]] = set()
    for at in instants_to_check(model):
        totals = model_at(model, at).guaranteed()
        for (pool_name, resource), total in totals.items():
            pool = model.pools[pool_name]
            limit = pool.capacity.get(resource, Decimal(0)) * model.limits.ratio_for(pool_name)
            if total <= limit or total <= declared.get((pool_name, resource), Decimal(0)):
                continue  # fits, or over without any grant (GG030's)
            grants = _in_force(model, at, pool_name, resource)
            if not grants:
                continue
            grant, rq = grants[-1]  # the latest start: the grant that made the overlap
            if (grant.name, pool_name, resource) in reported:
                continue
            reported.add((grant.name, pool_name, resource))
            others = ", ".join(f"'{g.name}' (+{format_quantity(q.nominal)})" for g, q in grants[:-1])
            fields = {"grant": grant.name, "amount": format_quantity(rq.nominal), "key": rq.key, "pool": pool_name,
                      "at": rfc3339(at), "total": format_quantity(total), "resource": resource,
                      "capacity": format_quantity(limit), "others": others}
            yield make(
                TIMELINE_OVERCOMMIT,
                Text("grant '{grant}' (+{amount} {key}) overcommits pool '{pool}' at {at}: {total} {resource} "
                     "guaranteed, capacity {capacity}; also in force: {others}", **fields) if others else
                Text("grant '{grant}' (+{amount} {key}) overcommits pool '{pool}' at {at}: {total} {resource} "
                     "guaranteed, capacity {capacity}", **fields),
                grant.at("resources", rq.key),
                *(g.at("resources", q.key) for g, q in grants[:-1]),
            )
