"""gpugov doctor on the living sandbox (real kube-apiserver, Kueue v0.17.0, KWOK GPU servers): the
example org's cluster east applied, then each check's failing case made for real (the visibility
APIService deleted, a node's MIG state failed, a pool without nodes, an admission binding removed,
Kueue's ConfigMap changed, a GPU Operator ClusterPolicy not ready) and put back. The exporters'
/metrics are fixture files served by a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpugov.cli import main
from gpugov.cluster.apply import apply_objects
from gpugov.sandbox import samples
from gpugov.sandbox.cluster import Sandbox
from tests.helpers.repos import REPO
from tests.unit.test_doctor import METRICS, serve_files

pytestmark = pytest.mark.e2e

VISIBILITY = "v1beta2.visibility.kueue.x-k8s.io"
# What doctor can see of the living sandbox as it starts: Kueue out of cluster (no ConfigMap, no
# metrics Service), no GPU Operator, no DCGM exporter; everything gpugov itself set up passes.
SANDBOX = {
    "DR001": "pass", "DR002": "pass", "DR003": "pass", "DR004": "skip", "DR005": "pass", "DR006": "warn",
    "DR007": "skip", "DR008": "skip",
    "DR009": "pass", "DR010": "skip", "DR011": "pass", "DR012": "pass", "DR013": "pass", "DR014": "pass", "DR015": "skip",
    "DR016": "warn", "DR017": "skip", "DR018": "skip", "DR020": "pass", "DR021": "pass", "DR022": "skip", "DR030": "pass",
    "DR040": "skip", "DR041": "pass", "DR042": "pass", "DR043": "pass", "DR050": "pass", "DR051": "pass",
    "DR060": "skip",  # east manages no fleet (tests/e2e/test_fleet.py checks a manager)
}


def doctor(capsys: pytest.CaptureFixture[str], sandbox: Sandbox, *extra: str, repo: Path = REPO) -> tuple[int, dict]:
    code = main(["doctor", str(repo), "--cluster", "east", "--kubeconfig", str(sandbox.cp.kubeconfig),
                 "--format", "json", *extra])
    out, err = capsys.readouterr()
    assert out, err
    return code, json.loads(out)


def statuses(body: dict) -> dict[str, str]:
    return {c["id"]: c["status"] for c in body["checks"]}


def check(body: dict, check_id: str) -> dict[str, Any]:
    return next(c for c in body["checks"] if c["id"] == check_id)


@pytest.fixture
def sandbox(living: Sandbox, living_org: list[dict[str, Any]]) -> Sandbox:
    return living


def _until(predicate: Any, timeout: float = 90.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not in {timeout:.0f}s: {what}")
        time.sleep(1)


def test_the_applied_sandbox_passes_what_it_can_show(sandbox: Sandbox, living_org: list[dict[str, Any]],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # Kueue writes status.fairSharing once it reconciled the ClusterQueues; wait for that. DR003 passes once
    # one of them has (it counts those with an Active condition, written in the same status update), and
    # Kueue reconciles them one after the other: the "5 of 5" below needs every one reconciled.
    custom = client.CustomObjectsApi(sandbox.cp.api_client())
    ours = [o["metadata"]["name"] for o in living_org if o["kind"] == "ClusterQueue"]
    _until(lambda: all(any(c["type"] == "Active" for c in (custom.get_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", name).get("status") or {}).get("conditions") or [])
                           for name in ours), what="every ClusterQueue reconciled by Kueue")
    _until(lambda: check(doctor(capsys, sandbox)[1], "DR003")["status"] == "pass", what="ClusterQueues reconciled")
    code, body = doctor(capsys, sandbox)
    assert statuses(body) == SANDBOX, [c for c in body["checks"] if SANDBOX[c["id"]] != c["status"]]
    assert code == 0
    assert "5 of 5 ClusterQueues report status.fairSharing" in check(body, "DR003")["message"]
    assert check(body, "DR010")["message"].startswith("no GPU Operator CRDs")


def test_visibility_apiservice_deleted(sandbox: Sandbox, capsys: pytest.CaptureFixture[str]) -> None:
    api = sandbox.cp.api_client()
    registration = client.ApiregistrationV1Api(api)
    saved = api.sanitize_for_serialization(registration.read_api_service(VISIBILITY))  # as the API spells it
    registration.delete_api_service(VISIBILITY)
    try:
        code, body = doctor(capsys, sandbox)
        assert code == 1
        assert check(body, "DR005")["status"] == "fail" and "is missing" in check(body, "DR005")["message"]
    finally:
        registration.create_api_service({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                                         "metadata": {"name": VISIBILITY}, "spec": saved["spec"]})
    _until(lambda: check(doctor(capsys, sandbox)[1], "DR005")["status"] == "pass", what="visibility API back")


def test_a_cohort_edited_by_hand(sandbox: Sandbox, living_org: list[dict[str, Any]],
                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #39: the research Cohort's own 4 GPUs on h100 taken away by hand: Kueue then lends nlp 4 less."""
    custom = client.CustomObjectsApi(sandbox.cp.api_client())
    declared = next(o for o in living_org if o["kind"] == "Cohort" and o["metadata"]["name"] == "research")
    custom.patch_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "cohorts", "research",
                                       {"spec": {"resourceGroups": None}})
    try:
        code, body = doctor(capsys, sandbox)
        assert code == 1
        assert check(body, "DR009")["status"] == "fail"
        assert "nlp can reach 24 nvidia.com/gpu in pool h100, the declarations give 28" in check(body, "DR009")["message"]
    finally:
        assert not apply_objects(sandbox.cp.api_client(), [declared]).missing
    assert check(doctor(capsys, sandbox)[1], "DR009")["status"] == "pass"


def _label(sandbox: Sandbox, node: str, key: str, value: str | None) -> None:
    client.CoreV1Api(sandbox.cp.api_client()).patch_node(node, {"metadata": {"labels": {key: value}}})


def test_node_mig_state_failed(sandbox: Sandbox, capsys: pytest.CaptureFixture[str]) -> None:
    _label(sandbox, "a100-02", "nvidia.com/mig.config.state", "failed")
    try:
        code, body = doctor(capsys, sandbox)
        assert code == 1
        assert check(body, "DR014") == {**check(body, "DR014"), "status": "fail"}
        assert "a100-02 (failed)" in check(body, "DR014")["message"]
    finally:
        _label(sandbox, "a100-02", "nvidia.com/mig.config.state", "success")
    assert check(doctor(capsys, sandbox)[1], "DR014")["status"] == "pass"


def test_node_with_another_gpu_model(sandbox: Sandbox, capsys: pytest.CaptureFixture[str]) -> None:
    _label(sandbox, "h100-03", "nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB")
    try:
        body = doctor(capsys, sandbox)[1]
        assert check(body, "DR021")["status"] == "fail"
        assert "h100-03 is NVIDIA-A100-SXM4-80GB, pool h100 declares H100-80GB" in check(body, "DR021")["message"]
    finally:
        _label(sandbox, "h100-03", "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3")


def test_a_pool_with_no_nodes(sandbox: Sandbox, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    for folder in ("tenants", "policies", "hardware"):
        shutil.copytree(REPO / folder, repo / folder)
    (repo / "hardware" / "spare.yaml").write_text(
        "apiVersion: gpugov.io/v1alpha1\nkind: GPUPool\nmetadata: {name: spare}\nspec:\n  cluster: east\n"
        "  accelerator: {model: H100-80GB}\n  acceleratorsPerNode: 8\n  nodes:\n    - name: spare-01\n"
        "    - name: spare-02\n")
    code, body = doctor(capsys, sandbox, repo=repo)
    assert code == 1
    assert check(body, "DR020")["status"] == "fail"
    assert check(body, "DR020")["message"] == "no node in the cluster for pool spare"
    assert check(doctor(capsys, sandbox)[1], "DR020")["status"] == "pass"


def test_admission_binding_removed(sandbox: Sandbox, living_org: list[dict[str, Any]],
                                   capsys: pytest.CaptureFixture[str]) -> None:
    name = "gpugov-accelerators-need-a-queue"
    admission = client.AdmissionregistrationV1Api(sandbox.cp.api_client())
    admission.delete_validating_admission_policy_binding(name)
    try:
        code, body = doctor(capsys, sandbox)
        assert code == 1
        assert check(body, "DR030")["status"] == "fail"
        assert f"ValidatingAdmissionPolicyBinding {name}" in check(body, "DR030")["message"]
    finally:
        binding = [o for o in living_org if o["kind"] == "ValidatingAdmissionPolicyBinding"
                   and o["metadata"]["name"] == name]
        assert not apply_objects(sandbox.cp.api_client(), binding).missing
    assert check(doctor(capsys, sandbox)[1], "DR030")["status"] == "pass"


@pytest.fixture
def kueue_configmap(sandbox: Sandbox) -> Iterator[Any]:
    """Kueue's ConfigMap as its manifests install it, holding the sandbox controller's own
    Configuration; `write(config)` replaces it. Removed afterwards."""
    core = client.CoreV1Api(sandbox.cp.api_client())
    running = yaml.safe_load((sandbox.cp.workdir / "kueue" / "config.yaml").read_text())

    def write(config: dict[str, Any]) -> None:
        body = {"metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
                "data": {"controller_manager_config.yaml": yaml.safe_dump(config, sort_keys=False)}}
        try:
            core.replace_namespaced_config_map("kueue-manager-config", "kueue-system", body)
        except ApiException as exc:
            if exc.status != 404:
                raise
            core.create_namespaced_config_map("kueue-system", body)

    write(running)
    yield write, running
    core.delete_namespaced_config_map("kueue-manager-config", "kueue-system")


def test_kueue_configuration_from_its_configmap(sandbox: Sandbox, kueue_configmap: Any,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    write, running = kueue_configmap
    body = doctor(capsys, sandbox)[1]
    assert check(body, "DR003")["status"] == "pass" and "has a fairSharing block" in check(body, "DR003")["message"]
    assert check(body, "DR004")["status"] == "pass"
    assert check(body, "DR022")["status"] == "pass", check(body, "DR022")  # the sandbox's featureGates
    write({k: v for k, v in running.items() if k not in ("fairSharing", "featureGates")})
    body = doctor(capsys, sandbox)[1]
    assert check(body, "DR003")["status"] == "fail" and "turns fair sharing off" in check(body, "DR003")["message"]
    assert check(body, "DR022")["status"] == "warn" and "h100" in check(body, "DR022")["message"]
    write({**running, "manageJobsWithoutQueueName": False})
    code, body = doctor(capsys, sandbox)
    assert code == 1 and check(body, "DR004")["status"] == "fail"


CLUSTERPOLICY_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "clusterpolicies.nvidia.com"},
    "spec": {"group": "nvidia.com", "scope": "Cluster",
             "names": {"plural": "clusterpolicies", "singular": "clusterpolicy", "kind": "ClusterPolicy",
                       "listKind": "ClusterPolicyList"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]},
}


@pytest.fixture
def gpu_operator(sandbox: Sandbox) -> Iterator[Any]:
    """The GPU Operator's ClusterPolicy CRD (its served shape, without the operator) and a
    ClusterPolicy that `set(state, strategy, config)` rewrites. Removed afterwards."""
    api = sandbox.cp.api_client()
    extensions = client.ApiextensionsV1Api(api)
    extensions.create_custom_resource_definition(CLUSTERPOLICY_CRD)
    custom = client.CustomObjectsApi(api)

    def established() -> bool:
        status = extensions.read_custom_resource_definition("clusterpolicies.nvidia.com").status
        return any(c.type == "Established" and c.status == "True" for c in (status.conditions or []))

    _until(established, 30, "ClusterPolicy CRD established")

    def put(state: str, strategy: str = "mixed", config: str = "gpugov-mig-parted-config") -> None:
        body = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
                "spec": {"mig": {"strategy": strategy}, "migManager": {"config": {"name": config}}},
                "status": {"state": state}}
        try:
            current = custom.get_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy")
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            custom.replace_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy", body)
        except ApiException as exc:
            if exc.status != 404:
                raise
            _until(lambda: _try_create(custom, body), 30, "ClusterPolicy created")

    yield put
    extensions.delete_custom_resource_definition("clusterpolicies.nvidia.com")


def _try_create(custom: client.CustomObjectsApi, body: dict[str, Any]) -> bool:
    try:
        custom.create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", body)
    except ApiException as exc:
        if exc.status == 404:  # the CRD's endpoint is not served yet
            return False
        raise
    return True


def test_gpu_operator_clusterpolicy(sandbox: Sandbox, gpu_operator: Any, capsys: pytest.CaptureFixture[str]) -> None:
    gpu_operator("ready")
    body = doctor(capsys, sandbox)[1]
    assert {k: statuses(body)[k] for k in ("DR010", "DR013", "DR015")} == {"DR010": "pass", "DR013": "pass",
                                                                           "DR015": "pass"}
    gpu_operator("notReady", strategy="single", config="default-mig-parted-config")
    code, body = doctor(capsys, sandbox)
    assert code == 1
    assert {k: statuses(body)[k] for k in ("DR010", "DR013", "DR015")} == {"DR010": "fail", "DR013": "fail",
                                                                           "DR015": "fail"}
    assert "notReady" in check(body, "DR010")["message"]
    assert "default-mig-parted-config" in check(body, "DR015")["message"]


@pytest.fixture
def gpu_job(sandbox: Sandbox) -> Iterator[str]:
    """A Job of tenant nlp holding one H100 through its queue, running on a KWOK node; yields
    `namespace/pod`."""
    api = sandbox.cp.api_client()
    job = samples.SampleJob("nlp", "nlp-train", f"doctor-{uuid.uuid4().hex[:6]}", "training", "nlp", "h100",
                            "nvidia.com/gpu")
    client.BatchV1Api(api).create_namespaced_job(job.namespace, samples.job_manifest(job, run_for=None,
                                                                                      priority_class="batch-low"))
    core = client.CoreV1Api(api)

    def running() -> list[str]:
        pods = core.list_namespaced_pod(job.namespace, label_selector=f"job-name={job.name}").items
        return [p.metadata.name for p in pods if p.status.phase == "Running"]

    try:
        _until(lambda: bool(running()), 120, f"pod of {job.name} running")
        yield f"{job.namespace}/{running()[0]}"
    finally:
        client.BatchV1Api(api).delete_namespaced_job(job.name, job.namespace, propagation_policy="Foreground")
        _until(lambda: not core.list_namespaced_pod(job.namespace, label_selector=f"job-name={job.name}").items,
               120, f"pods of {job.name} gone")


def test_exporter_metrics_from_fixture_files(sandbox: Sandbox, gpu_job: str, capsys: pytest.CaptureFixture[str]) -> None:
    files = {f"/{p.stem}": p for p in METRICS.glob("*.txt")}
    with serve_files(files) as base:
        code, body = doctor(capsys, sandbox, "--kueue-metrics", f"{base}/kueue-full",
                            "--dcgm-metrics", f"{base}/dcgm-with-pods")
        assert {k: statuses(body)[k] for k in ("DR006", "DR016", "DR017")} == {
            "DR006": "pass", "DR016": "pass", "DR017": "pass"}
        code, body = doctor(capsys, sandbox, "--kueue-metrics", f"{base}/not-kueue",
                            "--dcgm-metrics", f"{base}/dcgm-without-pods")
        assert code == 1
        assert check(body, "DR006")["status"] == "fail"
        assert check(body, "DR017")["status"] == "fail" and gpu_job in check(body, "DR017")["message"]
        code, body = doctor(capsys, sandbox, "--dcgm-metrics", f"{base}/nothing-here")
        assert code == 3 and check(body, "DR016")["incomplete"] and "404" in check(body, "DR016")["message"]
