"""Markdown tables for every reporter: one header, one separator, cells that cannot break a row."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def cell(text: str, empty: str = "") -> str:
    """`text` as one table cell: a `|` escaped and a newline flattened, so that a value (a finding's
    message, a reason Kueue wrote) can never end its row or start another."""
    return text.replace("|", "\\|").replace("\n", " ") or empty


def table(header: Sequence[str], rows: Iterable[Sequence[str]], *, align: Sequence[str] = (),
          empty: str = "") -> list[str]:
    """The lines of a table; `align` gives each column's separator (`---` by default, `---:` for numbers)."""
    separator = [align[i] if i < len(align) else "---" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "".join(f"{s}|" for s in separator)]
    lines += ["| " + " | ".join(cell(c, empty) for c in row) + " |" for row in rows]
    return lines
