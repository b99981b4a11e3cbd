"""Flavor fungibility on the real Kueue controller, with an organisation of its own (two pools of
the same resource, one tenant holding nominal quota in both) on a sandbox of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gpugov.sandbox import samples
from tests.e2e.conftest import SMALL_ORG_POLICIES, own_org_sandbox
from tests.helpers.waiting import eventually, queues_count_their_workloads

pytestmark = pytest.mark.e2e

ORG = {
    "policies/org.yaml": SMALL_ORG_POLICIES,
    "hardware/pools.yaml": """\
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata: {name: first}
spec:
  accelerator: {model: H100-80GB}
  acceleratorsPerNode: 8
  nodeResources: {cpu: 64, memory: 512Gi}
  nodes: [{name: first-1}, {name: first-2}]
---
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata: {name: second}
spec:
  accelerator: {model: H100-80GB}
  acceleratorsPerNode: 8
  nodeResources: {cpu: 64, memory: 512Gi}
  nodes: [{name: second-1}]
""",
    "tenants/teams.yaml": """\
apiVersion: gpugov.io/v1alpha1
kind: Department
metadata: {name: lab}
spec: {}
---
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata: {name: alpha}
spec:
  department: lab
  owners: {users: [a@example.com]}
  costCenter: CC-1
  namespaces: [alpha]
  queues: [{name: main, namespace: alpha}]
  quotas:
    - pool: first
      resources: {accelerators: 8}
    - pool: second
      resources: {accelerators: 8}
---
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata: {name: beta}
spec:
  department: lab
  owners: {users: [b@example.com]}
  costCenter: CC-2
  namespaces: [beta]
  queues: [{name: main, namespace: beta}]
  quotas:
    - pool: first
      resources: {accelerators: 8}
""",
}


@pytest.fixture(scope="module")
def lab(sandbox_binaries: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[client.ApiClient]:
    with own_org_sandbox(tmp_path_factory.mktemp("fungibility"), ORG) as api:
        yield api


def _borrowed(api: client.ApiClient, queue: str) -> dict[str, Any]:
    status = client.CustomObjectsApi(api).get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", queue)
    return {f["name"]: {r["name"]: str(r.get("borrowed", "0")) for r in f["resources"]}
            for f in status.get("status", {}).get("flavorsUsage", [])}


def test_nominal_on_a_later_pool_before_borrowing_on_the_first(lab: client.ApiClient) -> None:
    """alpha holds 8 GPUs in `first` and 8 in `second`; beta's 8 in `first` are idle. alpha's
    second 8-GPU job could fit `first` only by borrowing beta's quota; with flavorFungibility
    whenCanBorrow: TryNextFlavor it takes alpha's own quota in `second` instead, and nothing is
    borrowed (Kueue's default, MayStopSearch, borrows in `first`)."""
    placed = []
    for index in range(2):
        job = samples.SampleJob("alpha", "alpha", f"job-{index}", "main", "alpha", "", "nvidia.com/gpu")
        client.BatchV1Api(lab).create_namespaced_job("alpha", samples.job_manifest(job, run_for=None, amount=8))
        seen = samples.wait(lab, [job], until="admitted", timeout=60)[0]
        assert seen.admitted, seen
        placed.append(seen.flavor)
    assert placed == ["first", "second"]
    # read once Kueue's status counts both jobs: a status from before the second says nothing borrowed either
    eventually(lambda: queues_count_their_workloads(lab), 30, "alpha's status counting both jobs")
    assert all(v == "0" for flavor in _borrowed(lab, "alpha").values() for v in flavor.values())
