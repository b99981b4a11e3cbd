"""Policy checks on the organisation model: one module per rule family.

Each family module declares its rules (stable ids, level, hint) and marks its check functions with
`@check` (gpugov.policy.checks); FAMILIES below names every family with a plain import, and
`run_policy` runs their checks and returns findings sorted by location.

A check that reports where a change is (`@change_check`) also gets the base revision's model when
one is known (`plan`, `validate --base`): what the base did not have is reported at its line, what
it had becomes a related location. Without a base it reports deterministically on its own.
"""

from __future__ import annotations

from gpugov.declarations.model import Model
from gpugov.findings import Finding
from gpugov.policy import (
    accelerators,
    adoption,
    budget,
    capacity,
    conformance,
    fleet,
    hardware,
    isolation,
    mig,
    naming,
    ownership,
    priorities,
    reclaim,
    references,
    repository,
    timeline,
    volcano,
)
from gpugov.policy.checks import change_checks, model_checks

FAMILIES = (
    references, naming, accelerators, capacity, mig, hardware, priorities, ownership, conformance, repository,
    isolation, reclaim, adoption, timeline, budget, fleet, volcano,
)


def run_policy(model: Model, base: Model | None = None) -> list[Finding]:
    """Every policy finding of `model`; with `base` (the revision it changes) the change checks
    report at what the change added."""
    findings: list[Finding] = []
    for family in FAMILIES:
        for function in model_checks(family):
            findings.extend(function(model))
    for family in FAMILIES:
        for change in change_checks(family):
            findings.extend(change(model, base))
    return sorted(findings, key=Finding.sort_key)
