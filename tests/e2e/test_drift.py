"""Drift on a real API server: the example org applied, GPU servers and pods present, then
each kind of drift injected and caught with its rule id; exit 3 when the server goes away;
and drift under its own read-only ServiceAccount token.

Its own server (module scope): drift reads the whole cluster, so it must not see what the
other e2e tests apply.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from gpugov.app.pipeline import validate_repo
from gpugov.cli import main
from gpugov.cluster.apply import apply_objects
from gpugov.cluster.observe import observe
from gpugov.compile import compile
from gpugov.sandbox import ControlPlane
from gpugov.sandbox.nodes import create_nodes
from gpugov.sandbox.simulated import simulated_nodes
from gpugov.sources import CheckIncomplete
from tests.helpers.repos import REPO

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cluster(controlplane_binary_path: Path) -> Iterator[tuple[ControlPlane, list[dict]]]:
    model = validate_repo(REPO).model
    assert model is not None
    objects = compile(model, backend="kueue", cluster="east")
    with ControlPlane(binary=controlplane_binary_path) as cp:
        api = cp.api_client()
        create_nodes(api, simulated_nodes(model, "east"))
        client.CoreV1Api(api).create_namespace({"metadata": {"name": "gpu-operator"}})
        apply_objects(api, objects)
        run_pod(api, "nlp-train", "train-0", "h100-01", {"nvidia.com/gpu": "8"}, queue="training")
        run_pod(api, "inference", "serve-0", "a100-01", {"nvidia.com/mig-1g.10gb": "2"}, queue="serving")
        yield cp, objects


def run_pod(api: client.ApiClient, namespace: str, name: str, node: str, limits: dict[str, str],
            queue: str | None = None) -> None:
    labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    core = client.CoreV1Api(api)
    pod = core.create_namespaced_pod(namespace, {
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {"limits": limits}}]},
    })
    if queue:
        admit(api, pod, limits)
    # Bound as kube-scheduler binds (pods/binding): no pod may name its node at creation (gpugov-device-access).
    core.create_namespaced_pod_binding(name, namespace, {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}}, _preload_content=False)
    core.patch_namespaced_pod_status(name, namespace, {"status": {"phase": "Running"}})


def admit(api: client.ApiClient, pod: client.V1Pod, limits: dict[str, str]) -> None:
    """The admitted Workload Kueue's pod integration keeps for a queued pod (no Kueue runs on this bare
    server): owned by the pod, its admission in its status. Without it drift rightly reports the running
    pod as holding accelerators no admitted Workload holds (GD027)."""
    custom = client.CustomObjectsApi(api)
    namespace, name = pod.metadata.namespace, pod.metadata.name
    container = {"name": "main", "image": "busybox", "resources": {"requests": limits}}
    custom.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", namespace, "workloads", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": f"pod-{name}", "ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": pod.metadata.uid}]},
        "spec": {"queueName": pod.metadata.labels["kueue.x-k8s.io/queue-name"],
                 "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}]}})
    now = "2026-01-01T00:00:00Z"
    custom.patch_namespaced_custom_object_status("kueue.x-k8s.io", "v1beta2", namespace, "workloads", f"pod-{name}", {
        "status": {"admission": {"clusterQueue": namespace, "podSetAssignments": [
            {"name": "main", "count": 1, "flavors": dict.fromkeys(limits, "admitted"), "resourceUsage": limits}]},
            "conditions": [{"type": kind, "status": "True", "reason": kind, "message": "admitted",
                            "lastTransitionTime": now} for kind in ("QuotaReserved", "Admitted")]}})


def drift(capsys: pytest.CaptureFixture[str], kubeconfig: Path | str) -> tuple[int, dict]:
    code = main(["drift", str(REPO), "--cluster", "east", "--kubeconfig", str(kubeconfig), "--format", "json"])
    out, err = capsys.readouterr()
    return code, {**(json.loads(out) if out.strip() else {}), "stderr": err}


def rules(report: dict) -> set[str]:
    return {f["rule"] for f in report.get("findings", []) if f["level"] != "info"}


def test_applied_org_has_no_drift(cluster, capsys) -> None:
    cp, objects = cluster
    assert {"ClusterQueue", "LocalQueue", "Node", "CronJob", "DaemonSet"} <= {o["kind"] for o in objects}
    code, report = drift(capsys, cp.kubeconfig)
    assert (code, rules(report)) == (0, set()), report


def test_quota_patched_by_another_field_manager(cluster, capsys) -> None:
    cp, objects = cluster
    queue = copy.deepcopy(next(o for o in objects if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "nlp"))
    flavor = queue["spec"]["resourceGroups"][0]["flavors"][0]
    flavor["resources"][0]["nominalQuota"] = "40"
    dynamic = DynamicClient(cp.api_client())
    resource = dynamic.resources.get(api_version=queue["apiVersion"], kind="ClusterQueue")
    dynamic.server_side_apply(resource, body={k: queue[k] for k in ("apiVersion", "kind", "spec")} | {
        "metadata": {"name": "nlp"}}, field_manager="kubectl-edit", force_conflicts=True)
    try:
        code, report = drift(capsys, cp.kubeconfig)
        (finding,) = [f for f in report["findings"] if f["rule"] == "GD002"]
        assert code == 1
        assert finding["object"] == "ClusterQueue nlp" and finding["changed_by"] == "kubectl-edit"
        assert (finding["declared"], finding["live"]) == ("16", "40")
    finally:
        apply_objects(cp.api_client(), objects)


def test_pool_label_removed_and_mig_state_failed(cluster, capsys) -> None:
    cp, objects = cluster
    core = client.CoreV1Api(cp.api_client())
    core.patch_node("h100-02", {"metadata": {"labels": {"gpugov.io/pool": None}}})
    core.patch_node("a100-01", {"metadata": {"labels": {"nvidia.com/mig.config.state": "failed"}}})
    try:
        code, report = drift(capsys, cp.kubeconfig)
        assert code == 1 and {"GD012", "GD016"} <= rules(report)
        assert any(f["rule"] == "GD012" and f["object"] == "Node h100-02" for f in report["findings"])
    finally:
        core.patch_node("a100-01", {"metadata": {"labels": {"nvidia.com/mig.config.state": "success"}}})
        apply_objects(cp.api_client(), objects)
    assert drift(capsys, cp.kubeconfig)[0] == 0


def test_bypassing_pod_foreign_namespace_and_deleted_localqueue(cluster, capsys) -> None:
    cp, objects = cluster
    api = cp.api_client()
    core = client.CoreV1Api(api)
    # Only once someone removes gpugov's admission binding can such pods get in at all.
    client.AdmissionregistrationV1Api(api).delete_validating_admission_policy_binding("gpugov-accelerators-need-a-queue")
    deadline = time.monotonic() + 30  # until the apiserver's policy cache has dropped the binding
    while True:
        try:
            run_pod(api, "vision", "sneaky", "h100-03", {"nvidia.com/gpu": "1"})  # no queue label
            break
        except ApiException as exc:
            if exc.status != 403 or time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    core.create_namespace({"metadata": {"name": "rogue"}})
    run_pod(api, "rogue", "miner", "h100-04", {"nvidia.com/gpu": "2"})
    client.CustomObjectsApi(api).delete_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", "nlp-dev", "localqueues", "dev")
    try:
        code, report = drift(capsys, cp.kubeconfig)
        assert code == 1 and {"GD021", "GD022", "GD001"} <= rules(report)
        by_rule = {f["rule"]: f for f in report["findings"]}
        assert by_rule["GD021"]["object"] == "Pod vision/sneaky"
        assert by_rule["GD022"]["object"] == "Pod rogue/miner"
        missing = {f["object"] for f in report["findings"] if f["rule"] == "GD001"}
        assert missing == {"LocalQueue nlp-dev/dev",
                           "ValidatingAdmissionPolicyBinding gpugov-accelerators-need-a-queue"}
    finally:
        core.delete_namespaced_pod("sneaky", "vision", grace_period_seconds=0)
        core.delete_namespaced_pod("miner", "rogue", grace_period_seconds=0)
        apply_objects(api, objects)


def test_drift_under_its_own_read_only_service_account(cluster, capsys, tmp_path: Path) -> None:
    cp, _ = cluster
    core = client.CoreV1Api(cp.api_client())
    token = core.create_namespaced_service_account_token(
        "gpugov-drift", "gpugov-system", {"spec": {"expirationSeconds": 3600}}).status.token
    admin = yaml.safe_load(cp.kubeconfig.read_text())
    kubeconfig = {**admin, "users": [{"name": "drift", "user": {"token": token}}],
                  "contexts": [{"name": "drift", "context": {"cluster": admin["clusters"][0]["name"], "user": "drift"}}],
                  "current-context": "drift"}
    path = tmp_path / "drift.kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig))
    code, report = drift(capsys, path)
    assert (code, rules(report)) == (0, set()), report
    from kubernetes import config as kube_config

    reader = client.CoreV1Api(kube_config.new_client_from_config(config_file=str(path)))
    with pytest.raises(ApiException) as denied:
        reader.create_namespaced_config_map("nlp-train", {"metadata": {"name": "nope"}})
    assert denied.value.status == 403
    with pytest.raises(ApiException) as denied:
        reader.patch_node("h100-01", {"metadata": {"labels": {"x": "y"}}})
    assert denied.value.status == 403


def test_server_stopped_mid_check_is_incomplete(controlplane_binary_path: Path, capsys, tmp_path: Path) -> None:
    model = validate_repo(REPO).model
    objects = compile(model, backend="kueue", cluster="east")
    with ControlPlane(binary=controlplane_binary_path) as cp:
        api = cp.api_client()
        kubeconfig = cp.kubeconfig.read_text()

        def stop_before_nodes(step: str) -> None:
            if step == "list nodes":
                cp.stop()

        with pytest.raises(CheckIncomplete):
            observe(api, objects, on_progress=stop_before_nodes)
    stale = tmp_path / "kubeconfig"  # the server is gone: its copy outlives the workdir
    stale.write_text(kubeconfig)
    code, report = drift(capsys, stale)
    assert code == 3 and "could not check drift" in report["stderr"]
    assert report["incomplete"] is True and [f["rule"] for f in report["findings"]] == ["GD000"]
