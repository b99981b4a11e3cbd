"""Volcano's queues made binding by gpugov's admission policies, on a real apiserver with the
real Volcano CRDs (no Volcano scheduler runs here: only admission is proven, not scheduling).

A server of its own: the Kueue policies of the other tests would also judge these pods."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpugov.app.pipeline import validate_repo
from gpugov.cluster.apply import apply_objects
from gpugov.cluster.enforcement import probes_for, wait_until_enforced
from gpugov.cluster.rest import Api
from gpugov.compile import compile
from gpugov.compile.admission import VOLCANO_NEED_VOLCANO
from gpugov.sandbox import ControlPlane
from gpugov.sandbox.nodes import create_gpu_operator_footprint, create_nodes
from gpugov.sandbox.simulated import simulated_nodes
from tests.helpers.repos import REPO

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def api(controlplane_binary_path: Path) -> Iterator[client.ApiClient]:
    model = validate_repo(REPO).model
    assert model is not None
    with ControlPlane(binary=controlplane_binary_path) as cp:
        api = cp.api_client()
        create_nodes(api, simulated_nodes(model, "east"))
        create_gpu_operator_footprint(api)
        # What an installed Volcano has, and where gpugov writes its scheduler configuration.
        client.CoreV1Api(api).create_namespace({"metadata": {"name": "volcano-system"}})
        objects = compile(model, backend="volcano", cluster="east")
        assert not apply_objects(api, objects).missing
        # As `gpugov apply` does before it returns: the new policies are enforced a moment later.
        enforced = wait_until_enforced(Api(api), probes_for(objects))
        assert (enforced.in_force, enforced.not_yet, enforced.not_probed) == ([VOLCANO_NEED_VOLCANO], [], [])
        yield api


def podgroup(api: client.ApiClient, namespace: str, queue: str) -> dict[str, Any]:
    body = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": f"pg-{uuid.uuid4().hex[:6]}"}, "spec": {"minMember": 1, "queue": queue}}
    return dict(client.CustomObjectsApi(api).create_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", namespace, "podgroups", body))


def refused(create: Callable[[], Any]) -> str:
    """The apiserver's refusal message (eventually: the policy cache may lag the first apply)."""
    import time

    deadline = time.monotonic() + 20
    while True:
        try:
            create()
        except ApiException as exc:
            assert exc.status in (403, 422), exc
            return str(exc.body)
        if time.monotonic() > deadline:
            raise AssertionError("the apiserver accepted it")
        time.sleep(0.5)


def test_a_namespace_may_use_only_its_tenants_queue(api: client.ApiClient) -> None:
    """tenants/nlp.yaml: namespace nlp-train belongs to tenant nlp, whose Volcano Queue is `nlp`.
    A PodGroup there may not aim at vision's queue nor at the department (parent) queue
    `research`, which runs no jobs; it may use `nlp`."""
    message = refused(lambda: podgroup(api, "nlp-train", "vision"))
    assert "may not use Volcano queue vision; namespace nlp-train uses queue nlp" in message
    message = refused(lambda: podgroup(api, "nlp-train", "research"))
    assert "may not use Volcano queue research" in message
    assert podgroup(api, "nlp-train", "nlp")["spec"]["queue"] == "nlp"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": "outsider"}})
    message = refused(lambda: podgroup(api, "outsider", "nlp"))
    assert "it belongs to a gpugov tenant or department" in message


def test_accelerator_pods_must_be_scheduled_by_volcano(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)

    def pod(scheduler: str | None) -> dict[str, Any]:
        spec: dict[str, Any] = {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
        if scheduler:
            spec["schedulerName"] = scheduler
        return {"metadata": {"name": f"p-{uuid.uuid4().hex[:6]}",
                             "annotations": {"scheduling.volcano.sh/queue-name": "vision"}}, "spec": spec}

    message = refused(lambda: core.create_namespaced_pod("vision", pod(None)))
    assert "requests accelerators but is not scheduled by volcano" in message
    created = core.create_namespaced_pod("vision", pod("volcano"))
    assert created.spec.scheduler_name == "volcano"


def test_a_tenant_cannot_outrank_or_take_devices_on_volcano(api: client.ApiClient) -> None:
    """Classes 3 and 4 of issue #21 on Volcano, sent as alice@example.com of nlp-team (an owner of
    tenant nlp) through impersonation, so the apiserver applies exactly the roles gpugov binds.
    Volcano's scheduler preempts by the PriorityClass of a Pod or a PodGroup: without
    gpugov-volcano-pod-priority a tenant's system-node-critical pod was accepted, and
    without gpugov-device-access so was NVIDIA_VISIBLE_DEVICES=all on a pod that requests no GPU."""
    from gpugov.cluster.impersonate import impersonate
    from gpugov.kube.names import VOLCANO_QUEUE_ANNOTATION

    tenant = impersonate(client.ApiClient(api.configuration), "alice@example.com", ["nlp-team"])
    core, custom = client.CoreV1Api(tenant), client.CustomObjectsApi(tenant)

    def pod(priority: str | None = None, env: list[dict[str, str]] | None = None, gpus: int = 1) -> dict[str, Any]:
        container: dict[str, Any] = {"name": "main", "image": "registry.k8s.io/pause:3.10"}
        if gpus:
            container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
        if env:
            container["env"] = env
        spec: dict[str, Any] = {"schedulerName": "volcano", "containers": [container]}
        if priority:
            spec["priorityClassName"] = priority
        return {"metadata": {"name": f"p-{uuid.uuid4().hex[:6]}", "annotations": {VOLCANO_QUEUE_ANNOTATION: "nlp"}},
                "spec": spec}

    for cls in ("system-node-critical", "inference-critical"):  # the latter is inference's, not nlp's
        message = refused(lambda cls=cls: core.create_namespaced_pod("nlp-train", pod(cls)))
        assert "gpugov-volcano-pod-priority" in message and f"may not use priorityClassName {cls}" in message
        # a PodGroup is Volcano's controller's to write (from a Volcano Job, whose own class and tasks'
        # classes the same policy checks: tests/unit/test_tenant_isolation.py): the tenant's roles hold none
        group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                 "metadata": {"name": f"pg-{uuid.uuid4().hex[:6]}"},
                 "spec": {"minMember": 1, "queue": "nlp", "priorityClassName": cls}}
        with pytest.raises(ApiException) as forbidden:
            custom.create_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", "nlp-train", "podgroups", group)
        assert forbidden.value.status == 403 and "cannot create resource" in str(forbidden.value.body)
    message = refused(lambda: core.create_namespaced_pod(
        "nlp-train", pod(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}], gpus=0)))
    assert "gpugov-device-access" in message and "sets a device runtime variable" in message
    # the honest path: a class of nlp's queues
    assert core.create_namespaced_pod("nlp-train", pod("training-high")).spec.priority_class_name == "training-high"
