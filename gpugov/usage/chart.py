"""An SVG chart of usage per tenant over the window, written by hand (no plotting library):
stacked bars, one per time bucket, each tenant's average GPU equivalents held in it (a MIG slice
weighs its share of a GPU, as compile weighs it). Deterministic: same ledger, same bytes."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from decimal import Decimal
from html import escape

from gpugov.declarations.equivalents import device_equivalents, hami_views
from gpugov.declarations.model import GPUPool
from gpugov.usage.segments import Segment
from gpugov.usage.window import Window, seconds

PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac")
WIDTH, HEIGHT = 860, 380
LEFT, RIGHT, TOP, BOTTOM = 60, 180, 40, 50


def _chart_weights(pool: GPUPool) -> dict[str, Decimal]:
    """Device equivalents per resource; HAMi's memory and cores count 0 (views of the devices its
    vGPU slots already count)."""
    weights = device_equivalents(pool)
    if pool.hami_units is not None:
        weights.update({r: Decimal(0) for r in hami_views(pool) if r != pool.hami_units.count})
    return weights


def buckets(found: list[Segment], window: Window, pools: dict[str, GPUPool],
            count: int = 96) -> tuple[list[str], list[dict[str, Decimal]]]:
    """(tenants, per bucket: tenant -> average GPU equivalents held)."""
    count = max(1, min(count, window.seconds))
    width = Decimal(window.seconds) / count
    weights = {name: _chart_weights(pool) for name, pool in pools.items()}
    result: list[dict[str, Decimal]] = [defaultdict(Decimal) for _ in range(count)]
    for s in found:
        weight = weights.get(s.pool, {}).get(s.resource, Decimal(1))
        first = int(seconds(s.start - window.since) / width)
        last = min(count - 1, int(seconds(s.end - window.since) / width))
        for index in range(max(0, first), last + 1):
            low = window.since + timedelta(seconds=float(width * index))
            high = window.since + timedelta(seconds=float(width * (index + 1)))
            a, b = max(low, s.start), min(high, s.end)
            if a < b:
                result[index][s.tenant] += s.amount * weight * seconds(b - a) / width
    tenants = sorted({s.tenant for s in found})
    return tenants, result


def svg(found: list[Segment], window: Window, pools: dict[str, GPUPool], cluster: str) -> str:
    tenants, series = buckets(found, window, pools)
    peak = max((sum(b.values(), Decimal(0)) for b in series), default=Decimal(0))
    top = float(peak) if peak > 0 else 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    bar = plot_w / len(series)
    color = {t: PALETTE[i % len(PALETTE)] for i, t in enumerate(tenants)}
    since, until = window.since.strftime("%Y-%m-%dT%H:%M:%SZ"), window.until.strftime("%Y-%m-%dT%H:%M:%SZ")
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
           'font-family="sans-serif" font-size="12">',
           f"<title>Accelerator usage per tenant, cluster {escape(cluster)}, {since} to {until}</title>",
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{LEFT}" y="22" font-size="14">Usage per tenant (GPU equivalents held), cluster '
           f"{escape(cluster)}</text>"]
    for index, bucket in enumerate(series):
        y = float(TOP + plot_h)
        for tenant in tenants:
            value = float(bucket.get(tenant, Decimal(0)))
            if value <= 0:
                continue
            h = value / top * plot_h
            y -= h
            out.append(f'<rect x="{LEFT + index * bar:.2f}" y="{y:.2f}" width="{bar:.2f}" height="{h:.2f}" '
                       f'fill="{color[tenant]}"><title>{escape(tenant)}: {value:.2f}</title></rect>')
    axis_y = TOP + plot_h
    out.append(f'<line x1="{LEFT}" y1="{axis_y}" x2="{LEFT + plot_w}" y2="{axis_y}" stroke="black"/>')
    out.append(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{axis_y}" stroke="black"/>')
    for fraction in (0.0, 0.5, 1.0):
        y = axis_y - fraction * plot_h
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.2f}" text-anchor="end">{top * fraction:.2f}</text>')
    out.append(f'<text x="{LEFT}" y="{axis_y + 20}">{since}</text>')
    out.append(f'<text x="{LEFT + plot_w}" y="{axis_y + 20}" text-anchor="end">{until}</text>')
    for i, tenant in enumerate(tenants):
        y = TOP + 18 * i
        out.append(f'<rect x="{WIDTH - RIGHT + 16}" y="{y}" width="12" height="12" fill="{color[tenant]}"/>')
        out.append(f'<text x="{WIDTH - RIGHT + 34}" y="{y + 10}">{escape(tenant)}</text>')
    if not tenants:
        out.append(f'<text x="{LEFT + plot_w / 2:.2f}" y="{TOP + plot_h / 2:.2f}" text-anchor="middle">'
                   "no accelerators admitted in the window</text>")
    out.append("</svg>")
    return "\n".join(out) + "\n"
