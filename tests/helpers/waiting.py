"""Helpers the e2e modules share for reading Workloads and waiting on the living sandbox."""

from __future__ import annotations

import time
from typing import Any


def condition(w: dict[str, Any], kind: str) -> dict[str, Any]:
    """A Workload's condition of type `kind` ({} when absent)."""
    return next((c for c in w.get("status", {}).get("conditions", []) if c["type"] == kind), {})


def wait_for(predicate: Any, what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)
