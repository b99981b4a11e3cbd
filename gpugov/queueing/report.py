"""`gpugov queue` and `gpugov why` output: text, json and markdown, deterministic."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from json.encoder import encode_basestring_ascii as _string  # the C function where _json is built
from typing import Any

from gpugov.findings.markdown import table
from gpugov.i18n import _, localized
from gpugov.i18n.width import ljust, width
from gpugov.kube.quantity import format_quantity
from gpugov.queueing import indented
from gpugov.queueing.reasons import Reason
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


def _state(state: str) -> str:
    """A workload's state in the reader's language (JSON keeps Kueue's words)."""
    return {"admitted": _("admitted"), "reserved": _("reserved"), "pending": _("pending"), "inactive": _("inactive"),
            "finished": _("finished")}.get(state, state)


def _label(e: Entry) -> str:
    return _("(hidden)") if e.hidden else e.label


def _size(e: Entry) -> str:
    """What it asks, and where it was admitted (text and markdown; JSON has them apart)."""
    if not e.size:
        return "?" if e.hidden and e.state == "pending" else "-"
    amounts = " + ".join(f"{format_quantity(a)} {r}" for r, a in e.size.items())
    return _("{amounts} on {flavors}").format(amounts=amounts, flavors=", ".join(e.flavors)) if e.flavors else amounts


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


def _size_json(size: Mapping[str, Decimal]) -> dict[str, str]:
    return {r: format_quantity(a) for r, a in size.items()}


def _reason_json(reason: Reason) -> dict[str, Any]:
    return {
        "reason": reason.why.value,
        "finding": reason.finding,
        "message": reason.text,
        "kueue_message": reason.kueue or None,
        "deficits": [{"pool": d.pool, "resource": d.resource, "more": format_quantity(d.more),
                      **({"held": format_quantity(d.held)} if d.held is not None else {}),
                      **({"limit": format_quantity(d.limit)} if d.limit is not None else {})}
                     for d in reason.deficits],
    }


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
        "size": _size_json(e.size),
        "pools": list(e.flavors),
        "priority": e.priority,
        "priority_class": e.priority_class or None,
        "position": None if e.position is None else {"cluster_queue": e.position.in_cluster_queue + 1,
                                                     "local_queue": e.position.in_local_queue + 1},
        **_reason_json(e.reason),
        "expected_end": timestamp(e.expected_end),
        "estimated_start": timestamp(e.estimate.at) if e.estimate else None,
        "estimate": e.estimate.text if e.estimate else None,
    }


def _text(value: str | None) -> str:
    return "null" if value is None else _string(value)


class _EntryEncoder:
    """`indented.dumps(entry_json(e))` of each entry, as an indented.Encoded, written from a template
    instead of a dict walked key by key: building and walking those dicts made the report of 100,000
    workloads cost more than explaining them. What entries share is encoded once: a Reason's members
    (workloads alike share one Reason), sizes and pools. entry_json stays the shape's one definition:
    the shared parts are encoded from its pieces, and tests hold the two equal."""

    def __init__(self) -> None:
        self.reasons: dict[int, tuple[Reason, str]] = {}  # id -> (the Reason, kept alive; its members)
        self.sizes: dict[tuple[tuple[str, Decimal], ...], str] = {}
        self.pools: dict[tuple[str, ...], str] = {}

    def __call__(self, e: Entry) -> indented.Encoded:
        said = self.reasons.get(id(e.reason))
        if said is None:
            said = self.reasons[id(e.reason)] = (e.reason, indented.members(_reason_json(e.reason)))
        size_key = tuple(e.size.items())  # equal Decimals are written alike (see reasons.alike)
        size = self.sizes.get(size_key)
        if size is None:
            size = self.sizes[size_key] = indented.dumps(_size_json(e.size), "  ")
        pools = self.pools.get(e.flavors)
        if pools is None:
            pools = self.pools[e.flavors] = indented.dumps(list(e.flavors), "  ")
        hidden = e.hidden
        position = "null" if e.position is None else indented.dumps(
            {"cluster_queue": e.position.in_cluster_queue + 1, "local_queue": e.position.in_local_queue + 1}, "  ")
        estimate = e.estimate
        return indented.Encoded(
            f'{{\n  "tenant": {_string(e.tenant)},\n  "namespace": {"null" if hidden else _string(e.namespace)},'
            f'\n  "job": {"null" if hidden else _string(e.job)},'
            f'\n  "workload": {"null" if hidden else _string(e.workload.partition("/")[2])},'
            f'\n  "hidden": {"true" if hidden else "false"},\n  "local_queue": {_string(e.local_queue)},'
            f'\n  "cluster_queue": {_string(e.cluster_queue)},\n  "state": {_string(e.state)},'
            f'\n  "size": {size},\n  "pools": {pools},\n  "priority": {int.__repr__(e.priority)},'
            f'\n  "priority_class": {_text(e.priority_class or None)},\n  "position": {position},'
            f'\n  {said[1]},\n  "expected_end": {_text(timestamp(e.expected_end))},'
            f'\n  "estimated_start": {_text(timestamp(estimate.at) if estimate else None)},'
            f'\n  "estimate": {_text(estimate.text if estimate else None)}\n}}')


COLUMNS = ("TENANT", "QUEUE", "STATE", "POS", "JOB", "SIZE", "PRIORITY", "WHY")


def _columns() -> tuple[str, ...]:
    """COLUMNS in the reader's language."""
    return (_("TENANT"), _("QUEUE"), _("STATE"), _("POS"), _("JOB"), _("SIZE"), _("PRIORITY"), _("WHY"))


def _rows(entries: list[Entry], now: datetime) -> list[tuple[str, ...]]:
    return [(e.tenant or "?", e.local_queue, _state(e.state), _position(e), _label(e), _size(e), _priority(e),
             _why(e, now)) for e in entries]


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
    data: dict[str, Any] = {"cluster": cluster, "at": timestamp(now), "workloads": map(_EntryEncoder(), entries)}
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
    lines = [("### " if markdown else "") + _(
        "{job} (Workload {workload}, tenant {tenant}, LocalQueue {local_queue}, ClusterQueue {cluster_queue})").format(
        job=_label(e), workload=e.workload.partition("/")[2], tenant=e.tenant or "?", local_queue=e.local_queue,
        cluster_queue=e.cluster_queue or "?")]
    if markdown:
        lines.append("")
    where = _(", position {in_cluster_queue} in ClusterQueue {cluster_queue}, {in_local_queue} in LocalQueue "
              "{local_queue}").format(in_cluster_queue=e.position.in_cluster_queue + 1,
                                      cluster_queue=e.position.cluster_queue,
                                      in_local_queue=e.position.in_local_queue + 1,
                                      local_queue=e.position.local_queue) if e.position else ""
    lines.append(f"{bullet}{state}: {_state(e.state)}{where}")
    lines.append(f"{bullet}{size}: {_size(e)}; {priority} {_priority(e)}")
    lines.append(f"{bullet}{why}: {localized(e.reason.text)}")
    if e.reason.kueue:
        lines.append(f"{bullet}Kueue: {e.reason.kueue}")
    if e.state not in ("admitted", "reserved", "finished"):
        ahead = _(", ").join(f"{_label(a)} ({_size(a)})" for a in explanation.ahead) or _("nothing")
        ahead_label = _("ahead of it in its ClusterQueue")
        lines.append(f"{bullet}{ahead_label}: {ahead}")
        if explanation.holding:
            held = _(", ").join(f"{_label(h)} ({_size(h)}, " + (
                _("ends by {time}").format(time=timestamp(h.expected_end)) if h.expected_end else _("no expected end"))
                + ")" for h in explanation.holding)
            running = _("running where it waits")
            lines.append(f"{bullet}{running}: {held}")
        if e.estimate is not None:
            at = f"{timestamp(e.estimate.at)} ({_in(e.estimate.at, now)}), " if e.estimate.at else ""
            estimated = _("estimated start")
            lines.append(f"{bullet}{estimated}: {at}{localized(e.estimate.text)}")
    return "\n".join(lines) + "\n"
