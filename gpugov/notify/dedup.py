"""Remember what each sink was last sent, so an unchanged set of findings is not sent again too soon.

The fingerprint covers rule, object (the finding's file, without line and column: editing an unrelated
part of the file must not re-alert) and message, and ignores order and duplicates.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from gpugov.findings import Finding

log = logging.getLogger("gpugov.notify")
STATE_VERSION = 1


def fingerprint(findings: list[Finding]) -> str:
    keys = sorted({json.dumps([f.rule, f.location.file if f.location else "", f.message]) for f in findings})
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()[:32]


EMPTY = fingerprint([])


@dataclass(frozen=True)
class Sent:
    fingerprint: str
    at: datetime
    findings: int


class StateStore(Protocol):
    """Where what was last sent is kept: a file (FileState), or elsewhere (a ConfigMap, for the
    drift CronJob whose pods keep no files between runs)."""

    def load(self) -> dict[str, Sent]:
        """What was last sent; "nothing yet" when the store is missing or unreadable."""
        ...

    def save(self, state: dict[str, Sent]) -> None:
        """Keep `state`; OSError when it cannot."""
        ...


@dataclass(frozen=True)
class FileState:
    path: Path

    def load(self) -> dict[str, Sent]:
        return load_state(self.path)

    def save(self, state: dict[str, Sent]) -> None:
        save_state(self.path, state)

    def __str__(self) -> str:
        return str(self.path)


def state_from_text(text: str) -> dict[str, Sent]:
    """Parse a saved state; ValueError, KeyError, TypeError or AttributeError when it is malformed."""
    data = json.loads(text)
    return {
        name: Sent(
            str(entry["fingerprint"]),
            _aware(datetime.fromisoformat(entry["sent_at"])),
            int(entry.get("findings", 0)),
        )
        for name, entry in data["sinks"].items()
    }


def state_to_text(state: dict[str, Sent]) -> str:
    data = {
        "version": STATE_VERSION,
        "sinks": {
            name: {"fingerprint": s.fingerprint, "sent_at": s.at.astimezone(UTC).isoformat(), "findings": s.findings}
            for name, s in sorted(state.items())
        },
    }
    return json.dumps(data, indent=2) + "\n"


def load_state(path: Path) -> dict[str, Sent]:
    """Per sink name, what was last delivered. A missing or unreadable file means "nothing yet"."""
    try:
        return state_from_text(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        # Worst case a repeated message; refusing to alert over a bad cache file would be worse.
        log.warning("ignoring notification state %s (%s)", path, type(exc).__name__)
        return {}


def _aware(when: datetime) -> datetime:
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def save_state(path: Path, state: dict[str, Sent]) -> None:
    """Write atomically: a crash leaves the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(state_to_text(state))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
