"""A History (gpugov.monitoring.history) as an SVG written by hand, in the reader's language: per bucket a bar
of the mean devices held with its idle part, the activity per held device as a line on the right axis,
and every bucket without a measurement as a hatched gap marked unknown (never a bar of 0: missing data is
not idleness). A bucket measured only in part is drawn from what was measured and marked with a grey strip.

Deterministic: the same History gives the same bytes (fixed sizes, fixed number formats, times in UTC).
Every bucket carries its numbers as data-* attributes and the chart its totals, so tests and scripts can
read what was drawn.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from html import escape

from gpugov.capacity.report import ClusterReport, hours_text, percent
from gpugov.i18n import _
from gpugov.i18n.width import width
from gpugov.monitoring.history import History

WIDTH, HEIGHT = 760, 300
LEFT, RIGHT, TOP, BOTTOM = 56, 56, 44, 92
HELD, IDLE, ACTIVE, UNKNOWN, PARTIAL = "#5b8def", "#f2c14e", "#c0392b", "#9aa5b1", "#c9ced6"
TICKS = (60, 300, 900, 3600, 6 * 3600, 86400, 2 * 86400, 5 * 86400, 7 * 86400)


def number(value: Decimal | None, places: str = "0.01") -> str:
    """A figure for people and for data-* attributes: fixed decimals, '-' for none."""
    if value is None:
        return "-"
    text = f"{value.quantize(Decimal(places), ROUND_HALF_EVEN):f}"
    return "0" if text.strip("0.-") == "" else text


def share(value: Decimal | None) -> str:
    return "-" if value is None else number(value * 100, "0.1") + "%"


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ticks(since: datetime, until: datetime) -> list[tuple[int, str]]:
    """(epoch second, label) of the x axis: 3 to 8 ticks on whole minutes, hours or days (UTC)."""
    low, high = int(since.timestamp()), int(until.timestamp())
    every = next((t for t in TICKS if (high - low) // t <= 8), TICKS[-1])
    form = "%m-%d" if every >= 86400 else "%H:%M" if every >= 60 else "%H:%M:%S"
    first = -(-low // every) * every
    return [(t, datetime.fromtimestamp(t, UTC).strftime(form)) for t in range(first, high + 1, every)]


def _ident(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "-", text)


def title(found: History) -> str:
    if found.kind == "tenant":
        return _("Tenant {name}: GPU allocation and activity, last {window}").format(name=found.name,
                                                                                     window=found.span.name)
    return _("Pool {name}: GPU allocation and activity, last {window}").format(name=found.name, window=found.span.name)


def totals(found: History) -> str:
    return _("{held} device-hours held, {idle} idle ({share}), activity {activity}; unknown {unknown} h").format(
        held=number(found.device_hours), idle=number(found.idle_device_hours), share=share(found.idle_share),
        activity=share(found.activity), unknown=number(found.unknown_hours))


def svg(found: History, notes: Sequence[str] = ()) -> str:
    """The chart; `notes`: lines under it (the ledger's efficiency figures, already in the reader's language)."""
    window = found.span
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    height = HEIGHT + 16 * len(notes)
    peak = max((b.devices for b in found.buckets if b.devices is not None), default=Decimal(0))
    top = max(1, int(-(-peak // 1)))  # whole devices
    bar = plot_w / len(found.buckets)
    base = TOP + plot_h
    pattern = _ident(f"unknown-{found.kind}-{found.name}-{window.name}")
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11" role="img" '
           f'data-kind="{found.kind}" data-name="{escape(found.name)}" data-window="{escape(window.name)}" '
           f'data-since="{_stamp(window.since)}" data-until="{_stamp(window.until)}" data-step="{window.step}" '
           f'data-device-hours="{number(found.device_hours, "0.000001")}" '
           f'data-idle-device-hours="{number(found.idle_device_hours, "0.000001")}" '
           f'data-activity="{number(found.activity, "0.000001")}" '
           f'data-unknown-hours="{number(found.unknown_hours, "0.000001")}" '
           f'data-device-seconds="{number(found.device_seconds, "0.000001")}" '
           f'data-idle-device-seconds="{number(found.idle_device_seconds, "0.000001")}" '
           f'data-unknown-seconds="{found.unknown_seconds}">',
           f"<title>{escape(title(found))}</title>",
           f'<defs><pattern id="{pattern}" width="6" height="6" patternUnits="userSpaceOnUse" '
           f'patternTransform="rotate(45)"><rect width="6" height="6" fill="#eef0f3"/>'
           f'<line x1="0" y1="0" x2="0" y2="6" stroke="{UNKNOWN}" stroke-width="2"/></pattern></defs>',
           f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
           f'<text x="{LEFT}" y="20" font-size="14">{escape(title(found))}</text>',
           f'<text x="{LEFT}" y="36" fill="#555">{escape(_stamp(window.since))} – {escape(_stamp(window.until))}</text>']
    line: list[list[str]] = [[]]
    unknown = escape(_("unknown: no measurement"))
    for index, b in enumerate(found.buckets):
        x = LEFT + index * bar
        when = f"{_stamp(b.start)} – {_stamp(b.end)}"
        if b.devices is None:
            line.append([])
            out.append(f'<rect class="unknown" x="{x:.2f}" y="{TOP}" width="{bar:.2f}" height="{plot_h}" '
                       f'fill="url(#{pattern})" data-start="{_stamp(b.start)}" data-coverage="0">'
                       f"<title>{escape(when)}: {unknown}</title></rect>")
            continue
        assert b.idle is not None
        h = float(b.devices) / top * plot_h
        idle_h = float(min(b.idle, b.devices)) / top * plot_h
        tip = _("{when}: {held} devices held, {idle} idle, activity {activity}, measured {coverage}").format(
            when=when, held=number(b.devices), idle=number(b.idle), activity=share(b.activity),
            coverage=share(b.coverage))
        out.append(f'<g class="bucket" data-start="{_stamp(b.start)}" data-devices="{number(b.devices, "0.000001")}" '
                   f'data-idle="{number(b.idle, "0.000001")}" data-activity="{number(b.activity, "0.000001")}" '
                   f'data-coverage="{number(b.coverage, "0.0001")}"><title>{escape(tip)}</title>'
                   f'<rect x="{x:.2f}" y="{base - h:.2f}" width="{bar:.2f}" height="{h:.2f}" fill="{HELD}"/>'
                   f'<rect x="{x:.2f}" y="{base - idle_h:.2f}" width="{bar:.2f}" height="{idle_h:.2f}" fill="{IDLE}"/>'
                   + (f'<rect class="partial" x="{x:.2f}" y="{TOP}" width="{bar:.2f}" height="4" fill="{PARTIAL}"/>'
                      if b.measured < b.steps else "") + "</g>")
        if b.activity is None:
            line.append([])
        else:
            line[-1].append(f"{x + bar / 2:.2f},{base - float(b.activity) * plot_h:.2f}")
    for points in line:
        if len(points) > 1:
            out.append(f'<polyline class="activity" points="{" ".join(points)}" fill="none" stroke="{ACTIVE}" '
                       'stroke-width="1.5"/>')
        elif points:
            x, y = points[0].split(",")
            out.append(f'<circle class="activity" cx="{x}" cy="{y}" r="2" fill="{ACTIVE}"/>')
    out.append(f'<line x1="{LEFT}" y1="{base}" x2="{LEFT + plot_w}" y2="{base}" stroke="black"/>')
    out.append(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{base}" stroke="black"/>')
    out.append(f'<line x1="{LEFT + plot_w}" y1="{TOP}" x2="{LEFT + plot_w}" y2="{base}" stroke="{ACTIVE}"/>')
    for fraction in (0, 0.5, 1):
        y = base - fraction * plot_h
        out.append(f'<text class="y" x="{LEFT - 5}" y="{y + 4:.2f}" text-anchor="end">{top * fraction:g}</text>')
        out.append(f'<text class="y2" x="{LEFT + plot_w + 5}" y="{y + 4:.2f}" fill="{ACTIVE}">'
                   f"{fraction * 100:g}%</text>")
    devices, activity, axis = escape(_("devices")), escape(_("activity")), escape(_("time (UTC)"))
    out.append(f'<text x="{LEFT - 5}" y="{TOP - 6}" text-anchor="end">{devices}</text>')
    out.append(f'<text x="{LEFT + plot_w + 5}" y="{TOP - 6}" fill="{ACTIVE}">{activity}</text>')
    since, length = window.since.timestamp(), window.seconds
    for at, label in _ticks(window.since, window.until):
        x = LEFT + (at - since) / length * plot_w
        out.append(f'<line x1="{x:.2f}" y1="{base}" x2="{x:.2f}" y2="{base + 4}" stroke="black"/>')
        out.append(f'<text class="x" x="{x:.2f}" y="{base + 16}" text-anchor="middle">{escape(label)}</text>')
    out.append(f'<text x="{LEFT + plot_w / 2:.2f}" y="{base + 30}" text-anchor="middle" fill="#555">'
               f"{axis}</text>")
    legend = ((HELD, _("devices held")), (IDLE, _("idle devices")), (ACTIVE, _("activity per held device")),
              (UNKNOWN, _("unknown (no data)")))
    x = LEFT
    for colour, words in legend:
        out.append(f'<rect x="{x}" y="{base + 40}" width="10" height="10" fill="{colour}"/>'
                   f'<text x="{x + 14}" y="{base + 49}">{escape(words)}</text>')
        x += 34 + 6 * width(words)
    out.append(f'<text class="totals" x="{LEFT}" y="{base + 70}">{escape(totals(found))}</text>')
    for i, note in enumerate(notes):
        out.append(f'<text class="note" x="{LEFT}" y="{base + 86 + 16 * i}" fill="#333">{escape(note)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def ledger_notes(found: History, report: ClusterReport | None) -> list[str]:
    """The efficiency figures the capacity report takes from the usage ledger (its own window), for the
    tenant's or pool's chart: the same lines and numbers as the report's usage tables."""
    if report is None or report.window is None:
        return []
    where = _("ledger {since} to {until}").format(since=_stamp(report.window.since), until=_stamp(report.window.until))
    if found.kind == "tenant":
        return [_("{where}, {pool} {resource}: used {used} h, idle {idle} h, guarantee used {use}").format(
            where=where, pool=u.pool, resource=u.resource, used=hours_text(u.admitted_hours),
            idle=hours_text(u.idle_hours), use=percent(u.use) or "-") for u in report.usage if u.tenant == found.name]
    return [_("{where}, {resource}: capacity {capacity} h, used {used} h, idle {idle} h, utilisation {utilisation}").format(
        where=where, resource=p.resource, capacity=hours_text(p.capacity_hours), used=hours_text(p.admitted_hours),
        idle=hours_text(p.idle_hours), utilisation=percent(p.utilisation) or "-")
        for p in report.pool_usage if p.pool == found.name]
