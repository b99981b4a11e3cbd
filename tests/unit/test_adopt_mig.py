"""gpugov import reads MIG layouts back (issue #40): the nodes' nvidia.com/mig.config labels and the mig-parted
ConfigMap become the pool's migLayouts and its nodes' migLayout, so a MIG pool stays a MIG pool and quotas stay on
the profiles it offers. The example org's cluster east, as `gpugov apply` leaves it, imports to a repository that
validates and compiles to the same scheduler objects, node labels and mig-parted config."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from gpugov.adopt import import_inventory, inventory
from gpugov.app.pipeline import validate_repo
from gpugov.compile import compile
from gpugov.compile.mig import compiled_mig_configs
from gpugov.kube.objects import object_key
from gpugov.sandbox.simulated import simulated_nodes
from tests.helpers.repos import REPO

KUBE_SYSTEM = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system", "uid": "east-uid"}}
# What the cluster holds that import compares: the scheduler objects, the nodes' labels, the mig-parted config.
KEPT = ("ResourceFlavor", "Topology", "ClusterQueue", "Cohort", "LocalQueue", "WorkloadPriorityClass", "Node",
        "ConfigMap")


def example_east() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(compiled objects of the example org's cluster east, the objects a cluster holds after `gpugov apply`:
    those with the simulated GPU servers, labelled by the compiled node patches)."""
    model = validate_repo(REPO).model
    assert model is not None
    compiled = compile(model, backend="kueue", cluster="east")
    nodes = {n["metadata"]["name"]: n for n in simulated_nodes(model, "east")}
    for obj in compiled:
        if obj["kind"] == "Node":
            nodes[obj["metadata"]["name"]]["metadata"]["labels"].update(obj["metadata"]["labels"])
    held = [copy.deepcopy(o) for o in compiled if o["kind"] != "Node"] + list(nodes.values()) + [KUBE_SYSTEM]
    return compiled, held


def kept(objects: list[dict[str, Any]]) -> dict[Any, Any]:
    """What decides scheduling, keyed by object: spec (a Node patch's labels), a ConfigMap's mig-configs."""
    found: dict[Any, Any] = {}
    for obj in objects:
        if obj["kind"] == "Node":
            found[object_key(obj)] = obj["metadata"]["labels"]
        elif obj["kind"] == "ConfigMap":
            found[object_key(obj)] = compiled_mig_configs([obj]) or None
        elif obj["kind"] in KEPT:
            found[object_key(obj)] = {k: v for k, v in obj.items() if k != "metadata"}
    return {k: v for k, v in found.items() if v is not None}


def test_the_example_orgs_mig_pool_imports_as_a_mig_pool_and_compiles_back_the_same(tmp_path: Path) -> None:
    compiled, held = example_east()
    out = tmp_path / "repo"
    report = import_inventory(inventory(held, nodes_known=True), "east", out)
    assert report.gaps == [], report.gaps
    validation = validate_repo(out)
    assert validation.model is not None and not validation.errors, [f.message for f in validation.errors]
    pool = yaml.safe_load((out / "hardware" / "a100-mig.yaml").read_text())["spec"]
    assert pool["migLayouts"] == {"small": {"1g.10gb": 7}, "balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}
    assert pool["nodes"] == [{"name": "a100-01", "migLayout": "small"}, {"name": "a100-02", "migLayout": "small"},
                             {"name": "a100-03", "migLayout": "balanced"}, {"name": "a100-04"}]
    assert "nodeCount" not in pool and "nodeSelector" not in pool
    # Quotas only on what each pool offers: no `1g.10gb: 0` on h100 (compile writes those zeros itself).
    nlp = yaml.safe_load((out / "tenants" / "nlp.yaml").read_text())["spec"]
    assert [sorted(q["resources"]) for q in nlp["quotas"] if q["pool"] == "h100"] == [["accelerators", "cpu", "memory"]]
    h100 = yaml.safe_load((out / "hardware" / "h100.yaml").read_text())["spec"]
    assert h100["nodes"][0] == {"name": "h100-01", "labels": {"topology.gpugov.io/block": "b1",
                                                               "topology.gpugov.io/rack": "r1"}}
    cluster = yaml.safe_load((out / "policies" / "clusters.yaml").read_text())["spec"]
    assert cluster["migConfig"] == {"name": "gpugov-mig-parted-config", "namespace": "gpu-operator"}
    assert {"kind": "ConfigMap", "namespace": "gpu-operator", "name": "gpugov-mig-parted-config"} in cluster["adopt"]
    priorities = {d["metadata"]["name"]: d["spec"] for d in
                  yaml.safe_load_all((out / "policies" / "priorities.yaml").read_text())}
    assert priorities["inference-critical"]["preemptible"] is False  # from maxPriorityThreshold 10000
    assert "preemptible" not in priorities["training-high"]
    # What gpugov wrote on the cluster comes back too: cost centres (queue labels), the namespaces' Pod Security.
    assert nlp["costCenter"] == "CC-1010"
    guardrails = yaml.safe_load((out / "policies" / "guardrails.yaml").read_text())["spec"]
    assert guardrails["isolation"]["podSecurity"] == "baseline"
    again = compile(validation.model, backend="kueue", cluster="east")
    assert kept(again) == kept(compiled)
    labels = {object_key(o): o["metadata"].get("labels") for o in again if o["kind"] in ("ClusterQueue", "LocalQueue",
                                                                                          "Namespace")}
    assert labels == {k: o["metadata"].get("labels") for o in compiled if (k := object_key(o)) in labels}


def test_tenant_namespaces_keep_the_most_permissive_pod_security_they_enforce(tmp_path: Path) -> None:
    from tests.helpers.adopt_shapes import FLAT

    namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
                  for name, labels in (("team-a", {"pod-security.kubernetes.io/enforce": "baseline"}),
                                       ("team-a-dev", {"pod-security.kubernetes.io/enforce": "restricted"}),
                                       ("team-b", {"pod-security.kubernetes.io/enforce": "baseline"}))]
    report = import_inventory(inventory([*yaml.safe_load_all(FLAT), *namespaces]), "lab", tmp_path / "repo")
    guardrails = yaml.safe_load((tmp_path / "repo" / "policies" / "guardrails.yaml").read_text())["spec"]
    assert guardrails["isolation"]["podSecurity"] == "baseline" and guardrails["isolation"]["podSecurityReason"]
    assert [(g.object, g.field) for g in report.gaps] == [
        ("Namespace team-a-dev", "metadata.labels[pod-security.kubernetes.io/enforce]")]
    unlabelled = [{**n, "metadata": {"name": n["metadata"]["name"]}} for n in namespaces]
    import_inventory(inventory([*yaml.safe_load_all(FLAT), *unlabelled]), "lab", tmp_path / "bare")
    guardrails = yaml.safe_load((tmp_path / "bare" / "policies" / "guardrails.yaml").read_text())["spec"]
    assert guardrails["isolation"]["podSecurity"] == "privileged"  # no label: Kubernetes enforces nothing


MIG_CLUSTER = """
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{node-pool: a100, nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB, nvidia.com/gpu.count: "8",
            nvidia.com/mig.config: {config}}}
status:
  allocatable: {{nvidia.com/gpu: "{gpus}", cpu: "128", memory: 1Ti}}
"""
MIG_OBJECTS = """
apiVersion: v1
kind: ConfigMap
metadata: {name: default-mig-parted-config, namespace: gpu-operator}
data:
  config.yaml: |
    version: v1
    mig-configs:
      all-disabled:
      - {devices: all, mig-enabled: false}
      all-1g.10gb:
      - {devices: all, mig-enabled: true, mig-devices: {1g.10gb: 7}}
      a100-mixed:
      - {devices: all, mig-enabled: true, mig-devices: {3g.40gb: 2}}
      custom-split:
      - {devices: [0, 1, 2, 3], mig-enabled: true, mig-devices: {1g.10gb: 7}}
      - {devices: [4, 5, 6, 7], mig-enabled: false}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: a100}
spec: {nodeLabels: {node-pool: a100}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: serving}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: serving}}
  flavorFungibility: {whenCanBorrow: TryNextFlavor}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu, nvidia.com/mig-1g.10gb, nvidia.com/mig-3g.40gb,
                       nvidia.com/mig-7g.80gb]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: memory, nominalQuota: 512Gi}
      - {name: nvidia.com/gpu, nominalQuota: 8}
      - {name: nvidia.com/mig-1g.10gb, nominalQuota: 14}
      - {name: nvidia.com/mig-3g.40gb, nominalQuota: 4}
      - {name: nvidia.com/mig-7g.80gb, nominalQuota: 2}
"""


def test_a_hand_made_mig_cluster_imports_its_layouts_and_says_what_apply_would_change(tmp_path: Path) -> None:
    nodes = [MIG_CLUSTER.format(name=n, config=c, gpus=g) for n, c, g in (
        ("gpu-1", "all-1g.10gb", 0), ("gpu-2", "a100-mixed", 0), ("gpu-3", "all-disabled", 8), ("gpu-4", "custom-split", 4))]
    objects = [d for text in [*nodes, MIG_OBJECTS] for d in yaml.safe_load_all(text)]
    out = tmp_path / "repo"
    report = import_inventory(inventory(objects, nodes_known=True), "lab", out)
    validation = validate_repo(out)
    assert not validation.errors, [f.message for f in validation.errors]
    pool = yaml.safe_load((out / "hardware" / "a100.yaml").read_text())["spec"]
    assert pool["migLayouts"] == {"all-1g-10gb": {"1g.10gb": 7}, "mixed": {"3g.40gb": 2}}
    assert pool["nodes"] == [{"name": "gpu-1", "migLayout": "all-1g-10gb"}, {"name": "gpu-2", "migLayout": "mixed"},
                             {"name": "gpu-3"}, {"name": "gpu-4"}]
    assert pool["acceleratorsPerNode"] == 8  # GPU Feature Discovery's gpu.count: MIG nodes advertise no whole GPU
    cluster = yaml.safe_load((out / "policies" / "clusters.yaml").read_text())["spec"]
    assert cluster["migConfig"] == {"name": "default-mig-parted-config", "namespace": "gpu-operator"}
    gaps: dict[tuple[str, str], str] = {}
    for g in report.gaps:
        gaps[(g.object, g.field)] = gaps.get((g.object, g.field), "") + g.why + "; "
    # A config name outside gpugov's <pool>-<layout>: the node's label, and so its layout, would change.
    assert "becomes a100-all-1g-10gb" in gaps[("ResourceFlavor a100", "nodes[gpu-1].labels[nvidia.com/mig.config]")]
    assert ("ResourceFlavor a100", "nodes[gpu-2].labels[nvidia.com/mig.config]") not in gaps  # a100-mixed: kept
    assert "one MIG mix for every GPU" in gaps[("ResourceFlavor a100", "nodes[gpu-4].labels[nvidia.com/mig.config]")]
    assert "mig-manager would re-partition" in gaps[("Node gpu-1", "metadata.labels[nvidia.com/mig.config]")]
    assert ("Node gpu-2", "metadata.labels[nvidia.com/mig.config]") not in gaps
    assert "node-pool=a100" in gaps[("ResourceFlavor a100", "spec.nodeLabels")]  # selected by gpugov.io/pool then
    # The operator's own configs that no declared layout keeps would be dropped from its ConfigMap: said, per config.
    assert ("ConfigMap gpu-operator/default-mig-parted-config", "mig-configs[custom-split]") in gaps
    # 7g.80gb is offered by no layout of the pool: a gap, never a quota the schema refuses.
    assert "offers no nvidia.com/mig-7g.80gb" in gaps[
        ("ClusterQueue serving", "spec.resourceGroups.flavors[a100].resources[nvidia.com/mig-7g.80gb]")]
    serving = yaml.safe_load((out / "tenants" / "serving.yaml").read_text())["spec"]
    assert serving["quotas"] == [{"pool": "a100", "resources": {"cpu": 64, "memory": "512Gi", "accelerators": 8,
                                                                   "1g.10gb": 14, "3g.40gb": 4}}]


def test_mig_labels_without_a_mig_parted_config_are_a_gap_not_a_broken_pool(tmp_path: Path) -> None:
    nodes = [MIG_CLUSTER.format(name="gpu-1", config="all-1g.10gb", gpus=0)]
    objects = [d for text in [*nodes, MIG_OBJECTS] for d in yaml.safe_load_all(text) if d["kind"] != "ConfigMap"]
    report = import_inventory(inventory(objects, nodes_known=True), "lab", tmp_path / "repo")
    assert any(g.field == "nodes.labels[nvidia.com/mig.config]" and "no mig-parted ConfigMap" in g.why
               for g in report.gaps)
    assert not validate_repo(tmp_path / "repo").errors
