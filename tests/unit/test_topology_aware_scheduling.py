"""Cluster spec.topologyAwareScheduling (issue #40): every flavor of a Kueue cluster topology-aware (the default)
or none. `gpugov import` writes false for a cluster whose flavors have no topologyName, so that Kueue keeps
admitting by quota alone: a TAS flavor also checks that a job's pods fit the nodes' free capacity."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpugov.adopt import import_inventory
from gpugov.adopt.sources import read_folder
from gpugov.app.pipeline import validate_repo
from gpugov.compile import compile
from tests.helpers.adopt_shapes import CPU_ONLY, SEVERAL_FLAVORS
from tests.helpers.repos import overlay_repo, write

CLUSTER = """\
apiVersion: gpugov.io/v1alpha1
kind: Cluster
metadata:
  name: lab
spec:
  backend: kueue
"""


def _compiled(tmp_path: Path, cluster_spec: str) -> list[dict]:
    root = overlay_repo(tmp_path)
    write(root, "policies/clusters.yaml", CLUSTER + cluster_spec)
    validation = validate_repo(root)
    assert not validation.errors, validation.errors
    return compile(validation.model, cluster="lab")


@pytest.mark.parametrize(("spec", "tas"), [("", True), ("  topologyAwareScheduling: true\n", True),
                                           ("  topologyAwareScheduling: false\n", False)])
def test_compile_makes_every_flavor_topology_aware_or_none(tmp_path: Path, spec: str, tas: bool) -> None:
    objects = _compiled(tmp_path, spec)
    flavors = [o for o in objects if o["kind"] == "ResourceFlavor"]
    topologies = [o["metadata"]["name"] for o in objects if o["kind"] == "Topology"]
    assert flavors
    if tas:
        assert sorted(topologies) == sorted(f["metadata"]["name"] for f in flavors)
        assert all(f["spec"]["topologyName"] == f["metadata"]["name"] for f in flavors)
    else:
        assert topologies == [] and all("topologyName" not in f["spec"] for f in flavors)
        assert all(f["spec"]["nodeLabels"] for f in flavors)  # the flavors select their nodes as before


def test_topology_levels_in_a_cluster_without_tas_are_an_error(tmp_path: Path) -> None:
    root = overlay_repo(tmp_path)
    write(root, "policies/clusters.yaml", CLUSTER + "  topologyAwareScheduling: false\n")
    path = root / "hardware" / "a100.yaml"
    path.write_text(path.read_text() + "  topology: {levels: [kubernetes.io/hostname]}\n")
    errors = [f for f in validate_repo(root).errors if f.rule == "GG058"]
    assert [(f.location.file, f.location.line) for f in errors if f.location] == [("hardware/a100.yaml", 16)]
    assert "topologyAwareScheduling: false" in errors[0].message
    write(root, "policies/clusters.yaml", CLUSTER)  # TAS on (the default): the levels hold
    assert not validate_repo(root).errors


def _import(tmp_path: Path, text: str):
    source = tmp_path / "cluster"
    source.mkdir()
    (source / "objects.yaml").write_text(text)
    out = tmp_path / "repo"
    return out, import_inventory(read_folder(source), "lab", out)


def test_import_keeps_a_cluster_without_topology_aware_flavors_without(tmp_path: Path) -> None:
    out, report = _import(tmp_path, CPU_ONLY)
    assert report.gaps == []
    assert not [n for n in report.notes if "topolog" in n.why]  # nothing becomes topology-aware
    cluster = yaml.safe_load((out / "policies" / "clusters.yaml").read_text())["spec"]
    assert cluster["topologyAwareScheduling"] is False
    validation = validate_repo(out)
    assert not validation.errors
    compiled = compile(validation.model, cluster="lab")
    assert not [o for o in compiled if o["kind"] == "Topology"]
    assert all("topologyName" not in o["spec"] for o in compiled if o["kind"] == "ResourceFlavor")


def test_import_of_a_cluster_with_some_topology_aware_flavors_says_what_changes_for_the_others(tmp_path: Path) -> None:
    text = SEVERAL_FLAVORS.replace("spec: {nodeLabels: {node-pool: h100}}",
                                   "spec: {nodeLabels: {node-pool: h100}, topologyName: h100}", 1) + """---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: h100}
spec: {levels: [{nodeLabel: kubernetes.io/hostname}]}
"""
    out, report = _import(tmp_path, text)
    cluster = yaml.safe_load((out / "policies" / "clusters.yaml").read_text())["spec"]
    assert "topologyAwareScheduling" not in cluster  # the default: every flavor topology-aware
    [gap] = [g for g in report.gaps if g.field == "spec.topologyName"]
    assert gap.object == "ResourceFlavor a100-ondemand"
    assert "only where its pods fit" in gap.why and "ordinary jobs do not notice" not in gap.why
