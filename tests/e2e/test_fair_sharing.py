"""Fair-sharing weights on the real Kueue controller (fair sharing on, as gpugov's weights need),
with an organisation of its own on a sandbox of its own: two tenants of weights 3 and 1 share a
department's 8 GPUs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from gpugov.sandbox import samples
from tests.e2e.conftest import SMALL_ORG_POLICIES, own_org_sandbox

pytestmark = pytest.mark.e2e


def tenant(name: str, weight: int) -> str:
    return f"""\
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata: {{name: {name}}}
spec:
  department: lab
  owners: {{users: [{name}@example.com]}}
  costCenter: CC-{name}
  namespaces: [{name}]
  queues: [{{name: main, namespace: {name}}}]
  quotas:
    - pool: shared
      resources: {{accelerators: 0}}
  fairSharing: {{weight: {weight}}}
"""


ORG = {
    "policies/org.yaml": SMALL_ORG_POLICIES,
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
    "tenants/lab.yaml": """\
apiVersion: gpugov.io/v1alpha1
kind: Department
metadata: {name: lab}
spec:
  quotas:
    - pool: shared
      resources: {accelerators: 8}
""",
    "tenants/heavy.yaml": tenant("heavy", 3),
    "tenants/light.yaml": tenant("light", 1),
}


@pytest.fixture(scope="module")
def lab(sandbox_binaries: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[client.ApiClient]:
    with own_org_sandbox(tmp_path_factory.mktemp("fair-sharing"), ORG) as api:
        yield api


def submit(api: client.ApiClient, name: str, count: int) -> list[samples.SampleJob]:
    jobs = [samples.SampleJob(name, name, f"job-{i}", "main", name, "", "nvidia.com/gpu") for i in range(count)]
    for job in jobs:
        client.BatchV1Api(api).create_namespaced_job(name, samples.job_manifest(job, run_for=None))
    return jobs


def test_weights_share_a_contended_pool_three_to_one(lab: client.ApiClient) -> None:
    """tenants heavy (fairSharing.weight 3) and light (weight 1) borrow department lab's 8 GPUs.
    light takes all 8 first; when heavy asks for 8, fair-sharing preemption evicts light's jobs
    until the weighted shares balance: heavy runs 6, light 2 (equal weights would give 4 and 4)."""
    light = submit(lab, "light", 8)
    seen = samples.wait(lab, light, until="admitted", timeout=60)
    assert all(o.admitted for o in seen), samples.table(seen)
    heavy = submit(lab, "heavy", 8)
    deadline = time.monotonic() + 90
    counts = (0, 8)
    while time.monotonic() < deadline:
        counts = (sum(o.admitted for o in samples.observe(lab, heavy)),
                  sum(o.admitted for o in samples.observe(lab, light)))
        if counts == (6, 2):
            break
        time.sleep(1)
    assert counts == (6, 2), f"heavy, light admitted: {counts}"
