"""A Cluster's spec.adopt: declared, checked (GG160), a plan risk (GP026), and what lets apply and the
Pulumi guard take over scheduler objects that exist without gpugov's mark, against the fake API
endpoint (a real HTTP server answering as an empty API server, plus the objects a test adds).
The same take-over on the real API server with a running workload: tests/e2e/test_adopt.py."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpugov.app.desired import desired_state
from gpugov.app.pipeline import validate_repo
from gpugov.cli import main
from gpugov.cluster.ownership import Adoption, ForeignObjects, declared_adoption, ownership, refuse_foreign
from gpugov.declarations.model import AdoptEntry
from gpugov.deploy.guard import check_stack_cluster, stack_client
from gpugov.kube.kinds import KINDS
from gpugov.kube.names import KUEUE_API
from gpugov.plan.widening import field_risks
from gpugov.policy.adoption import UNKNOWN_ADOPTED
from tests.helpers.fake_kube import FakeKube, Reply, fake_kube
from tests.helpers.repos import REPO

ANCHOR = "  description: Main training and inference cluster (NVIDIA), scheduled by Kueue.\n"
HAND_MADE = {"metadata": {"labels": {"team": "platform"}}}  # an object someone made by hand: no gpugov mark


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    with fake_kube() as server:
        yield server


def org(tmp_path: Path, adopt: str = "") -> Path:
    """A copy of the example organisation; `adopt`: the YAML of east's spec.adopt entries."""
    root = tmp_path / "org"
    for folder in ("tenants", "policies", "hardware"):
        shutil.copytree(REPO / folder, root / folder)
    clusters = root / "policies" / "clusters.yaml"
    text = clusters.read_text()
    assert ANCHOR in text
    clusters.write_text(text.replace(ANCHOR, ANCHOR + (f"  adopt:\n{adopt}" if adopt else "")))
    return root


def existing(fake: FakeKube, *objects: tuple[str, str, str]) -> None:
    """The fake cluster holds these (kind, namespace, name) without gpugov's label."""
    paths: dict[str, dict[str, Any]] = {}
    for kind, namespace, name in objects:
        api_version = KUEUE_API if kind != "Namespace" else "v1"
        path = KINDS[(api_version, kind)].object_path(name, namespace)
        meta = {**HAND_MADE["metadata"], "name": name, **({"namespace": namespace} if namespace else {})}
        paths[path] = {"apiVersion": api_version, "kind": kind, "metadata": meta}
    fake.answer = lambda method, path: Reply.of(200, paths[path]) if method == "GET" and path in paths else None


def test_spec_adopt_is_read_into_the_model_and_names_compiled_objects(tmp_path: Path) -> None:
    root = org(tmp_path, "  - {kind: ClusterQueue, name: nlp}\n  - {kind: LocalQueue, namespace: nlp-train, "
                         "name: training}\n")
    validation = validate_repo(root)
    assert not validation.errors, [f.message for f in validation.errors]
    assert validation.model.cluster("east").adopt == (AdoptEntry("ClusterQueue", "nlp"),
                                                      AdoptEntry("LocalQueue", "training", "nlp-train"))
    assert validation.model.cluster("west").adopt == ()
    assert declared_adoption(validation.model, "east") == Adoption(
        frozenset(n for t in validation.model.tenants.values() for n in t.adopt_namespaces),
        frozenset({("ClusterQueue", "", "nlp"), ("LocalQueue", "nlp-train", "training")}))


@pytest.mark.parametrize("entry, why", [
    ("{kind: ClusterQueue, name: nope}", "ClusterQueue nope"),
    ("{kind: LocalQueue, name: training}", "LocalQueue training"),  # a LocalQueue without its namespace
    ("{kind: Cohort, namespace: nlp, name: research}", "Cohort nlp/research"),  # cluster-scoped, namespaced
    ("{kind: ResourceFlavor, name: nlp}", "ResourceFlavor nlp"),  # a name of another kind
])
def test_an_entry_that_names_nothing_compiled_is_an_error_at_its_line(tmp_path: Path, entry: str, why: str) -> None:
    root = org(tmp_path, f"  - {{kind: ClusterQueue, name: nlp}}\n  - {entry}\n")
    validation = validate_repo(root)
    found = [f for f in validation.findings if f.rule == UNKNOWN_ADOPTED.id]
    assert len(found) == 1 and validation.errors == found, [f.message for f in validation.findings]
    assert found[0].message.startswith(f"cluster 'east' adopts {why}, which the declarations do not compile to")
    assert (found[0].location.file, found[0].location.line) == ("policies/clusters.yaml", 11)


def test_the_hint_names_the_object_the_entry_probably_meant(tmp_path: Path) -> None:
    validation = validate_repo(org(tmp_path, "  - {kind: LocalQueue, namespace: nlp, name: training}\n"))
    (finding,) = validation.errors
    assert "(it compiles to LocalQueue nlp-train/training, LocalQueue vision/training)" in finding.message


def test_an_unknown_kind_is_a_schema_error(tmp_path: Path) -> None:
    validation = validate_repo(org(tmp_path, "  - {kind: Namespace, name: nlp}\n"))
    assert [f.rule for f in validation.errors] == ["GG003"]


def test_adding_an_entry_is_a_plan_risk_removing_one_is_not() -> None:
    before = {"spec": {"backend": "kueue"}}
    after = {"spec": {"backend": "kueue", "adopt": [{"kind": "ClusterQueue", "name": "nlp"},
                                                     {"kind": "LocalQueue", "namespace": "a", "name": "q"}]}}
    risks = field_risks("Cluster", "east", before, after)
    assert [(r.rule, r.message.split(":")[0] + ":" + r.message.split(":")[1]) for r in risks] == [
        ("GP026", "Cluster east: spec.adopt[kind=ClusterQueue,name=nlp] added"),
        ("GP026", "Cluster east: spec.adopt[kind=LocalQueue,namespace=a,name=q] added")]
    assert "prune owns it from then on" in risks[0].message
    assert field_risks("Cluster", "east", after, before) == []


def test_ownership_takes_over_the_adopted_and_refuses_the_rest(fake: FakeKube, tmp_path: Path) -> None:
    state = desired_state(org(tmp_path, "  - {kind: ClusterQueue, name: nlp}\n"), cluster="east")
    existing(fake, ("ClusterQueue", "", "nlp"), ("ClusterQueue", "", "vision"), ("LocalQueue", "nlp-train", "training"))
    api = stack_client(str(fake.kubeconfig(tmp_path)))
    adoption = declared_adoption(state.model, "east")
    found = ownership(api, state.objects, adoption)
    assert found.adopted_objects == ["ClusterQueue nlp"]
    assert found.foreign == ["ClusterQueue vision", "LocalQueue nlp-train/training"]
    with pytest.raises(ForeignObjects, match=r"refusing to take over 2 object\(s\) .*: ClusterQueue vision, "
                       r"LocalQueue nlp-train/training \(.*the Cluster a scheduler object .* with spec.adopt"):
        refuse_foreign(api, state.objects, adoption)
    assert ownership(api, state.objects, Adoption()).foreign == [
        "ClusterQueue nlp", "ClusterQueue vision", "LocalQueue nlp-train/training"]  # nothing declared: all refused
    assert fake.writes == []


def test_apply_dry_run_and_the_stack_take_over_exactly_the_declared(fake: FakeKube, tmp_path: Path, capsys) -> None:
    kubeconfig = str(fake.kubeconfig(tmp_path))
    held = (("ClusterQueue", "", "nlp"), ("Cohort", "", "research"), ("LocalQueue", "nlp-train", "training"))
    existing(fake, *held)
    partial = org(tmp_path / "partial", "  - {kind: ClusterQueue, name: nlp}\n")
    assert main(["apply", str(partial), "--cluster", "east", "--kubeconfig", kubeconfig, "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "refusing to take over 2 object(s)" in err and "Cohort research, LocalQueue nlp-train/" in err

    full = org(tmp_path / "full", "  - {kind: ClusterQueue, name: nlp}\n  - {kind: Cohort, name: research}\n"
                                  "  - {kind: LocalQueue, namespace: nlp-train, name: training}\n")
    assert main(["apply", str(full), "--cluster", "east", "--kubeconfig", kubeconfig, "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.splitlines()[1:4] == ["adopting Cohort research (Cluster spec.adopt)",
                                     "adopting ClusterQueue nlp (Cluster spec.adopt)",
                                     "adopting LocalQueue nlp-train/training (Cluster spec.adopt)"]
    told: list[str] = []
    check_stack_cluster(stack_client(kubeconfig), desired_state(full, cluster="east"), write=False, tell=told.append)
    assert sorted(told) == sorted(line for line in out.splitlines() if line.startswith("adopting"))
    with pytest.raises(ForeignObjects):
        check_stack_cluster(stack_client(kubeconfig), desired_state(partial, cluster="east"), write=False)
    # The dry run's only requests that are no reads: its server-side apply dry runs (dryRun=All, the
    # preview of how each existing object changes), one per object the cluster holds.
    held_paths = {KINDS[(KUEUE_API, kind)].object_path(name, namespace) for kind, namespace, name in held}
    assert sorted(path for _, path in fake.writes) == sorted(held_paths)
    assert {method for method, _ in fake.writes} == {"PATCH"}
