"""Capacity advice names tenants whose idle hours (the ledger's) exceed what their reclaim idle policy
tolerates, saying what the policy does about it (issue #26). The fixture ledger's tenant solo held
its A100s idle for 1900 of 1920 hours; vision 2000 of 6720 MIG slice-hours (2/7 of a GPU each: 8.5%
of its device-hours with its H100 hours, under the tolerated share)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpugov.app.exit import ExitCode
from gpugov.cli import main
from tests.helpers.repos import FIXTURES

ORG = FIXTURES / "ledger" / "org"
WINDOW = FIXTURES / "ledger" / "lab-window.json"


def advice(capsys: pytest.CaptureFixture[str], repo: Path) -> dict[str, str]:
    code = main(["capacity", str(repo), "--usage", str(WINDOW), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == ExitCode.OK, err
    (cluster,) = json.loads(out)["clusters"]
    return {a["subject"]: a["text"] for a in cluster["advice"] if a["kind"] == "idle-over-policy"}


def with_solo_reclaim(tmp_path: Path, reclaim: str) -> Path:
    repo = tmp_path / "org"
    shutil.copytree(ORG, repo)
    solo = repo / "tenants" / "solo.yaml"
    solo.write_text(solo.read_text() + reclaim)
    return repo


def test_no_idle_policy_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    found = advice(capsys, ORG)
    assert list(found) == ["solo"]  # vision's idle share is under the tolerated one
    assert found["solo"] == ("solo held accelerators idle for 1900 of the 1920 device-hours it used in the 240 h "
                             "window (99.0%) and declares no reclaim idle policy: declare reclaim.idle (Guardrails "
                             "or the tenant)")


def test_a_notify_only_policy_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    repo = with_solo_reclaim(tmp_path, "  reclaim:\n    idle: {window: 2h, grace: 1h}\n")
    assert "only notifies (action: notify): action: deactivate frees the cards" in advice(capsys, repo)["solo"]


def test_a_deactivating_policy_exceeded_is_named_with_its_window(capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path) -> None:
    repo = with_solo_reclaim(tmp_path, "  reclaim:\n    idle: {window: 2h, grace: 30m, action: deactivate}\n")
    assert advice(capsys, repo)["solo"].endswith(
        "(99.0%), more than its reclaim idle policy tolerates (warn after 2h below 5%, deactivate 30m later): "
        "check its exemptions and snoozes, or shorten the window")
