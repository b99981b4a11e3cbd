"""The example organisation, compiled for both backends, applied to a real API server.

Server-side apply through the kubernetes client (field manager gpugov); every compiled
object must then be found on the server, the hardware (simulated GPU servers with GFD
labels, capacity and allocatable) must carry gpugov's node patches, and a second apply
must change nothing.
"""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from gpugov.app.pipeline import validate_repo
from gpugov.cluster.apply import apply_objects
from gpugov.compile import compile
from gpugov.sandbox.nodes import create_nodes
from gpugov.sandbox.simulated import simulated_nodes
from tests.conftest import REPO

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def org(api_client: client.ApiClient):
    model = validate_repo(REPO).model
    assert model is not None
    create_nodes(api_client, simulated_nodes(model))
    try:  # the GPU Operator's namespace, where the mig-parted ConfigMap lives
        client.CoreV1Api(api_client).create_namespace({"metadata": {"name": "gpu-operator"}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    return model


@pytest.mark.parametrize(("cluster", "backend"), [("east", "kueue"), ("west", "volcano"), ("east", "volcano")])
def test_apply_finds_every_object_and_is_idempotent(api_client, org, cluster: str, backend: str) -> None:
    if backend == "volcano":
        try:
            DynamicClient(api_client).resources.get(api_version="scheduling.volcano.sh/v1beta1", kind="Queue")
        except ResourceNotFoundError:
            pytest.skip("Volcano CRDs come only from ../shared/reference/crds/, which is absent here")
    objects = compile(org, backend, cluster)
    result = apply_objects(api_client, objects)
    assert result.missing == [] and result.skipped_nodes == []
    assert len(result.applied) == len(objects)
    dynamic = DynamicClient(api_client)
    versions = {}
    for obj in objects:
        resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        live = resource.get(name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace")).to_dict()
        for key, value in obj["metadata"]["labels"].items():
            assert live["metadata"]["labels"][key] == value
        managers = {entry["manager"] for entry in live["metadata"].get("managedFields", [])}
        assert "gpugov" in managers
        versions[(obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"])] = live["metadata"][
            "resourceVersion"
        ]
    again = apply_objects(api_client, objects)
    assert again.missing == []
    for obj in objects:
        resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        live = resource.get(name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"))
        key = (obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"])
        assert live.metadata.resourceVersion == versions[key], f"second apply changed {key}"


def test_nodes_carry_hardware_facts_and_gpugov_patches(api_client, org) -> None:
    apply_objects(api_client, compile(org, "kueue", "east"))
    node = client.CoreV1Api(api_client).read_node("a100-01")
    labels = node.metadata.labels
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"  # from the hardware (GFD)
    assert labels["gpugov.io/pool"] == "a100-mig"  # from gpugov's patch
    assert labels["nvidia.com/mig.config"] == "a100-mig-small"
    assert node.status.allocatable["nvidia.com/mig-1g.10gb"] == "56"
    assert node.status.allocatable["nvidia.com/gpu"] == "0"
    h100 = client.CoreV1Api(api_client).read_node("h100-01")
    # gpugov's taint, beside the apiserver's own node.kubernetes.io/not-ready (no kubelet here):
    # applying gpugov's taints never removes anyone else's.
    assert ("gpugov.io/pool", "NoSchedule") in [(t.key, t.effect) for t in h100.spec.taints]


def test_apply_keeps_taints_that_are_not_gpugovs(api_client, org) -> None:
    """Node.spec.taints is an atomic list for server-side apply: applying gpugov's pool taint
    must not drop a taint that an admin (or the autoscaler, or the GPU Operator) set."""
    core = client.CoreV1Api(api_client)
    admin = {"key": "maintenance", "value": "planned", "effect": "PreferNoSchedule"}
    node = core.read_node("h100-02")
    others = [t.to_dict() for t in node.spec.taints or [] if t.key != admin["key"]]
    core.patch_node("h100-02", {"spec": {"taints": [*[{k: v for k, v in t.items() if v is not None} for t in others],
                                                    admin]}})
    apply_objects(api_client, compile(org, "kueue", "east"))
    taints = {(t.key, t.value, t.effect) for t in core.read_node("h100-02").spec.taints or []}
    assert ("maintenance", "planned", "PreferNoSchedule") in taints
    assert ("gpugov.io/pool", "h100", "NoSchedule") in taints
    apply_objects(api_client, compile(org, "kueue", "east"))  # and again: nothing piles up
    again = [(t.key, t.value, t.effect) for t in core.read_node("h100-02").spec.taints or []]
    assert sorted(again) == sorted(taints)
