"""Kubernetes resource quantities as exact Decimals.

The core never uses floats for quotas: "8", 8 and "8000m" must compare equal, and sums of
many tenants' quotas must not drift. Formatting is canonical so rendered manifests are
byte-identical for equal values.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
}
_PATTERN = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity."""


def parse_quantity(value: object) -> Decimal:
    """Parse a Kubernetes quantity ("2Ti", "500m", 8, "1e3") into an exact Decimal."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))
    if not isinstance(value, str):
        raise QuantityError(f"{value!r} is not a quantity")
    match = _PATTERN.match(value.strip())
    if not match:
        raise QuantityError(f"{value!r} is not a quantity (examples: 8, 500m, 64Gi, 2Ti)")
    number, suffix = match.group(1), match.group(2) or ""
    try:
        base = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only numbers
        raise QuantityError(f"{value!r} is not a quantity") from exc
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    if suffix in _DECIMAL:
        return base * _DECIMAL[suffix]
    return base * (Decimal(10) ** int(suffix[1:]))


@lru_cache(maxsize=4096)
def format_quantity(value: Decimal) -> str:
    """Canonical text for a quantity: integers plainly or with the largest exact binary
    suffix (>= 1Ki), fractions as milli-units (rounded up, as Kubernetes does)."""
    if value == value.to_integral_value():
        whole = int(value)
        if whole and abs(whole) >= 2**10:
            for suffix, factor in reversed(list(_BINARY.items())):
                if whole % factor == 0:
                    return f"{whole // factor}{suffix}"
        return str(whole)
    milli = (value * 1000).to_integral_value(rounding="ROUND_CEILING")
    return f"{int(milli)}m"


def quantities_equal(a: object, b: object) -> bool:
    """True when two quantities denote the same amount, whatever their spelling."""
    try:
        return parse_quantity(a) == parse_quantity(b)
    except QuantityError:
        return a == b
