"""The one rule table: every rule gpugov reports, for `gpugov rules`, the README and the tests.

As yamllint's `_RULES`: plain imports of every module that declares rules, and nothing registers
itself on import. A module's rules are the `Rule` constants it holds (GG, GD, GP). The doctor's
readiness checks (DR) are the second table, listed beside them; a check reports pass, warn, fail
or skip, and the level shown is the worst of these.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from gpugov.declarations import build, loader, schema
from gpugov.doctor.checks import CHECKS
from gpugov.drift import rules as drift_rules
from gpugov.findings import Rule
from gpugov.findings.markdown import table
from gpugov.i18n import _
from gpugov.plan import risks
from gpugov.plan import timeline as plan_timeline
from gpugov.policy import FAMILIES
from gpugov.reclaim import rules as reclaim_rules
from gpugov.usage import budget
from gpugov.yamlpos import reader

RULE_MODULES: tuple[ModuleType, ...] = (
    reader,  # GG001, GG002, GG004: reading YAML
    loader,  # GG005: reading files
    schema,  # GG003: the JSON Schema
    build,  # GG010: duplicate names
    *FAMILIES,  # GG011-GG160: policy on the model
    drift_rules,  # GD: the live cluster against the declarations
    reclaim_rules,  # GD040, GD041: gpugov reclaim's warnings and deactivations
    budget,  # GD050, GD051: gpugov budget's thresholds
    risks,  # GP: risks of a change, in the pull request's plan
    plan_timeline,  # GP030: a grant or window added or widened
)
CHECK_LEVEL = "fail"  # the worst outcome of a readiness check


@dataclass(frozen=True)
class Entry:
    """One row of the table: a finding's rule or a readiness check."""

    id: str
    name: str
    level: str
    summary: str


def finding_rules() -> list[Rule]:
    """Every rule a finding can carry, sorted by id; a rule imported by another module counts once."""
    found: dict[str, Rule] = {}
    for module in RULE_MODULES:
        for value in vars(module).values():
            if isinstance(value, Rule) and found.setdefault(value.id, value) is not value:
                raise ValueError(f"rule {value.id} declared twice (in {module.__name__} and elsewhere)")
    return sorted(found.values(), key=lambda r: r.id)


def all_rules() -> list[Entry]:
    """Every rule and readiness check, sorted by id."""
    entries = [Entry(r.id, r.name, r.level.value, r.summary) for r in finding_rules()]
    entries += [Entry(c.id, c.name, CHECK_LEVEL, c.summary) for c in CHECKS]
    return sorted(entries, key=lambda e: e.id)


def text_table() -> str:
    return "".join(f"{e.id}  {e.level:<7}  {e.name}: {_(e.summary)}\n" for e in all_rules())  # reader's language


def markdown_table() -> str:  # English: the README's table
    rows = ((e.id, e.name, str(e.level), e.summary) for e in all_rules())
    return "\n".join(table(("id", "name", "level", "what it finds"), rows)) + "\n"
