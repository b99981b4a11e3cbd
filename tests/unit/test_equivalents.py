"""Issue #23 item 3: every unit gpugov accepts (whole devices, MIG, Ascend vNPU, HAMi) converts into
device equivalents, for the quota guardrail (GP007) and for usage's rates and costs."""

from __future__ import annotations

import shutil
from decimal import Decimal
from pathlib import Path

from gpugov.app.pipeline import validate_repo
from gpugov.declarations.equivalents import device_equivalents, equivalents_of
from gpugov.usage.ledger import rate_of
from tests.helpers.repos import BASE, write
from tests.unit.test_plan import edit, make_repo, plan_json

ASCEND = """\
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata:
  name: ascend
spec:
  cluster: lab
  accelerator: {model: Ascend-910B}
  acceleratorsPerNode: 8
  nodeResources: {cpu: 192, memory: 1536Gi}
  pricePerAcceleratorHour: "2.40"
  vnpuLayouts:
    half: {vir10_3c_32g: 2}
  nodes:
""" + "".join(f"    - {{name: ascend-{i:02d}, vnpuLayout: half}}\n" for i in range(1, 11))

GAMMA = """\
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata:
  name: gamma
spec:
  department: rnd
  owners: {users: [g@example.com]}
  costCenter: CC-3
  namespaces: [gamma]
  queues: [{name: main, namespace: gamma, priorityClasses: [batch]}]
  quotas:
    - pool: ascend
      resources: {vir10_3c_32g: 8}
"""


def with_ascend(repo: Path) -> None:
    write(repo, "hardware/ascend.yaml", ASCEND)
    write(repo, "tenants/gamma.yaml", GAMMA)


def test_a_vnpu_quota_raise_counts_against_the_guardrail(tmp_path: Path, capsys) -> None:
    """8 -> 160 vir10_3c_32g: 152 half-NPUs are 76 NPUs, far above the guardrail of 4."""
    repo = make_repo(tmp_path, lambda r: edit(r, "tenants/gamma.yaml", "vir10_3c_32g: 8", "vir10_3c_32g: 160"),
                     prepare=with_ascend)
    (approval,) = [r for r in plan_json(capsys, repo)["risks"] if r["id"] == "needs-approval"]
    assert approval["message"] == (
        "accelerator quotas move by 76 GPU equivalents in total (whole devices 0, MIG slices 0, vNPUs 76), above the "
        "guardrail of 4 per pull request: needs approval from @lab/platform")
    assert "not counted" not in approval["message"]


def test_a_small_vnpu_raise_stays_under_the_guardrail(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path, lambda r: edit(r, "tenants/gamma.yaml", "vir10_3c_32g: 8", "vir10_3c_32g: 16"),
                     prepare=with_ascend)
    assert "needs-approval" not in [r["id"] for r in plan_json(capsys, repo)["risks"]]  # 4 NPUs: at the limit


def test_vnpu_templates_have_device_equivalents_and_rates(tmp_path: Path) -> None:
    repo = tmp_path / "org"
    shutil.copytree(BASE, repo)
    with_ascend(repo)
    model = validate_repo(repo).model
    assert model is not None
    pool = model.pools["ascend"]
    weights = device_equivalents(pool)
    assert weights["huawei.com/Ascend910"] == 1
    assert weights["huawei.com/Ascend910-10c.3cpu.32g"] == Decimal("0.5")  # 32 of 64 GiB
    assert weights["huawei.com/Ascend910-5c.1cpu.16g"] == Decimal("0.25")
    assert rate_of(pool, "huawei.com/Ascend910-10c.3cpu.32g") == Decimal("1.2")  # half of 2.40 an NPU-hour
    assert rate_of(pool, "huawei.com/Ascend910") == Decimal("2.4")


HAMI = """\
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata:
  name: shared
spec:
  cluster: lab
  accelerator: {model: A10}
  acceleratorsPerNode: 8
  nodeResources: {cpu: 128, memory: 1Ti}
  pricePerAcceleratorHour: "3.00"
  sharing:
    hami: {deviceSplitCount: 10}
  nodes: [{name: shared-1}]
"""


def test_hami_units_are_views_of_the_same_devices(tmp_path: Path) -> None:
    repo = tmp_path / "org"
    shutil.copytree(BASE, repo)
    write(repo, "hardware/shared.yaml", HAMI)
    model = validate_repo(repo).model
    assert model is not None
    pool = model.pools["shared"]
    per_device = pool.hami_device_units
    weights = device_equivalents(pool)
    count, memory, cores = pool.hami_units.count, pool.hami_units.memory, pool.hami_units.cores
    assert weights[count] == Decimal("0.1")  # a vGPU slot: 1/deviceSplitCount
    assert weights[memory] * per_device[memory] == 1 and weights[cores] * per_device[cores] == 1
    # 10 vGPUs holding half of 8 devices' memory: the largest view, 4 devices, never the sum.
    amounts = {count: Decimal(10), memory: per_device[memory] * 4, cores: per_device[cores] * 2}
    assert equivalents_of(pool, amounts) == (Decimal(4), frozenset())
    assert rate_of(pool, count) == Decimal("0.3")  # a vGPU slot is charged; memory and cores are views
    assert rate_of(pool, memory) is None and rate_of(pool, cores) is None
