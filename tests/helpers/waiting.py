"""Helpers the e2e modules share for reading Workloads and waiting on the living sandbox."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def condition(w: dict[str, Any], kind: str) -> dict[str, Any]:
    """A Workload's condition of type `kind` ({} when absent)."""
    return next((c for c in w.get("status", {}).get("conditions", []) if c["type"] == kind), {})


def wait_for(predicate: Any, what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def eventually(probe: Callable[[], T | None], timeout: float = 60.0, what: str = "condition") -> T:
    """Poll ``probe`` until it returns something truthy, and return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached after {timeout:.0f}s")
        time.sleep(0.5)
