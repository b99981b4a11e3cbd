"""The living sandbox behaves like a cluster: controllers reconcile, the scheduler binds,
KWOK runs and completes pods on the simulated GPU servers, and the real Kueue controller
admits Jobs through its webhooks, with its visibility API behind the apiserver.

One session-wide sandbox (``living``) with the example organisation's cluster ``east``
applied to it (``living_org``).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpugov.sandbox import samples
from gpugov.sandbox.cluster import Sandbox
from gpugov.sandbox.kwok import RUN_FOR_ANNOTATION
from tests.helpers.repos import REPO
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.e2e

KUEUE = ("kueue.x-k8s.io", "v1beta2")




@pytest.fixture(scope="module")
def org(living_org: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return living_org


@pytest.fixture
def api(living: Sandbox) -> client.ApiClient:
    return living.cp.api_client()


def test_every_component_runs_with_its_version(living: Sandbox) -> None:
    versions = {s.name: s.version for s in living.started}
    assert versions == {
        "kube-apiserver": "v1.36.3",
        "kube-controller-manager": "v1.36.3",
        "kube-scheduler": "v1.36.3",
        "kwok": "v0.8.0",
        "kueue": "v0.17.0",
    }
    assert living.problems() == []


def test_kueue_runs_against_its_own_crds_with_conversion_webhooks(api: client.ApiClient) -> None:
    crds = client.ApiextensionsV1Api(api)
    workloads = crds.read_custom_resource_definition("workloads.kueue.x-k8s.io")
    assert [v.name for v in workloads.spec.versions if v.storage] == ["v1beta2"]
    assert workloads.spec.conversion.strategy == "Webhook"
    assert workloads.spec.conversion.webhook.client_config.url.startswith("https://127.0.0.1:")
    # The v0.19-only field is absent: these are v0.17.0's CRDs, not the reference ones.
    cq = crds.read_custom_resource_definition("clusterqueues.kueue.x-k8s.io")
    v1beta2 = next(v for v in cq.spec.versions if v.name == "v1beta2")
    assert "concurrentAdmissionPolicy" not in json.dumps(api.sanitize_for_serialization(v1beta2.schema))


def test_nodes_are_ready_with_the_device_plugin_capacity(org: list[dict[str, Any]], api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)

    def ready_nodes() -> dict[str, Any] | None:
        nodes = {n.metadata.name: n for n in core.list_node().items}
        ready = all(any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or []) for n in nodes.values())
        return nodes if nodes and ready else None

    nodes = eventually(ready_nodes, what="every node Ready")
    assert nodes["h100-01"].status.allocatable["nvidia.com/gpu"] == "8"
    assert nodes["a100-01"].status.allocatable["nvidia.com/mig-1g.10gb"] == "56"
    assert nodes["h100-01"].metadata.labels["gpugov.io/pool"] == "h100"  # gpugov's node patch
    assert nodes["h100-01"].status.node_info.kubelet_version == "kwok-0.8.0"


def test_controllers_reconcile_quota_service_accounts_and_garbage(org: list[dict[str, Any]], api: client.ApiClient) -> None:
    """ResourceQuota status, the default ServiceAccount, and the garbage collector are real."""
    core = client.CoreV1Api(api)
    name = f"e2e-gc-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    core.create_namespaced_resource_quota(name, {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "3"}}})

    def quota_status() -> Any:
        quota = core.read_namespaced_resource_quota("q", name)
        return quota.status if quota.status and quota.status.hard == quota.spec.hard else None

    assert eventually(quota_status, what="ResourceQuota status.hard").used == {"pods": "0"}
    eventually(lambda: core.list_namespaced_service_account(name).items, what="default ServiceAccount")
    owner = core.create_namespaced_config_map(name, {"metadata": {"name": "owner"}})
    core.create_namespaced_config_map(
        name,
        {
            "metadata": {
                "name": "dependent",
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}],
            }
        },
    )
    core.delete_namespaced_config_map("owner", name)
    eventually(lambda: not core.list_namespaced_config_map(name, field_selector="metadata.name=dependent").items,
               what="dependent garbage-collected")
    core.delete_namespace(name)

    def namespace_gone() -> bool:
        try:
            core.read_namespace(name)
        except ApiException as exc:
            return exc.status == 404
        return False

    eventually(namespace_gone, what="namespace finalized by the namespace controller")


def test_agent_daemonset_rolls_out_on_the_gpu_nodes(org: list[dict[str, Any]], api: client.ApiClient) -> None:
    daemonsets = [o for o in org if o["kind"] == "DaemonSet"]
    if not daemonsets:
        pytest.skip("the example org declares no operations image, so compile emits no agent DaemonSet")
    apps = client.AppsV1Api(api)
    ds = daemonsets[0]

    def rolled_out() -> Any:
        status = apps.read_namespaced_daemon_set(ds["metadata"]["name"], ds["metadata"]["namespace"]).status
        return status if status.desired_number_scheduled and status.number_ready == status.desired_number_scheduled else None

    assert eventually(rolled_out, timeout=90, what="DaemonSet ready").number_ready >= 1


def test_job_is_admitted_bound_run_and_completed_freeing_quota(org: list[dict[str, Any]], api: client.ApiClient) -> None:
    """A Job with a queue label is suspended by Kueue's webhook, admitted to the tenant's
    flavor, bound by kube-scheduler to a node of that pool, completed by KWOK, and its
    quota is released."""
    sample = samples.SampleJob("speech", "speech", f"e2e-{uuid.uuid4().hex[:6]}", "default", "speech", "a100-mig",
                               "nvidia.com/mig-1g.10gb")
    manifest = samples.job_manifest(sample, run_for="3s")
    manifest["spec"]["suspend"] = False  # Kueue's mutating webhook must suspend it
    batch = client.BatchV1Api(api)
    created = batch.create_namespaced_job(sample.namespace, manifest)
    assert created.spec.suspend is True

    seen = samples.wait(api, [sample], until="finished", timeout=90)[0]
    assert seen.finished, seen
    assert seen.flavor == "a100-mig"
    node = client.CoreV1Api(api).read_node(seen.node)
    assert node.metadata.labels["gpugov.io/pool"] == "a100-mig"

    custom = client.CustomObjectsApi(api)

    def released() -> bool:
        cq = custom.get_cluster_custom_object(*KUEUE, "clusterqueues", "speech")
        usage = cq.get("status", {}).get("flavorsUsage", [])
        return all(str(r.get("total", "0")) == "0" for f in usage for r in f.get("resources", []))

    eventually(released, what="ClusterQueue usage back to 0")


def test_pending_workloads_through_the_visibility_api(
    org: list[dict[str, Any]], api: client.ApiClient, living: Sandbox
) -> None:
    """A job beyond the tenant's quota waits, and the aggregated visibility API lists it."""
    too_big = samples.SampleJob("speech", "speech", f"e2e-big-{uuid.uuid4().hex[:6]}", "default", "speech", "a100-mig",
                                "nvidia.com/mig-1g.10gb")
    manifest = samples.job_manifest(too_big, run_for="1s")
    manifest["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"nvidia.com/mig-1g.10gb": "1000"},
        "limits": {"nvidia.com/mig-1g.10gb": "1000"},
    }
    batch = client.BatchV1Api(api)
    batch.create_namespaced_job(too_big.namespace, manifest)
    try:
        def listed() -> list[dict[str, Any]] | None:
            path = "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/speech/pendingworkloads"
            response = json.loads(living.cp.get(path))
            items = [w for w in response.get("items", []) if too_big.name in w["metadata"]["name"]]
            return items or None

        pending = eventually(listed, what="the workload in pendingworkloads")
        assert pending[0]["localQueueName"] == "default"
        assert pending[0]["positionInClusterQueue"] == 0
        seen = eventually(lambda: next((o for o in samples.observe(api, [too_big]) if "insufficient" in o.reason), None),
                          what="Kueue's reason for the wait")
        assert not seen.admitted
    finally:
        batch.delete_namespaced_job(too_big.name, too_big.namespace, propagation_policy="Background")


def test_every_tenant_sample_is_admitted_to_its_own_pool(org: list[dict[str, Any]], api: client.ApiClient) -> None:
    """`gpugov sandbox jobs`: one Job per tenant, each admitted to the pool of its first quota."""
    jobs = samples.sample_jobs(org)
    assert {j.tenant for j in jobs} == {"data-platform", "inference", "nlp", "speech", "vision"}
    samples.submit(api, jobs, run_for="2s")
    seen = samples.wait(api, jobs, until="finished", timeout=120)
    assert [(o.job.tenant, o.flavor, o.finished) for o in seen] == [(j.tenant, j.flavor, True) for j in jobs], (
        samples.table(seen)
    )
    # MIG slices land on MIG nodes, whole GPUs on nodes that offer whole GPUs
    core = client.CoreV1Api(api)
    for o in seen:
        allocatable = core.read_node(o.node).status.allocatable
        assert int(allocatable.get(o.job.resource, "0")) > 0, (o.job.tenant, o.node, o.job.resource)


def test_pod_without_run_for_keeps_running(org: list[dict[str, Any]], api: client.ApiClient) -> None:
    """KWOK completes only pods that say how long they run; others run like services."""
    core = client.CoreV1Api(api)
    name = f"e2e-svc-{uuid.uuid4().hex[:6]}"
    pod = {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": samples.IMAGE}], "tolerations": [{"operator": "Exists"}]},
    }
    core.create_namespaced_pod("default", pod)
    eventually(lambda: core.read_namespaced_pod(name, "default").status.phase == "Running", what="pod Running")
    time.sleep(3)
    assert core.read_namespaced_pod(name, "default").status.phase == "Running"
    assert RUN_FOR_ANNOTATION not in (core.read_namespaced_pod(name, "default").metadata.annotations or {})
    core.delete_namespaced_pod(name, "default")


def test_drift_counts_kueue_admitted_job_pods_as_queued(
    org: list[dict[str, Any]], api: client.ApiClient, living: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Job's pods carry no queue-name label (Kueue labels the Job); once Kueue admits the
    workload it labels them with their LocalQueue. Drift must not call them queue bypasses
    (GD021), which it did for every admitted Job before."""
    from gpugov.cli import main

    jobs = samples.sample_jobs(org)
    samples.submit(api, jobs, run_for="120s")
    seen = samples.wait(api, jobs, until="admitted", timeout=60)
    assert all(o.admitted for o in seen), samples.table(seen)
    core = client.CoreV1Api(api)
    eventually(lambda: all(core.list_namespaced_pod(j.namespace, label_selector=f"job-name={j.name}").items
                           for j in jobs), what="the sample pods")
    capsys.readouterr()
    main(["drift", str(REPO), "--cluster", "east", "--kubeconfig", str(living.cp.kubeconfig), "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert [f for f in report["findings"] if f["rule"] == "GD021"] == []
    for job in jobs:
        client.BatchV1Api(api).delete_namespaced_job(job.name, job.namespace, propagation_policy="Background")
