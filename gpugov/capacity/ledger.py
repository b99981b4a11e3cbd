"""The usage ledger `gpugov capacity --usage FILE` reads: the JSON that `gpugov usage` writes.

Only its documented shape is read (every number a decimal string), so the report never
depends on how the ledger was computed. A ledger that says it is not complete is refused:
a partial window would read as idle guarantees and wrong advice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from gpugov.usage.ledger import PoolHours
from gpugov.usage.ledger import Row as UsageRow  # the rows `gpugov usage` writes, read back

ROW_KEYS = ("tenant", "pool", "resource", "admitted_hours", "in_quota_hours", "borrowed_hours", "idle_hours")


class LedgerError(ValueError):
    """The ledger cannot be used: unreadable, not the documented shape, or incomplete."""


@dataclass(frozen=True)
class Ledger:
    source: str
    cluster: str
    since: datetime
    until: datetime
    rows: tuple[UsageRow, ...]
    unallocated: tuple[PoolHours, ...]
    capacity: tuple[PoolHours, ...]

    @property
    def hours(self) -> Decimal:
        """Length of the window in hours (exact: whole seconds / 3600)."""
        return Decimal(int((self.until - self.since).total_seconds())) / Decimal(3600)


def _number(value: Any, where: str, optional: bool = False) -> Decimal | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise LedgerError(f"{where} must be a decimal string, got {json.dumps(value)}")
    try:
        number = Decimal(value)
    except InvalidOperation:
        raise LedgerError(f"{where} is not a decimal number: {value!r}") from None
    if not number.is_finite():
        raise LedgerError(f"{where} is not a finite number: {value!r}")
    return number


def _hours(value: Any, where: str) -> Decimal:
    number = _number(value, where)
    assert number is not None
    if number < 0:
        raise LedgerError(f"{where} is negative: {value}")
    return number


def _text(entry: dict[str, Any], key: str, where: str, optional: bool = False) -> str | None:
    value = entry.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or (not value and not optional):
        raise LedgerError(f"{where}.{key} must be a non-empty string, got {json.dumps(value)}")
    return value or None


def _time(value: Any, where: str) -> datetime:
    if not isinstance(value, str):
        raise LedgerError(f"{where} must be an ISO 8601 time, got {json.dumps(value)}")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise LedgerError(f"{where} is not an ISO 8601 time: {value!r}") from None
    if moment.tzinfo is None:
        raise LedgerError(f"{where} has no time zone: {value!r} (write e.g. 2026-11-01T00:00:00Z)")
    return moment


def _entries(data: dict[str, Any], key: str) -> list[dict[str, Any]]:
    entries = data.get(key, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise LedgerError(f"'{key}' must be a list of objects")
    return entries


def _pool_hours(entry: dict[str, Any], where: str, priced: bool) -> PoolHours:
    return PoolHours(
        _text(entry, "pool", where) or "",
        _text(entry, "resource", where) or "",
        _hours(entry.get("hours"), f"{where}.hours"),
        _number(entry.get("rate"), f"{where}.rate", optional=True) if priced else None,
        _number(entry.get("cost"), f"{where}.cost", optional=True),
    )


def parse_ledger(data: Any, source: str) -> Ledger:
    """The ledger in `data` (parsed JSON); LedgerError naming the first problem otherwise."""
    if not isinstance(data, dict):
        raise LedgerError("the ledger must be a JSON object")
    if data.get("complete") is not True:
        raise LedgerError(
            "the ledger is not complete (\"complete\": " + json.dumps(data.get("complete")) + "): a partial window "
            "would read as unused guarantees; re-run gpugov usage until it reads the whole window"
        )
    window = data.get("window")
    if not isinstance(window, dict):
        raise LedgerError("'window' must be an object with 'since' and 'until'")
    since, until = _time(window.get("since"), "window.since"), _time(window.get("until"), "window.until")
    if until <= since:
        raise LedgerError(f"window.until ({window['until']}) is not after window.since ({window['since']})")
    cluster = data.get("cluster")
    if not isinstance(cluster, str) or not cluster:
        raise LedgerError("'cluster' must name the cluster the ledger was read from")
    rows = []
    for index, entry in enumerate(_entries(data, "rows")):
        where = f"rows[{index}]"
        missing = [key for key in ROW_KEYS if key not in entry]
        if missing:
            raise LedgerError(f"{where} lacks {', '.join(missing)}")
        rows.append(
            UsageRow(
                tenant=_text(entry, "tenant", where) or "",
                department=_text(entry, "department", where, optional=True),
                cost_center=_text(entry, "cost_center", where, optional=True),
                pool=_text(entry, "pool", where) or "",
                resource=_text(entry, "resource", where) or "",
                unit=_text(entry, "unit", where, optional=True) or "hours",
                admitted_hours=_hours(entry["admitted_hours"], f"{where}.admitted_hours"),
                in_quota_hours=_hours(entry["in_quota_hours"], f"{where}.in_quota_hours"),
                borrowed_hours=_hours(entry["borrowed_hours"], f"{where}.borrowed_hours"),
                idle_hours=_hours(entry["idle_hours"], f"{where}.idle_hours"),
                rate=_number(entry.get("rate"), f"{where}.rate", optional=True),
                cost=_number(entry.get("cost"), f"{where}.cost", optional=True),
            )
        )
    unallocated = [_pool_hours(e, f"unallocated[{i}]", False) for i, e in enumerate(_entries(data, "unallocated"))]
    capacity = [_pool_hours(e, f"capacity[{i}]", True) for i, e in enumerate(_entries(data, "capacity"))]
    return Ledger(source, cluster, since, until, tuple(rows), tuple(unallocated), tuple(capacity))


def load_ledger(path: Path) -> Ledger:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LedgerError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LedgerError(f"{path} is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    try:
        return parse_ledger(data, str(path))
    except LedgerError as exc:
        raise LedgerError(f"{path}: {exc}") from None
