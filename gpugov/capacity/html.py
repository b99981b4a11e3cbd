"""The capacity report as one HTML page that renders offline: no CDN, no font, no image, no
external URL. The tables are static HTML; the charts are SVG drawn by the inline script from the
report's JSON (embedded in the page), so the page is one file to attach to a ticket or a wiki."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import TYPE_CHECKING

from gpugov.capacity.jsonout import report_json
from gpugov.capacity.markdown import DASH, _n, advice_kind, source_line
from gpugov.capacity.report import ClusterReport, hours_text, money, percent, q, ratio_display
from gpugov.i18n import _, current, localized

if TYPE_CHECKING:
    from gpugov.monitoring.history import History

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #1d2430; background: #ffffff; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 2px solid #d8dee8; }
h3 { font-size: 15px; margin-top: 20px; }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { border: 1px solid #d8dee8; padding: 3px 8px; text-align: right; }
th { background: #eef2f7; } td:first-child, th:first-child { text-align: left; }
td.text, th.text { text-align: left; }
.legend span { display: inline-block; margin-right: 14px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -1px; }
.chart { margin: 6px 0 18px; }
.advice li { margin: 3px 0; } .kind { font-weight: 600; }
"""

# The page's lang attribute (BCP 47) of each catalogue.
LANG_TAGS = {"en": "en", "zh_CN": "zh-CN"}

# Series colours, shared by the legend and the script.
COLOURS = {
    "physical": "#9aa5b1", "live": "#5b8def", "guaranteed": "#e07b39", "borrowable": "#3aa17e",
    "in_quota": "#8e6cc0", "borrowed": "#c94f7c", "idle": "#f2c14e", "used": "#5b8def",
}

SCRIPT = """
(function () {
  var data = JSON.parse(document.getElementById('capacity-data').textContent);
  var colours = JSON.parse(document.getElementById('capacity-colours').textContent);
  var words = JSON.parse(document.getElementById('capacity-words').textContent);
  function esc(text) {
    return String(text).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
  }
  function num(text) { return text === null || text === undefined ? 0 : parseFloat(text); }
  // Text widths as the browser will draw them (a canvas measures with the page's font), so that no
  // row label runs into its bars and no value label past the chart; 0.62 em a character without one.
  var canvas = document.createElement('canvas'), context = canvas.getContext ? canvas.getContext('2d') : null;
  var FONT = 'system-ui, sans-serif';
  function textWidth(text, size) {
    if (context) { context.font = size + 'px ' + FONT; return context.measureText(String(text)).width; }
    return String(text).length * size * 0.62;
  }
  // One horizontal bar chart: rows of labelled groups, each group a list of [series, value text]. The
  // label column is as wide as the widest label, the value column as the widest value; the chart
  // grows past `width` rather than let them overlap the bars.
  function bars(rows, width) {
    var barHeight = 14, gap = 3, groupGap = 10, max = 0, y = 4, parts = [], labelWidth = 120, valueWidth = 40;
    rows.forEach(function (row) {
      labelWidth = Math.max(labelWidth, Math.ceil(textWidth(row.label, 12)) + 12);
      row.bars.forEach(function (b) {
        max = Math.max(max, num(b[1]));
        valueWidth = Math.max(valueWidth, Math.ceil(textWidth(b[1], 11)) + 10);
      });
    });
    width = Math.max(width, labelWidth + valueWidth + 300);
    var scale = max > 0 ? (width - labelWidth - valueWidth) / max : 0;
    rows.forEach(function (row) {
      var groupTop = y;
      row.bars.forEach(function (b) {
        var w = Math.round(num(b[1]) * scale * 100) / 100;
        parts.push('<rect x="' + labelWidth + '" y="' + y + '" width="' + w + '" height="' + barHeight +
          '" fill="' + colours[b[0]] + '" data-series="' + esc(b[0]) + '" data-row="' + esc(row.label) +
          '" data-value="' + esc(b[1]) + '"><title>' + esc(row.label + ' ' + (words[b[0]] || b[0]) + ': ' + b[1]) +
          '</title></rect>');
        parts.push('<text x="' + (labelWidth + w + 4) + '" y="' + (y + barHeight - 3) + '" font-size="11" ' +
          'font-family="' + FONT + '">' + esc(b[1]) + '</text>');
        y += barHeight + gap;
      });
      parts.push('<text x="0" y="' + (groupTop + 12) + '" font-size="12" font-family="' + FONT + '">' +
        esc(row.label) + '</text>');
      y += groupGap;
    });
    return '<svg width="' + width + '" height="' + (y + 4) + '" viewBox="0 0 ' + width + ' ' + (y + 4) +
      '" role="img">' + parts.join('') + '</svg>';
  }
  var drawn = 0;
  data.clusters.forEach(function (cluster) {
    var capacity = document.getElementById('chart-capacity-' + cluster.cluster);
    if (capacity) {
      var rows = [];
      cluster.pools.forEach(function (pool) {
        pool.resources.forEach(function (r) {
          var bars = [['physical', r.physical_declared]];
          if (r.physical_live !== null) { bars.push(['live', r.physical_live]); }
          bars.push(['guaranteed', r.guaranteed], ['borrowable', r.borrowable]);
          rows.push({label: pool.pool + ' ' + r.resource, bars: bars});
        });
      });
      capacity.innerHTML = bars(rows, 900);
      drawn += 1;
    }
    var usage = document.getElementById('chart-usage-' + cluster.cluster);
    if (usage && cluster.usage.length) {
      usage.innerHTML = bars(cluster.usage.map(function (u) {
        return {label: u.tenant + ' ' + u.pool + ' ' + u.resource,
                bars: [['guaranteed', u.guaranteed_hours], ['in_quota', u.in_quota_hours],
                       ['borrowed', u.borrowed_hours], ['idle', u.idle_hours]]};
      }), 900);
      drawn += 1;
    }
    var pools = document.getElementById('chart-pools-' + cluster.cluster);
    if (pools && cluster.pool_usage.length) {
      pools.innerHTML = bars(cluster.pool_usage.map(function (p) {
        return {label: p.pool + ' ' + p.resource,
                bars: [['physical', p.capacity_hours], ['used', p.used_hours], ['borrowed', p.lent_hours],
                       ['idle', p.idle_hours]]};
      }), 900);
      drawn += 1;
    }
  });
  document.getElementById('chart-status').textContent = words.drawn.replace('{count}', drawn);
})();
"""


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], text_columns: int = 1) -> str:
    head = "".join(f'<th class="text">{escape(h)}</th>' if i < text_columns else f"<th>{escape(h)}</th>"
                   for i, h in enumerate(header))
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="text">{escape(c)}</td>' if i < text_columns else f"<td>{escape(c)}</td>"
            for i, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _series() -> dict[str, str]:
    """The charts' series as the legend and the bars' titles name them, in the reader's language."""
    return {"physical": _("physical"), "live": _("physical (live)"), "guaranteed": _("guaranteed"),
            "borrowable": _("borrowable"), "in_quota": _("used in quota"), "borrowed": _("borrowed / lent"),
            "idle": _("idle"), "used": _("used")}


def _tag(name: str, text: str) -> str:
    return f"<{name}>{escape(text)}</{name}>"


def _legend(series: Sequence[str]) -> str:
    labels = _series()
    items = "".join(f'<span><i style="background:{COLOURS[s]}"></i>{escape(labels[s])}</span>' for s in series)
    return f'<p class="legend">{items}</p>'


def _history(report: ClusterReport, found: Sequence[History]) -> str:
    """Per tenant, then per pool, its charts over each window (gpugov.capacity.charts: static SVG, no
    script), the ledger's efficiency figures under each."""
    from gpugov.capacity.charts import ledger_notes, svg

    parts = [_tag("h3", _("History: GPU allocation and activity")),
             _tag("p", _("From Prometheus' recording rules (gpugov monitoring); hatched: unknown, no measurement "
                         "(never idle)."))]
    for kind, heading in (("tenant", _("Tenant {name}")), ("pool", _("Pool {name}"))):
        names = sorted({h.name for h in found if h.kind == kind})
        for name in names:
            # inline SVG needs no namespace: the page names no URL at all
            charts = "".join('<div class="chart history">' + svg(h, ledger_notes(h, report)).replace(
                ' xmlns="http://www.w3.org/2000/svg"', "", 1) + "</div>"
                             for h in found if h.kind == kind and h.name == name)
            parts += [_tag("h4", heading.format(name=name)), charts]
    return "\n".join(parts)


def _cluster(report: ClusterReport, found: Sequence[History] = ()) -> str:
    key = escape(report.cluster)
    heading = _("Cluster {cluster} ({backend})").format(cluster=report.cluster, backend=report.backend)
    parts = [_tag("h2", heading), _tag("p", source_line(report)), _tag("h3", _("Pools"))]
    series = ["physical", "live", "guaranteed", "borrowable"] if report.live else ["physical", "guaranteed",
                                                                                     "borrowable"]
    parts += [_legend(series), f'<div class="chart" id="chart-capacity-{key}"></div>']
    rows = []
    for pool in report.pools:
        for line in pool.resources:
            rows.append([pool.name, line.resource, f"{pool.nodes_declared} / {_n(pool.nodes_live)}",
                         f"{pool.gpus_declared} / {_n(pool.gpus_live)}", _n(line.declared), _n(line.live),
                         _n(line.guaranteed), _n(line.borrowable), _n(line.unassigned),
                         ratio_display(line.ratio) or DASH, q(line.ratio_limit)])
    parts.append(_table([_("pool"), _("resource"), _("nodes declared / live"), _("GPUs declared / GFD"), _("physical"),
                         _("physical live"), _("guaranteed"), _("borrowable"), _("unassigned"), _("oversubscription"),
                         _("limit")], rows, 2))
    mig = [[p.name, m.profile, _n(m.declared), _n(m.guaranteed), _n(m.carvable)] for p in report.pools for m in p.mig]
    if mig:
        parts += [_tag("h3", _("MIG profiles")),
                  _table([_("pool"), _("profile"), _("declared layouts"), _("guaranteed"),
                          _("carvable (nodes' mig.config)")], mig, 2)]
    parts += [_tag("h3", _("Tenants")), _table(
        [_("tenant"), _("department"), _("resource"), _("nominal"), _("ceiling"), _("may borrow"), _("may lend")],
        [[t.tenant, t.department or DASH, t.resource, _n(t.nominal), _n(t.ceiling), _n(t.borrowable),
          _n(t.lendable)] for t in report.tenants], 3)]
    if report.window is not None:
        parts += [_tag("h3", _("Usage ({hours} h window)").format(hours=hours_text(report.window.hours))),
                  _legend(["guaranteed", "in_quota", "borrowed", "idle"]),
                  f'<div class="chart" id="chart-usage-{key}"></div>',
                  _table([_("tenant"), _("pool"), _("resource"), _("guaranteed h"), _("used h"), _("in quota h"),
                          _("borrowed h"), _("idle h"), _("guarantee used"), _("cost")],
                         [[u.tenant, u.pool, u.resource, hours_text(u.guaranteed_hours), hours_text(u.admitted_hours),
                           hours_text(u.in_quota_hours), hours_text(u.borrowed_hours), hours_text(u.idle_hours), percent(u.use) or DASH,
                           money(u.cost, u.currency)] for u in report.usage], 3),
                  _legend(["physical", "used", "borrowed", "idle"]),
                  f'<div class="chart" id="chart-pools-{key}"></div>',
                  _table([_("pool"), _("resource"), _("capacity h"), _("used h"), _("lent h"), _("idle h"),
                          _("unallocated h"), _("utilisation")],
                         [[p.pool, p.resource, hours_text(p.capacity_hours), hours_text(p.admitted_hours), hours_text(p.borrowed_hours),
                           hours_text(p.idle_hours), hours_text(p.unallocated_hours), percent(p.utilisation) or DASH]
                          for p in report.pool_usage], 2)]
    items = "".join(f'<li data-kind="{escape(a.kind)}"><span class="kind">{escape(advice_kind(a.kind))}</span>: '
                    f"{escape(localized(a.text))}</li>" for a in report.advice) or _tag("li", _("nothing to advise"))
    parts += [_tag("h3", _("Advice")), f'<ul class="advice">{items}</ul>']
    if found:
        parts.append(_history(report, found))
    return "\n".join(parts)


def _embedded(value: object) -> str:
    """JSON safe inside a <script> element (no `</` can close it early)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False).replace("</", "<\\/")


def html(reports: list[ClusterReport], histories: Mapping[str, Sequence[History]] | None = None) -> str:
    """The page in the reader's language (its `lang` says which); the embedded data stays the JSON report.
    `histories`: per cluster, the tenants' and pools' histories to draw (gpugov history's charts)."""
    body = "\n".join(_cluster(r, (histories or {}).get(r.cluster, ())) for r in reports)
    title = escape(_("GPU capacity"))
    status = escape(_("charts need JavaScript; the tables below hold every number"))
    words = {**_series(), "drawn": _("{count} charts drawn")}
    return (
        f"<!DOCTYPE html>\n<html lang=\"{LANG_TAGS.get(current(), 'en')}\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{title}</title>\n"
        f"<style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n"
        f'<p id="chart-status">{status}</p>\n'
        f"{body}\n"
        f'<script type="application/json" id="capacity-data">{_embedded(report_json(reports))}</script>\n'
        f'<script type="application/json" id="capacity-colours">{_embedded(COLOURS)}</script>\n'
        f'<script type="application/json" id="capacity-words">{_embedded(words)}</script>\n'
        f"<script>{SCRIPT}</script>\n</body>\n</html>\n"
    )
