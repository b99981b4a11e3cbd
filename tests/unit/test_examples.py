"""Acceptance on example trees (check-jsonschema style).

Every positive tree validates clean. Every negative tree fails with exactly the rules its
files announce: a `# expect: GGnnn` comment on the line the finding must point at, or a
line `GGnnn file:line` in expect.txt for findings that point into the base tree.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.rules import finding_rules
from tests.helpers.repos import EXAMPLES, REPO, overlay_repo

MARKER = re.compile(r"#\s*expect:\s*(GG\d{3})")
NEGATIVE = sorted(p for p in (EXAMPLES / "negative").iterdir() if p.is_dir())
POSITIVE = sorted(p for p in (EXAMPLES / "positive").iterdir() if p.is_dir())


def expected_findings(case: Path) -> set[tuple[str, str, int]]:
    expected = set()
    for path in case.rglob("*.yaml"):
        rel = path.relative_to(case).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for rule in MARKER.findall(line):
                expected.add((rule, rel, number))
    expect_file = case / "expect.txt"
    if expect_file.exists():
        for line in expect_file.read_text().split("\n"):
            if line.strip():
                rule, where = line.split()
                file, number = where.rsplit(":", 1)
                expected.add((rule, file, int(number)))
    return expected


@pytest.mark.parametrize("case", NEGATIVE, ids=lambda p: p.name)
def test_negative_example_fails_with_its_rule_at_its_line(case: Path, tmp_path: Path) -> None:
    result = validate_repo(overlay_repo(tmp_path, case))
    expected = expected_findings(case)
    assert expected, f"{case.name} announces no expected finding"
    actual = {(f.rule, f.location.file, f.location.line) for f in result.findings if f.location}
    assert actual == expected, "\n".join(str(f) for f in result.findings)
    assert case.name.split("-")[0] in {rule for rule, _, _ in expected}


@pytest.mark.parametrize("case", POSITIVE, ids=lambda p: p.name)
def test_positive_example_is_clean(case: Path, tmp_path: Path) -> None:
    result = validate_repo(overlay_repo(tmp_path, case))
    assert result.findings == []


def test_base_and_root_example_org_are_clean(tmp_path: Path) -> None:
    assert validate_repo(overlay_repo(tmp_path)).findings == []
    root = validate_repo(REPO)
    assert root.findings == []
    assert root.model is not None
    assert len(root.model.tenants) >= 6
    assert len({t.department for t in root.model.tenants.values()}) >= 2
    assert sum(len(p.nodes) for p in root.model.pools.values()) >= 12


def test_every_declaration_rule_has_a_negative_example() -> None:
    covered = {case.name.split("-")[0] for case in NEGATIVE}
    # GG004 (hostile files) is generated in test_hostile_inputs; GG081-GG083 cannot arise from
    # declarations and are tested on hand-made objects in test_conformance. GG140 speaks of a change, so it
    # needs a base revision: tests/unit/test_findings_at_change.py.
    # GG173 (an expired grant) needs a clock: tests/unit/test_quota_timeline.py.
    elsewhere = {"GG004", "GG081", "GG082", "GG083", "GG140", "GG173"}
    declaration_rules = {rule.id for rule in finding_rules() if rule.id.startswith("GG")}  # GD (drift) rules: tests/e2e/test_drift.py
    assert declaration_rules - covered - elsewhere == set()
