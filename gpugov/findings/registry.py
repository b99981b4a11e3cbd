"""The one rule table: every rule of every family, for `gpugov rules`, the README and the tests.

Rules are declared beside the checks that raise them (yamllint's layout); this list names
every module that declares some, so importing it registers them all.
"""

from __future__ import annotations

import importlib

from gpugov.findings import RULES, Rule
from gpugov.policy import FAMILIES

RULE_MODULES = (
    "gpugov.declarations.loader",  # GG001-GG005: reading files
    "gpugov.declarations.schema",  # GG003: the JSON Schema
    "gpugov.declarations.model",  # GG010: duplicate names
    *(f"gpugov.policy.{family}" for family in FAMILIES),  # GG011-GG101: policy on the model
    "gpugov.drift.rules",  # GD: the live cluster against the declarations
    "gpugov.plan.risks",  # GP: risks of a change, in the pull request's plan
)


def all_rules() -> list[Rule]:
    """Every rule, sorted by id."""
    for module in RULE_MODULES:
        importlib.import_module(module)
    return sorted(RULES.values(), key=lambda r: r.id)


def markdown_table() -> str:
    rows = ["| id | name | level | what it finds |", "|---|---|---|---|"]
    rows += [f"| {r.id} | {r.name} | {r.level.value} | {r.summary} |" for r in all_rules()]
    return "\n".join(rows) + "\n"
