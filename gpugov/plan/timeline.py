"""The quota timeline in a plan (issue #27): each QuotaGrant and QuotaWindow of the head with when it
holds and what it borrows from whom, and a new or widened grant or window as a risk, like a quota raise."""

from __future__ import annotations

from dataclasses import dataclass

from gpugov.declarations.model import Holder, Model, QuotaGrant, QuotaWindow, ResourceQuota
from gpugov.declarations.schema import WEEKDAYS
from gpugov.declarations.timeline import rfc3339
from gpugov.findings import Level, rule
from gpugov.i18n import Text, _, localized
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


# Cells as Texts: English in the plan's JSON, the reader's language in its comment (issue #30).
EVERY_DAY, NEVER = Text("every day"), Text("never")


def _days(days: tuple[int, ...]) -> str:
    return ",".join(WEEKDAYS[d] for d in days) if len(days) < 7 else EVERY_DAY


def _holder(holder: Holder) -> str:
    """As Holder's str: "tenant 'a'", "department 'b'"."""
    if holder.kind == "Tenant":
        return Text("tenant '{name}'", name=holder.name)
    if holder.kind == "Department":
        return Text("department '{name}'", name=holder.name)
    return str(holder)


def _grant(grant: QuotaGrant) -> TimelineEntry:
    source = Text("pool '{pool}' capacity no one else is guaranteed", pool=grant.pool)
    return TimelineEntry("QuotaGrant", grant.name, grant.pool, _amounts(grant.resources),
                         rfc3339(grant.starts) if grant.starts else "?", rfc3339(grant.ends) if grant.ends else NEVER,
                         source, _holder(Holder("Tenant", grant.tenant)), grant.reason, grant.approved_by)


def _window(window: QuotaWindow) -> TimelineEntry:
    opens, closes = f"{window.start:%H:%M}", f"{window.end:%H:%M}"
    start = Text("{days} {time} {zone}", days=_days(window.weekdays), time=opens, zone=window.time_zone)
    end = Text("{time} (next day)", time=closes) if window.end <= window.start else closes
    return TimelineEntry("QuotaWindow", window.name, window.pool, _amounts(window.resources), start, end,
                         _holder(window.donor), _holder(window.recipient), window.reason, window.approved_by)


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
        found.append(risk(TIMELINE_WIDENED, _widened(entry, new=before is None)))
    return found


def _widened(entry: TimelineEntry, *, new: bool) -> str:
    fields = {"kind": entry.kind, "name": entry.name, "resources": entry.resources, "pool": entry.pool,
              "to": entry.to, "start": entry.start, "end": entry.end, "source": entry.borrows_from}
    if new:
        return Text("{kind} {name} adds {resources} of pool '{pool}' for {to}, {start} → {end}, from {source}",
                    **fields)
    return Text("{kind} {name} changes {resources} of pool '{pool}' for {to}, {start} → {end}, from {source}",
                **fields)


def markdown_rows(entries: list[TimelineEntry]) -> list[str]:
    """The plan's timeline table (empty without a grant or window)."""
    if not entries:
        return []
    header = (_("kind"), _("name"), _("pool"), _("resources"), _("start"), _("end"), _("borrowed from"), _("to"),
              _("reason"))
    out = [_("**Quota timeline**"), "", "| " + " | ".join(header) + " |", "|---|---|---|---|---|---|---|---|---|"]
    out += [f"| {e.kind} | {e.name} | {e.pool} | {e.resources} | {localized(e.start)} | {localized(e.end)} | "
            f"{localized(e.borrows_from)} | {localized(e.to)} | {' '.join(e.reason.split()).replace('|', '/')} |"
            for e in entries]
    return [*out, ""]
