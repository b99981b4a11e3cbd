"""The CI files are real: actionlint passes, and every gpugov call in them parses with the CLI."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gpugov.app.pipeline import validate_repo
from gpugov.cli import build_parser
from gpugov.compile import codeowners
from tests.conftest import REPO

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
CI_FILES = [*WORKFLOWS, REPO / "examples" / "ci" / "gitlab-ci.yml"]


def actionlint() -> str:
    for candidate in (REPO / "tools" / "bin" / "actionlint", shutil.which("actionlint"),
                      Path.home() / "go" / "bin" / "actionlint"):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    if os.environ.get("GPUGOV_REQUIRE_E2E") == "1":
        pytest.fail("actionlint is missing: make test installs it with Go")
    pytest.skip("actionlint not installed (make test builds it with `go install`; it needs Go)")


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_actionlint(workflow: Path) -> None:
    proc = subprocess.run([actionlint(), "-no-color", str(workflow)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def gpugov_calls(path: Path) -> list[list[str]]:
    calls = []
    text = re.sub(r"\$\{\{[^}]*\}\}", "placeholder", path.read_text())
    text = re.sub(r"\\\n\s*", " ", text)  # join shell line continuations
    for line in text.splitlines():
        line = line.strip().removeprefix("- ").removeprefix("run: ")
        if line.startswith("gpugov "):
            words = shlex.split(line.split(">")[0])
            # a shell array expansion ("${notify[@]}") adds optional words: drop it
            words = [w for w in words[1:] if not (w.startswith("$") and "[@]" in w)]
            calls.append([w if not w.startswith("$") else "placeholder" for w in words])
    return calls


@pytest.mark.parametrize("path", CI_FILES, ids=lambda p: p.name)
def test_ci_files_call_only_existing_commands_and_options(path: Path) -> None:
    yaml.safe_load(path.read_text())
    calls = gpugov_calls(path)
    assert calls, f"{path.name} calls no gpugov command"
    parser = build_parser()
    for args in calls:
        parsed = parser.parse_args(args)  # exits (fails the test) on an unknown command or option
        assert parsed.func is not None


def test_codeowners_round_trips(tmp_path: Path) -> None:
    model = validate_repo(REPO).model
    assert model is not None
    text = codeowners.generate(model)
    assert (REPO / codeowners.PATH).read_text() == text, "run: gpugov codeowners"
    rules = codeowners.parse(text)
    assert rules["/policies/"] == list(model.limits.platform_team)
    for tenant in model.tenants.values():
        owners = rules[f"/{tenant.doc.file}"]
        assert set(tenant.owners.reviewers or tenant.owners.users) <= set(owners)
    assert codeowners.generate(model) == text  # stable
