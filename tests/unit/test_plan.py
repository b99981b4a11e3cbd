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
from tests.helpers.golden import assert_golden_file
from tests.helpers.repos import BASE, EXAMPLES, GOLDEN, write

PLAN_GOLDEN = GOLDEN / "plan"
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "gpugov-test", "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "gpugov-test", "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=GIT_ENV).stdout


def make_repo(tmp_path: Path, change: Callable[[Path], None], prepare: Callable[[Path], None] | None = None) -> Path:
    """A git repository of the base example org (after `prepare`), then one commit of `change`."""
    repo = tmp_path / "org"
    shutil.copytree(BASE, repo)
    write(repo, "policies/guardrails.yaml", (BASE / "policies/guardrails.yaml").read_text()
          + "  maxQuotaChangePerPullRequest: 4\n")
    if prepare is not None:
        prepare(repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    commit(repo, change)
    return repo


def commit(repo: Path, change: Callable[[Path], None]) -> None:
    change(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "change", "--allow-empty")


def edit(repo: Path, rel: str, old: str, new: str) -> None:
    path = repo / rel
    text = path.read_text()
    assert old in text, f"{rel} has no {old!r}"
    path.write_text(text.replace(old, new, 1))


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
    assert_golden_file(PLAN_GOLDEN / f"{scenario}.md", out)


def test_plan_content_and_risks(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path, raise_quota)
    code, out, _ = run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "json")
    data = json.loads(out)
    assert code == 0
    (change,) = data["quotas"]
    assert (change["name"], change["pool"], change["resource"]) == ("alpha", "a100", "nvidia.com/mig-1g.10gb")
    assert (change["before"]["nominal"], change["after"]["nominal"]) == ("14", "20")
    # 6 more 1g.10gb slices are 6/7 of one A100, under the guardrail of 4 GPUs: no GP007; yet a raised
    # quota widens the tenant's power, which is a risk of its own (GP014)
    assert [(r["rule"], r["message"]) for r in data["risks"]] == [
        ("GP014", "Tenant alpha: spec.quotas[pool=a100].resources.1g.10gb.nominal 14 -> 20")]
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
    (removed,) = [r for r in data["risks"] if r["id"] == "tenant-removed"]
    assert "drain ClusterQueue beta first (spec.stopPolicy: HoldAndDrain)" in removed["message"]
    assert "Volcano" not in removed["message"]
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


def risk_ids(capsys: pytest.CaptureFixture[str], repo: Path) -> list[str]:
    code, out, err = run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "json")
    assert code == 0, out + err
    return [r["id"] for r in json.loads(out)["risks"]]


def plan_json(capsys: pytest.CaptureFixture[str], repo: Path) -> dict:
    code, out, err = run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "json")
    assert code == 0, out + err
    return json.loads(out)


GAMMA = """\
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata:
  name: gamma
spec:
  department: rnd
  owners: {users: [g@example.com]}
  costCenter: CC-3
  namespaces: [gamma]
  queues: [{name: main, namespace: gamma, priorityClasses: [PRIORITY]}]
  quotas:
    - pool: a100
      resources:
        1g.10gb: {nominal: 2, borrowingLimit: 8, lendingLimit: 1}
"""


def test_a_new_tenants_limits_are_not_a_quota_decrease(tmp_path: Path, capsys) -> None:
    """Unlimited -> 8 for a tenant that did not exist is no decrease: only quotas of the base compare."""
    repo = make_repo(tmp_path, lambda r: write(r, "tenants/gamma.yaml", GAMMA.replace("PRIORITY", "batch")))
    data = plan_json(capsys, repo)
    (change,) = data["quotas"]
    assert change["name"] == "gamma" and change["after"]["borrowing_limit"] == "8"
    assert "quota-decrease" not in {r["id"] for r in data["risks"]}
    (added,) = data["risks"]  # a new tenant widens power: one risk that lists what it brings
    assert added["rule"] == "GP021" and added["message"].startswith("new Tenant gamma (")
    assert "spec.namespaces [gamma]" in added["message"] and "spec.quotas[pool=a100]" in added["message"]


def test_an_existing_quota_that_gains_a_limit_or_goes_away_is_a_decrease(tmp_path: Path, capsys) -> None:
    def limit_and_drop(repo: Path) -> None:
        edit(repo, "tenants/alpha.yaml", "        1g.10gb: 14", "        1g.10gb: {nominal: 14, lendingLimit: 2}")
        edit(repo, "tenants/beta.yaml", "    - pool: a100\n      resources:\n        accelerators: 4\n", "")

    repo = make_repo(tmp_path, limit_and_drop)
    messages = [r["message"] for r in plan_json(capsys, repo)["risks"] if r["id"] == "quota-decrease"]
    assert messages == [
        "tenant alpha: nvidia.com/mig-1g.10gb in a100 goes down (lending limit - -> 2); running work may be preempted",
        "tenant beta: nvidia.com/gpu in a100 goes down (nominal 4 -> -); running work may be preempted",
    ]


def test_moving_a_tenant_to_another_department_is_a_risk(tmp_path: Path, capsys) -> None:
    def move(repo: Path) -> None:
        path = repo / "tenants/departments.yaml"
        path.write_text(path.read_text() + "---\napiVersion: gpugov.io/v1alpha1\nkind: Department\n"
                        "metadata:\n  name: ops\nspec: {}\n")
        edit(repo, "tenants/alpha.yaml", "department: rnd", "department: ops")

    repo = make_repo(tmp_path, move)
    data = plan_json(capsys, repo)
    assert data["moves"] == [{"holder": "tenant", "name": "alpha", "before": "rnd", "after": "ops"}]
    (moved,) = [r for r in data["risks"] if r["id"] == "department-changed"]
    assert moved["rule"] == "GP008" and moved["message"].startswith("tenant alpha moves from department rnd to ops")
    markdown = run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD")[1]
    assert "- tenant `alpha`: department rnd → ops" in markdown


def test_raising_a_fair_sharing_weight_is_a_risk_and_lowering_is_not(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path, lambda r: edit(r, "tenants/alpha.yaml", "  costCenter: CC-1\n",
                                              "  costCenter: CC-1\n  fairSharing: {weight: 3}\n"))
    data = plan_json(capsys, repo)
    (raised,) = [r for r in data["risks"] if r["id"] == "fair-share-raised"]
    assert raised["message"].startswith("tenant alpha: fairSharing weight goes from 1 to 3")
    commit(repo, lambda r: edit(r, "tenants/alpha.yaml", "weight: 3", "weight: 2"))
    data = plan_json(capsys, repo)
    assert [(w["before"], w["after"]) for w in data["weights"]] == [(3, 2)]
    assert "fair-share-raised" not in {r["id"] for r in data["risks"]}


def test_a_new_tenant_above_the_default_weight_is_a_risk(tmp_path: Path, capsys) -> None:
    gamma = GAMMA.replace("PRIORITY", "batch").replace("  costCenter: CC-3\n", "  costCenter: CC-3\n"
                                                         "  fairSharing: {weight: 5}\n")
    repo = make_repo(tmp_path, lambda r: write(r, "tenants/gamma.yaml", gamma))
    (raised,) = [r for r in plan_json(capsys, repo)["risks"] if r["id"] == "fair-share-raised"]
    assert raised["message"].startswith("new tenant gamma: fairSharing weight starts with 5 (default 1)")


def test_a_queue_gaining_a_non_preemptible_class_is_a_risk(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path, lambda r: write(r, "tenants/gamma.yaml", GAMMA.replace("PRIORITY", "serving")
                                               .replace("borrowingLimit: 8", "borrowingLimit: 0")))
    messages = [r["message"] for r in plan_json(capsys, repo)["risks"] if r["id"] == "queue-gains-protected-priority"]
    assert messages == ["queue gamma/main of tenant gamma now admits non-preemptible serving: that work cannot be "
                        "preempted to give quota back"]
    commit(repo, lambda r: edit(r, "tenants/beta.yaml", "    - {name: serve, namespace: beta, priorityClasses: [serving]}",
                                "    - {name: serve, namespace: beta, priorityClasses: [serving]}\n"
                                "    - {name: dev, namespace: beta-dev, priorityClasses: [batch]}"))
    assert "queue-gains-protected-priority" not in risk_ids(capsys, repo), "a preemptible class is no such risk"


def test_approval_counts_gpu_equivalents_not_slices_as_gpus(tmp_path: Path, capsys) -> None:
    """14 slices of 1g.10gb are 2 A100s, plus 4 whole A100s: 6 GPU equivalents, above 4."""
    def drop_a100(repo: Path) -> None:
        edit(repo, "tenants/alpha.yaml", "    - pool: a100\n      resources:\n        1g.10gb: 14\n", "")
        edit(repo, "tenants/beta.yaml", "    - pool: a100\n      resources:\n        accelerators: 4\n", "")

    repo = make_repo(tmp_path, drop_a100)
    (approval,) = [r for r in plan_json(capsys, repo)["risks"] if r["id"] == "needs-approval"]
    assert approval["message"] == (
        "accelerator quotas move by 6 GPU equivalents in total (whole devices 4, MIG slices 2), above the guardrail "
        "of 4 per pull request: needs approval from @lab/platform")


def test_approval_stays_quiet_for_a_few_slices(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path, lambda r: edit(r, "tenants/alpha.yaml", "1g.10gb: 14", "1g.10gb: 27"))
    assert "needs-approval" not in risk_ids(capsys, repo), "13 slices of 1g.10gb are 1.86 A100s, under 4"


def add_node(repo: Path) -> None:
    edit(repo, "hardware/h100.yaml", "    - name: h100-b\n", "    - name: h100-b\n    - name: h100-c\n")


def test_a_removed_node_is_kept_and_the_plan_says_what_each_path_does(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path, add_node)
    commit(repo, lambda r: edit(r, "hardware/h100.yaml", "    - name: h100-c\n", ""))
    data = plan_json(capsys, repo)
    node = next(o for o in data["objects"] if o["kind"] == "Node")
    assert (node["name"], node["action"]) == ("h100-c", "retain"), "gpugov never deletes a Node"
    (removal,) = data["removals"]
    assert removal["category"] == "Node" and removal["names"] == ["h100-c"]
    assert set(removal["paths"]) == {"gpugov apply", "Pulumi", "Argo CD / Flux"}
    assert "taints it recorded" in removal["paths"]["gpugov apply"]
    assert "NodePatch" in removal["paths"]["Pulumi"]
    text = run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "text")[1]
    assert "delete lab Node" not in text and "retain lab Node h100-c" in text
    assert "removed nodes, Argo CD / Flux: nothing: node patches are not in the kustomization" in text
    markdown = run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD")[1]
    assert "- 1 node (`h100-c`):\n  - gpugov apply: keeps the nodes;" in markdown


def volcano(repo: Path) -> None:
    source = BASE.parent / "positive" / "volcano-proportion"
    for path in source.rglob("*.yaml"):
        write(repo, path.relative_to(source).as_posix(), path.read_text())


def test_removing_a_volcano_tenant_names_its_queue_not_a_cluster_queue(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path, remove_tenant, prepare=volcano)
    data = plan_json(capsys, repo)
    assert ("Queue", "delete") in {(o["kind"], o["action"]) for o in data["objects"] if o["name"] == "beta"}
    (removed,) = [r for r in data["risks"] if r["id"] == "tenant-removed"]
    assert "close Volcano Queue beta first (`vcctl queue operate --name beta --action close`" in removed["message"]
    assert "ClusterQueue" not in removed["message"] and "HoldAndDrain" not in removed["message"]
    namespaces = next(r for r in data["removals"] if r["category"] == "Namespace")
    assert namespaces["names"] == ["beta", "beta-dev"]
    assert "Prune=false" in namespaces["paths"]["Argo CD / Flux"]


def test_a_reserved_namespace_gives_findings_not_a_plan(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path, lambda r: edit(r, "tenants/alpha.yaml", "namespaces: [alpha]",
                                              "namespaces: [alpha, kube-system]"))
    code, out, err = run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "text")
    assert code == 1 and "[GG015]" in out and "tenants/alpha.yaml:9" in out and "no plan" in err


def test_another_tenants_lending_limit_changes_what_a_tenant_can_reach(tmp_path: Path, capsys) -> None:
    """Issue #39: beta keeps 6 of its 8 h100 GPUs local (lendingLimit 2). alpha's own quota does not
    change, yet Kueue's maximum for it drops from 12 (8 + borrowing limit 4) to 10 (its 4 kept local +
    the 4 it lends + beta's 2): the plan says so, from the same computation as `gpugov why`."""
    def lend_less(repo: Path) -> None:
        edit(repo, "tenants/beta.yaml", "        accelerators: 8\n        cpu: 48",
             "        accelerators: {nominal: 8, lendingLimit: 2}\n        cpu: 48")

    repo = make_repo(tmp_path, lend_less)
    code, out, _ = run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "json")
    assert code in (0, 1)
    reach = json.loads(out)["reach"]
    assert [(r["tenant"], r["pool"], r["resource"], r["before"], r["after"]) for r in reach] == [
        ("alpha", "h100", "nvidia.com/gpu", "12", "10")]
    text = run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "text")[1]
    assert "reach lab alpha h100 nvidia.com/gpu: 12 -> 10" in text
    markdown = run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD")[1]
    assert "| lab | `alpha` | h100 | nvidia.com/gpu | 12 | 10 |" in markdown


def test_turning_topology_aware_scheduling_off_or_on_is_a_cluster_change(tmp_path: Path, capsys) -> None:
    """Every flavor topology-aware or none (issue #40): Kueue's TAS decides differently, so either way is a risk."""
    off = make_repo(tmp_path / "off", lambda r: edit(r, "policies/clusters.yaml", "  backend: kueue\n",
                                                     "  backend: kueue\n  topologyAwareScheduling: false\n"))
    # off: also a flavor's topologyName removed, which Kueue refuses to change in place
    assert set(risk_ids(capsys, off)) == {"cluster-changed", "kueue-immutable"}
    commit(off, lambda r: edit(r, "policies/clusters.yaml", "topologyAwareScheduling: false",
                               "topologyAwareScheduling: true"))
    assert "cluster-changed" in risk_ids(capsys, off)


def _fleet(repo: Path) -> None:
    """The fleet example (hub managing lab and lab2) over the base org."""
    shutil.copytree(EXAMPLES / "positive" / "fleet", repo, dirs_exist_ok=True)


def _members(capsys: pytest.CaptureFixture[str], repo: Path) -> list[tuple[str, str, dict[str, int]]]:
    code, out, _ = run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "json")
    assert code == 0, out
    return [(m["cluster"], m["role"], m["counts"]) for m in json.loads(out)["fleets"]]


def test_plan_of_a_fleet_quota_change_touches_the_manager_only(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path, lambda r: edit(r, "policies/fleets.yaml", "accelerators: 16", "accelerators: 12"),
                     prepare=_fleet)
    assert _members(capsys, repo) == [("lab", "worker", {}), ("lab2", "worker", {}), ("hub", "manager", {"update": 1})]
    out = run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD")[1]
    assert "| training | hub | manager | 1 to update |" in out and "| training | lab | worker | no object change |" in out
    out = run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "text")[1]
    assert "fleet training hub (manager): 1 to update" in out.splitlines(), out


def test_plan_of_the_managers_user_touches_every_worker_and_not_the_manager(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The manager's user is bound on the workers (and trusted by their admission policies): each worker
    changes, the manager does not."""
    repo = make_repo(tmp_path, lambda r: edit(r, "policies/fleets.yaml", "  manager: hub\n",
                                              "  manager: hub\n  managerUser: someone-else\n"), prepare=_fleet)
    members = _members(capsys, repo)
    assert [(c, r) for c, r, _ in members] == [("lab", "worker"), ("lab2", "worker"), ("hub", "manager")]
    assert members[2][2] == {} and members[0][2] == members[1][2] and members[0][2].get("update", 0) >= 2, members


def test_plan_of_a_workers_own_tenant_touches_that_worker_only(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """beta is no fleet tenant: its quota is lab's alone (its pool is lab's)."""
    repo = make_repo(tmp_path, lambda r: edit(r, "tenants/beta.yaml", "accelerators: 8", "accelerators: 6"),
                     prepare=_fleet)
    assert _members(capsys, repo) == [("lab", "worker", {"update": 1}), ("lab2", "worker", {}), ("hub", "manager", {})]


def test_plan_of_a_change_no_member_sees_lists_no_member(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path, lambda r: edit(r, "policies/fleets.yaml", "description: lab and lab2",
                                              "description: the two labs"), prepare=_fleet)
    data = json.loads(run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "json")[1])
    assert (data["objects"], data["fleets"]) == ([], []), data
