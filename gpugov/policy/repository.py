"""Checks on the repository around the declarations (they need the work tree, not just the model)."""

from __future__ import annotations

from pathlib import Path

from gpugov import codeowners
from gpugov.declarations.model import Model
from gpugov.findings import Finding, Level, Location, make, rule

CODEOWNERS_STALE = rule(
    "GG090",
    "codeowners-stale",
    Level.WARNING,
    ".github/CODEOWNERS does not match the declarations' owners.",
    "Run `gpugov codeowners` and commit the result.",
)


def check_repository(root: Path, model: Model) -> list[Finding]:
    if codeowners.is_stale(root, model):
        return [make(CODEOWNERS_STALE, "CODEOWNERS is out of date with the tenants' owners and the platform team",
                     Location(codeowners.PATH.as_posix(), 1, 1))]
    return []
