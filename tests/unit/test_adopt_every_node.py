"""A Kueue ResourceFlavor without nodeLabels (it matches every node) imports as a GPUPool whose nodeSelector is
empty, compiles back to a flavor without nodeLabels, and validate says what gpugov cannot govern there (GG056)."""

from __future__ import annotations

from pathlib import Path

import yaml

from gpugov.adopt import import_inventory, inventory
from gpugov.adopt.canonical import differences
from gpugov.adopt.sources import read_folder
from gpugov.app.pipeline import validate_repo
from gpugov.capacity.nodes import pool_nodes
from gpugov.compile import compile
from gpugov.compile.admission.placement import pool_keys
from gpugov.compile.common import LABEL_POOL, select
from tests.helpers.adopt_shapes import EVERY_NODE, GFD_NODE, documents


def _imported(tmp_path: Path, text: str = EVERY_NODE) -> Path:
    source = tmp_path / "cluster"
    source.mkdir()
    (source / "objects.yaml").write_text(text)
    out = tmp_path / "repo"
    report = import_inventory(read_folder(source), "lab", out)
    assert report.gaps == [], report.gaps
    return out


def _findings(root: Path, rule: str) -> list[tuple[str, int, str]]:
    return [(f.location.file, f.location.line, f.message) for f in validate_repo(root).findings
            if f.rule == rule and f.location]


def test_a_flavor_without_node_labels_is_a_pool_that_selects_every_node(tmp_path: Path) -> None:
    out = _imported(tmp_path)
    pool = yaml.safe_load((out / "hardware" / "default-flavor.yaml").read_text())["spec"]
    # every node, declared as such; its capacity counts the node with GPUs, not the CPU-only one
    assert (pool["nodeSelector"], pool["nodeCount"], pool["acceleratorsPerNode"]) == ({}, 1, 8)
    validation = validate_repo(out)
    assert not validation.errors
    compiled = compile(validation.model, cluster="lab")
    flavor = next(o for o in compiled if o["kind"] == "ResourceFlavor")
    assert "nodeLabels" not in flavor["spec"]  # Kueue's flavor matches every node, as before
    # Kueue refuses a topology to a flavor without nodeLabels: no flavor of the cluster is topology-aware
    assert "topologyName" not in flavor["spec"] and not [o for o in compiled if o["kind"] == "Topology"]
    assert not [o for o in compiled if o["kind"] == "Node"]  # no node patched with a pool label
    assert pool_keys(select(validation.model, cluster="lab"))[0] == ["kubernetes.io/hostname"]  # no pool label
    [(file, _, message)] = _findings(out, "GG056")
    assert file == "hardware/default-flavor.yaml" and "gpugov-pool-placement cannot keep" in message


def test_the_compiled_back_comparison_covers_what_a_flavor_selects(tmp_path: Path) -> None:
    """A flavor whose nodes the declarations would change is a difference, never silent."""
    before = inventory(documents("every-node"))
    after = inventory([{**d, "spec": {"nodeLabels": {LABEL_POOL: "default-flavor"}}}
                       if d["kind"] == "ResourceFlavor" else d for d in documents("every-node")])
    assert [(d.object, d.field, d.before, d.after) for d in differences(before, after)] == [
        ("ResourceFlavor default-flavor", "spec.nodeLabels", {}, {LABEL_POOL: "default-flavor"})]
    tainted = inventory([{**d, "spec": {"nodeTaints": [{"key": "gpu", "value": "x", "effect": "NoSchedule"}]}}
                         if d["kind"] == "ResourceFlavor" else d for d in documents("every-node")])
    assert [d.field for d in differences(before, tainted)] == ["spec.nodeTaints"]


def test_what_cannot_hold_on_every_node_is_a_finding(tmp_path: Path) -> None:
    """Taints gpugov cannot put on every node, and other pools whose nodes the pool's work can reach."""
    text = EVERY_NODE.replace("metadata: {name: default-flavor}\n", """metadata: {name: default-flavor}
spec:
  nodeTaints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
  tolerations: [{key: nvidia.com/gpu, operator: Equal, value: present, effect: NoSchedule}]
""", 1) + """---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: a100}
spec: {nodeLabels: {node-pool: a100}}
---""" + GFD_NODE.format(name="a100-1", pool="a100", product="NVIDIA-A100-SXM4-80GB")
    out = _imported(tmp_path, text)
    messages = sorted(m for _, _, m in _findings(out, "GG056"))
    assert len(messages) == 3, messages
    for part in ("the nodes of 'a100' too", "declares taints (nvidia.com/gpu)", "as a Kueue ResourceFlavor without"):
        assert any(part in m for m in messages), (part, messages)
    assert not validate_repo(out).errors  # warnings: what the cluster does today


def test_a_volcano_pool_cannot_select_every_node(tmp_path: Path) -> None:
    out = _imported(tmp_path)
    clusters = out / "policies" / "clusters.yaml"
    clusters.write_text(clusters.read_text().replace("backend: kueue", "backend: volcano"))
    assert [f.rule for f in validate_repo(out).errors] == ["GG055"]


def test_the_live_nodes_of_an_every_node_pool_are_those_with_its_devices(tmp_path: Path) -> None:
    model = validate_repo(_imported(tmp_path)).model
    assert model is not None
    nodes = [d for d in documents("every-node") if d["kind"] == "Node"]
    assert [n["metadata"]["name"] for n in pool_nodes(model.pools["default-flavor"], nodes)] == ["gpu-1"]


def test_no_topology_where_a_pool_selects_every_node(tmp_path: Path) -> None:
    """A topology declared beside a pool that selects every node cannot hold (GG057); import does not declare one."""
    text = EVERY_NODE + """---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: racks}
spec: {levels: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: a100}
spec: {nodeLabels: {node-pool: a100}, topologyName: racks}
---""" + GFD_NODE.format(name="a100-1", pool="a100", product="NVIDIA-A100-SXM4-80GB")
    source = tmp_path / "cluster"
    source.mkdir()
    (source / "objects.yaml").write_text(text)
    out = tmp_path / "repo"
    report = import_inventory(read_folder(source), "lab", out)
    assert [(g.object, g.field) for g in report.gaps] == [("ResourceFlavor a100", "spec.topologyName")]
    assert "topology" not in yaml.safe_load((out / "hardware" / "a100.yaml").read_text())["spec"]
    path = out / "hardware" / "a100.yaml"
    path.write_text(path.read_text() + "  topology: {levels: [rack, kubernetes.io/hostname]}\n")
    assert [(f.rule, f.location.file) for f in validate_repo(out).errors if f.location] == [
        ("GG057", "hardware/a100.yaml")]
