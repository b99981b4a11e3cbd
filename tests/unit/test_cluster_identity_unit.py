"""The wrong-cluster guard of apply (gpugov.cluster.identity) and the mass-prune limit, against the
fake API endpoint (a real HTTP server answering as an empty API server, plus what a test adds). The
same guard on the real API server, with objects to lose: tests/e2e/test_cluster_identity.py."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.cli import main
from gpugov.cluster.identity import LABEL_IDENTITY, RECORD_NAME, Identity, Record, foreign_objects
from gpugov.cluster.prune import Prunable, mass_prune
from gpugov.compile import compile
from gpugov.kube.kinds import KINDS
from gpugov.kube.objects import object_key
from tests.helpers.fake_kube import KUBE_SYSTEM_UID, FakeKube, Reply, fake_kube
from tests.helpers.repos import REPO

CONFIG_MAPS = KINDS[("v1", "ConfigMap")]


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    with fake_kube() as server:
        yield server


def record_list(cluster: str, uid: str = KUBE_SYSTEM_UID) -> Reply:
    return Reply.of(200, {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {}, "items": [{
        "metadata": {"name": RECORD_NAME, "namespace": "kube-system", "labels": {LABEL_IDENTITY: cluster}},
        "data": {"cluster": cluster, "kubeSystemUID": uid}}]})


def with_record(fake: FakeKube, cluster: str, uid: str = KUBE_SYSTEM_UID) -> None:
    fake.answer = lambda method, path: (record_list(cluster, uid) if method == "GET"
                                        and path == CONFIG_MAPS.collection_path() else None)


def apply(capsys: pytest.CaptureFixture[str], fake: FakeKube, tmp_path: Path, *argv: str,
          repo: Path = REPO) -> tuple[int, list[str], list[str]]:
    code = main(["apply", str(repo), "--kubeconfig", str(fake.kubeconfig(tmp_path)), *argv])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["apply", "dry-run"])
def test_a_cluster_recorded_as_another_is_refused_before_any_write(fake, tmp_path, capsys, dry_run) -> None:
    with_record(fake, "east")
    code, out, err = apply(capsys, fake, tmp_path, "--cluster", "west", *dry_run)
    assert (code, out) == (2, [])
    (line,) = err
    assert line.startswith(f"gpugov: refused: {fake.url} is cluster east, not west ")
    assert f"ConfigMap kube-system/{RECORD_NAME} says so, kube-system uid {KUBE_SYSTEM_UID}" in line
    assert "check --kubeconfig/--context" in line and line.endswith("; nothing was changed")
    assert fake.writes == []


def test_reidentify_overrides_a_record_of_another_cluster(fake, tmp_path, capsys) -> None:
    with_record(fake, "east")
    code, out, err = apply(capsys, fake, tmp_path, "--cluster", "west", "--dry-run", "--reidentify")
    assert (code, err) == (0, [])
    assert out[0] == (f"identity: {fake.url} is cluster west (kube-system uid {KUBE_SYSTEM_UID}); would re-record "
                      f"in ConfigMap kube-system/{RECORD_NAME}")
    assert fake.writes == []


def test_a_record_made_on_another_physical_cluster_is_refused(fake, tmp_path, capsys) -> None:
    with_record(fake, "east", uid="11111111-2222-4333-8444-555555555555")
    code, out, err = apply(capsys, fake, tmp_path, "--cluster", "east", "--dry-run")
    assert code == 2 and out == []
    assert "says cluster east with kube-system uid 11111111-2222-4333-8444-555555555555" in err[0]
    assert f"has kube-system uid {KUBE_SYSTEM_UID}" in err[0] and "--reidentify" in err[0]


def test_the_right_record_passes_and_a_fresh_cluster_would_be_recorded(fake, tmp_path, capsys) -> None:
    code, out, err = apply(capsys, fake, tmp_path, "--cluster", "east", "--dry-run")
    assert (code, err) == (0, [])
    assert out[0] == (f"identity: {fake.url} is cluster east (kube-system uid {KUBE_SYSTEM_UID}); would record in "
                      f"ConfigMap kube-system/{RECORD_NAME}")
    with_record(fake, "east")
    code, out, err = apply(capsys, fake, tmp_path, "--cluster", "east", "--dry-run")
    assert (code, err) == (0, [])
    assert out[0].endswith(f"as recorded in ConfigMap kube-system/{RECORD_NAME}")


def pinned_repo(tmp_path: Path, uid: str) -> Path:
    root = tmp_path / "org"
    for folder in ("tenants", "policies", "hardware"):
        shutil.copytree(REPO / folder, root / folder)
    clusters = root / "policies" / "clusters.yaml"
    text = clusters.read_text()
    anchor = "  description: Main training and inference cluster (NVIDIA), scheduled by Kueue.\n"
    assert anchor in text
    clusters.write_text(text.replace(anchor, anchor + f"  identity: {{kubeSystemUID: {uid}}}\n"))
    return root


def test_a_pinned_cluster_refuses_another_server_even_with_reidentify(fake, tmp_path, capsys) -> None:
    root = pinned_repo(tmp_path, "6f1c2d3e-0000-4000-8000-000000000001")
    for extra in ([], ["--reidentify"]):
        code, out, err = apply(capsys, fake, tmp_path, "--cluster", "east", "--dry-run", *extra, repo=root)
        assert code == 2 and out == [] and fake.writes == []
        assert err == [f"gpugov: refused: {fake.url} is not cluster east: east is pinned to kube-system uid "
                       "6f1c2d3e-0000-4000-8000-000000000001 (policies/clusters.yaml:9:29), this server's is "
                       f"{KUBE_SYSTEM_UID}; check --kubeconfig/--context (and --cluster); nothing was changed"]
    root = pinned_repo(tmp_path / "right", KUBE_SYSTEM_UID)
    code, out, err = apply(capsys, fake, tmp_path, "--cluster", "east", "--dry-run", repo=root)
    assert (code, err) == (0, []) and "would record" in out[0]


def test_no_kube_system_namespace_is_could_not_check(fake, tmp_path, capsys) -> None:
    fake.answer = lambda method, path: (Reply.of(404, {
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
        "message": 'namespaces "kube-system" not found', "details": {"name": "kube-system", "kind": "namespaces"}})
        if path == "/api/v1/namespaces/kube-system" else None)
    code, out, err = apply(capsys, fake, tmp_path, "--cluster", "east")
    assert (code, out) == (3, []) and fake.writes == []
    assert err == [f"gpugov: apply failed: GET {fake.url}/api/v1/namespaces/kube-system: no kube-system namespace "
                   "with a uid, so gpugov cannot tell which cluster this is"]


# -- pure parts --------------------------------------------------------------------------------

def test_foreign_objects_are_the_ones_only_another_cluster_declares() -> None:
    model = validate_repo(REPO).model
    assert model is not None
    east, west = compile(model, backend="kueue", cluster="east"), compile(model, backend="volcano", cluster="west")
    elsewhere = {"east": {object_key(o) for o in east}}
    assert foreign_objects(west, west, elsewhere) is None  # west's own objects
    other, keys = foreign_objects(east, west, elsewhere) or ("", [])
    shared = {object_key(o) for o in east} & {object_key(o) for o in west}
    assert other == "east" and len(keys) == len(east) - len(shared) > 0
    assert ("v1", "Node", "", "h100-01") in keys


def prunable(n: int) -> list[Prunable]:
    return [Prunable("delete" if i % 3 else "release", {"apiVersion": "v1", "kind": "ConfigMap",
                                                         "metadata": {"name": f"c{i}", "namespace": "x"}})
            for i in range(n)]


@pytest.mark.parametrize(("planned", "owned", "refused"), [
    (0, 0, False), (30, 100, False), (31, 100, True),  # the object limit
    (5, 10, False), (6, 10, True), (3, 3, True),  # the fraction
])
def test_mass_prune_limits(planned: int, owned: int, refused: bool) -> None:
    why = mass_prune(prunable(planned), owned, 30, Decimal("0.5"))
    assert bool(why) is refused
    if refused:
        deletes = sum(1 for i in range(planned) if i % 3)
        assert why.startswith(f"prune would delete {deletes} and release {planned - deletes} objects, {planned} of "
                              f"the {owned} gpugov owns on this cluster")
        assert why.endswith("the limit is 30 objects or 50% (the Cluster's spec.pruneLimit)")


def test_identity_is_recorded_only_when_it_is_not_already_right() -> None:
    right = Record("east", "uid-1", "kube-system")
    assert Identity("east", "uid-1", "https://h", "kube-system", (right,)).recorded
    assert not Identity("east", "uid-1", "https://h", "ops", (right,)).recorded  # the namespace moved
    assert not Identity("east", "uid-1", "https://h", "kube-system", (right,), reidentified=True).recorded
    assert not Identity("east", "uid-1", "https://h", "kube-system", ()).recorded
