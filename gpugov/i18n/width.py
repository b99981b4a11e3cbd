"""Column widths for text tables in any language: a Chinese character takes two terminal cells, so a
table padded by len() would not line up. ASCII text is as wide as it is long, so English output is
unchanged."""

from __future__ import annotations

from unicodedata import east_asian_width


def width(text: str) -> int:
    """Terminal cells `text` takes: two for a wide or full-width character, one for any other."""
    return sum(2 if east_asian_width(ch) in "WF" else 1 for ch in text)


def ljust(text: str, cells: int) -> str:
    """`text` padded with spaces to `cells` terminal cells (as str.ljust does by characters)."""
    return text + " " * max(0, cells - width(text))
