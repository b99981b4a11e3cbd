"""gpugov's in-cluster parts as a kustomize base (issue #30): `gpugov render --kustomize DIR` writes
DIR/base, whose resources are exactly compile's objects for gpugov itself, and DIR/overlays/example,
which real kustomize (kubectl's, where one is installed) builds into the same objects with the image
from a private registry and pull secrets on every pod."""

from __future__ import annotations

import shutil
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpugov import __version__
from gpugov.app.desired import desired_state
from gpugov.cli import main
from gpugov.compile.mig import mig_configmap
from gpugov.compile.operations import operations_objects
from gpugov.kube.objects import LABEL_COMPONENT, object_key
from gpugov.manifests.kustomize import BASE_DIR, OVERLAY_DIR, parse_image
from tests.helpers.repos import EXAMPLES, REPO, overlay_repo, write

IMAGE = "registry.example.com/platform/gpugov-config:main"  # the repository's own Cluster east
ALL_PARTS = f"""apiVersion: gpugov.io/v1alpha1
kind: Cluster
metadata:
  name: lab
spec:
  backend: kueue
  operations:
    image: {IMAGE}
    prometheus: http://prometheus.monitoring:9090
"""
AT = "2030-03-05T00:00:00+08:00"  # inside the QuotaGrant: the timeline marks every object with its span
RECLAIM_IDLE = "  reclaim:\n    idle: {window: 1h, grace: 30m, action: deactivate}\n"


def full_repo(tmp_path: Path, cluster: str = ALL_PARTS) -> Path:
    """Every in-cluster part: drift, agent, MIG config (the a100 pool), reclaim (an idle policy and a
    Prometheus) and timeline (a QuotaGrant and a QuotaWindow)."""
    root = overlay_repo(tmp_path, EXAMPLES / "positive" / "quota-timeline")
    write(root, "policies/clusters.yaml", cluster)
    guardrails = root / "policies" / "guardrails.yaml"
    guardrails.write_text(guardrails.read_text(encoding="utf-8") + RECLAIM_IDLE, encoding="utf-8")
    return root


def expected_parts(repo: Path, cluster: str) -> list[dict[str, Any]]:
    """compile's objects for gpugov itself, chosen by the functions that emit them (not by label), in
    compile's order."""
    state = desired_state(repo, cluster=cluster, backend=None, at=datetime.fromisoformat(AT))
    others = [obj for obj in state.objects if LABEL_COMPONENT not in obj["metadata"].get("labels", {})]
    keys = {object_key(obj) for obj in [*operations_objects(state.scope, others), *mig_configmap(state.scope)]}
    return [obj for obj in state.objects if object_key(obj) in keys]


def render(repo: Path, cluster: str, out: Path, *extra: str) -> int:
    return main(["render", str(repo), "--cluster", cluster, "--at", AT, "--kustomize", str(out), *extra])


def base_objects(out: Path) -> list[dict[str, Any]]:
    """The base's resources, in its kustomization's order, parsed back."""
    kustomization = yaml.safe_load((out / BASE_DIR / "kustomization.yaml").read_text(encoding="utf-8"))
    return [doc for name in kustomization["resources"]
            for doc in yaml.safe_load_all((out / BASE_DIR / name).read_text(encoding="utf-8")) if doc is not None]


def tree(root: Path) -> dict[str, bytes]:
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def components(objects: list[dict[str, Any]]) -> set[str]:
    return {obj["metadata"]["labels"].get(LABEL_COMPONENT, obj["kind"]) for obj in objects}


@pytest.mark.parametrize("case", ["repository east", "every part"])
def test_the_base_holds_exactly_compiles_in_cluster_objects(tmp_path: Path, case: str) -> None:
    repo, cluster = (REPO, "east") if case == "repository east" else (full_repo(tmp_path), "lab")
    assert render(repo, cluster, tmp_path / "pkg") == 0
    expected = expected_parts(repo, cluster)
    assert base_objects(tmp_path / "pkg") == expected
    wanted = {"operations", "drift", "agent", "ConfigMap"} | ({"reclaim", "timeline"} if case == "every part" else set())
    assert components(expected) == wanted  # the mig-parted ConfigMap carries no component label
    kustomization = yaml.safe_load((tmp_path / "pkg" / BASE_DIR / "kustomization.yaml").read_text(encoding="utf-8"))
    assert kustomization["labels"] == [{"pairs": {"app.kubernetes.io/version": __version__}}]
    assert sorted(kustomization["resources"]) == sorted(
        p.name for p in (tmp_path / "pkg" / BASE_DIR).iterdir() if p.name != "kustomization.yaml")


def test_rendering_twice_gives_byte_identical_trees_and_keeps_other_overlays(tmp_path: Path) -> None:
    repo = full_repo(tmp_path)
    assert render(repo, "lab", tmp_path / "one", "--image-registry", "harbor.example.cn") == 0
    assert render(repo, "lab", tmp_path / "two", "--image-registry", "harbor.example.cn") == 0
    assert tree(tmp_path / "one") == tree(tmp_path / "two")
    site = write(tmp_path / "one", "overlays/site/kustomization.yaml", "resources: [../../base]\n")
    stale = write(tmp_path / "one", f"{BASE_DIR}/99-stale.yaml", "kind: Stale\n")
    assert render(repo, "lab", tmp_path / "one", "--image-registry", "harbor.example.cn") == 0
    assert site.read_text(encoding="utf-8") == "resources: [../../base]\n"  # the site's own overlay stays
    assert not stale.exists()  # the base is replaced as a whole
    assert {k: v for k, v in tree(tmp_path / "one").items() if not k.startswith("overlays/site/")} == tree(tmp_path / "two")


def overlay_file(out: Path, name: str = "kustomization.yaml") -> Any:
    return yaml.safe_load((out / OVERLAY_DIR / name).read_text(encoding="utf-8"))


def test_the_overlays_values_default_to_the_clusters_image(tmp_path: Path) -> None:
    assert render(REPO, "east", tmp_path / "pkg") == 0
    overlay = overlay_file(tmp_path / "pkg")
    assert overlay["resources"] == ["../../base"]
    assert overlay["images"] == [{"name": "registry.example.com/platform/gpugov-config",
                                  "newName": "registry.example.com/platform/gpugov-config", "newTag": "main"}]
    secrets = {doc["kind"]: doc for doc in yaml.safe_load_all(
        (tmp_path / "pkg" / OVERLAY_DIR / "pull-secrets.yaml").read_text(encoding="utf-8")) if doc}
    assert secrets["DaemonSet"]["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "gpugov-registry"}]


def test_a_digest_stays_pinned_unless_a_tag_is_asked_for_and_no_secret_means_no_patch(tmp_path: Path) -> None:
    digest = "sha256:" + "a" * 64
    repo = full_repo(tmp_path, ALL_PARTS.replace(IMAGE, f"localhost:5000/gpugov@{digest}"))
    assert render(repo, "lab", tmp_path / "pinned", "--pull-secret", "") == 0
    overlay = overlay_file(tmp_path / "pinned")
    assert overlay["images"] == [{"name": "localhost:5000/gpugov", "newName": "localhost:5000/gpugov", "digest": digest}]
    assert "patches" not in overlay and not (tmp_path / "pinned" / OVERLAY_DIR / "pull-secrets.yaml").exists()
    assert render(repo, "lab", tmp_path / "tagged", "--image-registry", "harbor.example.cn/",
                  "--image-name", "platform/gpugov", "--image-tag", "0.1.0") == 0
    assert overlay_file(tmp_path / "tagged")["images"] == [
        {"name": "localhost:5000/gpugov", "newName": "harbor.example.cn/platform/gpugov", "newTag": "0.1.0"}]


@pytest.mark.parametrize(("reference", "parts"), [
    ("registry.example.com/platform/gpugov:main", ("registry.example.com", "platform/gpugov", "main", "")),
    ("localhost:5000/gpugov", ("localhost:5000", "gpugov", "", "")),
    ("localhost/gpugov:1", ("localhost", "gpugov", "1", "")),
    ("platform/gpugov:1.2", ("", "platform/gpugov", "1.2", "")),
    ("gpugov", ("", "gpugov", "", "")),
    ("r.io:443/a/b:t@sha256:00", ("r.io:443", "a/b", "t", "sha256:00")),
])
def test_image_references_split_as_kustomize_matches_them(reference: str, parts: tuple[str, ...]) -> None:
    ref = parse_image(reference)
    assert (ref.registry, ref.name, ref.tag, ref.digest) == parts


def test_values_without_kustomize_or_a_cluster_without_an_image_are_bad_input(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", str(REPO), "--cluster", "east", "--out", str(tmp_path / "o"), "--image-tag", "1"]) == 2
    assert capsys.readouterr().err == "gpugov: --image-tag only set the values of --kustomize DIR\n"
    assert render(REPO, "west", tmp_path / "west") == 2  # west declares no operations.image
    err = capsys.readouterr().err
    assert err.startswith("gpugov: the cluster declares no operations.image") and err.count("\n") == 1
    assert not (tmp_path / "west").exists()


def kustomize_command() -> list[str] | None:
    """kubectl's built-in kustomize, or a standalone kustomize, from PATH or tools/bin."""
    tools = str(REPO / "tools" / "bin")
    for name, args in (("kubectl", ["kustomize"]), ("kustomize", ["build"])):
        found = shutil.which(name) or shutil.which(name, path=tools)
        if found:
            return [found, *args]
    return None


KUSTOMIZE = kustomize_command()
needs_kustomize = pytest.mark.skipif(KUSTOMIZE is None, reason="neither kubectl nor kustomize is on PATH or in "
                                     "tools/bin: the overlay cannot be built by real kustomize here")


def kustomize_build(folder: Path) -> list[dict[str, Any]]:
    assert KUSTOMIZE is not None
    done = subprocess.run([*KUSTOMIZE, str(folder)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc is not None]


def pod_specs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj.get("spec", {})
    if obj["kind"] == "CronJob":
        return [spec["jobTemplate"]["spec"]["template"]["spec"]]
    return [spec["template"]["spec"]] if obj["kind"] == "DaemonSet" else []


def without_version(obj: dict[str, Any]) -> dict[str, Any]:
    copy = yaml.safe_load(yaml.safe_dump(obj))
    labels = copy["metadata"]["labels"]
    assert labels.pop("app.kubernetes.io/version") == __version__
    return dict(copy)


@needs_kustomize
def test_kustomize_builds_the_overlay_with_the_private_image_and_pull_secrets(tmp_path: Path) -> None:
    repo = full_repo(tmp_path)
    out = tmp_path / "pkg"
    assert render(repo, "lab", out, "--image-registry", "harbor.example.cn", "--image-name", "mirror/gpugov",
                  "--image-tag", "0.1.0", "--pull-secret", "harbor-pull", "--pull-secret", "backup-pull") == 0
    expected = expected_parts(repo, "lab")
    key = object_key
    # The base builds into compile's objects, each with the version label added and nothing else.
    built_base = kustomize_build(out / BASE_DIR)
    assert sorted(map(key, built_base)) == sorted(map(key, expected))
    by_key = {key(obj): obj for obj in expected}
    assert all(without_version(obj) == by_key[key(obj)] for obj in built_base)
    # The overlay: the same objects, every container from the private registry, every pod with the secrets.
    built = kustomize_build(out / OVERLAY_DIR)
    assert sorted(map(key, built)) == sorted(map(key, expected))
    specs = [spec for obj in built for spec in pod_specs(obj)]
    assert {obj["kind"] for obj in built if pod_specs(obj)} == {"CronJob", "DaemonSet"}
    assert len(specs) == 4  # drift, reclaim and timeline CronJobs, the agent DaemonSet
    assert {c["image"] for spec in specs for c in spec["containers"]} == {"harbor.example.cn/mirror/gpugov:0.1.0"}
    assert all(spec["imagePullSecrets"] == [{"name": "harbor-pull"}, {"name": "backup-pull"}] for spec in specs)
    daemonset = next(obj for obj in built if obj["kind"] == "DaemonSet")
    assert "app.kubernetes.io/version" not in daemonset["spec"]["selector"]["matchLabels"]  # immutable on upgrade
