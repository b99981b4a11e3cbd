"""The quota timeline of `gpugov plan` (issue #27) on real git repositories: a pull request that adds a
QuotaGrant and a QuotaWindow shows both in the markdown table and the JSON `timeline`, each a GP030 risk;
one that changes nothing of the timeline raises none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpugov.cli import main
from tests.helpers.golden import assert_golden_file
from tests.helpers.repos import write
from tests.unit.test_plan import PLAN_GOLDEN, commit, edit, make_repo

AT = "2030-01-01T00:00:00Z"  # the instant the plan looks from: before the grant, so no GG173
GRANT = """\
apiVersion: gpugov.io/v1alpha1
kind: QuotaGrant
metadata: {name: beta-release}
spec:
  tenant: beta
  pool: a100
  resources: {1g.10gb: 6}
  from: "2030-03-01T00:00:00+08:00"
  until: "2030-03-15T00:00:00+08:00"
  reason: release crunch
  approvedBy: [cto@example.com]
"""
WINDOW = """\
apiVersion: gpugov.io/v1alpha1
kind: QuotaWindow
metadata: {name: beta-at-night}
spec:
  pool: h100
  donor: {tenant: alpha}
  recipient: {tenant: beta}
  resources: {accelerators: 4}
  weekdays: [Mon, Tue, Wed, Thu, Fri]
  start: "20:00"
  end: "08:00"
  timeZone: Asia/Shanghai
  reason: alpha is quiet at night
  approvedBy: [ops@example.com]
"""


def add_timeline(repo: Path) -> None:
    write(repo, "tenants/timeline.yaml", f"{GRANT}---\n{WINDOW}")


def plan(capsys: pytest.CaptureFixture[str], repo: Path, *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["plan", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--at", AT, *extra])
    return int(code), capsys.readouterr().out


def test_a_new_grant_and_window_are_a_timeline_and_two_risks(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path, add_timeline)
    code, out = plan(capsys, repo, "--format", "json")
    data = json.loads(out)
    assert code == 0
    assert data["timeline"] == [
        {"kind": "QuotaGrant", "name": "beta-release", "pool": "a100", "resources": "6 1g.10gb",
         "start": "2030-02-28T16:00:00Z", "end": "2030-03-14T16:00:00Z",
         "borrows_from": "pool 'a100' capacity no one else is guaranteed", "to": "tenant 'beta'",
         "reason": "release crunch", "approved_by": ["cto@example.com"]},
        {"kind": "QuotaWindow", "name": "beta-at-night", "pool": "h100", "resources": "4 accelerators",
         "start": "Mon,Tue,Wed,Thu,Fri 20:00 Asia/Shanghai", "end": "08:00 (next day)",
         "borrows_from": "tenant 'alpha'", "to": "tenant 'beta'", "reason": "alpha is quiet at night",
         "approved_by": ["ops@example.com"]},
    ]
    gp030 = [r["message"] for r in data["risks"] if r["rule"] == "GP030"]
    assert gp030 == [
        "QuotaGrant beta-release adds 6 1g.10gb of pool 'a100' for tenant 'beta', 2030-02-28T16:00:00Z → "
        "2030-03-14T16:00:00Z, from pool 'a100' capacity no one else is guaranteed",
        "QuotaWindow beta-at-night adds 4 accelerators of pool 'h100' for tenant 'beta', "
        "Mon,Tue,Wed,Thu,Fri 20:00 Asia/Shanghai → 08:00 (next day), from tenant 'alpha'",
    ]
    assert plan(capsys, repo, "--fail-on", "risk")[0] == 1


def test_the_timeline_table_in_the_pull_request_comment(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path, add_timeline)
    code, out = plan(capsys, repo)
    assert code == 0
    assert "**Quota timeline**" in out
    assert_golden_file(PLAN_GOLDEN / "quota-timeline.md", out)


def test_a_longer_grant_is_a_risk_again_and_an_untouched_timeline_is_none(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path, add_timeline)
    commit(repo, lambda r: edit(r, "tenants/timeline.yaml", 'until: "2030-03-15', 'until: "2030-03-29'))
    data = json.loads(plan(capsys, repo, "--format", "json")[1])
    assert [r["message"] for r in data["risks"] if r["rule"] == "GP030"] == [
        "QuotaGrant beta-release changes 6 1g.10gb of pool 'a100' for tenant 'beta', 2030-02-28T16:00:00Z → "
        "2030-03-28T16:00:00Z, from pool 'a100' capacity no one else is guaranteed"]
    commit(repo, lambda r: edit(r, "tenants/timeline.yaml", "reason: release crunch", "reason: release week"))
    data = json.loads(plan(capsys, repo, "--format", "json")[1])
    assert [r for r in data["risks"] if r["rule"] == "GP030"] == []  # a new reason widens nothing
    assert data["timeline"][0]["reason"] == "release week"


def test_a_plan_without_grants_or_windows_has_no_timeline(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path, lambda r: edit(r, "tenants/alpha.yaml", "1g.10gb: 14", "1g.10gb: 12"))
    code, out = plan(capsys, repo, "--format", "json")
    assert code == 0 and json.loads(out)["timeline"] == []
    assert "Quota timeline" not in plan(capsys, repo)[1]
