"""Issue #23 item 11: a plan never says it creates a Node (nodes are hardware; gpugov labels them)."""

from __future__ import annotations

from pathlib import Path

from tests.unit.test_plan import add_pool, make_repo, plan_json


def test_new_nodes_are_labelled_not_created(tmp_path: Path, capsys) -> None:
    plan = plan_json(capsys, make_repo(tmp_path, add_pool))
    nodes = {(o["action"], o["name"]) for o in plan["objects"] if o["kind"] == "Node"}
    assert nodes == {("label", "h200-a"), ("label", "h200-b")}
    assert not [o for o in plan["objects"] if o["kind"] == "Node" and o["action"] == "create"]
    assert any(o["action"] == "create" and o["kind"] == "ResourceFlavor" for o in plan["objects"])


def test_capacity_a_change_leaves_unassigned_is_said_in_the_plan(tmp_path: Path, capsys) -> None:
    """Issue #23 item 7: the new pool's 16 H200s, 4 of them in gamma's quota: 12 nobody can use."""
    from tests.unit.test_plan import run

    repo = make_repo(tmp_path, add_pool)
    code, out, err = run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD")
    assert code == 0, err
    assert ("- **unassigned**: 12 of 16 nvidia.com/gpu of pool h200 are in nobody's nominal quota after this change "
            "(before: 0), and Kueue admits nothing onto them") in out
    code, text, err = run(capsys, "plan", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "text")
    assert code == 0, err
    told = [line for line in text.splitlines() if line.startswith("unassigned: ")]  # what the markdown says, plain
    assert told == [line.removeprefix("- ").replace("**", "") for line in out.splitlines()
                    if line.startswith("- **unassigned**")] and "12 of 16 nvidia.com/gpu of pool h200" in told[0]
