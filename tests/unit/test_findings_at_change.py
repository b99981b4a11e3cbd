"""Findings where the change is (issue #23 item 8): with the base revision known (`validate --base`,
`plan`), a namespace claimed twice is reported at the new claim and a pool whose capacity a change
lowered below its quotas at the hardware/ line that lowered it, saying by how much; the lines the
base already had are related locations. Without a base the report is deterministic and names both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpugov.cli import main
from tests.helpers.repos import write
from tests.unit.test_plan import edit, make_repo

AUTODRIVE = """\
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata:
  name: autodrive
spec:
  department: rnd
  owners: {users: [ad@example.com]}
  costCenter: CC-9
  namespaces: [autodrive, beta-dev]
"""


def add_autodrive(repo: Path) -> None:
    """A new tenant that sorts before beta claims beta's namespace beta-dev (line 9, column 27)."""
    write(repo, "tenants/autodrive.yaml", AUTODRIVE)


def findings_of(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict]]:
    code = main(["validate", *args, "--format", "json"])
    return code, json.loads(capsys.readouterr().out)["findings"]


def by_rule(found: list[dict], rule: str) -> list[dict]:
    return [f for f in found if f["rule"] == rule]


def test_a_namespace_claimed_again_is_reported_at_the_new_claim(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path, lambda repo: None)
    add_autodrive(repo)  # in the working tree; the base is committed
    code, found = findings_of(capsys, str(repo), "--base", "HEAD")
    (claim,) = by_rule(found, "GG012")
    assert code == 1
    assert (claim["file"], claim["line"], claim["col"]) == ("tenants/autodrive.yaml", 9, 27)
    assert claim["related"] == ["tenants/beta.yaml:9:22"]
    assert claim["message"] == ("namespace 'beta-dev' is newly claimed by tenant 'autodrive' here; also claimed by "
                                "tenant 'beta' (tenants/beta.yaml:9:22, in the base revision)")
    main(["validate", str(repo), "--base", "HEAD", "--format", "github"])
    annotations = [line for line in capsys.readouterr().out.splitlines() if "title=GG012" in line]
    assert len(annotations) == 1 and annotations[0].startswith("::error file=tenants/autodrive.yaml,line=9,col=27,")


def test_the_gate_reports_the_new_claim_too(tmp_path: Path, capsys) -> None:
    """The pull-request gate (`plan --base --head`) prints the invalid head's findings at the new claim."""
    repo = make_repo(tmp_path, add_autodrive)
    assert main(["plan", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "text"]) == 1
    lines = [line for line in capsys.readouterr().out.splitlines() if "[GG012]" in line]
    assert len(lines) == 1 and lines[0].startswith("tenants/autodrive.yaml:9:27: error: namespace 'beta-dev' is "
                                                   "newly claimed by tenant 'autodrive' here")


def test_without_a_base_every_claim_is_reported_naming_the_others(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path, add_autodrive)
    _, found = findings_of(capsys, str(repo))
    claims = {(f["file"], f["line"]): (f["message"], f["related"]) for f in by_rule(found, "GG012")}
    assert claims == {
        ("tenants/autodrive.yaml", 9): ("namespace 'beta-dev' is claimed by tenant 'autodrive' here and by tenant "
                                        "'beta' (tenants/beta.yaml:9:22)", ["tenants/beta.yaml:9:22"]),
        ("tenants/beta.yaml", 9): ("namespace 'beta-dev' is claimed by tenant 'beta' here and by tenant 'autodrive' "
                                   "(tenants/autodrive.yaml:9:27)", ["tenants/autodrive.yaml:9:27"]),
    }


def remove_node(repo: Path) -> None:
    edit(repo, "hardware/h100.yaml", "    - name: h100-b\n", "")


def test_removing_nodes_reports_at_the_hardware_line_by_how_much(tmp_path: Path, capsys) -> None:
    """alpha 8 + beta 8 on h100's two 8-GPU nodes; a node removed: 16 → 8, reported in hardware/,
    not on the tenant files nobody changed."""
    repo = make_repo(tmp_path, remove_node)
    code, found = findings_of(capsys, str(repo), "--base", "HEAD~1")
    (over,) = by_rule(found, "GG030")
    assert code == 1
    assert (over["file"], over["line"]) == ("hardware/h100.yaml", 11)  # h100-a, beside the removed line
    assert over["message"] == ("pool 'h100' nvidia.com/gpu capacity 16 → 8 (node h100-b removed): its nominal quotas "
                               "add up to 16, more than 8 x ratio 1.0 = 8 (alpha 8, beta 8)")
    assert over["related"] == ["tenants/alpha.yaml:15:23", "tenants/beta.yaml:15:23"]
    # the gate says the same
    assert main(["plan", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "text"]) == 1
    out = capsys.readouterr().out
    assert "hardware/h100.yaml:11:7: error: pool 'h100' nvidia.com/gpu capacity 16 → 8" in out
    assert not [line for line in out.splitlines() if line.startswith("tenants/") and "[GG030]" in line]


def test_a_mig_relayout_reports_at_the_layout_it_changed(tmp_path: Path, capsys) -> None:
    def shrink(repo: Path) -> None:
        edit(repo, "hardware/a100.yaml", "small: {1g.10gb: 7}", "small: {1g.10gb: 3}")

    repo = make_repo(tmp_path, shrink)
    _, found = findings_of(capsys, str(repo), "--base", "HEAD~1")
    (over,) = by_rule(found, "GG030")
    assert (over["file"], over["line"]) == ("hardware/a100.yaml", 11)
    assert over["message"].startswith("pool 'a100' nvidia.com/mig-1g.10gb capacity 28 → 12 (migLayouts.small "
                                      "changed): its nominal quotas add up to 14")
    assert over["related"] == ["tenants/alpha.yaml:18:18"]


def test_a_node_leaving_its_layout_is_reported_at_that_node(tmp_path: Path, capsys) -> None:
    """The pool no longer offers the profile alpha holds: said at the node that left its layout, not on alpha."""
    def whole(repo: Path) -> None:
        edit(repo, "hardware/a100.yaml", "    - name: a100-a\n      migLayout: small\n", "    - name: a100-a\n")

    repo = make_repo(tmp_path, whole)
    _, found = findings_of(capsys, str(repo), "--base", "HEAD~1")
    (gone,) = by_rule(found, "GG033")
    assert (gone["file"], gone["line"]) == ("hardware/a100.yaml", 13)
    assert gone["message"] == ("pool 'a100' no longer offers nvidia.com/mig-1g.10gb (node a100-a migLayout small → "
                               "none; it offers cpu, memory, nvidia.com/gpu), which alpha holds quota of "
                               "(capacity 28 → 0)")
    assert gone["related"] == ["tenants/alpha.yaml:18:9"]
    _, without = findings_of(capsys, str(repo))
    assert [(f["file"], f["line"]) for f in by_rule(without, "GG033")] == [("tenants/alpha.yaml", 18)]


def test_a_raised_quota_is_reported_at_its_line_only(tmp_path: Path, capsys) -> None:
    def raise_beta(repo: Path) -> None:
        edit(repo, "tenants/beta.yaml", "        accelerators: 8\n", "        accelerators: 9\n")

    repo = make_repo(tmp_path, raise_beta)
    _, with_base = findings_of(capsys, str(repo), "--base", "HEAD~1")
    assert [(f["file"], f["line"]) for f in by_rule(with_base, "GG030")] == [("tenants/beta.yaml", 15)]
    _, without = findings_of(capsys, str(repo))  # no base: every contributing quota, as before
    assert [(f["file"], f["line"]) for f in by_rule(without, "GG030")] == [("tenants/alpha.yaml", 15),
                                                                           ("tenants/beta.yaml", 15)]


def test_a_lowered_ratio_is_reported_at_the_guardrail(tmp_path: Path, capsys) -> None:
    def lower(repo: Path) -> None:
        edit(repo, "policies/guardrails.yaml", "capacityRatio: 1.0", "capacityRatio: 0.5")

    repo = make_repo(tmp_path, lower)
    _, found = findings_of(capsys, str(repo), "--base", "HEAD~1")
    located = {(f["file"], f["line"]) for f in by_rule(found, "GG030")}
    assert located == {("policies/guardrails.yaml", 6)}
    assert all("(ratio 1.0 → 0.5)" in f["message"] for f in by_rule(found, "GG030"))


def test_an_unknown_base_is_a_usage_error(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path, remove_node)
    assert main(["validate", str(repo), "--base", "nope"]) == 2
    assert "unknown revision 'nope'" in capsys.readouterr().err


H20 = """\
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata:
  name: h20
spec:
  cluster: lab
  accelerator: {model: H20}
  acceleratorsPerNode: 8
  nodeResources: {cpu: 96, memory: 1Ti}
  nodes:
    - name: h20-01
    - name: h20-02
    - name: h20-03
"""


def test_unassigned_capacity_a_change_makes_is_a_warning_at_the_pool(tmp_path: Path, capsys) -> None:
    """Issue #23 item 7: a new 3x8 H20 pool of which a tenant holds 16 leaves 8 in nobody's quota."""
    def add_h20(repo: Path) -> None:
        write(repo, "hardware/h20.yaml", H20)
        write(repo, "tenants/autodrive.yaml", AUTODRIVE.replace("beta-dev", "autodrive-dev")
              + "  quotas:\n    - pool: h20\n      resources: {accelerators: 16}\n")

    repo = make_repo(tmp_path, add_h20)
    code, found = findings_of(capsys, str(repo), "--base", "HEAD~1")
    (unassigned,) = by_rule(found, "GG140")
    assert code == 0 and unassigned["level"] == "warning"
    assert (unassigned["file"], unassigned["line"]) == ("hardware/h20.yaml", 4)
    assert unassigned["message"] == ("8 of 24 H20 GPUs (nvidia.com/gpu) of pool 'h20' are in no tenant's or "
                                     "department's nominal quota (before this change: 0): Kueue admits nothing onto them")
    assert main(["validate", str(repo), "--base", "HEAD~1", "--strict"]) == 1
    capsys.readouterr()


def test_unassigned_capacity_is_reported_at_the_change_that_made_it(tmp_path: Path, capsys) -> None:
    def add_node(repo: Path) -> None:
        edit(repo, "hardware/h100.yaml", "    - name: h100-b\n", "    - name: h100-b\n    - name: h100-c\n")

    repo = make_repo(tmp_path / "node", add_node)
    _, found = findings_of(capsys, str(repo), "--base", "HEAD~1")
    (unassigned,) = by_rule(found, "GG140")
    assert (unassigned["file"], unassigned["line"]) == ("hardware/h100.yaml", 13)  # the node added
    assert unassigned["message"].startswith("8 of 24 H100-80GB GPUs (nvidia.com/gpu) of pool 'h100' are in no")

    def lower_beta(repo: Path) -> None:
        edit(repo, "tenants/beta.yaml", "        accelerators: 8\n", "        accelerators: 5\n")

    repo = make_repo(tmp_path / "lower", lower_beta)
    _, found = findings_of(capsys, str(repo), "--base", "HEAD~1")
    (unassigned,) = by_rule(found, "GG140")
    assert (unassigned["file"], unassigned["line"]) == ("tenants/beta.yaml", 15)
    assert unassigned["related"] == ["hardware/h100.yaml:4:9"]
    assert unassigned["message"].startswith("3 of 16 H100-80GB GPUs")


def test_unassigned_capacity_the_change_did_not_make_is_not_reported(tmp_path: Path, capsys) -> None:
    """The base org leaves 14 of a100's 28 1g.10gb slices unassigned; a change elsewhere says nothing
    of them, and neither does validate without a base (`gpugov capacity` says the standing state)."""
    def raise_alpha_a100(repo: Path) -> None:
        edit(repo, "tenants/alpha.yaml", "1g.10gb: 14", "1g.10gb: 20")

    repo = make_repo(tmp_path, raise_alpha_a100)
    assert by_rule(findings_of(capsys, str(repo), "--base", "HEAD~1")[1], "GG140") == []
    _, without = findings_of(capsys, str(repo))
    assert by_rule(without, "GG140") == []
