"""The ledger as a table, csv, json (the documented shape) or markdown, with totals per tenant
and cost centre, what `gpugov reclaim` took back per tenant, and the closure line."""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from decimal import ROUND_HALF_EVEN, Decimal

from gpugov.findings.markdown import table as markdown_table
from gpugov.i18n import _, localized
from gpugov.i18n.width import ljust, width
from gpugov.usage.budget import unit_words
from gpugov.usage.ledger import Ledger, closure, decimal_string

FORMATS = ("table", "csv", "json", "markdown")
ROW_COLUMNS = ("tenant", "department", "cost_center", "pool", "resource", "unit", "admitted_hours", "in_quota_hours",
               "borrowed_hours", "idle_hours", "rate", "cost")


CENT = Decimal("0.01")


def _column(name: str) -> str:
    """A column's name ("admitted hours") in the reader's language; the table writes it upper case with
    dashes, the markdown as it is (ROW_COLUMNS with underscores). Unknown names stay as they are."""
    names = {
        "tenant": _("tenant"), "department": _("department"), "cost center": _("cost center"), "pool": _("pool"),
        "resource": _("resource"), "unit": _("unit"), "admitted hours": _("admitted hours"),
        "in quota hours": _("in quota hours"), "borrowed hours": _("borrowed hours"), "idle hours": _("idle hours"),
        "rate": _("rate"), "cost": _("cost"), "unallocated hours": _("unallocated hours"),
        "unallocated cost": _("unallocated cost"), "capacity hours": _("capacity hours"),
        "capacity cost": _("capacity cost"), "deactivations": _("deactivations"),
        "reclaimed hours": _("reclaimed hours"), "holder": _("holder"), "period": _("period"), "since": _("since"),
        "spent": _("spent"), "budget": _("budget"), "percent": _("percent"),
        "action": _("action"), "held": _("held"),
    }
    return names.get(name, name)


def _upper(names: list[str] | tuple[str, ...]) -> list[str]:
    """The table's header: "COST-CENTER" from "cost_center" or "cost center"."""
    return [_column(n.replace("_", " ")).upper().replace(" ", "-") for n in names]


def _h(value: Decimal | None) -> str:
    """Hours for people (table, markdown): two decimals; csv and json keep the exact micro-hours."""
    return "-" if value is None else f"{value.quantize(CENT, ROUND_HALF_EVEN):f}"


def _money(value: Decimal | None, currency: str | None) -> str:
    """A cost for people: two decimals and the currency its pool's price declares (spec.currency)."""
    if value is None:
        return "-"
    return f"{value.quantize(CENT, ROUND_HALF_EVEN):f}" + (f" {currency}" if currency else "")


def _rate(value: Decimal | None, currency: str | None) -> str:
    """A unit price as computed (at most 0.000001): rounding it would not multiply to the cost shown."""
    return "-" if value is None else decimal_string(value) + (f" {currency}" if currency else "")


def _sums(amounts: list[tuple[Decimal, str | None]]) -> str:
    """Costs of pools that may price in different currencies, summed per currency, never across."""
    by_currency: dict[str | None, Decimal] = defaultdict(Decimal)
    for amount, currency in amounts:
        by_currency[currency] += amount
    if not by_currency:
        return _money(Decimal(0), None)
    return ", ".join(_money(total, code) for code, total in sorted(by_currency.items(), key=lambda kv: kv[0] or ""))


def _row_cells(book: Ledger) -> list[list[str]]:
    return [[r.tenant, r.department or "-", r.cost_center or "-", r.pool, r.resource, r.unit, _h(r.admitted_hours),
             _h(r.in_quota_hours), _h(r.borrowed_hours), _h(r.idle_hours), _rate(r.rate, book.currency(r.pool)),
             _money(r.cost, book.currency(r.pool))] for r in book.rows]


def _pool_cells(book: Ledger) -> list[list[str]]:
    return [[c.pool, c.resource, _h(u.hours), _money(u.cost, book.currency(c.pool)), _h(c.hours),
             _rate(c.rate, book.currency(c.pool)), _money(c.cost, book.currency(c.pool))]
            for c, u in zip(book.capacity, book.unallocated, strict=True)]


RECLAIMED_HEADER = ("tenant", "resource", "deactivations", "reclaimed hours")


def _reclaimed_cells(book: Ledger) -> list[list[str]]:
    return [[r.tenant, r.resource, str(r.deactivations), _h(r.hours)] for r in book.reclaimed]


BUDGET_HEADER = ("holder", "period", "since", "spent", "budget", "unit", "percent", "action", "held")


def _budget_cells(book: Ledger) -> list[list[str]]:
    actions = {"alert": _("alert"), "hold": _("hold"), "none": _("none")}
    return [[localized(b.holder), b.period, b.since, decimal_string(b.spent), decimal_string(b.budget),
             unit_words(b.unit), f"{decimal_string(b.percent)}%", actions.get(b.action, b.action),
             _("yes") if b.held else _("no")] for b in book.budgets]


def _total_cells(book: Ledger, by: str) -> list[list[str]]:
    """Per tenant or cost centre: admitted hours and cost, per currency where pools price in several."""
    costs: dict[str, list[tuple[Decimal, str | None]]] = defaultdict(list)
    for r in book.rows:
        costs[(r.tenant if by == "tenant" else r.cost_center) or "-"].append((r.cost or Decimal(0), book.currency(r.pool)))
    return [[key, _h(hours), _sums(costs[key])] for key, hours, _cost in totals(book, by)]


def totals(book: Ledger, by: str) -> list[tuple[str, Decimal, Decimal]]:
    """(tenant or cost centre, admitted hours, cost) summed over rows; hours of different units add
    as they are (a slice-hour counts one), cost is what they share."""
    hours: dict[str, Decimal] = defaultdict(Decimal)
    cost: dict[str, Decimal] = defaultdict(Decimal)
    for r in book.rows:
        key = (r.tenant if by == "tenant" else r.cost_center) or "-"
        hours[key] += r.admitted_hours
        cost[key] += r.cost or Decimal(0)
    return [(k, hours[k], cost[k]) for k in sorted(hours)]


def closure_line(book: Ledger) -> str:
    """The verdict is exact (`closure`); the three sums are shown to the cent, one equation per
    currency, each figure with its unit: sums of two currencies are never added or set on one line."""
    charged = [(r.cost or Decimal(0), book.currency(r.pool)) for r in book.rows
               if any(c.pool == r.pool and c.resource == r.resource for c in book.capacity)]
    left = [(u.cost or Decimal(0), book.currency(u.pool)) for u in book.unallocated]
    whole = [(c.cost or Decimal(0), book.currency(c.pool)) for c in book.capacity]
    broken = closure(book)
    verdict = _("closes") if not broken else _("DOES NOT CLOSE: ") + "; ".join(broken)
    units = sorted({code for _amount, code in charged + left + whole}, key=lambda code: code or "") or [None]
    equation = _("tenants' charges {charged} + unallocated {left} = capacity x rate x window {whole}")
    equations = [equation.format(charged=_sum_in(charged, unit), left=_sum_in(left, unit), whole=_sum_in(whole, unit))
                 for unit in units]
    return _("ledger {verdict}: {equations}").format(verdict=verdict, equations=_("; ").join(equations))


def _sum_in(amounts: list[tuple[Decimal, str | None]], currency: str | None) -> str:
    """The costs priced in `currency`, summed, with it."""
    return _money(sum((amount for amount, code in amounts if code == currency), Decimal(0)), currency)



def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(width(x) for x in column) for column in zip(header, *rows, strict=False)]  # cells, not chars
    return ["  ".join(ljust(v, w) for v, w in zip(line, widths, strict=True)).rstrip() for line in [header, *rows]]


def table(book: Ledger) -> str:
    since, until = book.to_json()["window"].values()
    lines = [_("usage of cluster {cluster}, {since} to {until} ({seconds} s)").format(
        cluster=book.cluster, since=since, until=until, seconds=book.window.seconds), ""]
    lines += _table(_upper(ROW_COLUMNS), _row_cells(book))
    lines += ["", _("unallocated and capacity per pool resource:")]
    lines += _table(_upper(["pool", "resource", "unallocated hours", "unallocated cost", "capacity hours", "rate",
                            "capacity cost"]), _pool_cells(book))
    for by in ("tenant", "cost_center"):
        lines += ["", _("per tenant:") if by == "tenant" else _("per cost center:")]
        lines += _table(_upper([by, "admitted hours", "cost"]), _total_cells(book, by))
    if book.reclaimed:
        lines += ["", _("reclaimed by gpugov reclaim (idle from the warning to the deactivation):")]
        lines += _table(_upper(RECLAIMED_HEADER), _reclaimed_cells(book))
    if book.budgets:
        lines += ["", _("GPU-hour budgets, spent this period (not this window):")]
        lines += _table(_upper(BUDGET_HEADER), _budget_cells(book))
    lines += ["", closure_line(book)]
    return "\n".join(lines) + "\n"


def markdown(book: Ledger) -> str:
    md = markdown_table
    since, until = book.to_json()["window"].values()
    lines = [_("### Usage of cluster {cluster}, {since} to {until}").format(cluster=book.cluster, since=since,
                                                                            until=until), ""]
    lines += md([_column(c.replace("_", " ")).replace(" ", "_") for c in ROW_COLUMNS], _row_cells(book))
    lines += ["", _("#### Unallocated and capacity"), ""]
    lines += md([_column(c) for c in ("pool", "resource", "unallocated hours", "unallocated cost", "capacity hours",
                                      "rate", "capacity cost")], _pool_cells(book))
    for by in ("tenant", "cost_center"):
        lines += ["", _("#### Per tenant") if by == "tenant" else _("#### Per cost center"), ""]
        lines += md([_column(c) for c in (by.replace("_", " "), "admitted hours", "cost")], _total_cells(book, by))
    if book.reclaimed:
        lines += ["", _("#### Reclaimed by gpugov reclaim (idle from the warning to the deactivation)"), ""]
        lines += md([_column(c) for c in RECLAIMED_HEADER], _reclaimed_cells(book))
    if book.budgets:
        lines += ["", _("#### GPU-hour budgets, spent this period (not this window)"), ""]
        lines += md([_column(c) for c in BUDGET_HEADER], _budget_cells(book))
    lines += ["", closure_line(book)]
    return "\n".join(lines) + "\n"


def csv_text(book: Ledger) -> str:
    """One table: `section` tenant (a row of the ledger), unallocated, capacity or reclaimed; `hours` is
    the admitted hours of a tenant row, the reclaimed hours of a reclaimed row (with its `deactivations`)
    and the hours of the others; exact numbers, and the currency of the pool's price where it declares
    one. Empty cells for what does not apply."""
    def cell(value: Decimal | None) -> str:
        return "" if value is None else decimal_string(value)

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["section", *ROW_COLUMNS[:6], "hours", *ROW_COLUMNS[7:], "currency", "deactivations"])
    for r in book.rows:
        writer.writerow(["tenant", r.tenant, r.department or "", r.cost_center or "", r.pool, r.resource, r.unit,
                         cell(r.admitted_hours), cell(r.in_quota_hours), cell(r.borrowed_hours), cell(r.idle_hours),
                         cell(r.rate), cell(r.cost), book.currency(r.pool) or "", ""])
    for c, u in zip(book.capacity, book.unallocated, strict=True):
        code = book.currency(c.pool) or ""
        writer.writerow(["unallocated", "", "", "", u.pool, u.resource, "", cell(u.hours), "", "", "", "", cell(u.cost),
                         code, ""])
        writer.writerow(["capacity", "", "", "", c.pool, c.resource, "", cell(c.hours), "", "", "", cell(c.rate),
                         cell(c.cost), code, ""])
    for t in book.reclaimed:
        writer.writerow(["reclaimed", t.tenant, "", "", "", t.resource, "", cell(t.hours), "", "", "", "", "", "",
                         str(t.deactivations)])
    return out.getvalue()


def json_text(book: Ledger) -> str:
    return json.dumps(book.to_json(), indent=2) + "\n"


RENDER = {"table": table, "csv": csv_text, "json": json_text, "markdown": markdown}
