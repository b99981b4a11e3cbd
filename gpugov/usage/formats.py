"""The ledger as a table, csv, json (the documented shape) or markdown, with totals per tenant
and cost centre and the closure line."""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from decimal import Decimal

from gpugov.usage.ledger import Ledger, closure, decimal_string

FORMATS = ("table", "csv", "json", "markdown")
ROW_COLUMNS = ("tenant", "department", "cost_center", "pool", "resource", "unit", "admitted_hours", "in_quota_hours",
               "borrowed_hours", "idle_hours", "rate", "cost")


def _n(value: Decimal | None) -> str:
    return "-" if value is None else decimal_string(value)


def _row_cells(book: Ledger) -> list[list[str]]:
    return [[r.tenant, r.department or "-", r.cost_center or "-", r.pool, r.resource, r.unit, _n(r.admitted_hours),
             _n(r.in_quota_hours), _n(r.borrowed_hours), _n(r.idle_hours), _n(r.rate), _n(r.cost)] for r in book.rows]


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
    charged = sum((r.cost or Decimal(0) for r in book.rows if any(c.pool == r.pool and c.resource == r.resource
                                                                  for c in book.capacity)), Decimal(0))
    left = sum((u.cost or Decimal(0) for u in book.unallocated), Decimal(0))
    whole = sum((c.cost or Decimal(0) for c in book.capacity), Decimal(0))
    broken = closure(book)
    verdict = "closes" if not broken else "DOES NOT CLOSE: " + "; ".join(broken)
    return (f"ledger {verdict}: tenants' charges {_n(charged)} + unallocated {_n(left)} = capacity x rate x window "
            f"{_n(whole)}")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(x) for x in column) for column in zip(header, *rows, strict=False)]
    return ["  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in [header, *rows]]


def table(book: Ledger) -> str:
    since, until = book.to_json()["window"].values()
    lines = [f"usage of cluster {book.cluster}, {since} to {until} ({book.window.seconds} s)", ""]
    lines += _table([c.upper().replace("_", "-") for c in ROW_COLUMNS], _row_cells(book))
    lines += ["", "unallocated and capacity per pool resource:"]
    lines += _table(["POOL", "RESOURCE", "UNALLOCATED-HOURS", "UNALLOCATED-COST", "CAPACITY-HOURS", "RATE",
                     "CAPACITY-COST"],
                    [[c.pool, c.resource, _n(u.hours), _n(u.cost), _n(c.hours), _n(c.rate), _n(c.cost)]
                     for c, u in zip(book.capacity, book.unallocated, strict=True)])
    for by in ("tenant", "cost_center"):
        lines += ["", f"per {by.replace('_', ' ')}:"]
        lines += _table([by.upper().replace("_", "-"), "ADMITTED-HOURS", "COST"],
                        [[k, _n(h), _n(c)] for k, h, c in totals(book, by)])
    lines += ["", closure_line(book)]
    return "\n".join(lines) + "\n"


def markdown(book: Ledger) -> str:
    def md(header: list[str], rows: list[list[str]]) -> list[str]:
        return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
                *("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows)]

    since, until = book.to_json()["window"].values()
    lines = [f"### Usage of cluster {book.cluster}, {since} to {until}", ""]
    lines += md(list(ROW_COLUMNS), _row_cells(book))
    lines += ["", "#### Unallocated and capacity", ""]
    lines += md(["pool", "resource", "unallocated hours", "unallocated cost", "capacity hours", "rate", "capacity cost"],
                [[c.pool, c.resource, _n(u.hours), _n(u.cost), _n(c.hours), _n(c.rate), _n(c.cost)]
                 for c, u in zip(book.capacity, book.unallocated, strict=True)])
    for by in ("tenant", "cost_center"):
        lines += ["", f"#### Per {by.replace('_', ' ')}", ""]
        lines += md([by.replace("_", " "), "admitted hours", "cost"], [[k, _n(h), _n(c)] for k, h, c in totals(book, by)])
    lines += ["", closure_line(book)]
    return "\n".join(lines) + "\n"


def csv_text(book: Ledger) -> str:
    """One table: `section` tenant (a row of the ledger), unallocated or capacity; `hours` is the
    admitted hours of a tenant row and the hours of the others. Empty cells for what does not apply."""
    def cell(value: Decimal | None) -> str:
        return "" if value is None else decimal_string(value)

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["section", *ROW_COLUMNS[:6], "hours", *ROW_COLUMNS[7:]])
    for r in book.rows:
        writer.writerow(["tenant", r.tenant, r.department or "", r.cost_center or "", r.pool, r.resource, r.unit,
                         cell(r.admitted_hours), cell(r.in_quota_hours), cell(r.borrowed_hours), cell(r.idle_hours),
                         cell(r.rate), cell(r.cost)])
    for c, u in zip(book.capacity, book.unallocated, strict=True):
        writer.writerow(["unallocated", "", "", "", u.pool, u.resource, "", cell(u.hours), "", "", "", "", cell(u.cost)])
        writer.writerow(["capacity", "", "", "", c.pool, c.resource, "", cell(c.hours), "", "", "", cell(c.rate),
                         cell(c.cost)])
    return out.getvalue()


def json_text(book: Ledger) -> str:
    return json.dumps(book.to_json(), indent=2) + "\n"


RENDER = {"table": table, "csv": csv_text, "json": json_text, "markdown": markdown}
