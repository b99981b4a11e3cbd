"""Issue #38, the runtime side, on a real kube-apiserver with the GPU Operator's own ClusterPolicy CRD
(tests/fixtures/crds, from github.com/NVIDIA/gpu-operator): a ClusterPolicy as the operator's chart leaves
it honours NVIDIA_VISIBLE_DEVICES from unprivileged containers and doctor DR018 fails; gpugov apply of the
Cluster's spec.gpuOperator patch (validated by the operator's schema on the server) keeps the platform's
other env entries, and DR018 passes. A ClusterPolicy that does not exist is never created."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpugov.app.pipeline import validate_repo
from gpugov.cli import main
from gpugov.cluster.apply import apply_objects, preview_changes
from gpugov.cluster.rest import Api, served_versions
from gpugov.compile import compile
from gpugov.sandbox.controlplane import ControlPlane
from tests.helpers.repos import FIXTURES
from tests.unit.test_gpu_operator import declaring

pytestmark = pytest.mark.e2e

CRD = FIXTURES / "crds" / "nvidia.com_clusterpolicies.yaml"
GROUP, VERSION, PLURAL, NAME = "nvidia.com", "v1", "clusterpolicies", "cluster-policy"
SOCKET = {"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"}
# The operator's required components (the CRD's spec.required), as its Helm chart writes them, CDI off and
# the toolkit and device plugin at their defaults but for a socket path the platform set.
CHART_SPEC: dict[str, Any] = {
    "daemonsets": {}, "dcgm": {}, "dcgmExporter": {}, "driver": {}, "gfd": {}, "nodeStatusExporter": {},
    "operator": {}, "cdi": {"enabled": False}, "devicePlugin": {}, "toolkit": {"enabled": True, "env": [SOCKET]},
}


def _until(predicate: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def gpu_operator_crd(controlplane: ControlPlane, api_client: client.ApiClient) -> Iterator[client.CustomObjectsApi]:
    extensions = client.ApiextensionsV1Api(api_client)
    extensions.create_custom_resource_definition(yaml.safe_load(CRD.read_text(encoding="utf-8")))
    custom = client.CustomObjectsApi(api_client)

    def served() -> bool:
        # apply checks discovery first, which the API server updates only once the CRD is Established; it
        # serves the kind's list as soon as the names are accepted, a moment before
        if f"{GROUP}/{VERSION}" not in served_versions(Api(api_client)):
            return False
        try:
            custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    try:
        _until(served, 30, "the ClusterPolicy CRD served")
        yield custom
    finally:
        extensions.delete_custom_resource_definition("clusterpolicies.nvidia.com")


def dr018(controlplane: ControlPlane, repo: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    main(["doctor", str(repo), "--cluster", "east", "--kubeconfig", str(controlplane.kubeconfig), "--format", "json"])
    out, err = capsys.readouterr()
    assert out, err
    return next(c for c in json.loads(out)["checks"] if c["id"] == "DR018")


def test_doctor_fails_until_gpugov_applies_the_clusterpolicy_patch(
        controlplane: ControlPlane, api_client: client.ApiClient, gpu_operator_crd: client.CustomObjectsApi,
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    custom = gpu_operator_crd
    repo = declaring(tmp_path, "  gpuOperator:\n    clusterPolicy: cluster-policy\n")
    model = validate_repo(repo).model
    assert model is not None
    patch = [o for o in compile(model, cluster="east") if o["kind"] == "ClusterPolicy"]
    assert len(patch) == 1

    # Not there: apply never creates the operator's ClusterPolicy.
    result = apply_objects(api_client, patch)
    assert result.skipped_nodes == ["ClusterPolicy cluster-policy"] and not result.applied
    with pytest.raises(ApiException) as absent:
        custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, NAME)
    assert absent.value.status == 404

    custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterPolicy", "metadata": {"name": NAME}, "spec": CHART_SPEC})
    before = dr018(controlplane, repo, capsys)
    assert before["status"] == "fail", before
    assert "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED is none, not false" in before["message"]
    assert "DEVICE_LIST_STRATEGY is envvar" in before["message"]
    assert preview_changes(api_client, patch) == {("ClusterPolicy", "", NAME): "configure"}

    result = apply_objects(api_client, patch)
    assert result.applied == [("ClusterPolicy", "", NAME)] and not result.missing
    live = custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, NAME)
    assert live["spec"]["toolkit"]["env"] == [
        SOCKET, {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "false"},
        {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "value": "true"}]
    assert live["spec"]["devicePlugin"]["env"] == [{"name": "DEVICE_LIST_STRATEGY", "value": "volume-mounts"}]
    assert live["spec"]["toolkit"]["enabled"] is True and live["spec"]["cdi"]["enabled"] is False
    assert "app.kubernetes.io/managed-by" not in (live["metadata"].get("labels") or {})
    after = dr018(controlplane, repo, capsys)
    assert after["status"] == "pass", after
    # Applying again changes nothing.
    assert preview_changes(api_client, patch) == {("ClusterPolicy", "", NAME): "unchanged"}
    assert apply_objects(api_client, patch).changes == {("ClusterPolicy", "", NAME): "unchanged"}
