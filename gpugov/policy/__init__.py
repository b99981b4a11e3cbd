"""Policy checks on the organisation model: one module per rule family.

Each family module registers its rules (stable ids, level, hint) and its check functions
with `@check`; `run_policy` runs them all and returns findings sorted by location.

A check that reports where a change is (`@change_check`) also gets the base revision's model when
one is known (`plan`, `validate --base`): what the base did not have is reported at its line, what
it had becomes a related location. Without a base it reports deterministically on its own.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable

from gpugov.declarations.model import Model
from gpugov.findings import Finding

Check = Callable[[Model], Iterable[Finding]]
ChangeCheck = Callable[[Model, Model | None], Iterable[Finding]]
CHECKS: list[Check] = []
CHANGE_CHECKS: list[ChangeCheck] = []


def check(function: Check) -> Check:
    CHECKS.append(function)
    return function


def change_check(function: ChangeCheck) -> ChangeCheck:
    """A check called with the head's model and the base's (None when no base is known)."""
    CHANGE_CHECKS.append(function)
    return function


FAMILIES = (
    "references", "naming", "accelerators", "capacity", "mig", "hardware", "priorities", "ownership", "conformance",
    "repository", "isolation",
)


def load_families() -> None:
    """Import every rule family so its rules and checks register (idempotent)."""
    for family in FAMILIES:
        importlib.import_module(f"gpugov.policy.{family}")


def run_policy(model: Model, base: Model | None = None) -> list[Finding]:
    """Every policy finding of `model`; with `base` (the revision it changes) the change checks
    report at what the change added."""
    load_families()
    findings: list[Finding] = []
    for function in CHECKS:
        findings.extend(function(model))
    for change in CHANGE_CHECKS:
        findings.extend(change(model, base))
    return sorted(findings, key=Finding.sort_key)
