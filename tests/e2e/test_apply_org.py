"""The example organisation, compiled for both backends, applied to a real API server.

Server-side apply through the kubernetes client (field manager gpugov); every compiled
object must then be found on the server, the hardware (simulated GPU servers with GFD
labels, capacity and allocatable) must carry gpugov's node patches, and a second apply
must change nothing.
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from gpugov.app.pipeline import validate_repo
from gpugov.cluster.apply import apply_objects
from gpugov.compile import compile
from gpugov.sandbox.nodes import create_nodes
from gpugov.sandbox.simulated import simulated_nodes
from tests.helpers.repos import REPO
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def org(api_client: client.ApiClient):
    model = validate_repo(REPO).model
    assert model is not None
    create_nodes(api_client, simulated_nodes(model))
    # Namespaces of what gpugov configures but does not install: the GPU Operator's (the mig-parted
    # ConfigMap) and Volcano's (the scheduler ConfigMap compile writes for a Volcano cluster)
    for namespace in ("gpu-operator", "volcano-system"):
        try:
            client.CoreV1Api(api_client).create_namespace({"metadata": {"name": namespace}})
        except ApiException as exc:
            if exc.status != 409:
                raise
    return model


@pytest.mark.parametrize(("cluster", "backend"), [("east", "kueue"), ("west", "volcano"), ("east", "volcano")])
def test_apply_finds_every_object_and_is_idempotent(api_client, org, cluster: str, backend: str) -> None:
    objects = compile(org, backend=backend, cluster=cluster)
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
    apply_objects(api_client, compile(org, backend="kueue", cluster="east"))
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
    apply_objects(api_client, compile(org, backend="kueue", cluster="east"))
    taints = {(t.key, t.value, t.effect) for t in core.read_node("h100-02").spec.taints or []}
    assert ("maintenance", "planned", "PreferNoSchedule") in taints
    assert ("gpugov.io/pool", "h100", "NoSchedule") in taints
    apply_objects(api_client, compile(org, backend="kueue", cluster="east"))  # and again: nothing piles up
    again = [(t.key, t.value, t.effect) for t in core.read_node("h100-02").spec.taints or []]
    assert sorted(again) == sorted(taints)


# -- prune: what is no longer declared ----------------------------------------------------------
#
# Its own API server: prune removes every object gpugov owns that this org does not declare, so it
# must not see what the tests above apply for the other clusters and backends.

FINALIZER = "kueue.x-k8s.io/resource-in-use"  # what Kueue's webhook puts on every ClusterQueue


@pytest.fixture(scope="module")
def pruned_org(controlplane_binary_path, tmp_path_factory):
    from gpugov.sandbox import ControlPlane
    from gpugov.sandbox.nodes import create_gpu_operator_footprint

    root = tmp_path_factory.mktemp("org")
    for folder in ("tenants", "policies", "hardware"):
        shutil.copytree(REPO / folder, root / folder)
    with ControlPlane(binary=controlplane_binary_path) as cp:
        api = cp.api_client()
        create_nodes(api, simulated_nodes(validate_repo(root).model, "east"))
        create_gpu_operator_footprint(api)
        yield root, cp


def gpugov_apply(cp, root, capsys, *extra: str) -> tuple[int, list[str]]:
    from gpugov.cli import main

    code = main(["apply", str(root), "--cluster", "east", "--kubeconfig", str(cp.kubeconfig), *extra])
    out, err = capsys.readouterr()
    assert err == "", err
    return code, out.splitlines()


def rows(lines: list[str], verb: str) -> set[str]:
    """`Kind namespace/name` of the listing rows that start with `verb`."""
    words = verb.split()
    return {" ".join(line.split()[len(words):len(words) + 2]).rstrip(":") for line in lines
            if line.split()[:len(words)] == words}


def test_apply_prunes_a_removed_tenant_and_releases_a_removed_node(pruned_org, capsys) -> None:
    root, cp = pruned_org
    api = cp.api_client()
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    code, lines = gpugov_apply(cp, root, capsys)
    assert code == 0 and lines[-1] == "nothing to prune: every object labelled managed-by gpugov is declared"
    # What others do to the objects, which prune must leave alone: an admin's taint and label, a
    # ConfigMap someone labelled managed-by gpugov by hand (gpugov's field manager never wrote it).
    admin_taint = {"key": "maintenance", "value": "planned", "effect": "PreferNoSchedule"}
    taints = [t.to_dict() for t in core.read_node("h100-06").spec.taints or []]
    core.patch_node("h100-06", {"spec": {"taints": [{k: v for k, v in t.items() if v is not None} for t in taints]
                                         + [admin_taint]}})
    core.patch_namespace("vision", {"metadata": {"labels": {"team": "vision"}}})
    core.create_namespaced_config_map("vision", {"metadata": {"name": "by-hand", "labels": {
        "app.kubernetes.io/managed-by": "gpugov"}}})
    custom.patch_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "vision",
                                       {"metadata": {"finalizers": [FINALIZER]}})

    (root / "tenants" / "vision.yaml").unlink()
    pool = root / "hardware" / "h100.yaml"
    node_06 = "    - name: h100-06\n      labels: {topology.gpugov.io/block: b1, topology.gpugov.io/rack: r2}\n"
    assert node_06 in pool.read_text()
    pool.write_text(pool.read_text().replace(node_06, ""))
    deleted = {"ClusterQueue vision", "Cohort research-vision", "LocalQueue vision/training",
               "RoleBinding vision/gpugov-tenant-owners", "RoleBinding vision/gpugov-tenant-members",
               "RoleBinding vision/gpugov-tenant-viewers", "ClusterRoleBinding gpugov-tenant-vision"}
    released = {"Namespace vision", "Node h100-06"}

    code, lines = gpugov_apply(cp, root, capsys, "--dry-run")
    assert code == 0 and lines[-1].endswith("7 would be deleted and 2 released; nothing was changed")
    assert rows(lines, "would delete") == deleted and rows(lines, "would release") == released
    (queue_row,) = [line for line in lines if "would delete" in line and "ClusterQueue" in line]
    assert "stopPolicy HoldAndDrain first" in queue_row
    (node_row,) = [line for line in lines if "would release" in line and "h100-06" in line]
    assert "gpugov.io/pool" in node_row and "topology.gpugov.io/rack" in node_row
    assert "taints gpugov.io/pool=h100:NoSchedule" in node_row
    queue = custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "vision")
    assert queue["spec"]["stopPolicy"] == "None" and "deletionTimestamp" not in queue["metadata"]  # untouched
    assert core.read_node("h100-06").metadata.labels["gpugov.io/pool"] == "h100"

    code, lines = gpugov_apply(cp, root, capsys)
    assert code == 0, lines
    assert rows(lines, "deleted") == deleted - {"ClusterQueue vision"}
    assert rows(lines, "deleting") == {"ClusterQueue vision"}  # the finalizer holds it, drained
    assert rows(lines, "released") == released
    assert lines[-1] == "pruned what gpugov no longer declares: 6 deleted, 1 deleting, 2 released"
    queue = custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "vision")
    assert queue["spec"]["stopPolicy"] == "HoldAndDrain" and queue["metadata"]["deletionTimestamp"]
    custom.patch_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "vision",
                                       {"metadata": {"finalizers": None}})  # what Kueue does once drained
    with pytest.raises(ApiException) as gone:
        custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "vision")
    assert gone.value.status == 404

    namespace = core.read_namespace("vision").metadata
    assert namespace.labels.get("team") == "vision" and "app.kubernetes.io/managed-by" not in namespace.labels
    assert "gpugov.io/tenant" not in namespace.labels and "gpugov.io/source" not in (namespace.annotations or {})
    assert core.read_namespaced_config_map("by-hand", "vision")  # labelled by hand: never gpugov's
    node = core.read_node("h100-06")
    labels = node.metadata.labels
    assert not {"gpugov.io/pool", "topology.gpugov.io/block", "topology.gpugov.io/rack",
                "app.kubernetes.io/managed-by"} & set(labels)
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"  # the hardware's own labels stay
    assert "gpugov.io/taints" not in (node.metadata.annotations or {})
    node_taints = {(t.key, t.value, t.effect) for t in node.spec.taints or []}
    assert ("maintenance", "planned", "PreferNoSchedule") in node_taints
    assert not any(key == "gpugov.io/pool" for key, _, _ in node_taints)
    assert core.read_node("h100-05").metadata.labels["gpugov.io/pool"] == "h100"  # still declared

    code, lines = gpugov_apply(cp, root, capsys)
    assert code == 0 and lines[-1] == "nothing to prune: every object labelled managed-by gpugov is declared"


def test_no_prune_keeps_what_is_no_longer_declared(pruned_org, capsys) -> None:
    root, cp = pruned_org
    core = client.CoreV1Api(cp.api_client())
    core.create_namespaced_config_map("gpugov-system", {"metadata": {"name": "leftover"}})
    leftover = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "leftover", "namespace": "gpugov-system", "labels": {"app.kubernetes.io/managed-by": "gpugov"}}}
    dynamic = DynamicClient(cp.api_client())
    dynamic.server_side_apply(dynamic.resources.get(api_version="v1", kind="ConfigMap"), body=leftover,
                              namespace="gpugov-system", field_manager="gpugov")
    code, lines = gpugov_apply(cp, root, capsys, "--no-prune")
    assert code == 0 and not rows(lines, "deleted")
    assert core.read_namespaced_config_map("leftover", "gpugov-system")
    code, lines = gpugov_apply(cp, root, capsys, "--dry-run", "--no-prune")
    assert lines[-1].endswith("nothing would be pruned (--no-prune); nothing was changed")
    code, lines = gpugov_apply(cp, root, capsys)
    assert rows(lines, "deleted") == {"ConfigMap gpugov-system/leftover"}


# -- prune with the real Kueue controller: a removed tenant's admitted work is drained ------------

def small_tenant(name: str) -> str:
    return f"""\
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata: {{name: {name}}}
spec:
  owners: {{users: [{name}@example.com]}}
  costCenter: CC-{name}
  namespaces: [{name}]
  queues: [{{name: main, namespace: {name}}}]
  quotas:
    - pool: shared
      resources: {{accelerators: 4}}
"""


SMALL_ORG = {
    "hardware/shared.yaml": """\
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata: {name: shared}
spec:
  accelerator: {model: H100-80GB}
  acceleratorsPerNode: 8
  nodeResources: {cpu: 64, memory: 512Gi}
  nodes: [{name: shared-1}]
""",
    "tenants/stays.yaml": small_tenant("stays"),
    "tenants/leaves.yaml": small_tenant("leaves"),
}


def test_a_removed_tenants_admitted_work_is_drained_and_its_queue_goes(sandbox_binaries, tmp_path) -> None:
    """Kueue's finalizer keeps a ClusterQueue while it has admitted workloads: prune sets
    HoldAndDrain first, so Kueue evicts the running Job, waits for the queue to be empty and
    only then deletes it, so the finalizer is lifted when Kueue next reconciles it (prune waits
    for that)."""
    from gpugov.cluster.prune import prune, prune_plan
    from gpugov.sandbox import samples
    from tests.e2e.conftest import SMALL_ORG_POLICIES, own_org_sandbox

    with own_org_sandbox(tmp_path, {**SMALL_ORG, "policies/org.yaml": SMALL_ORG_POLICIES}) as api:
        custom = client.CustomObjectsApi(api)
        queue = custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "leaves")
        assert FINALIZER in queue["metadata"]["finalizers"]  # Kueue's webhook put it there
        job = samples.SampleJob("leaves", "leaves", "train", "main", "leaves", "", "nvidia.com/gpu")
        client.BatchV1Api(api).create_namespaced_job("leaves", samples.job_manifest(job, run_for=None))
        (seen,) = samples.wait(api, [job], until="admitted", timeout=60)
        assert seen.admitted, samples.table([seen])

        (tmp_path / "tenants" / "leaves.yaml").unlink()
        objects = compile(validate_repo(tmp_path).model, backend="kueue")
        assert not apply_objects(api, objects).missing
        plan = prune_plan(api, objects)
        assert {(p.action, p.label) for p in plan} >= {("delete", "ClusterQueue leaves"),
                                                       ("delete", "LocalQueue leaves/main"),
                                                       ("release", "Namespace leaves")}
        outcomes = {p.item.label: p for p in prune(api, plan, drain_timeout=90)}

        def evicted() -> dict[str, Any] | None:
            """The Workload's conditions once Kueue has written its eviction (it does so asynchronously)."""
            (workload,) = custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "leaves",
                                                               "workloads")["items"]
            found = {c["type"]: c for c in workload["status"]["conditions"]}
            return found if "Evicted" in found else None

        conditions = eventually(evicted, timeout=60, what=f"the Workload evicted after prune ({outcomes})")
        assert (conditions["Evicted"]["status"], conditions["Evicted"]["reason"]) == ("True", "ClusterQueueStopped")
        queue_outcome = outcomes["ClusterQueue leaves"]
        if conditions["QuotaReserved"]["status"] == "False":  # Kueue finished evicting within the wait
            assert queue_outcome.outcome == "deleted", queue_outcome
            with pytest.raises(ApiException) as gone:
                custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "leaves")
            assert gone.value.status == 404
        else:  # the eviction outlasted the wait: deleted anyway, held, and said so
            assert queue_outcome.outcome == "deleting" and FINALIZER in queue_outcome.note
        assert client.BatchV1Api(api).read_namespaced_job("train", "leaves").spec.suspend is True
        assert client.CoreV1Api(api).read_namespace("leaves").status.phase == "Active"  # released, kept
        stays = custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "stays")
        assert "deletionTimestamp" not in stays["metadata"]
