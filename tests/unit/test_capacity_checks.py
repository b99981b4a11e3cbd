"""Capacity checks: findings where the change is (GG030 on each contributing quota), and exact
conversion of fractional units (HAMi memory and compute, MIG, vNPU) against whole devices."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.cli import main
from tests.helpers.repos import overlay_repo, write

A10_POOL = """\
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata:
  name: a10
spec:
  cluster: lab
  accelerator: {{model: A10}}
  acceleratorsPerNode: 2
  nodeResources: {{cpu: 32, memory: 256Gi}}
  sharing:
    hami: {hami}
  nodes:
    - name: a10-a
    - name: a10-b
"""
TENANT = """\
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata:
  name: {name}
spec:
  department: rnd
  owners: {{users: [{name}@example.com]}}
  costCenter: CC-{name}
  namespaces: [{name}]
  quotas:
    - pool: {pool}
      resources: {resources}
"""


def repo(tmp_path: Path, hami: str = "{deviceSplitCount: 10}", **tenants: str) -> Path:
    """The base org plus a HAMi-shared A10 pool (4 cards of 24Gi) and tenants with quota on it."""
    root = overlay_repo(tmp_path)
    write(root, "hardware/a10.yaml", A10_POOL.format(hami=hami))
    for name, resources in tenants.items():
        write(root, f"tenants/{name}.yaml", TENANT.format(name=name, pool="a10", resources=resources))
    return root


def findings(root: Path) -> list[tuple[str, str, int]]:
    return [(f.rule, f.location.file, f.location.line) for f in validate_repo(root).findings if f.location]


def test_hami_pool_capacity_is_per_card_units(tmp_path: Path) -> None:
    model = validate_repo(repo(tmp_path)).model
    assert model is not None
    pool = model.pools["a10"]
    assert pool.capacity["nvidia.com/gpu"] == 40  # 4 cards x deviceSplitCount 10
    assert pool.capacity["nvidia.com/gpumem"] == 4 * 24 * 1024  # MiB
    assert pool.capacity["nvidia.com/gpucores"] == 400


def test_scaling_and_nvml_memory_are_applied_and_rounded_down(tmp_path: Path) -> None:
    root = repo(tmp_path, "{deviceSplitCount: 4, deviceMemoryScaling: 1.5, deviceCoreScaling: 2, deviceMemory: 22731Mi}")
    pool = validate_repo(root).model.pools["a10"]
    assert pool.capacity["nvidia.com/gpu"] == 16
    assert pool.capacity["nvidia.com/gpumem"] == 4 * 34096  # floor(22731 x 1.5) per card
    assert pool.capacity["nvidia.com/gpucores"] == 800


@pytest.mark.parametrize(("memory", "units"), [("40Gi", 40960), ("1536Mi", 1536), ("1.5Gi", 1536), ("2Gi", 2048)])
def test_accelerator_memory_converts_exactly_to_the_plugins_unit(tmp_path: Path, memory: str, units: int) -> None:
    root = repo(tmp_path, gamma=f"{{accelerators: 4, acceleratorMemory: {memory}}}")
    result = validate_repo(root)
    assert result.findings == []
    (rq,) = [rq for rq in result.model.tenants["gamma"].quotas[0].resources if rq.key == "acceleratorMemory"]
    assert rq.resource == "nvidia.com/gpumem" and rq.nominal == units


def test_memory_that_is_not_a_whole_unit_is_refused(tmp_path: Path) -> None:
    root = repo(tmp_path, gamma="{accelerators: 1, acceleratorMemory: 1000}")  # bytes, not MiB
    result = validate_repo(root)
    (finding,) = result.findings
    assert finding.rule == "GG037" and "units of 1Mi" in finding.message
    assert (finding.location.file, finding.location.line) == ("tenants/gamma.yaml", 12)


def test_whole_cards_and_fractions_are_checked_against_the_same_memory(tmp_path: Path) -> None:
    """3 whole cards hold 3 x 24Gi of gpumem; with 24Gi more the 4 cards are full, 1Mi more is over."""
    full = repo(tmp_path / "full", gamma="{accelerators: 3}", delta="{accelerators: 4, acceleratorMemory: 24Gi}")
    assert validate_repo(full).findings == []
    over = repo(tmp_path / "over", gamma="{accelerators: 3}", delta="{accelerators: 4, acceleratorMemory: 24577Mi}")
    result = validate_repo(over)
    assert {(f.rule, f.location.file) for f in result.findings} == {
        ("GG030", "tenants/gamma.yaml"), ("GG030", "tenants/delta.yaml")}
    gamma = next(f for f in result.findings if f.location.file == "tenants/gamma.yaml")
    assert gamma.message.startswith("tenant 'gamma' holds 72Gi (its accelerators are whole devices) of pool 'a10' "
                                    "nvidia.com/gpumem, whose nominal quotas add up to 98305Mi; capacity is 96Gi")
    assert "(gamma 72Gi, delta 24577Mi)" in gamma.message


def test_whole_cards_hold_their_compute_unless_cores_are_declared(tmp_path: Path) -> None:
    over = repo(tmp_path / "over", gamma="{accelerators: 3}", delta="{accelerators: 2, acceleratorMemory: 1Gi, "
                "acceleratorCores: 101}")
    assert [(f.rule, f.message.split(" of pool")[0]) for f in validate_repo(over).findings] == [
        ("GG030", "tenant 'delta' holds 101"), ("GG030", "tenant 'gamma' holds 300 (its accelerators are whole devices)")]
    # a tenant that declares memory but no cores is guaranteed no compute (HAMi gpucores default 0: shared)
    fits = repo(tmp_path / "fits", gamma="{accelerators: 3}", delta="{accelerators: 2, acceleratorMemory: 1Gi}")
    assert validate_repo(fits).findings == []


def test_hami_units_need_a_hami_pool(tmp_path: Path) -> None:
    root = overlay_repo(tmp_path)
    write(root, "tenants/gamma.yaml", TENANT.format(name="gamma", pool="h100", resources="{acceleratorMemory: 8Gi}"))
    (finding,) = validate_repo(root).findings
    assert finding.rule == "GG033" and "not shared through HAMi" in finding.message


def test_over_capacity_points_at_every_contributing_quota(tmp_path: Path) -> None:
    """A pull request that raises one tenant gets the annotation on that tenant's line, the pool related."""
    root = overlay_repo(tmp_path)
    write(root, "tenants/gamma.yaml", TENANT.format(name="gamma", pool="h100", resources="{accelerators: 1}"))
    result = validate_repo(root)
    assert sorted(findings(root)) == [("GG030", "tenants/alpha.yaml", 15), ("GG030", "tenants/beta.yaml", 15),
                                      ("GG030", "tenants/gamma.yaml", 12)]
    for finding in result.findings:
        assert [str(r) for r in finding.related] == ["hardware/h100.yaml:4:9"]
        assert "(alpha 8, beta 8, gamma 1)" in finding.message
    gamma = next(f for f in result.findings if f.location.file == "tenants/gamma.yaml")
    assert gamma.message.startswith("tenant 'gamma' holds 1 of pool 'h100' nvidia.com/gpu, whose nominal quotas add "
                                    "up to 17; capacity is 16 x ratio")


def test_github_annotation_lands_on_the_changed_file(tmp_path: Path, capsys) -> None:
    root = overlay_repo(tmp_path)
    write(root, "tenants/gamma.yaml", TENANT.format(name="gamma", pool="h100", resources="{accelerators: 1}"))
    assert main(["validate", str(root), "--format", "github"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("::error file=tenants/gamma.yaml,line=12,col=33,title=GG030::tenant 'gamma'")
               for line in lines)
    assert not any("file=hardware/" in line for line in lines)


def test_department_quotas_contribute_too(tmp_path: Path) -> None:
    root = overlay_repo(tmp_path)
    write(root, "tenants/departments.yaml", """\
apiVersion: gpugov.io/v1alpha1
kind: Department
metadata:
  name: rnd
spec:
  quotas:
    - pool: h100
      resources: {accelerators: 2}
""")
    messages = {f.location.file: f.message for f in validate_repo(root).findings}
    assert messages["tenants/departments.yaml"].startswith("department 'rnd' holds 2 of pool 'h100'")


def test_vnpu_quota_is_checked_per_template(tmp_path: Path) -> None:
    root = overlay_repo(tmp_path)
    write(root, "hardware/ascend.yaml", """\
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata:
  name: ascend
spec:
  cluster: lab
  accelerator: {model: Ascend-910B}
  acceleratorsPerNode: 8
  nodeResources: {cpu: 192, memory: 1536Gi}
  vnpuLayouts:
    quarters: {vir05_1c_16g: 4}
  nodes:
    - {name: ascend-a, vnpuLayout: quarters}
    - name: ascend-b
""")
    write(root, "tenants/gamma.yaml", TENANT.format(name="gamma", pool="ascend",
                                                    resources="{vir05_1c_16g: 33, accelerators: 8}"))
    model = validate_repo(root).model
    assert model.pools["ascend"].capacity["huawei.com/Ascend910-5c.1cpu.16g"] == Decimal(32)
    assert model.pools["ascend"].capacity["huawei.com/Ascend910"] == Decimal(8)
    assert findings(root) == [("GG030", "tenants/gamma.yaml", 12)]


def test_json_report_lists_the_pool_as_related(tmp_path: Path, capsys) -> None:
    root = overlay_repo(tmp_path)
    write(root, "tenants/gamma.yaml", TENANT.format(name="gamma", pool="h100", resources="{accelerators: 1}"))
    main(["validate", str(root), "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert data["errors"] == 3
    assert {f["file"] for f in data["findings"]} == {"tenants/alpha.yaml", "tenants/beta.yaml", "tenants/gamma.yaml"}
    assert all(f["related"] == ["hardware/h100.yaml:4:9"] for f in data["findings"])
