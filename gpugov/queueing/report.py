"""`gpugov queue` and `gpugov why` output: text, json and markdown, deterministic."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from gpugov.findings.markdown import table
from gpugov.i18n import _, localized
from gpugov.i18n.width import ljust, width
from gpugov.kube.quantity import format_quantity
from gpugov.queueing import indented
from gpugov.queueing.view import Entry, Explanation, Gaps

FORMATS = ("text", "json", "markdown")


def timestamp(at: datetime | None) -> str | None:
    return None if at is None else at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _in(at: datetime, now: datetime) -> str:
    seconds = int((at - now).total_seconds())
    if seconds <= 0:
        return _("now")
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    span = " ".join(f"{v}{u}" for v, u in ((hours, "h"), (minutes, "m"), (seconds, "s")) if v or u == "s")
    return _("in {span}").format(span=span)


def _position(e: Entry) -> str:
    if e.position is None:
        return "-"
    return f"{e.position.in_cluster_queue + 1}/{e.position.in_local_queue + 1}"


def _priority(e: Entry) -> str:
    return f"{e.priority_class} ({e.priority})" if e.priority_class else str(e.priority)


def _why(e: Entry, now: datetime) -> str:
    if e.state in ("admitted", "reserved"):
        return _("ends by {time}").format(time=timestamp(e.expected_end)) if e.expected_end else ""
    text = localized(e.reason.text)  # in the reader's language; JSON keeps the English
    if e.estimate is not None and e.estimate.at is not None:
        text += " " + _("[estimated start {time}, {when}]").format(time=timestamp(e.estimate.at),
                                                                   when=_in(e.estimate.at, now))
    return text


def entry_json(e: Entry) -> dict[str, Any]:
    return {
        "tenant": e.tenant,
        "namespace": None if e.hidden else e.namespace,
        "job": None if e.hidden else e.job,
        "workload": None if e.hidden else e.workload.partition("/")[2],
        "hidden": e.hidden,
        "local_queue": e.local_queue,
        "cluster_queue": e.cluster_queue,
        "state": e.state,
        "size": {r: format_quantity(a) for r, a in e.size.items()},
        "pools": list(e.flavors),
        "priority": e.priority,
        "priority_class": e.priority_class or None,
        "position": None if e.position is None else {"cluster_queue": e.position.in_cluster_queue + 1,
                                                     "local_queue": e.position.in_local_queue + 1},
        "reason": e.reason.why.value,
        "finding": e.reason.finding,
        "message": e.reason.text,
        "kueue_message": e.reason.kueue or None,
        "deficits": [{"pool": d.pool, "resource": d.resource, "more": format_quantity(d.more),
                      **({"held": format_quantity(d.held)} if d.held is not None else {}),
                      **({"limit": format_quantity(d.limit)} if d.limit is not None else {})}
                     for d in e.reason.deficits],
        "expected_end": timestamp(e.expected_end),
        "estimated_start": timestamp(e.estimate.at) if e.estimate else None,
        "estimate": e.estimate.text if e.estimate else None,
    }


COLUMNS = ("TENANT", "QUEUE", "STATE", "POS", "JOB", "SIZE", "PRIORITY", "WHY")


def _columns() -> tuple[str, ...]:
    """COLUMNS in the reader's language."""
    return (_("TENANT"), _("QUEUE"), _("STATE"), _("POS"), _("JOB"), _("SIZE"), _("PRIORITY"), _("WHY"))


def _rows(entries: list[Entry], now: datetime) -> list[tuple[str, ...]]:
    return [(e.tenant or "?", e.local_queue, e.state, _position(e), e.label, e.size_text, _priority(e), _why(e, now))
            for e in entries]


def gap_lines(gaps: Gaps | None) -> list[str]:
    """What could not be read or named, one line each (after the table)."""
    if gaps is None:
        return []
    lines = [_("not shown: tenant {tenant} (ClusterQueue {cluster_queue}): {admitted} admitted and {pending} pending "
               "workload(s) that you may not read, counted from the ClusterQueue's status").format(
                 tenant=n.tenant, cluster_queue=n.cluster_queue, admitted=n.admitted, pending=n.pending)
             for n in gaps.not_shown]
    return lines + gaps.lines


def queue_text(entries: list[Entry], now: datetime, cluster: str, gaps: Gaps | None = None) -> str:
    rows = _rows(entries, now)
    if not rows:
        return "\n".join([_("cluster {cluster}: no admitted or pending workloads").format(cluster=cluster),
                          *gap_lines(gaps)]) + "\n"
    columns = _columns()
    widths = [max(width(r[i]) for r in [columns, *rows]) for i in range(len(columns) - 1)]  # cells, not chars
    lines = ["  ".join(ljust(v, w) for v, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1]
             for row in [columns, *rows]]
    pending = sum(e.state not in ("admitted", "reserved") for e in entries)
    findings = sum(e.reason.finding for e in entries)
    lines.append(_("cluster {cluster}: {admitted} admitted, {pending} pending, {never} that can never start as "
                   "declared (POS: position in ClusterQueue/LocalQueue)").format(
                     cluster=cluster, admitted=len(entries) - pending, pending=pending, never=findings))
    lines += gap_lines(gaps)
    return "\n".join(line.rstrip() for line in lines) + "\n"


def queue_markdown(entries: list[Entry], now: datetime, cluster: str, gaps: Gaps | None = None) -> str:
    lines = [_("### Queues of cluster {cluster}").format(cluster=cluster), "", *table(_columns(), _rows(entries, now))]
    notes = gap_lines(gaps)
    if notes:
        lines += ["", *(f"- {line}" for line in notes)]
    return "\n".join(lines) + "\n"


def queue_json_pieces(entries: list[Entry], now: datetime, cluster: str, gaps: Gaps | None = None) -> Iterator[str]:
    """queue_json in pieces, one workload a piece, each encoded as it is written (a report of
    100,000 workloads is never held whole, as dicts or as text)."""
    data: dict[str, Any] = {"cluster": cluster, "at": timestamp(now), "workloads": map(entry_json, entries)}
    if gaps is not None:
        data["not_shown"] = [{"tenant": n.tenant, "cluster_queue": n.cluster_queue, "admitted": n.admitted,
                              "pending": n.pending} for n in gaps.not_shown]
        data["forbidden"] = gaps.lines
    return indented.lines(data, "workloads")


def queue_json(entries: list[Entry], now: datetime, cluster: str, gaps: Gaps | None = None) -> str:
    """The report as `json.dumps(..., indent=2)` writes it (gpugov.queueing.indented: byte for byte)."""
    return "".join(queue_json_pieces(entries, now, cluster, gaps))


def why_json(explanation: Explanation, now: datetime, cluster: str) -> str:
    return indented.dumps({"cluster": cluster, "at": timestamp(now), "workload": entry_json(explanation.entry),
                           "ahead": [entry_json(e) for e in explanation.ahead],
                           "holding": [entry_json(e) for e in explanation.holding]}) + "\n"


def why_text(explanation: Explanation, now: datetime, markdown: bool = False) -> str:
    e = explanation.entry
    bullet = "- " if markdown else "  "
    state, size, priority, why = _("state"), _("size"), _("priority"), _("why")
    lines = [f"{'### ' if markdown else ''}{e.label} (Workload {e.workload.partition('/')[2]}, tenant {e.tenant or '?'}, "
             f"LocalQueue {e.local_queue}, ClusterQueue {e.cluster_queue or '?'})"]
    if markdown:
        lines.append("")
    where = f", position {e.position.in_cluster_queue + 1} in ClusterQueue {e.position.cluster_queue}, " \
            f"{e.position.in_local_queue + 1} in LocalQueue {e.position.local_queue}" if e.position else ""
    lines.append(f"{bullet}{state}: {e.state}{where}")
    lines.append(f"{bullet}{size}: {e.size_text}; {priority} {_priority(e)}")
    lines.append(f"{bullet}{why}: {localized(e.reason.text)}")
    if e.reason.kueue:
        lines.append(f"{bullet}Kueue: {e.reason.kueue}")
    if e.state not in ("admitted", "reserved", "finished"):
        ahead = ", ".join(f"{a.label} ({a.size_text})" for a in explanation.ahead) or _("nothing")
        ahead_label = _("ahead of it in its ClusterQueue")
        lines.append(f"{bullet}{ahead_label}: {ahead}")
        if explanation.holding:
            held = ", ".join(f"{h.label} ({h.size_text}, "
                             f"{'ends by ' + str(timestamp(h.expected_end)) if h.expected_end else 'no expected end'})"
                             for h in explanation.holding)
            running = _("running where it waits")
            lines.append(f"{bullet}{running}: {held}")
        if e.estimate is not None:
            at = f"{timestamp(e.estimate.at)} ({_in(e.estimate.at, now)}), " if e.estimate.at else ""
            estimated = _("estimated start")
            lines.append(f"{bullet}{estimated}: {at}{e.estimate.text}")
    return "\n".join(lines) + "\n"
