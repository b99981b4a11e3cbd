"""The quota timeline in a what-if report (issue #27): per revision, the boundaries the replay
applied (instant, trace time, the grants and windows that start or end there, the quotas that
change) and how many jobs of each tenant were admitted at each. Markdown and JSON, byte-identical
for the same inputs; a revision without QuotaGrant or QuotaWindow has no section."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpugov.declarations.timeline import rfc3339
from gpugov.i18n import _
from gpugov.whatif.setup import Quota
from gpugov.whatif.timeline import Boundary, QuotaChange
from gpugov.whatif.trace import _quantity_text

if TYPE_CHECKING:
    from gpugov.whatif.report import Run

MAX_ROWS = 40  # a long trace crosses a nightly window twice a day: the JSON has every boundary


def _amount(resource: str, value: int | None) -> str:
    if value is None:
        return "—"
    return _quantity_text(value, milli=resource == "cpu") or "0"


def _quota_words(change: QuotaChange) -> str:
    """`16 → 24` for the nominal quota, with the limits where they change."""
    before, after = change.before or Quota(0, None, None), change.after or Quota(0, None, None)
    words = f"{change.resource} {_amount(change.resource, before.nominal)} → {_amount(change.resource, after.nominal)}"
    for label, old, new in ((_("borrowing limit"), before.borrowing_limit, after.borrowing_limit),
                            (_("lending limit"), before.lending_limit, after.lending_limit)):
        if old != new:
            words += f" ({label} {_amount(change.resource, old)} → {_amount(change.resource, new)})"
    return words


def _changes_words(boundary: Boundary) -> str:
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for change in boundary.changes:
        who = f"`{change.tenant}`" if change.kind == "ClusterQueue" else _("cohort `{name}`").format(name=change.name)
        grouped.setdefault((change.kind, who, change.flavor), []).append(_quota_words(change))
    return "; ".join(f"{who} {flavor}: {', '.join(words)}" for (_kind, who, flavor), words in grouped.items())


def _declaration_words(boundary: Boundary) -> str:
    events = {"starts": _("{kind} `{name}` starts"), "ends": _("{kind} `{name}` ends"),
              "opens": _("{kind} `{name}` opens"), "closes": _("{kind} `{name}` closes")}
    return ", ".join(events[event].format(kind=kind, name=name)
                     for kind, name, event in boundary.declarations) or "—"


def admitted_at(run: Run) -> dict[int, dict[str, int]]:
    """Trace millisecond -> tenant -> jobs admitted at that instant."""
    tenant_of = {wl.job.id: run.setup.tenant_of(wl.cq.name) for wl in run.outcome.workloads if wl.cq is not None}
    found: dict[int, dict[str, int]] = {}
    for ms, _cycle, job in run.outcome.admission_log:
        per = found.setdefault(ms, {})
        per[tenant_of[job]] = per.get(tenant_of[job], 0) + 1
    return found


def applied(run: Run) -> tuple[Boundary, ...]:
    """The boundaries the replay reached (it stops at the last job's end, or when nothing waits)."""
    assert run.timeline is not None
    return run.timeline.boundaries[: run.outcome.boundaries_applied]


def markdown_lines(side: str, run: Run, duration: Callable[[int | None], str]) -> list[str]:
    """The timeline section of one revision; [] without a timeline."""
    if run.timeline is None:
        return []
    timeline = run.timeline
    held = ", ".join(f"{kind} `{name}`" for kind, name in timeline.in_force) or _("none")
    lines = ["", _("**Quota timeline of the {side}** ({label}): the trace's second 0 is {start}; in force at its "
                   "first submission: {held}.").format(side=side, label=run.label, start=rfc3339(timeline.start),
                                                        held=held)]
    reached = applied(run)
    if not reached:
        return [*lines, "", _("No boundary changes this cluster's quotas while the replay runs.")]
    admitted = admitted_at(run)
    lines += ["", "| " + " | ".join((_("Instant"), _("Trace time"), _("Grants and windows"), _("Quotas from then on"),
                                     _("Admitted then"))) + " |", "|---|---:|---|---|---|"]
    for boundary in reached[:MAX_ROWS]:
        then = ", ".join(f"`{tenant}` {n}" for tenant, n in sorted(admitted.get(boundary.at_ms, {}).items())) or "—"
        lines.append(f"| {rfc3339(boundary.instant)} | {duration(boundary.at_ms)} | {_declaration_words(boundary)} | "
                     f"{_changes_words(boundary)} | {then} |")
    if len(reached) > MAX_ROWS:
        lines += ["", _("{rows} more boundaries: see --format json.").format(rows=f"{len(reached) - MAX_ROWS:,}")]
    return lines


def _quota_json(quota: Quota | None) -> dict[str, int | None] | None:
    if quota is None:
        return None
    return {"nominal": quota.nominal, "borrowing_limit": quota.borrowing_limit, "lending_limit": quota.lending_limit}


def to_json(run: Run) -> dict[str, Any]:
    """The timeline of one revision for the JSON report (quantities as Kueue counts them: cpu in
    millicores, the rest in units)."""
    assert run.timeline is not None
    admitted = admitted_at(run)
    reached = applied(run)
    return {
        "start": rfc3339(run.timeline.start),
        "in_force": [{"kind": kind, "name": name} for kind, name in run.timeline.in_force],
        "boundaries": [{
            "at": rfc3339(b.instant),
            "trace_seconds": b.at_ms / 1000,
            "declarations": [{"kind": kind, "name": name, "event": event} for kind, name, event in b.declarations],
            "quotas": [{"kind": c.kind, "name": c.name, "tenant": c.tenant, "flavor": c.flavor,
                        "resource": c.resource, "before": _quota_json(c.before), "after": _quota_json(c.after)}
                       for c in b.changes],
            "admitted": dict(sorted(admitted.get(b.at_ms, {}).items())),
        } for b in reached],
        "boundaries_not_reached": len(run.timeline.boundaries) - len(reached),
    }
