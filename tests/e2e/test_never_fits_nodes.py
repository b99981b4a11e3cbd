"""Issue #23 item 5 with the real Kueue and kube-scheduler: a pod larger than any node of its pool.

A tenant holds 16 H100s on a pool of 8-GPU nodes; one-pod Jobs asking 12 and 16 GPUs fit the quota.
Kueue keeps them pending (here its topology-aware scheduling excludes both nodes; without a
topology, or with the quota in use, it reads as a wait for quota: tests/unit/test_queueing_unit.py), a
wait as far as Kueue's words go. gpugov knows the nodes' size: `gpugov why` says each can never
start and exits 1. One living sandbox for the module.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kubernetes import client

from gpugov.app.pipeline import validate_repo
from gpugov.cluster.apply import apply_objects
from gpugov.compile import compile
from gpugov.sandbox import samples
from gpugov.sandbox.cluster import Sandbox
from gpugov.sandbox.nodes import create_gpu_operator_footprint, create_nodes
from gpugov.sandbox.simulated import simulated_nodes
from tests.e2e.conftest import SMALL_ORG_POLICIES

pytestmark = pytest.mark.e2e

ORG = {
    "hardware/wide.yaml": """\
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata: {name: wide}
spec:
  accelerator: {model: H100-80GB}
  acceleratorsPerNode: 8
  nodeResources: {cpu: 64, memory: 512Gi}
  nodes: [{name: wide-1}, {name: wide-2}]
""",
    "tenants/alpha.yaml": """\
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata: {name: alpha}
spec:
  owners: {users: [alpha@example.com]}
  costCenter: CC-alpha
  namespaces: [alpha]
  queues: [{name: main, namespace: alpha}]
  quotas:
    - pool: wide
      resources: {accelerators: 16}
""",
    "policies/org.yaml": SMALL_ORG_POLICIES,
}


@pytest.fixture(scope="module")
def cluster(sandbox_binaries, tmp_path_factory):
    root = tmp_path_factory.mktemp("wide")
    for rel, text in ORG.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    model = validate_repo(root).model
    assert model is not None
    with Sandbox() as sandbox:
        api = sandbox.cp.api_client()
        create_nodes(api, simulated_nodes(model), kwok=True)
        create_gpu_operator_footprint(api)
        assert not apply_objects(api, compile(model, backend="kueue")).missing
        yield root, sandbox.cp, api


def why(cp, root: Path, job: str, capsys) -> tuple[int, str]:
    from gpugov.cli import main

    code = main(["why", f"alpha/{job}", str(root), "--kubeconfig", str(cp.kubeconfig)])
    out, err = capsys.readouterr()
    assert err == "", err
    return code, " ".join(out.split())


def pending_message(api, job: str, timeout: float = 60) -> str:
    custom = client.CustomObjectsApi(api)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for wl in custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "alpha", "workloads")["items"]:
            owners = [o["name"] for o in wl["metadata"].get("ownerReferences") or []]
            conditions = {c["type"]: c for c in (wl.get("status") or {}).get("conditions") or []}
            reserved = conditions.get("QuotaReserved")
            if job in owners and reserved and reserved["status"] == "False" and reserved.get("message"):
                return reserved["message"]
        time.sleep(1)
    raise AssertionError(f"Kueue wrote no pending reason for {job} within {timeout}s")


@pytest.mark.parametrize("gpus", [12, 16])
def test_pods_larger_than_any_node_can_never_start(cluster, capsys, gpus: int) -> None:
    """Both fit alpha's 16 GPUs of quota; Kueue (its topology-aware scheduling sees the nodes) keeps them
    pending as a wait for room in the topology, which reads as something time resolves. gpugov: never."""
    root, cp, api = cluster
    job = f"wide-{gpus}"
    sample = samples.SampleJob("alpha", "alpha", job, "main", "alpha", "", "nvidia.com/gpu")
    client.BatchV1Api(api).create_namespaced_job("alpha", samples.job_manifest(sample, run_for=None, amount=gpus))
    message = pending_message(api, job)
    assert "nvidia.com/gpu" in message, message
    code, out = why(cp, root, job, capsys)
    assert code == 1, out
    assert (f"can never start: a pod of pod set main asks {gpus} nvidia.com/gpu, more than any node offers (pool "
            "wide: 8 per node); split it into pods of at most 8 nvidia.com/gpu") in out, out
    client.BatchV1Api(api).delete_namespaced_job(job, "alpha", propagation_policy="Background")
