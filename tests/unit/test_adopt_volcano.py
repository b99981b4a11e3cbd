"""gpugov import from Volcano (issue #37): hand-written Volcano configurations, not made by gpugov, become the
declarations of a Volcano cluster that compile back to the same Queues; what gpugov cannot express is a gap."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpugov.adopt import ImportReport, import_inventory, inventory
from gpugov.adopt.canonical import queue_differences, queue_view
from gpugov.adopt.run import BothBackends, backend_of
from gpugov.app.pipeline import validate_repo
from gpugov.compile import compile
from gpugov.compile.volcano_scheduler import scheduler_conf_text

NODES = "\n---\n".join(f"""
apiVersion: v1
kind: Node
metadata:
  name: {group}-{i}
  labels: {{volcano.sh/nodegroup-name: {group}, nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}}
status:
  allocatable: {{cpu: "96", memory: 1Ti, nvidia.com/gpu: "8"}}
""" for group in ("train", "serve") for i in (1, 2))

# Volcano's chart default: enqueue, the proportion plugin, no nodegroup plugin.
CHART_CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""


def configmap(conf: str) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "volcano-scheduler-configmap", "namespace": "volcano-system"}, "data": {"volcano-scheduler.conf": conf}})


def podgroup(namespace: str, queue: str) -> str:
    return f"""
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {{name: pg-{queue}, namespace: {namespace}}}
spec: {{queue: {queue}, minMember: 1}}
"""


def queue(name: str, **spec: Any) -> str:
    return yaml.safe_dump({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
                           "spec": spec})


def run(tmp_path: Path, *documents: str) -> tuple[ImportReport, list[dict[str, Any]], Any]:
    inv = inventory(list(yaml.safe_load_all("\n---\n".join(documents))))
    out = tmp_path / "repo"
    report = import_inventory(inv, "gpu", out)
    validation = validate_repo(out)
    assert validation.model is not None and not validation.errors, validation.errors
    return report, compile(validation.model, cluster="gpu"), inv


def queues(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: queue_view(o) for o in objects if o["kind"] == "Queue"}


def gaps(report: ImportReport) -> set[tuple[str, str]]:
    return {(g.object, g.field) for g in report.gaps}


HIERARCHY = [
    NODES,
    configmap(scheduler_conf_text("capacity")),
    # research has no parent: Volcano reads it as root's child.
    queue("research", weight=2, deserved={"nvidia.com/gpu": "24"}, guarantee={"resource": {"nvidia.com/gpu": "4"}}),
    queue("nlp", parent="research", deserved={"nvidia.com/gpu": "8"}, capability={"nvidia.com/gpu": "16"},
          affinity={"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["train"]}}),
    queue("vision", parent="research", reclaimable=True, deserved={"nvidia.com/gpu": "12"},
          guarantee={"resource": {"nvidia.com/gpu": "4"}},
          affinity={"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["train"]}}),
    queue("serving", parent="root", weight=3, deserved={"nvidia.com/gpu": "8"}, capability={"nvidia.com/gpu": "8"},
          affinity={"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["serve"]}}),
    podgroup("nlp", "nlp"), podgroup("vision", "vision"), podgroup("serving", "serving"),
    """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
description: urgent runs
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: system-node-critical}
value: 2000001000
""",
]


def test_a_hand_written_hierarchy_compiles_back_to_the_same_queues(tmp_path: Path) -> None:
    report, objects, inv = run(tmp_path, *HIERARCHY)
    assert report.gaps == [], report.gaps
    assert queue_differences(inv, inventory(objects)) == []
    read = queues(objects)
    assert set(read) == {"research", "nlp", "vision", "serving"}
    # research holds 4 of its own beyond nlp's 8 and vision's 12, and guarantees nothing beyond vision's 4.
    assert read["research"]["deserved"] == {"nvidia.com/gpu": 24}
    assert read["research"]["guarantee.resource"] == {"nvidia.com/gpu": 4}
    assert read["nlp"]["capability"] == {"nvidia.com/gpu": 16}
    assert read["vision"]["capability"] == {}  # no ceiling, as the cluster had
    assert read["serving"]["weight"] == 3
    repo = tmp_path / "repo"
    department = yaml.safe_load((repo / "tenants/departments.yaml").read_text().split("\n", 1)[1])
    assert department["metadata"]["name"] == "research" and department["spec"]["fairSharing"] == {"weight": 2}
    assert department["spec"]["quotas"] == [{"pool": "serve", "resources": {"accelerators": 4}}]
    pool = yaml.safe_load((repo / "hardware/train.yaml").read_text().split("\n", 1)[1])["spec"]
    assert pool["nodeSelector"] == {"matchLabels": {"volcano.sh/nodegroup-name": "train"}}
    assert pool["accelerator"]["model"] == "H100-80GB" and pool["acceleratorsPerNode"] == 8
    assert (repo / "tenants/nlp.yaml").exists() and "system-node-critical" not in (repo / "policies/priorities.yaml").read_text()
    cluster = yaml.safe_load((repo / "policies/clusters.yaml").read_text().split("\n", 1)[1])["spec"]
    assert cluster["backend"] == "volcano"
    assert {"kind": "PriorityClass", "name": "high"} in cluster["adopt"]
    assert {"kind": "Queue", "name": "research"} in cluster["adopt"]


def test_flat_queues_on_the_charts_proportion_configuration(tmp_path: Path) -> None:
    """Volcano's chart default (proportion, enqueue): tenants under root; a queue that may borrow goes into a
    department that writes no queue; the configuration gpugov would write differs, each part a gap."""
    report, objects, inv = run(
        tmp_path, NODES, configmap(CHART_CONF),
        queue("team-a", deserved={"nvidia.com/gpu": "8"}, capability={"nvidia.com/gpu": "16"},
              affinity={"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["train"]}}),
        queue("team-b", deserved={"nvidia.com/gpu": "4"}, capability={"nvidia.com/gpu": "4"},
              affinity={"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["serve"]}}),
        podgroup("team-a", "team-a"), podgroup("team-b", "team-b"))
    assert queue_differences(inv, inventory(objects)) == []
    policy = yaml.safe_load((tmp_path / "repo/policies/scheduling.yaml").read_text().split("\n", 1)[1])["spec"]
    assert policy["volcano"] == {"plugin": "proportion"}
    assert yaml.safe_load((tmp_path / "repo/tenants/team-a.yaml").read_text().split("\n", 1)[1])["spec"][
        "department"] == "shared"
    assert "department" not in (tmp_path / "repo/tenants/team-b.yaml").read_text()
    assert not any(o["kind"] == "Queue" and o["metadata"]["name"] == "shared" for o in objects)
    fields = {f for o, f in gaps(report) if o == "ConfigMap volcano-system/volcano-scheduler-configmap"}
    assert fields == {"data[volcano-scheduler.conf].actions", "data[volcano-scheduler.conf].tiers[1].plugins"}


def test_a_missing_parent_reads_as_root_and_a_dangling_one_is_a_gap(tmp_path: Path) -> None:
    report, objects, _ = run(
        tmp_path, NODES,
        queue("solo", deserved={"nvidia.com/gpu": "4"}, capability={"nvidia.com/gpu": "4"},
              affinity={"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["train"]}}),
        queue("orphan", parent="gone", deserved={"nvidia.com/gpu": "4"}, capability={"nvidia.com/gpu": "4"},
              affinity={"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["train"]}}),
        podgroup("solo", "solo"), podgroup("orphan", "orphan"))
    read = queues(objects)
    assert read["solo"]["parent"] == "root" and read["solo"]["deserved"] == {"nvidia.com/gpu": 4}
    assert ("Queue orphan", "spec.parent") in gaps(report)
    assert read["orphan"]["parent"] == "root"
    assert any(n.object.startswith("ConfigMap") for n in report.notes)  # no configuration read: capacity assumed


def test_what_gpugov_cannot_express_is_a_gap_with_its_reason(tmp_path: Path) -> None:
    train = {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["train"]}}
    report, objects, _ = run(
        tmp_path, NODES, configmap(scheduler_conf_text("capacity")),
        queue("default", weight=1, reclaimable=True),
        queue("cpu-batch", deserved={"cpu": "64"}, capability={"cpu": "128"}),
        queue("org", deserved={"nvidia.com/gpu": "8"}, capability={"nvidia.com/gpu": "32"}),
        queue("leaf", parent="org", deserved={"nvidia.com/gpu": "8", "cpu": "16"}, affinity=train),
        queue("root-borrower", deserved={"nvidia.com/gpu": "4"}, affinity=train, priority=5),
        queue("greedy", parent="org", deserved={"nvidia.com/gpu": "8"}, capability={"nvidia.com/gpu": "4"},
              affinity=train),
        yaml.safe_dump({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "shut"},
                        "spec": {"parent": "org", "deserved": {"nvidia.com/gpu": "0"}, "affinity": train},
                        "status": {"state": "Closed"}}),
        queue("spread", parent="org", deserved={"nvidia.com/gpu": "0"}, affinity={"nodeGroupAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": ["train", "serve"]}}),
        podgroup("spread", "spread"), podgroup("batch", "cpu-batch"), podgroup("leaf", "leaf"), podgroup("stray", "org"),
        podgroup("root-borrower", "root-borrower"), podgroup("greedy", "greedy"), podgroup("shut", "shut"))
    found = gaps(report)
    expected = {
        ("Queue default", "(object)"),  # Volcano's own default queue
        ("Queue cpu-batch", "spec"),  # no accelerators
        ("Queue cpu-batch", "spec.deserved[cpu]"),
        ("Queue leaf", "spec.deserved[cpu]"),
        ("Queue org", "spec.capability"),  # a parent queue's capability
        ("Queue org", "PodGroup stray/pg-org"),  # a job under a non-leaf queue
        ("Queue root-borrower", "spec.capability[nvidia.com/gpu]"),  # no ceiling without a department
        ("Queue root-borrower", "spec.priority"),
        ("Queue greedy", "spec.capability[nvidia.com/gpu]"),  # below deserved
        ("Queue shut", "status.state"),
        ("Queue spread", "spec.affinity.nodeGroupAffinity.requiredDuringSchedulingIgnoredDuringExecution"),
    }
    assert expected <= found, sorted(found)
    reasons = {(g.object, g.field): g.why for g in report.gaps}
    assert "reclaimable" not in reasons[("Queue cpu-batch", "spec")] and "accelerators" in reasons[
        ("Queue cpu-batch", "spec")]
    # Compiled back: the cpu-only queue is not declared, the compare says so too.
    assert ("Queue cpu-batch", "(object)") in found
    assert sum(g.object == "Queue default" for g in report.gaps) == 1  # said once, with its reason
    assert "cpu-batch" not in queues(objects)


def test_a_difference_compile_does_not_foresee_still_reaches_the_report() -> None:
    before = inventory([yaml.safe_load(queue("a", weight=2, deserved={"nvidia.com/gpu": "8"}, parent="p"))])
    after = inventory([yaml.safe_load(queue("a", weight=1, deserved={"nvidia.com/gpu": "8000m"}))])
    found = {(d.field, d.before, d.after) for d in queue_differences(before, after)}
    assert found == {("spec.parent", "p", "root"), ("spec.weight", 2, 1)}


def test_the_backend_is_what_the_input_holds_and_both_must_be_chosen(tmp_path: Path) -> None:
    volcano = inventory(list(yaml.safe_load_all(HIERARCHY[2])))
    assert backend_of(volcano, None) == "volcano"
    kueue = yaml.safe_load("""
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team}
spec: {namespaceSelector: {}}
""")
    both = inventory([kueue, yaml.safe_load(HIERARCHY[2])])
    with pytest.raises(BothBackends, match="--backend"):
        import_inventory(both, "gpu", tmp_path / "x")
    assert not (tmp_path / "x").exists()
    assert backend_of(both, "kueue") == "kueue"
    # Volcano's own two queues alone are no Volcano configuration to import.
    assert backend_of(inventory([kueue, yaml.safe_load(queue("default")), yaml.safe_load(queue("root"))]), None) == "kueue"


def test_cli_import_from_a_volcano_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpugov.cli import main

    source = tmp_path / "src"
    source.mkdir()
    (source / "all.yaml").write_text("\n---\n".join(HIERARCHY))
    code = main(["import", "--from", str(source), "--cluster", "gpu", "--out", str(tmp_path / "repo"),
                 "--backend", "volcano"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "everything was expressed" in out and "Queue research" in out


def test_with_a_backend_chosen_the_other_schedulers_queues_are_gaps(tmp_path: Path) -> None:
    kueue = yaml.safe_load("""
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team}
spec: {namespaceSelector: {}}
""")
    documents = [kueue, *yaml.safe_load_all("\n---\n".join(HIERARCHY)), yaml.safe_load(queue("default"))]
    report = import_inventory(inventory(documents), "gpu", tmp_path / "repo", backend="volcano")
    assert {(g.object, g.field) for g in report.gaps} == {("ClusterQueue team", "(object)"),
                                                         ("Queue default", "(object)")}
    assert validate_repo(tmp_path / "repo").model.cluster("gpu").backend == "volcano"
    report = import_inventory(inventory(documents), "gpu", tmp_path / "kueue", backend="kueue")
    others = {g.object for g in report.gaps if "the other scheduler's" in g.why}
    assert others == {"Queue research", "Queue nlp", "Queue vision", "Queue serving"}  # not root, not default


def test_nodes_gpugov_labelled_are_listed_and_an_oversubscribed_pool_gets_a_ratio(tmp_path: Path) -> None:
    nodes = "\n---\n".join(f"""
apiVersion: v1
kind: Node
metadata:
  name: n{i}
  labels: {{volcano.sh/nodegroup-name: big, gpugov.io/pool: big, nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}}
status:
  allocatable: {{nvidia.com/gpu: "8"}}
""" for i in (1, 2))
    big = {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["big"]}}
    report, objects, inv = run(
        tmp_path, nodes,
        queue("all", weight=100000, deserved={"nvidia.com/gpu": "24"}),
        queue("x", parent="all", deserved={"nvidia.com/gpu": "16"}, affinity=big),
        queue("y", parent="all", deserved={"nvidia.com/gpu": "8"}, affinity=big),
        podgroup("x", "x"), podgroup("y", "y"))
    assert gaps(report) == {("Queue all", "spec.weight")}  # 100000 > 65535: imported as 1, and compared
    assert [d.field for d in queue_differences(inv, inventory(objects))] == ["spec.weight"]
    pool = yaml.safe_load((tmp_path / "repo/hardware/big.yaml").read_text().split("\n", 1)[1])["spec"]
    assert pool["nodes"] == [{"name": "n1"}, {"name": "n2"}] and "nodeSelector" not in pool
    guardrails = yaml.safe_load((tmp_path / "repo/policies/guardrails.yaml").read_text().split("\n", 1)[1])["spec"]
    assert guardrails["poolCapacityRatios"] == {"big": 1.5}


def test_west_as_gpugov_compiles_it_imports_back_to_every_same_object(tmp_path: Path) -> None:
    """The example org's Volcano cluster, as compile writes it (its nodes as the kubelet reports them with gpugov's
    labels): imported, it compiles back to the same objects, admission policies and bindings included."""
    from gpugov.sandbox.simulated import simulated_nodes
    from tests.helpers.repos import REPO

    model = validate_repo(REPO).model
    assert model is not None
    objects = compile(model, cluster="west")
    patches = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Node"}
    nodes = simulated_nodes(model, "west")
    for node in nodes:
        node["metadata"]["labels"].update(patches[node["metadata"]["name"]]["metadata"]["labels"])
    report = import_inventory(inventory([o for o in objects if o["kind"] != "Node"] + nodes, nodes_known=True),
                              "west", tmp_path / "repo")
    assert report.gaps == []
    again = validate_repo(tmp_path / "repo")
    assert again.model is not None and not again.errors

    def keyed(found: list[dict[str, Any]]) -> dict[tuple[str, str, str], Any]:
        kept = {}
        for obj in found:
            obj = yaml.safe_load(yaml.safe_dump(obj))
            obj["metadata"].get("annotations", {}).pop("gpugov.io/source", None)
            kept[(obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])] = obj
        return kept

    before, after = keyed(objects), keyed(compile(again.model, cluster="west"))
    assert set(after) == set(before)
    assert [k for k in before if before[k] != after[k]] == []


def test_read_cluster_reads_volcano_where_the_cluster_serves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the cluster serves picks what is read: Volcano's Queues, PodGroups, PriorityClasses and scheduler
    ConfigMap where it serves scheduling.volcano.sh/v1beta1; neither scheduler, or the one asked for missing: exit 3."""
    from types import SimpleNamespace

    import gpugov.cluster.rest as rest
    from gpugov.adopt.sources import read_cluster
    from gpugov.sources import CheckIncomplete

    held = {"Queue": [yaml.safe_load(HIERARCHY[2])], "PodGroup": list(yaml.safe_load_all(HIERARCHY[6])),
            "ConfigMap": [yaml.safe_load(HIERARCHY[1])], "PriorityClass": [next(yaml.safe_load_all(HIERARCHY[-1]))]}
    asked: list[str] = []

    def list_all(api: Any, kind: Any, **_: Any) -> list[dict[str, Any]]:
        asked.append(kind.kind)
        return held.get(kind.kind, [])

    served: set[str] = {"v1", "scheduling.volcano.sh/v1beta1"}
    monkeypatch.setattr(rest, "served_versions", lambda api: served)
    monkeypatch.setattr(rest, "list_all", list_all)
    cluster = SimpleNamespace(configuration=SimpleNamespace(host="https://k8s"))
    inv = read_cluster(cluster)
    assert set(inv.volcano_queues) == {"research"} and set(inv.podgroups) == {("nlp", "pg-nlp")}
    assert inv.volcano_conf is not None and set(inv.pod_priority_classes) == {"high"}
    assert "ClusterQueue" not in asked
    with pytest.raises(CheckIncomplete, match="is Kueue installed"):
        read_cluster(cluster, backend="kueue")
    served.discard("scheduling.volcano.sh/v1beta1")
    with pytest.raises(CheckIncomplete, match="Kueue or Volcano"):
        read_cluster(cluster)
    with pytest.raises(CheckIncomplete, match="is Volcano installed"):
        read_cluster(cluster, backend="volcano")


def test_a_malformed_hand_written_queue_is_a_gap_not_a_crash(tmp_path: Path) -> None:
    report, _, _ = run(tmp_path, NODES, queue("odd", weight="heavy", deserved={"nvidia.com/gpu": "4"},
                                              capability={"nvidia.com/gpu": "4"}, affinity={"nodeGroupAffinity": {
                                                  "requiredDuringSchedulingIgnoredDuringExecution": ["train"]}}),
                       podgroup("odd", "odd"))
    assert ("Queue odd", "spec.weight") in gaps(report)
