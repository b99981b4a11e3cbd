"""The Done-when cluster on a real control plane: Kueue admits each vendor's resource names to the
right pool and kube-scheduler places the pods on that pool's simulated servers.

A living sandbox of its own (kube-apiserver, controllers, scheduler, KWOK, the real Kueue) with the
base org plus tests/examples/positive/production-mix: A100, H800 (MIG), A800, A10 shared through HAMi,
L20, L40S, an Ascend 910B pool with static vNPUs and a declared Biren-BR104 model.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from gpugov.sandbox import ToolUnavailableError
from gpugov.sandbox.samples import SampleJob, job_manifest, wait
from gpugov.sandbox.tools import TOOL_OF, tool_binary
from tests.e2e.conftest import own_org_sandbox, skip_or_fail
from tests.helpers.repos import BASE, EXAMPLES

pytestmark = pytest.mark.e2e

MIXED = EXAMPLES / "positive" / "production-mix"
# (tenant, job, the resources its pod asks for, the pool Kueue must admit it to, the nodes it may run on)
JOBS = [
    ("serving", "vgpu", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4096", "nvidia.com/gpucores": "25"}, "a10-shared",
     {"a10-a", "a10-b", "a10-c", "a10-d"}),
    ("serving", "vnpu", {"huawei.com/Ascend910-10c.3cpu.32g": "1"}, "ascend", {"ascend-a", "ascend-b"}),
    ("serving", "mig", {"nvidia.com/mig-3g.40gb": "1"}, "h800", {"h800-a"}),
    ("serving", "declared", {"birentech.com/gpu": "2"}, "biren", {"biren-a"}),
    ("training", "npu", {"huawei.com/Ascend910": "8"}, "ascend", {"ascend-c", "ascend-d"}),
    ("training", "gpu", {"nvidia.com/gpu": "8"}, "h800", {"h800-b", "h800-c"}),
]


def _files(*trees: Path) -> dict[str, str]:
    files: dict[str, str] = {}
    for tree in trees:
        for path in sorted(tree.rglob("*.yaml")):
            files[path.relative_to(tree).as_posix()] = path.read_text(encoding="utf-8")
    return files


def test_each_vendors_resources_are_admitted_to_their_pool(tmp_path: Path) -> None:
    try:
        for name in TOOL_OF:
            tool_binary(name)
    except ToolUnavailableError as exc:
        skip_or_fail(f"e2e: the living sandbox's binaries are missing: {exc}")
    with own_org_sandbox(tmp_path / "org", _files(BASE, MIXED)) as api:
        batch = client.BatchV1Api(api)
        samples = []
        for tenant, job, resources, _, _ in JOBS:
            sample = SampleJob(tenant, tenant, f"{job}-{tenant}", "main", tenant, "", next(iter(resources)))
            manifest = job_manifest(sample, "5s")
            container = manifest["spec"]["template"]["spec"]["containers"][0]
            requests = {**resources, "cpu": "1", "memory": "1Gi"}
            container["resources"] = {"requests": requests, "limits": requests}
            batch.create_namespaced_job(tenant, manifest)
            samples.append(sample)
        seen = wait(api, samples, until="finished", timeout=180)
        for observed, (_, job, _, pool, nodes) in zip(seen, JOBS, strict=True):
            assert observed.finished, f"{job}: {observed}"
            assert observed.flavor == pool, f"{job}: admitted to {observed.flavor}, not {pool}"
            assert observed.node in nodes, f"{job}: ran on {observed.node}, not on {sorted(nodes)}"
