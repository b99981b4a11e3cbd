"""gpugov plan on real git repositories: golden markdown for typical changes, risks, formats."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from gpugov.cli import main
from tests.conftest import BASE, write

GOLDEN = Path(__file__).resolve().parent / "golden" / "plan"
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "gpugov-test", "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "gpugov-test", "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=GIT_ENV).stdout


def make_repo(tmp_path: Path, change: Callable[[Path], None]) -> Path:
    repo = tmp_path / "org"
    shutil.copytree(BASE, repo)
    write(repo, "policies/guardrails.yaml", (BASE / "policies/guardrails.yaml").read_text()
          + "  maxQuotaChangePerPullRequest: 4\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    change(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "change", "--allow-empty")
    return repo


def raise_quota(repo: Path) -> None:
    path = repo / "tenants/alpha.yaml"
    path.write_text(path.read_text().replace("1g.10gb: 14", "1g.10gb: 20"))


def relayout_mig(repo: Path) -> None:
    path = repo / "hardware/a100.yaml"
    path.write_text(path.read_text().replace("small: {1g.10gb: 7}", "small: {1g.10gb: 5, 2g.20gb: 1}"))


def remove_tenant(repo: Path) -> None:
    (repo / "tenants/beta.yaml").unlink()


def add_pool(repo: Path) -> None:
    write(repo, "hardware/h200.yaml", """\
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata:
  name: h200
spec:
  cluster: lab
  accelerator: {model: H200}
  acceleratorsPerNode: 8
  nodeResources: {cpu: 128, memory: 2Ti}
  nodes: [{name: h200-a}, {name: h200-b}]
""")
    write(repo, "tenants/gamma.yaml", """\
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata:
  name: gamma
spec:
  department: rnd
  owners: {users: [g@example.com]}
  costCenter: CC-3
  namespaces: [gamma]
  queues: [{name: main, namespace: gamma, priorityClasses: [batch]}]
  quotas:
    - pool: h200
      resources: {accelerators: 4}
""")


SCENARIOS = {"quota-raise": raise_quota, "mig-relayout": relayout_mig, "tenant-removal": remove_tenant,
             "new-pool": add_pool}


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_golden_markdown(tmp_path: Path, capsys, scenario: str) -> None:
    repo = make_repo(tmp_path, SCENARIOS[scenario])
    code, out, _ = run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD")
    assert code == 0
    golden = GOLDEN / f"{scenario}.md"
    if os.environ.get("GPUGOV_UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(out)
    assert out == golden.read_text()


def test_plan_content_and_risks(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path, raise_quota)
    code, out, _ = run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "json")
    data = json.loads(out)
    assert code == 0
    (change,) = data["quotas"]
    assert (change["name"], change["pool"], change["resource"]) == ("alpha", "a100", "nvidia.com/mig-1g.10gb")
    assert (change["before"]["nominal"], change["after"]["nominal"]) == ("14", "20")
    assert [r["id"] for r in data["risks"]] == ["needs-approval"]
    assert {(o["kind"], o["action"]) for o in data["objects"]} >= {("ClusterQueue", "update")}
    assert run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--fail-on", "risk")[0] == 1


def test_mig_relayout_names_the_nodes_it_hits(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path, relayout_mig)
    data = json.loads(run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "json")[1])
    assert [(m["node"], m["reason"]) for m in data["mig"]] == [("a100-a", "config 'a100-small' changed")]
    assert "mig-reconfiguration" in {r["id"] for r in data["risks"]}


def test_tenant_removal_and_working_tree_head(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path, lambda r: None)
    remove_tenant(repo)  # uncommitted: head defaults to the working tree
    data = json.loads(run(capsys, "plan", str(repo), "--base", "HEAD", "--format", "json")[1])
    assert data["tenants_removed"] == ["beta"]
    assert "tenant-removed" in {r["id"] for r in data["risks"]}
    deleted = {(o["kind"], o["name"]) for o in data["objects"] if o["action"] == "delete"}
    assert ("ClusterQueue", "beta") in deleted and ("LocalQueue", "serve") in deleted
    kept = {o["name"] for o in data["objects"] if o["action"] == "retain"}
    assert kept == {"beta", "beta-dev"}, "namespaces are kept, never deleted"
    assert git(repo, "status", "--porcelain").strip() == "D tenants/beta.yaml", "plan must not touch the tree"


def test_moving_a_line_is_no_object_change(tmp_path: Path, capsys) -> None:
    def add_comment(repo: Path) -> None:
        path = repo / "tenants/alpha.yaml"
        path.write_text("# owned by the alpha team\n" + path.read_text())

    repo = make_repo(tmp_path, add_comment)
    code, out, _ = run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD")
    assert code == 0 and "No change to tenants, quotas, pools or cluster objects." in out


def test_invalid_head_gives_findings_not_a_plan(tmp_path: Path, capsys) -> None:
    def break_it(repo: Path) -> None:
        path = repo / "tenants/alpha.yaml"
        path.write_text(path.read_text().replace("1g.10gb: 14", "1g.10gb: 40"))

    repo = make_repo(tmp_path, break_it)
    code, out, err = run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "text")
    assert code == 1 and "[GG030]" in out and "no plan" in err


def test_unknown_revision_is_a_usage_error(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path, raise_quota)
    code, _, err = run(capsys, "plan", str(repo), "--base", "nope")
    assert code == 2 and "unknown revision 'nope'" in err


def taint_pool(repo: Path) -> None:
    path = repo / "hardware/h100.yaml"
    path.write_text(path.read_text().replace("  nodeResources:", "  taints:\n    - {key: gpu, value: h100, effect: NoSchedule}\n  nodeResources:", 1))


def test_flavor_change_kueue_refuses_in_place_is_a_risk(tmp_path: Path, capsys) -> None:
    """Every flavor is topology-aware, and Kueue's CRD makes nodeLabels, tolerations and
    topologyName immutable once topologyName is set: a new pool taint means a new flavor."""
    repo = make_repo(tmp_path, taint_pool)
    code, out, _ = run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "json")
    data = json.loads(out)
    assert code == 0
    flavor = next(o for o in data["objects"] if o["kind"] == "ResourceFlavor" and o["name"] == "h100")
    assert flavor["action"] == "replace"
    (risk,) = [r for r in data["risks"] if r["id"] == "kueue-immutable"]
    assert risk["message"].startswith("ResourceFlavor h100:") and "spec.tolerations" in risk["message"]


def test_unknown_cluster_is_a_usage_error(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path, raise_quota)
    code, out, err = run(capsys, "plan", str(repo), "--base", "HEAD~1", "--cluster", "nope")
    assert code == 2 and out == ""
    assert "unknown cluster 'nope' (declared: lab)" in err
