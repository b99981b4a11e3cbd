"""The capacity report as Markdown, for a pull request or a wiki page."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal

from gpugov.capacity.report import ClusterReport, hours_text, money, percent, q, ratio_display
from gpugov.findings.markdown import table as markdown_table
from gpugov.i18n import Translator, _, localized

DASH = "–"


def _n(value: Decimal | int | None) -> str:
    if value is None:
        return DASH
    return q(value) if isinstance(value, Decimal) else str(value)


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    return markdown_table(header, rows, empty=DASH)


def source_line(report: ClusterReport, tr: Translator | None = None) -> str:
    """What the report read, in the current language or `tr`'s (the HTML page stays English)."""
    parts = [_("declarations", tr)]
    if report.live:
        parts.append(_("live nodes (allocatable, GFD labels)", tr))
    if report.window is not None:
        w = report.window
        parts.append(_("usage {since} to {until} ({hours} h, {source})", tr).format(
            since=w.since.isoformat(), until=w.until.isoformat(), hours=hours_text(w.hours), source=w.source))
    return _("Read from: {sources}.", tr).format(sources=_(", ", tr).join(parts))


def advice_kind(kind: str, tr: Translator | None = None) -> str:
    """An advice's kind as the reader reads it (English: the kind itself, as JSON has it)."""
    words = {"oversubscribed": _("oversubscribed", tr), "unassigned": _("unassigned", tr),
             "live-short": _("live-short", tr), "mig-carve": _("mig-carve", tr), "mig-config": _("mig-config", tr),
             "mig-state": _("mig-state", tr), "never-used": _("never-used", tr),
             "chronic-borrower": _("chronic-borrower", tr), "near-exhaustion": _("near-exhaustion", tr),
             "ledger-unknown": _("ledger-unknown", tr), "idle-over-policy": _("idle-over-policy", tr)}
    return words.get(kind, kind)


def cluster_markdown(report: ClusterReport) -> list[str]:
    out = [_("## Cluster {cluster} ({backend})").format(cluster=report.cluster, backend=report.backend), "",
           source_line(report), "", _("### Pools"), ""]
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
    out += table([_("pool"), _("model"), _("nodes declared / live"), _("GPUs declared / GFD"), _("resource"),
                  _("physical"), _("physical live"), _("guaranteed"), _("borrowable"), _("unassigned"),
                  _("oversubscription")], rows)
    mig = [[p.name, m.profile, _n(m.declared), _n(m.guaranteed), _n(m.carvable)] for p in report.pools for m in p.mig]
    if mig:
        out += ["", _("### MIG profiles"), ""]
        out += table([_("pool"), _("profile"), _("declared layouts"), _("guaranteed"),
                      _("carvable (nodes' mig.config)")], mig)
    out += ["", _("### Tenants"), ""]
    out += table([_("tenant"), _("department"), _("resource"), _("nominal"), _("ceiling"), _("may borrow"),
                  _("may lend")],
                 [[t.tenant, t.department or DASH, f"`{t.resource}`", _n(t.nominal), _n(t.ceiling),
                   _n(t.borrowable), _n(t.lendable)] for t in report.tenants])
    if report.window is not None:
        out += ["", _("### Usage ({hours} h window)").format(hours=hours_text(report.window.hours)), ""]
        out += table([_("tenant"), _("pool"), _("resource"), _("guaranteed h"), _("used h"), _("in quota h"),
                      _("borrowed h"), _("idle h"), _("guarantee used"), _("cost")],
                     [[u.tenant, u.pool, f"`{u.resource}`", hours_text(u.guaranteed_hours), hours_text(u.admitted_hours),
                       hours_text(u.in_quota_hours), hours_text(u.borrowed_hours), hours_text(u.idle_hours), percent(u.use) or DASH,
                       money(u.cost, u.currency)] for u in report.usage])
        out += [""]
        out += table([_("pool"), _("resource"), _("capacity h"), _("used h"), _("lent h"), _("idle h"),
                      _("unallocated h"), _("utilisation")],
                     [[p.pool, f"`{p.resource}`", hours_text(p.capacity_hours), hours_text(p.admitted_hours), hours_text(p.borrowed_hours),
                       hours_text(p.idle_hours), hours_text(p.unallocated_hours), percent(p.utilisation) or DASH]
                      for p in report.pool_usage])
    out += ["", _("### Advice"), ""]
    out += [f"- **{advice_kind(a.kind)}**: {localized(a.text)}" for a in report.advice] or \
        ["- " + _("nothing to advise")]
    return out


def markdown(reports: list[ClusterReport]) -> str:
    lines = [_("# GPU capacity"), ""]
    for report in reports:
        lines += [*cluster_markdown(report), ""]
    return "\n".join(lines).rstrip() + "\n"
