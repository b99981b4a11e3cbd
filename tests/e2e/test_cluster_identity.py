"""The wrong-cluster guard on a real API server: one apiserver first applied as cluster `east`,
then addressed as `west` (the issue's `gpugov apply . --cluster west --kubeconfig <east's>`).

The wrong one is refused with exit 2 and one line, and NOTHING is touched: every object of every
kind gpugov knows, on the whole server, keeps its resourceVersion. The right one still applies and
prunes. The same for a cluster applied before identity records existed (gpugov's objects tell), a
pinned kube-system uid, a record restored from another cluster, a mass prune, the Pulumi stack's
guard (called directly: the Pulumi CLI is not built by default) and a deliberate rebuild.
One apiserver for the module.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from gpugov.app.desired import desired_state
from gpugov.app.pipeline import validate_repo
from gpugov.cluster.identity import LABEL_IDENTITY, RECORD_NAME, WrongCluster
from gpugov.cluster.rest import Api, list_all, served_versions
from gpugov.kube.kinds import KINDS
from tests.helpers.repos import REPO

pytestmark = pytest.mark.e2e

ResourceVersions = dict[tuple[str, str, str, str], str]


@pytest.fixture(scope="module")
def server(controlplane_binary_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, object]]:
    """Its own apiserver (with the Kueue and Volcano CRDs), every declared GPU server as a Node, and
    a copy of the example organisation to change."""
    from gpugov.sandbox import ControlPlane
    from gpugov.sandbox.nodes import create_gpu_operator_footprint, create_nodes
    from gpugov.sandbox.simulated import simulated_nodes

    root = tmp_path_factory.mktemp("org")
    for folder in ("tenants", "policies", "hardware"):
        shutil.copytree(REPO / folder, root / folder)
    with ControlPlane(binary=controlplane_binary_path) as cp:
        api = cp.api_client()
        create_nodes(api, simulated_nodes(validate_repo(root).model))  # east's and west's servers
        create_gpu_operator_footprint(api)
        # Volcano's namespace, as an installed Volcano has it: west's scheduler ConfigMap goes there
        client.CoreV1Api(api).create_namespace({"metadata": {"name": "volcano-system"}})
        yield root, cp


def gpugov_apply(cp, root: Path, capsys, cluster: str, *extra: str) -> tuple[int, list[str], list[str]]:
    from gpugov.cli import main

    code = main(["apply", str(root), "--cluster", cluster, "--kubeconfig", str(cp.kubeconfig), *extra])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


def versions(cp) -> ResourceVersions:
    """The resourceVersion of every object of every kind gpugov knows that the server serves."""
    api = Api(cp.api_client())
    served = served_versions(api)
    found: ResourceVersions = {}
    for kind in KINDS.values():
        if kind.api_version in served:
            for obj in list_all(api, kind):
                meta = obj["metadata"]
                found[(kind.api_version, kind.kind, meta.get("namespace", ""), meta["name"])] = meta["resourceVersion"]
    return found


def kube_system_uid(cp) -> str:
    return client.CoreV1Api(cp.api_client()).read_namespace("kube-system").metadata.uid


def identity_record(cp) -> dict[str, str]:
    return client.CoreV1Api(cp.api_client()).read_namespaced_config_map(RECORD_NAME, "kube-system").data


def refused(cp, root: Path, capsys, cluster: str, *extra: str) -> str:
    """Apply as `cluster` must be refused with one line and leave every object as it was."""
    before = versions(cp)
    code, out, err = gpugov_apply(cp, root, capsys, cluster, *extra)
    assert (code, out, len(err)) == (2, [], 1), (code, out, err)
    assert err[0].startswith("gpugov: refused: ") and err[0].endswith("; nothing was changed"), err
    after = versions(cp)
    assert after == before, {k: (before.get(k), after.get(k)) for k in set(before) | set(after)
                             if before.get(k) != after.get(k)}
    return err[0]


def test_the_first_apply_records_the_cluster_and_another_cluster_is_refused(server, capsys) -> None:
    root, cp = server
    uid, host = kube_system_uid(cp), cp.api_client().configuration.host
    code, out, err = gpugov_apply(cp, root, capsys, "east")
    assert (code, err) == (0, []), (out, err)
    assert out[0] == f"identity: {host} is cluster east (kube-system uid {uid}); recorded in ConfigMap " \
                     f"kube-system/{RECORD_NAME}"
    assert identity_record(cp) == {"cluster": "east", "kubeSystemUID": uid}
    assert "Node h100-01" in rows(out, "labelled") and "ClusterQueue nlp" in rows(out, "created")
    labels = client.CoreV1Api(cp.api_client()).read_namespaced_config_map(RECORD_NAME, "kube-system").metadata.labels
    assert labels == {LABEL_IDENTITY: "east"}  # never managed-by gpugov: prune never sees it
    # The policies were written a moment ago: apply returned only once the API server enforces them,
    # so a GPU Job without a queue, sent the instant apply returns, is refused.
    assert "admission: in force (gpugov-accelerators-need-a-queue, gpugov-workload-ownership refused a " \
           "server-side dry run as it must)" in out
    gpu_job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "right-after-apply"},
               "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                   {"name": "main", "image": "pause", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}
    with pytest.raises(client.exceptions.ApiException) as refusal:
        client.BatchV1Api(cp.api_client()).create_namespaced_job("nlp-train", gpu_job, dry_run="All")
    assert "gpugov-accelerators-need-a-queue" in str(refusal.value.body)

    # The command, and its variants: refused before any read of what to change is acted on.
    for extra in ([], ["--dry-run"], ["--no-prune"], ["--allow-mass-prune"]):
        line = refused(cp, root, capsys, "west", *extra)
        assert line.startswith(f"gpugov: refused: {host} is cluster east, not west (its ConfigMap "
                               f"kube-system/{RECORD_NAME} says so, kube-system uid {uid}); check "
                               "--kubeconfig/--context (and --cluster), or rebuild it as west on purpose with "
                               "--reidentify"), line

    # The right cluster still applies (the record is not rewritten) and prunes.
    record_version = client.CoreV1Api(cp.api_client()).read_namespaced_config_map(
        RECORD_NAME, "kube-system").metadata.resource_version
    code, out, err = gpugov_apply(cp, root, capsys, "east")
    assert (code, err) == (0, [])
    assert out[0].endswith(f"as recorded in ConfigMap kube-system/{RECORD_NAME}")
    assert out[-1] == "nothing to prune: every object labelled managed-by gpugov is declared"
    assert client.CoreV1Api(cp.api_client()).read_namespaced_config_map(
        RECORD_NAME, "kube-system").metadata.resource_version == record_version


def rows(lines: list[str], verb: str) -> set[str]:
    """`Kind namespace/name` of the listing rows that start with `verb`."""
    words = verb.split()
    return {" ".join(line.split()[len(words):len(words) + 2]).rstrip(":") for line in lines
            if line.split()[:len(words)] == words}


def test_apply_and_its_dry_run_say_what_changes(server, capsys) -> None:
    """Issue #23 item 11: on an up-to-date cluster every object reads unchanged (the server-side apply
    dry run, then the resourceVersions), a raised quota reads as the one object configured."""
    root, cp = server
    before = versions(cp)
    code, out, err = gpugov_apply(cp, root, capsys, "east", "--dry-run")
    assert (code, err) == (0, [])
    listed = [line for line in out[1:] if not line.startswith(("dry run:", "would delete", "would release"))]
    assert listed and all(line.startswith("unchanged ") for line in listed), [x for x in listed if "unchanged" not in x]
    assert out[-1].startswith(f"dry run: {len(listed)} objects would be applied ({len(listed)} unchanged); ")
    assert versions(cp) == before  # the dry run wrote nothing

    nlp = root / "tenants" / "nlp.yaml"
    original = nlp.read_text()
    try:
        nlp.write_text(original.replace("{nominal: 16, borrowingLimit: 16, lendingLimit: 8}",
                                        "{nominal: 12, borrowingLimit: 16, lendingLimit: 8}"))
        code, out, err = gpugov_apply(cp, root, capsys, "east", "--dry-run")
        assert (code, err) == (0, [])
        assert "ClusterQueue nlp" in rows(out, "would configure")
        assert not rows(out, "would create") and versions(cp) == before
        code, applied, err = gpugov_apply(cp, root, capsys, "east")
        assert (code, err) == (0, [])
        assert rows(applied, "configured") == rows(out, "would configure")
        assert not rows(applied, "created") and rows(applied, "unchanged")
        summary = [line for line in applied if " objects applied with field manager gpugov (" in line]
        assert summary and f"{len(rows(out, 'would configure'))} configured, " in summary[0]
    finally:
        nlp.write_text(original)
    code, out, err = gpugov_apply(cp, root, capsys, "east")
    assert (code, err) == (0, []) and "ClusterQueue nlp" in rows(out, "configured")


def test_a_cluster_applied_before_identity_records_is_told_by_its_objects(server, capsys) -> None:
    root, cp = server
    core = client.CoreV1Api(cp.api_client())
    core.delete_namespaced_config_map(RECORD_NAME, "kube-system")  # as an older gpugov left it
    line = refused(cp, root, capsys, "west", "--dry-run")
    assert " looks like cluster east, not west: it has no identity record, but gpugov's objects there include " in line
    assert "that only east declares (" in line and "--reidentify" in line
    refused(cp, root, capsys, "west")
    code, out, err = gpugov_apply(cp, root, capsys, "east")  # the right one: recorded again
    assert (code, err) == (0, []) and "; recorded in ConfigMap" in out[0]
    assert identity_record(cp)["cluster"] == "east"


def test_a_record_restored_from_another_cluster_and_a_pin_are_checked_against_kube_system(server, capsys) -> None:
    root, cp = server
    core = client.CoreV1Api(cp.api_client())
    uid = kube_system_uid(cp)
    other_uid = "0d2c5a51-7d4e-4c55-9a8e-5b0c1f0e7a11"
    core.patch_namespaced_config_map(RECORD_NAME, "kube-system", {"data": {"kubeSystemUID": other_uid}})
    line = refused(cp, root, capsys, "east")
    assert f"has kube-system uid {uid}, but its ConfigMap kube-system/{RECORD_NAME} says cluster east with " \
           f"kube-system uid {other_uid} (restored from another cluster?)" in line
    core.patch_namespaced_config_map(RECORD_NAME, "kube-system", {"data": {"kubeSystemUID": uid}})

    clusters = root / "policies" / "clusters.yaml"
    original = clusters.read_text()
    anchor = "  backend: kueue\n"
    try:
        clusters.write_text(original.replace(anchor, anchor + f"  identity: {{kubeSystemUID: {other_uid}}}\n", 1))
        line = refused(cp, root, capsys, "east", "--reidentify")
        assert f"is not cluster east: east is pinned to kube-system uid {other_uid} (policies/clusters.yaml:" in line
        clusters.write_text(original.replace(anchor, anchor + f"  identity: {{kubeSystemUID: {uid}}}\n", 1))
        code, out, err = gpugov_apply(cp, root, capsys, "east")
        assert (code, err) == (0, []) and out[0].endswith("as recorded in ConfigMap kube-system/" + RECORD_NAME)
    finally:
        clusters.write_text(original)


def test_the_pulumi_stack_guard_refuses_the_other_cluster_before_any_resource(server) -> None:
    from gpugov.deploy.guard import check_stack_cluster, stack_client

    root, cp = server
    api = stack_client(str(cp.kubeconfig))
    before = versions(cp)
    with pytest.raises(WrongCluster, match="is cluster east, not west"):
        check_stack_cluster(api, desired_state(root, cluster="west"), write=True)
    assert versions(cp) == before
    identity = check_stack_cluster(stack_client(Path(cp.kubeconfig).read_text()), desired_state(root, cluster="east"),
                                   write=True)
    assert identity.recorded and versions(cp) == before  # right and already recorded: nothing written


def test_a_mass_prune_needs_its_flag(server, capsys) -> None:
    root, cp = server
    removed = sorted((root / "tenants").glob("*.yaml"))
    keep = root / "tenants" / "departments.yaml"
    saved = {path: path.read_text() for path in removed}
    try:
        for path in removed:
            if path != keep:
                path.unlink()
        before = versions(cp)
        code, out, err = gpugov_apply(cp, root, capsys, "east", "--dry-run")
        assert code == 2 and err == [], (out, err)
        (warning,) = [line for line in out if line.startswith("apply would be refused (exit 2): ")]
        assert "prune would delete " in warning and "the limit is 30 objects or 50% (the Cluster's " \
               "spec.pruneLimit) of cluster east; if this is the cluster you mean, rerun with --allow-mass-prune" \
               in warning
        assert out[-1].endswith("; nothing was changed") and versions(cp) == before
        refused(cp, root, capsys, "east")
        code, out, err = gpugov_apply(cp, root, capsys, "east", "--allow-mass-prune")
        assert (code, err) == (0, []), (out, err)
        assert out[-1].startswith("pruned what gpugov no longer declares: ")
        assert [line for line in out if line.startswith("deleted ") and "ClusterQueue" in line]
    finally:
        for path, text in saved.items():
            path.write_text(text)
    code, out, err = gpugov_apply(cp, root, capsys, "east")  # the tenants back: nothing to prune
    assert (code, err) == (0, []) and out[-1] == "nothing to prune: every object labelled managed-by gpugov is declared"


def test_a_deliberate_rebuild_as_another_cluster(server, capsys) -> None:
    """--reidentify (with --allow-mass-prune: it prunes all of east) rebuilds the server as west;
    east is then the one refused."""
    root, cp = server
    # west is a Volcano cluster: the sandbox serves Volcano's own CRDs (tools/build volcano), always
    assert "scheduling.volcano.sh/v1beta1" in served_versions(Api(cp.api_client()))
    refused(cp, root, capsys, "west", "--reidentify")  # the prune of all of east is a mass prune
    code, out, err = gpugov_apply(cp, root, capsys, "west", "--reidentify", "--allow-mass-prune")
    assert (code, err) == (0, []), (out, err)
    assert "; re-recorded in ConfigMap kube-system/" + RECORD_NAME in out[0]
    assert identity_record(cp)["cluster"] == "west"
    assert "ClusterQueue" in "\n".join(line for line in out if line.startswith(("deleted", "deleting")))
    line = refused(cp, root, capsys, "east", "--dry-run")
    assert " is cluster west, not east " in line
