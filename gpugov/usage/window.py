"""The ledger's window: `--since` and `--until` as ISO 8601 times or a duration back from until."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

_DURATION = re.compile(r"^(\d+)([smhdw])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class WindowError(ValueError):
    """A window that cannot be read or makes no sense (empty, in the future)."""


def seconds(delta: timedelta) -> Decimal:
    """A duration in exact Decimal seconds."""
    return Decimal(delta.days * 86400 + delta.seconds) + Decimal(delta.microseconds) / Decimal(10**6)


@dataclass(frozen=True)
class Window:
    since: datetime
    until: datetime

    @property
    def seconds(self) -> int:
        return int((self.until - self.since).total_seconds())

    def clip(self, start: datetime, end: datetime) -> tuple[datetime, datetime] | None:
        """[start, end) within the window, None when they do not overlap."""
        low, high = max(start, self.since), min(end, self.until)
        return (low, high) if low < high else None


def parse_time(text: str, option: str) -> datetime:
    """An ISO 8601 time (`2026-11-01`, `2026-11-01T08:00:00Z`, with an offset); no zone means UTC.
    Whole seconds: Kubernetes records times to the second."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise WindowError(f"{option} {text!r} is neither an ISO 8601 time (2026-11-01T08:00:00Z) nor a "
                          "duration (90m, 24h, 7d, 2w)") from None
    moment = moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    return moment.replace(microsecond=0)


def _duration(text: str) -> timedelta | None:
    match = _DURATION.match(text.strip())
    return timedelta(seconds=int(match[1]) * _UNIT[match[2]]) if match else None


def parse_window(since: str, until: str | None, now: datetime) -> Window:
    """The window for the options; `until` defaults to now, `since` may be a duration before it."""
    now = now.astimezone(UTC).replace(microsecond=0)
    end = now if until is None else parse_time(until, "--until")
    if end > now:
        raise WindowError(f"--until {until} is in the future (now is {now:%Y-%m-%dT%H:%M:%SZ}): "
                          "what is not yet used cannot be billed")
    back = _duration(since)
    start = end - back if back is not None else parse_time(since, "--since")
    if start >= end:
        raise WindowError(f"--since ({start:%Y-%m-%dT%H:%M:%SZ}) must be before --until ({end:%Y-%m-%dT%H:%M:%SZ})")
    return Window(start, end)
