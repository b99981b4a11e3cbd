"""Policy checks on the organisation model: one module per rule family.

Each family module registers its rules (stable ids, level, hint) and its check functions
with `@check`; `run_policy` runs them all and returns findings sorted by location.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable

from gpugov.declarations.model import Model
from gpugov.findings import Finding

Check = Callable[[Model], Iterable[Finding]]
CHECKS: list[Check] = []


def check(function: Check) -> Check:
    CHECKS.append(function)
    return function


FAMILIES = (
    "references", "naming", "accelerators", "capacity", "mig", "hardware", "priorities", "ownership", "conformance",
    "repository", "isolation",
)


def load_families() -> None:
    """Import every rule family so its rules and checks register (idempotent)."""
    for family in FAMILIES:
        importlib.import_module(f"gpugov.policy.{family}")


def run_policy(model: Model) -> list[Finding]:
    load_families()
    findings: list[Finding] = []
    for function in CHECKS:
        findings.extend(function(model))
    return sorted(findings, key=Finding.sort_key)
