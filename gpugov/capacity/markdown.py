"""The capacity report as Markdown, for a pull request or a wiki page."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal

from gpugov.capacity.report import ClusterReport, hours_text, money, percent, q, ratio_display
from gpugov.findings.markdown import table as markdown_table

DASH = "–"


def _n(value: Decimal | int | None) -> str:
    if value is None:
        return DASH
    return q(value) if isinstance(value, Decimal) else str(value)


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    return markdown_table(header, rows, empty=DASH)


def source_line(report: ClusterReport) -> str:
    parts = ["declarations"]
    if report.live:
        parts.append("live nodes (allocatable, GFD labels)")
    if report.window is not None:
        w = report.window
        parts.append(f"usage {w.since.isoformat()} to {w.until.isoformat()} ({hours_text(w.hours)} h, {w.source})")
    return "Read from: " + ", ".join(parts) + "."


def cluster_markdown(report: ClusterReport) -> list[str]:
    out = [f"## Cluster {report.cluster} ({report.backend})", "", source_line(report), "", "### Pools", ""]
    rows = []
    for pool in report.pools:
        for line in pool.resources:
            limit = f" (≤ {q(line.ratio_limit)})" if line.ratio is not None else ""
            rows.append([
                pool.name, pool.model, f"{pool.nodes_declared} / {_n(pool.nodes_live)}",
                f"{pool.gpus_declared} / {_n(pool.gpus_live)}", f"`{line.resource}`", _n(line.declared),
                _n(line.live), _n(line.guaranteed), _n(line.borrowable), _n(line.unassigned),
                (ratio_display(line.ratio) + limit) if line.ratio is not None else DASH,
            ])
    out += table(["pool", "model", "nodes declared / live", "GPUs declared / GFD", "resource", "physical",
                  "physical live", "guaranteed", "borrowable", "unassigned", "oversubscription"], rows)
    mig = [[p.name, m.profile, _n(m.declared), _n(m.guaranteed), _n(m.carvable)] for p in report.pools for m in p.mig]
    if mig:
        out += ["", "### MIG profiles", ""]
        out += table(["pool", "profile", "declared layouts", "guaranteed", "carvable (nodes' mig.config)"], mig)
    out += ["", "### Tenants", ""]
    out += table(["tenant", "department", "resource", "nominal", "ceiling", "may borrow", "may lend"],
                 [[t.tenant, t.department or DASH, f"`{t.resource}`", _n(t.nominal), _n(t.ceiling),
                   _n(t.borrowable), _n(t.lendable)] for t in report.tenants])
    if report.window is not None:
        out += ["", f"### Usage ({hours_text(report.window.hours)} h window)", ""]
        out += table(["tenant", "pool", "resource", "guaranteed h", "used h", "in quota h", "borrowed h", "idle h",
                      "guarantee used", "cost"],
                     [[u.tenant, u.pool, f"`{u.resource}`", hours_text(u.guaranteed_hours), hours_text(u.admitted_hours),
                       hours_text(u.in_quota_hours), hours_text(u.borrowed_hours), hours_text(u.idle_hours), percent(u.use) or DASH,
                       money(u.cost, u.currency)] for u in report.usage])
        out += [""]
        out += table(["pool", "resource", "capacity h", "used h", "lent h", "idle h", "unallocated h", "utilisation"],
                     [[p.pool, f"`{p.resource}`", hours_text(p.capacity_hours), hours_text(p.admitted_hours), hours_text(p.borrowed_hours),
                       hours_text(p.idle_hours), hours_text(p.unallocated_hours), percent(p.utilisation) or DASH]
                      for p in report.pool_usage])
    out += ["", "### Advice", ""]
    out += [f"- **{a.kind}**: {a.text}" for a in report.advice] or ["- nothing to advise"]
    return out


def markdown(reports: list[ClusterReport]) -> str:
    lines = ["# GPU capacity", ""]
    for report in reports:
        lines += [*cluster_markdown(report), ""]
    return "\n".join(lines).rstrip() + "\n"
