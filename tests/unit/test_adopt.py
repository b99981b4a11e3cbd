"""gpugov import (gpugov.adopt): hand-written Kueue shapes import, validate and compile back to the same queues."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpugov.adopt import import_inventory, inventory
from gpugov.adopt.canonical import cluster_queue_view, cohort_view
from gpugov.adopt.canonical import differences as import_differences
from gpugov.adopt.report import render_json, render_text
from gpugov.adopt.sources import read_folder
from gpugov.adopt.write import OutputError
from gpugov.app.pipeline import validate_repo
from gpugov.cli import main
from gpugov.compile import compile
from gpugov.drift.live import LiveState
from gpugov.drift.objects import differences, object_findings
from gpugov.kube.canonical import NAMESPACE_NAME_LABEL, canonical, canonical_selector, quantity, with_defaults
from gpugov.kube.names import KUEUE_API
from gpugov.kube.objects import object_key
from tests.helpers.adopt_shapes import COHORT_TREE, FLAT, GFD_NODE, SHAPES, V1BETA1


def _source(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "cluster"
    folder.mkdir()
    (folder / "objects.yaml").write_text(text)
    return folder


def _import(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    inv = read_folder(_source(tmp_path, text))
    out = tmp_path / "repo"
    return inv, out, import_inventory(inv, "imported", out)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_shape_imports_validates_and_compiles_back(tmp_path: Path, shape: str) -> None:
    inv, out, report = _import(tmp_path, SHAPES[shape])
    validation = validate_repo(out)
    assert not validation.errors, [f.message for f in validation.errors]
    compiled = inventory(compile(validation.model, cluster="imported"))
    assert import_differences(inv, compiled) == []
    for name, cq in inv.cluster_queues.items():
        assert cluster_queue_view(compiled.cluster_queues[name]) == cluster_queue_view(cq)
    for name, cohort in inv.cohorts.items():
        assert cohort_view(compiled.cohorts[name]) == cohort_view(cohort)
    for key, lq in inv.local_queues.items():
        assert compiled.local_queues[key]["spec"]["clusterQueue"] == lq["spec"]["clusterQueue"]
    assert report.gaps == []


def test_written_files_carry_modelines_and_the_cluster_names(tmp_path: Path) -> None:
    _, out, report = _import(tmp_path, COHORT_TREE)
    tenant = (out / "tenants" / "nlp.yaml").read_text()
    assert tenant.startswith("# yaml-language-server: $schema=../schemas/tenant.json\n")
    assert (out / "schemas" / "tenant.json").is_file()
    doc = yaml.safe_load(tenant)
    assert doc["spec"]["department"] == "research"
    assert doc["spec"]["quotas"] == [{"pool": "a100", "resources": {
        "accelerators": {"nominal": 8, "borrowingLimit": 4, "lendingLimit": 2}, "cpu": "64000m",
        "memory": {"nominal": "512Gi", "lendingLimit": 0}}}]
    pool = yaml.safe_load((out / "hardware" / "a100.yaml").read_text())["spec"]
    assert pool["accelerator"] == {"model": "A100-80GB"}  # from GPU Feature Discovery's product label
    assert (pool["nodeCount"], pool["acceleratorsPerNode"]) == (2, 8)
    assert pool["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    departments = list(yaml.safe_load_all((out / "tenants" / "departments.yaml").read_text()))
    assert [(d["metadata"]["name"], d["spec"].get("parent")) for d in departments] == [
        ("org-root", None), ("research", "org-root")]
    priorities = list(yaml.safe_load_all((out / "policies" / "priorities.yaml").read_text()))
    assert [(p["metadata"]["name"], p["spec"]["value"]) for p in priorities] == [("high", 1000), ("low", 10)]
    assert "tenants/nlp.yaml" in report.written


def test_what_gpugov_cannot_say_is_reported_never_dropped(tmp_path: Path) -> None:
    text = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: gpu}
spec: {nodeLabels: {pool: gpu}, tolerations: [{key: spot, operator: Exists, effect: NoSchedule}]}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: cpu}
spec: {nodeLabels: {pool: cpu}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: a}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  stopPolicy: Hold
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors: [{name: cpu, resources: [{name: cpu, nominalQuota: 8}, {name: memory, nominalQuota: 8Gi}]}]
  - coveredResources: [nvidia.com/gpu, example.com/fpga]
    flavors: [{name: gpu, resources: [{name: nvidia.com/gpu, nominalQuota: 2}, {name: example.com/fpga, nominalQuota: 1}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: b}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: b}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: c}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: c}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: q, namespace: default}
spec: {clusterQueue: a}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq.main, namespace: c}
spec: {clusterQueue: c}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: prov}
spec: {controllerName: kueue.x-k8s.io/provisioning-request}
"""
    _, out, report = _import(tmp_path, text)
    fields = {(g.object, g.field) for g in report.gaps}
    assert ("ClusterQueue a", "spec.resourceGroups") in fields  # two groups
    assert ("ClusterQueue a", "spec.resourceGroups.flavors[gpu].resources[example.com/fpga]") in fields
    assert ("ClusterQueue a", "spec.preemption.withinClusterQueue") in fields  # unlike b and c
    assert ("ClusterQueue a", "spec.stopPolicy") in fields
    assert ("ClusterQueue a", "spec.namespaceSelector") in fields  # every namespace
    assert ("ClusterQueue a", "namespaces[default]") in fields  # reserved
    assert ("ClusterQueue b", "spec.flavorFungibility") not in fields  # declared as it is (issue #40)
    assert yaml.safe_load((out / "tenants" / "b.yaml").read_text())["spec"]["flavorFungibility"] == {
        "whenCanBorrow": "MayStopSearch"}
    assert ("ResourceFlavor gpu", "spec.tolerations") in fields
    assert ("AdmissionCheck prov", "") in fields
    assert ("LocalQueue c/lq.main", "metadata.name") in fields  # a Kubernetes name, not a DNS-1123 label
    assert ("LocalQueue c/lq.main", "spec.clusterQueue") in fields  # and the round trip says so too
    assert not report.complete
    assert not validate_repo(out).errors  # what is declared still validates


def test_cli_writes_atomically_refuses_a_full_folder_and_reports_json(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    source, out = _source(tmp_path, FLAT), tmp_path / "repo"
    assert main(["import", "--from", str(source), "--out", str(out), "--cluster", "east"]) == 0
    assert "everything was expressed" in capsys.readouterr().out
    assert main(["import", "--from", str(source), "--out", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err
    (tmp_path / "v1").mkdir()
    other = _source(tmp_path / "v1", V1BETA1 + "\n---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: AdmissionCheck\nmetadata: {name: prov}\n"
                    "spec: {controllerName: kueue.x-k8s.io/provisioning-request}\n")
    code = main(["import", "--from", str(other), "--out", str(out), "--force", "--format", "json"])
    body = json.loads(capsys.readouterr().out)
    assert code == 1 and not body["complete"]
    assert [(g["object"], g["field"]) for g in body["notExpressed"]] == [("AdmissionCheck prov", "")]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".repo")] == []  # no staging left behind
    assert main(["import", "--from", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2


def test_output_errors(tmp_path: Path) -> None:
    inv = read_folder(_source(tmp_path, FLAT))
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("x")
    with pytest.raises(OutputError):
        import_inventory(inv, "imported", tmp_path / "full")
    assert (tmp_path / "full" / "keep.txt").read_text() == "x"


def _live_state(inv) -> LiveState:  # type: ignore[no-untyped-def]
    """The input's scheduler objects as the cluster would hold them (served as v1beta2)."""
    live = LiveState()
    for group in (inv.flavors, inv.cluster_queues, inv.cohorts, inv.local_queues):
        for obj in group.values():
            obj = {**obj, "apiVersion": KUEUE_API}
            live.objects[object_key(obj)] = obj
    return live


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_drift_after_import_shows_only_what_gpugov_adds(tmp_path: Path, shape: str) -> None:
    inv, out, _ = _import(tmp_path, SHAPES[shape])
    model = validate_repo(out).model
    objects = [o for o in compile(model, cluster="imported") if o["kind"] in ("ClusterQueue", "Cohort", "LocalQueue")]
    live = _live_state(inv)
    findings = object_findings(objects, live, model)
    for finding in findings:
        details = dict(finding.details)
        if finding.rule == "GD001":  # a cohort a queue names but nobody created: gpugov creates it
            assert details["object"].startswith("Cohort ") and details["object"].split()[1] not in inv.cohorts
            continue
        assert finding.rule == "GD002" and all(f.startswith("metadata.") for f in details["fields"].split(",")), finding
    # The comparison can fail: a quota changed on the cluster, or a selector naming another namespace, is drift.
    queue = next(o for o in objects if o["kind"] == "ClusterQueue")
    changed = live.objects[object_key(queue)]
    resource = changed["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    resource["nominalQuota"] = str(quantity(resource["nominalQuota"]) + 1)
    changed["spec"]["namespaceSelector"] = {"matchLabels": {NAMESPACE_NAME_LABEL: "someone-else"}}
    (finding,) = [f for f in object_findings([queue], live, model) if f.rule == "GD002"]
    fields = dict(finding.details)["fields"].split(",")
    assert any(f.endswith(f"{resource['name']}.nominalQuota") for f in fields), fields
    assert any(f.startswith("spec.namespaceSelector") for f in fields), fields


def test_canonical_forms_and_kueue_defaults() -> None:
    by_labels = {"matchLabels": {NAMESPACE_NAME_LABEL: "a"}}
    by_expressions = {"matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": ["a"]}]}
    assert canonical_selector(by_labels) == canonical_selector(by_expressions)
    assert canonical_selector({**by_labels, **by_expressions}) == canonical_selector(by_expressions)  # both: the same
    assert canonical_selector({"matchLabels": {NAMESPACE_NAME_LABEL: "b"}}) != canonical_selector(by_labels)
    assert canonical_selector({}) == {} and canonical_selector(None) is None  # everything / nothing
    filled = with_defaults({"kind": "ClusterQueue", "spec": {"preemption": {"withinClusterQueue": "LowerPriority"}}})
    assert filled["spec"]["preemption"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Never",
                                            "borrowWithinCohort": {"policy": "Never"}}
    assert (filled["spec"]["queueingStrategy"], filled["spec"]["fairSharing"]) == ("BestEffortFIFO", {"weight": 1})
    desired = {"spec": {"queueingStrategy": "BestEffortFIFO", "fairSharing": {"weight": "1"},
                        "namespaceSelector": by_expressions}}
    live = {"kind": "ClusterQueue", "spec": {"namespaceSelector": by_labels}}
    assert list(differences(canonical(desired, "ClusterQueue"), canonical(with_defaults(live)))) == []
    live["spec"]["queueingStrategy"] = "StrictFIFO"  # written out differently from the default: drift
    assert list(differences(canonical(desired, "ClusterQueue"), canonical(with_defaults(live)))) == [
        (("spec", "queueingStrategy"), "BestEffortFIFO", "StrictFIFO")]


def test_a_cluster_read_live_pins_the_declaration_to_it(tmp_path: Path) -> None:
    kube_system = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system", "uid": "0f1e-42"}}
    inv = inventory([*yaml.safe_load_all(FLAT), kube_system], nodes_known=True)
    report = import_inventory(inv, "east", tmp_path / "repo")
    cluster = yaml.safe_load((tmp_path / "repo" / "policies" / "clusters.yaml").read_text())
    assert cluster["spec"]["identity"] == {"kubeSystemUID": "0f1e-42"}
    assert validate_repo(tmp_path / "repo").model.cluster("east").kube_system_uid == "0f1e-42"
    assert ("ClusterQueue", "", "team-a-cq") in report.take_over and ("LocalQueue", "team-b", "user-queue") in report.take_over


def test_import_adopts_exactly_what_the_cluster_holds_and_the_declarations_write_again(tmp_path: Path) -> None:
    """The take-over is declared (Cluster spec.adopt), reviewed like any declaration: no kubectl label step."""
    source = [*yaml.safe_load_all(FLAT)]
    source.append({"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": "NotALabel"},
                   "spec": {"resourceGroups": []}})  # not imported (a gap), so never adopted
    report = import_inventory(inventory(source, nodes_known=True), "east", tmp_path / "repo")
    cluster = yaml.safe_load((tmp_path / "repo" / "policies" / "clusters.yaml").read_text())
    assert cluster["spec"]["adopt"] == [
        {"kind": "ClusterQueue", "name": "team-a-cq"},
        {"kind": "ClusterQueue", "name": "team-b-cq"},
        {"kind": "LocalQueue", "namespace": "team-a", "name": "user-queue"},
        {"kind": "LocalQueue", "namespace": "team-b", "name": "user-queue"},
        {"kind": "ResourceFlavor", "name": "default-flavor"},
    ]
    assert report.take_over == [("ClusterQueue", "", "team-a-cq"), ("ClusterQueue", "", "team-b-cq"),
                                ("LocalQueue", "team-a", "user-queue"), ("LocalQueue", "team-b", "user-queue"),
                                ("ResourceFlavor", "", "default-flavor")]
    validation = validate_repo(tmp_path / "repo")
    assert not validation.errors, [f.message for f in validation.errors]
    assert [str(e) for e in validation.model.cluster("east").adopt] == [
        "ClusterQueue team-a-cq", "ClusterQueue team-b-cq", "LocalQueue team-a/user-queue",
        "LocalQueue team-b/user-queue", "ResourceFlavor default-flavor"]
    text = render_text(report, "repo")
    assert "to take over (5): adopted in policies/clusters.yaml spec.adopt; gpugov apply takes them over" in text
    assert "  LocalQueue team-b/user-queue\n" in text and "kubectl" not in text
    body = json.loads(render_json(report, "repo"))
    assert body["adoptedIn"] == "policies/clusters.yaml spec.adopt"
    assert {"kind": "LocalQueue", "namespace": "team-a", "name": "user-queue"} in body["takeOver"]
    assert "kubectl" not in json.dumps(body)


def test_a_folder_without_kueue_objects_adopts_nothing(tmp_path: Path) -> None:
    node = yaml.safe_load(GFD_NODE.format(name="gpu-1", pool="h100", product="NVIDIA-H100-80GB-HBM3"))
    report = import_inventory(inventory([node], nodes_known=True), "east", tmp_path / "repo")
    cluster = yaml.safe_load((tmp_path / "repo" / "policies" / "clusters.yaml").read_text())
    assert "adopt" not in cluster["spec"] and report.take_over == []
    assert "to take over" not in render_text(report, "repo")


def _corrupting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make convert write a tenant quota on a pool nobody declares: a repository `gpugov validate` refuses."""
    from gpugov.adopt import run

    real = run.convert

    def convert(inv, cluster):  # type: ignore[no-untyped-def]
        declarations = real(inv, cluster)
        tenant = next(docs for path, docs in declarations.files.items() if path.startswith("tenants/")
                      and docs[0]["kind"] == "Tenant")[0]
        tenant["spec"].setdefault("quotas", []).append({"pool": "nowhere", "resources": {"accelerators": 1}})
        return declarations

    monkeypatch.setattr(run, "convert", convert)


def test_import_never_writes_a_repository_that_does_not_validate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpugov.adopt import InvalidImport

    _corrupting(monkeypatch)
    inv = read_folder(_source(tmp_path, FLAT))
    with pytest.raises(InvalidImport) as raised:
        import_inventory(inv, "imported", tmp_path / "repo")
    assert raised.value.errors and all(f.level.value == "error" for f in raised.value.errors)
    assert any("nowhere" in f.message for f in raised.value.errors)
    assert "nothing was written" in str(raised.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster"]  # no repo, no staging left behind
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "keep.txt").write_text("x")
    with pytest.raises(InvalidImport):
        import_inventory(inv, "imported", tmp_path / "old", force=True)
    assert [p.name for p in (tmp_path / "old").iterdir()] == ["keep.txt"]  # an existing --out is left as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster", "old"]


def test_cli_import_and_init_refuse_a_repository_that_does_not_validate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    _corrupting(monkeypatch)
    source, out = _source(tmp_path, FLAT), tmp_path / "repo"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    assert main(["import", "--from", str(source), "--out", str(out), "--force"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "error:" in captured.err and "nowhere" in captured.err and "[GG" in captured.err
    assert "does not validate" in captured.err and "nothing was written" in captured.err
    assert "Traceback" not in captured.err
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    # init --from-cluster hands over to import: refused the same way, and adds no CI files to nothing.
    import gpugov.adopt.sources as sources
    import gpugov.cli.cluster as cluster_cli

    monkeypatch.setattr(sources, "read_cluster", lambda api: read_folder(source))
    monkeypatch.setattr(cluster_cli, "api_client", lambda args: None)
    target = tmp_path / "new"
    assert main(["init", str(target), "--from-cluster", "--cluster", "east"]) == 1
    assert "nothing was written" in capsys.readouterr().err
    assert not target.exists()
