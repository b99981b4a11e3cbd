"""The quota timeline in a plan (issue #27): each QuotaGrant and QuotaWindow of the head with when it
holds and what it borrows from whom, and a new or widened grant or window as a risk, like a quota raise."""

from __future__ import annotations

from dataclasses import dataclass

from gpugov.declarations.model import Model, QuotaGrant, QuotaWindow, ResourceQuota
from gpugov.declarations.schema import WEEKDAYS
from gpugov.declarations.timeline import rfc3339
from gpugov.findings import Level, rule
from gpugov.i18n import _
from gpugov.kube.quantity import format_quantity
from gpugov.plan.risks import Risk, risk

TIMELINE_WIDENED = rule("GP030", "quota-timeline-widened", Level.WARNING,
                        "A QuotaGrant or QuotaWindow is added, or one changes (more resources, a longer period, "
                        "another tenant): a quota raise for a period, to review as one.")


@dataclass(frozen=True)
class TimelineEntry:
    """One row of the plan's timeline: a grant or a window, when it holds and what it moves."""

    kind: str  # QuotaGrant | QuotaWindow
    name: str
    pool: str
    resources: str  # "8 accelerators, 2 1g.10gb"
    start: str  # a grant: RFC 3339; a window: "Mon-Fri 20:00 Asia/Shanghai"
    end: str  # a grant: RFC 3339 or "never"; a window: "08:00 (next day)"
    borrows_from: str  # a grant: the pool's spare capacity; a window: its donor
    to: str
    reason: str
    approved_by: tuple[str, ...]


def _amounts(resources: tuple[ResourceQuota, ...]) -> str:
    return ", ".join(f"{format_quantity(rq.nominal)} {rq.key}" for rq in resources)


def _days(days: tuple[int, ...]) -> str:
    return ",".join(WEEKDAYS[d] for d in days) if len(days) < 7 else "every day"


def _grant(grant: QuotaGrant) -> TimelineEntry:
    return TimelineEntry("QuotaGrant", grant.name, grant.pool, _amounts(grant.resources),
                         rfc3339(grant.starts) if grant.starts else "?", rfc3339(grant.ends) if grant.ends else "never",
                         f"pool '{grant.pool}' capacity no one else is guaranteed", f"tenant '{grant.tenant}'",
                         grant.reason, grant.approved_by)


def _window(window: QuotaWindow) -> TimelineEntry:
    overnight = " (next day)" if window.end <= window.start else ""
    return TimelineEntry("QuotaWindow", window.name, window.pool, _amounts(window.resources),
                         f"{_days(window.weekdays)} {window.start:%H:%M} {window.time_zone}",
                         f"{window.end:%H:%M}{overnight}", str(window.donor), str(window.recipient),
                         window.reason, window.approved_by)


def timeline(model: Model) -> list[TimelineEntry]:
    """Every grant (by start) and window (by name) of `model`."""
    grants = sorted(model.grants.values(), key=lambda g: (g.starts is None, g.starts and rfc3339(g.starts), g.name))
    return [*map(_grant, grants), *map(_window, sorted(model.windows.values(), key=lambda w: w.name))]


def timeline_risks(base: Model, head: Model) -> list[Risk]:
    """GP030 for each grant or window that is new, or whose row (what, when, from whom, to whom) changed."""
    old = {(e.kind, e.name): e for e in timeline(base)}
    found = []
    for entry in timeline(head):
        before = old.get((entry.kind, entry.name))
        if before is not None and (before.pool, before.resources, before.start, before.end, before.borrows_from,
                                   before.to) == (entry.pool, entry.resources, entry.start, entry.end,
                                                  entry.borrows_from, entry.to):
            continue
        verb = "adds" if before is None else "changes"
        found.append(risk(TIMELINE_WIDENED, f"{entry.kind} {entry.name} {verb} {entry.resources} of pool "
                          f"'{entry.pool}' for {entry.to}, {entry.start} → {entry.end}, from {entry.borrows_from}"))
    return found


def markdown_rows(entries: list[TimelineEntry]) -> list[str]:
    """The plan's timeline table (empty without a grant or window)."""
    if not entries:
        return []
    header = (_("kind"), _("name"), _("pool"), _("resources"), _("start"), _("end"), _("borrowed from"), _("to"),
              _("reason"))
    out = [_("**Quota timeline**"), "", "| " + " | ".join(header) + " |", "|---|---|---|---|---|---|---|---|---|"]
    out += [f"| {e.kind} | {e.name} | {e.pool} | {e.resources} | {e.start} | {e.end} | {e.borrows_from} | {e.to} | "
            f"{' '.join(e.reason.split()).replace('|', '/')} |" for e in entries]
    return [*out, ""]
