"""gpugov capacity with --kubeconfig on the living sandbox: the example org's cluster east applied
on its KWOK GPU servers; the live numbers (allocatable, GFD labels, the nodes' nvidia.com/mig.config)
match the declarations exactly, and a node relabelled to another layout shows in the MIG carve."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from gpugov.cli import main
from gpugov.sandbox.cluster import Sandbox
from tests.helpers.repos import REPO

pytestmark = pytest.mark.e2e


def capacity(capsys: pytest.CaptureFixture[str], sandbox: Sandbox) -> dict[str, Any]:
    code = main(["capacity", str(REPO), "--cluster", "east", "--kubeconfig", str(sandbox.cp.kubeconfig),
                 "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    (cluster,) = json.loads(out)["clusters"]
    return cluster


def test_live_capacity_matches_the_declarations(living: Sandbox, living_org: list[dict[str, Any]],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    cluster = capacity(capsys, living)
    assert cluster["live"] is True
    pools = {p["pool"]: p for p in cluster["pools"]}
    assert pools["h100"]["nodes"] == {"declared": 6, "live": 6}
    assert pools["h100"]["gpus"] == {"declared": 48, "live_gfd": 48}
    assert pools["a100-mig"]["gpus"] == {"declared": 32, "live_gfd": 32}
    live = {(p["pool"], r["resource"]): (r["physical_declared"], r["physical_live"])
            for p in cluster["pools"] for r in p["resources"]}
    assert live == {
        ("h100", "nvidia.com/gpu"): ("48", "48"),
        ("a100-mig", "nvidia.com/gpu"): ("8", "8"),
        ("a100-mig", "nvidia.com/mig-1g.10gb"): ("128", "128"),
        ("a100-mig", "nvidia.com/mig-2g.20gb"): ("8", "8"),
        ("a100-mig", "nvidia.com/mig-3g.40gb"): ("8", "8"),
    }
    carve = {m["profile"]: (m["declared"], m["carvable"]) for m in pools["a100-mig"]["mig"]}
    assert carve == {"1g.10gb": ("128", "128"), "2g.20gb": ("8", "8"), "3g.40gb": ("8", "8")}
    assert {a["kind"] for a in cluster["advice"]} == {"unassigned"}


def test_a_node_selecting_another_layout_changes_the_carve(living: Sandbox, living_org: list[dict[str, Any]],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    core = client.CoreV1Api(living.cp.api_client())
    core.patch_node("a100-02", {"metadata": {"labels": {"nvidia.com/mig.config": "a100-mig-balanced"}}})
    try:
        cluster = capacity(capsys, living)
    finally:
        core.patch_node("a100-02", {"metadata": {"labels": {"nvidia.com/mig.config": "a100-mig-small"}}})
    pools = {p["pool"]: p for p in cluster["pools"]}
    # a100-02's 8 GPUs go from 7 x 1g.10gb to 2 x 1g.10gb + 2g.20gb + 3g.40gb each.
    carve = {m["profile"]: (m["declared"], m["carvable"]) for m in pools["a100-mig"]["mig"]}
    assert carve == {"1g.10gb": ("128", "88"), "2g.20gb": ("8", "16"), "3g.40gb": ("8", "16")}
    assert sorted(a["subject"] for a in cluster["advice"] if a["kind"] == "mig-carve") == [
        "a100-mig 1g.10gb", "a100-mig 2g.20gb", "a100-mig 3g.40gb"]
