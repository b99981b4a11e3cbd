"""The accelerator catalog: built-in facts against upstream (NVIDIA mig-parted's MIG tables), one format for
built-in and declared models, vNPU and MIG geometry keyed on the model, and the Done-when cluster shape."""

from __future__ import annotations

import copy
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from gpugov.app.pipeline import validate_repo
from gpugov.catalog import MODELS, layout_fits, vnpu_layout_fits
from gpugov.catalog.accelerators import BUILTIN_FILE, CatalogError, load_builtins
from gpugov.catalog.table import markdown_table
from gpugov.compile import compile
from gpugov.declarations.loader import parse_documents
from gpugov.declarations.schema import check_document, kind_schema
from gpugov.sandbox.simulated import simulated_nodes
from tests.helpers.mig_parted import (
    config_path,
    filtered_pci_ids,
    gpu_of,
    load_configs,
    pinned_version,
    upstream_gpus,
)
from tests.helpers.repos import EXAMPLES, REPO, overlay_repo, write

NAMES_USERS_TYPE = ["H800", "A800-80GB", "A10", "L20", "L40S", "T4", "RTX-4090", "H20", "Ascend-910B", "Ascend-910C",
                    "Ascend-310P", "Hygon-K100", "Cambricon-MLU370", "Cambricon-MLU590", "Kunlunxin-P800",
                    "MetaX-C500", "Iluvatar-BI-V100", "Enflame-S60", "MTT-S4000"]
MIXED = EXAMPLES / "positive" / "production-mix"
# The catalog's MIG-capable models, each held to mig-parted's tables (tests/helpers/mig_parted.py)
MIG_NAMES = ["H800", "A800-80GB", "A100-80GB", "A100-40GB", "H100-80GB", "H100-NVL", "H200", "H20", "B200", "A30"]


@pytest.mark.parametrize("name", NAMES_USERS_TYPE)
def test_models_users_type_are_built_in_with_a_resource_and_its_source(name: str) -> None:
    model = MODELS[name]
    assert model.builtin and "/" in model.resource
    assert model.sources.get("resource"), f"{name}: the resource name has no source"
    assert "memory" in model.sources, f"{name}: memory names no source (nor 'none found')"
    assert (model.memory is None) == model.sources["memory"].startswith("none found")


def test_every_stated_fact_names_its_source() -> None:
    for model in MODELS.values():
        stated = {"productLabel": model.product_label, "pciDeviceIds": model.pci_device_ids,
                  "pciVendorId": model.pci_vendor_id, "mig": model.mig_profiles, "hami": model.hami,
                  "vnpu": model.vnpu}
        for key, value in stated.items():
            if value:
                assert model.sources.get(key), f"{model.name}: {key} is stated without a source"


def test_the_mig_models_are_the_catalogs_mig_capable_ones() -> None:
    assert {name for name, model in MODELS.items() if model.mig_capable} == set(MIG_NAMES)


@pytest.mark.parametrize("name", MIG_NAMES)
def test_mig_profiles_equal_mig_parteds(name: str) -> None:
    """Profiles, max counts per GPU and placement classes as mig-parted's default configs give them for the
    model's PCI ids (H800 shares H100-80GB's all-balanced entry, A800-80GB A100-80GB's)."""
    model = MODELS[name]
    upstream = gpu_of(model.pci_device_ids)
    assert model.pci_device_ids and model.mig_geometry == upstream.geometry
    assert {p: (m.max_count, m.slot) for p, m in model.mig_profiles.items()} == upstream.profiles
    assert {p for p, m in model.mig_profiles.items() if m.media_extensions} == {
        p for p in upstream.profiles if p.endswith("+me")
    }
    assert layout_fits(model.mig_geometry, model.mig_profiles, upstream.balanced) is None


@pytest.mark.parametrize("name", MIG_NAMES)
def test_mig_placements_hold_mig_parteds_max_counts(name: str) -> None:
    """The geometry's placements, not only the max count, fit exactly mig-parted's count of each profile."""
    model = MODELS[name]
    upstream = gpu_of(model.pci_device_ids).profiles
    assert set(model.mig_profiles) == set(upstream)
    for profile, (most, _) in upstream.items():
        if model.mig_profiles[profile].media_extensions:
            continue  # one +me instance per GPU is a rule of its own (layout_fits)
        unbounded = {**model.mig_profiles, profile: replace(model.mig_profiles[profile], max_count=99)}
        assert layout_fits(model.mig_geometry, unbounded, {profile: most}) is None, profile
        assert layout_fits(model.mig_geometry, unbounded, {profile: most + 1}) is not None, profile


def test_the_mig_parted_derivation_follows_the_file_and_never_guesses() -> None:
    """A count changed upstream changes the table the catalog is held to; a profile upstream lacks fails."""
    changed = copy.deepcopy(load_configs())
    changed["all-2g.20gb"][0]["mig-devices"]["2g.20gb"] = 2
    assert gpu_of(MODELS["H800"].pci_device_ids, upstream_gpus(changed)).profiles["2g.20gb"] == (2, "2g")
    missing = copy.deepcopy(load_configs())
    del missing["all-4g.40gb"]
    with pytest.raises(AssertionError, match=r"mig-parted has no all-4g\.40gb config"):
        upstream_gpus(missing)


def test_pci_ids_belong_to_one_model_each() -> None:
    owners: dict[str, str] = {}
    for model in MODELS.values():
        for pci in model.pci_device_ids:
            assert owners.setdefault(pci, model.name) == model.name, f"{pci}: {owners[pci]} and {model.name}"
    # mig-parted's all-balanced group of A100-80GB/A800-80GB/H100-80GB/H800 splits exactly between the four
    group = gpu_of(MODELS["H800"].pci_device_ids).pci_device_ids
    assert {p for n in ("A100-80GB", "A800-80GB", "H100-80GB", "H800") for p in MODELS[n].pci_device_ids} == group
    # a GPU mig-parted configures is MIG-capable in the catalog too
    assert {owners[pci] for pci in filtered_pci_ids() if pci in owners} <= set(MIG_NAMES)


def test_the_mig_parted_tables_come_from_the_pinned_module() -> None:
    """tools/build mig-parted links the file of the version tools/mig-parted/go.mod pins, from the cache."""
    target = config_path().resolve()
    assert target.name == "config-default.yaml" and target.parent.name.startswith("mig-parted-")
    assert pinned_version() == "v0.15.1"
    assert len(upstream_gpus()) == 12  # v0.15.1's all-balanced: 12 device-filter groups, every one derived


@pytest.mark.parametrize("name", ["A10", "L20", "L40S", "T4", "RTX-4090"])
def test_models_without_mig_have_no_profiles_but_a_gfd_label(name: str) -> None:
    model = MODELS[name]
    assert not model.mig_capable and model.gfd_products and model.hami is not None


def test_mig_lookups_are_keyed_on_the_model() -> None:
    assert MODELS["H800"].mig_profiles["1g.10gb"].max_count == 7
    assert MODELS["A100-40GB"].mig_profiles["1g.10gb"].max_count == 4
    assert layout_fits("g7m8", MODELS["H800"].mig_profiles, {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}) is None
    assert layout_fits("g7m8", MODELS["A800-80GB"].mig_profiles, {"1g.10gb": 8}) is not None


@pytest.mark.parametrize(
    ("name", "mix", "fits"),
    [
        ("Ascend-910B", {"vir10_3c_32g": 2}, True),
        ("Ascend-910B", {"vir05_1c_16g": 4}, True),
        ("Ascend-910B", {"vir12_3c_32g": 2, "vir05_1c_16g": 1}, False),  # 80Gi > 64Gi
        ("Ascend-310P", {"vir04": 1, "vir02": 1, "vir01": 1}, True),  # 7 AI cores and 7 AI CPUs, 21Gi of 24Gi
        ("Ascend-310P", {"vir04": 2}, False),  # 8 AI CPUs of 7 (mind-cluster has vir04_3c for that)
        ("Ascend-310P", {"vir04": 1, "vir02": 2}, False),  # 8 AI cores, 8 AI CPUs
    ],
)
def test_vnpu_layouts(name: str, mix: dict[str, int], fits: bool) -> None:
    model = MODELS[name]
    assert model.vnpu is not None
    assert (vnpu_layout_fits(model.vnpu, model.memory, mix) is None) is fits


def test_built_ins_pass_the_users_schema() -> None:
    """models.yaml is an ordinary file of AcceleratorModel declarations."""
    docs = list(parse_documents(BUILTIN_FILE.read_text(encoding="utf-8"), "hardware/models.yaml"))
    assert len(docs) == len(MODELS)
    assert [f for doc in docs for f in check_document(doc)] == []


def test_a_broken_catalog_fails_at_load(tmp_path: Path) -> None:
    text = BUILTIN_FILE.read_text(encoding="utf-8").replace("resource: nvidia.com/gpu\n", "resource: gpu\n", 1)
    (tmp_path / "models.yaml").write_text(text)
    with pytest.raises(CatalogError, match=r"models\.yaml:\d+"):
        load_builtins(tmp_path / "models.yaml")


def test_schema_completes_built_ins_but_accepts_declared_models() -> None:
    model = kind_schema("GPUPool")["properties"]["spec"]["properties"]["accelerator"]["properties"]["model"]
    assert "enum" not in model
    enum = next(branch["enum"] for branch in model["anyOf"] if "enum" in branch)
    assert set(NAMES_USERS_TYPE) <= set(enum)


def test_readme_catalog_table_is_generated_from_the_catalog() -> None:
    assert markdown_table(MODELS.values()) in (REPO / "README.md").read_text(encoding="utf-8")


DECLARED = """\
apiVersion: gpugov.io/v1alpha1
kind: AcceleratorModel
metadata:
  name: Vastai-VA1
spec:
  vendor: vastai
  resource: vastaitech.com/va
  memory: 32Gi
---
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata:
  name: va
spec:
  cluster: lab
  accelerator: {model: Vastai-VA1}
  acceleratorsPerNode: 4
  nodeResources: {cpu: 32, memory: 256Gi}
  nodes: [{name: va-a}]
"""


def test_a_declared_model_validates_and_renders_its_resource(tmp_path: Path) -> None:
    root = overlay_repo(tmp_path)
    write(root, "hardware/va.yaml", DECLARED)
    write(root, "tenants/gamma.yaml", GAMMA.format(pool="va", resources="{accelerators: 4}"))
    result = validate_repo(root)
    assert result.findings == [] and result.model is not None
    assert result.model.pools["va"].capacity["vastaitech.com/va"] == 4
    queue = next(o for o in compile(result.model, cluster="lab") if o["kind"] == "ClusterQueue"
                 and o["metadata"]["name"] == "gamma")
    flavor = next(f for f in queue["spec"]["resourceGroups"][0]["flavors"] if f["name"] == "va")
    assert {"name": "vastaitech.com/va", "nominalQuota": "4"} in flavor["resources"]


def test_a_declared_model_is_checked_like_every_declaration(tmp_path: Path) -> None:
    root = overlay_repo(tmp_path)
    write(root, "hardware/va.yaml", DECLARED.replace("resource: vastaitech.com/va", "resource: va"))
    assert [f.rule for f in validate_repo(root).findings] == ["GG003"]


GAMMA = """\
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata:
  name: gamma
spec:
  department: rnd
  owners: {{users: [g@example.com]}}
  costCenter: CC-3
  namespaces: [gamma]
  quotas:
    - pool: {pool}
      resources: {resources}
"""


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory):
    result = validate_repo(overlay_repo(tmp_path_factory.mktemp("mixed"), MIXED))
    assert result.findings == [] and result.model is not None
    return result.model


def test_the_mixed_cluster_renders_each_pools_resource_names(mixed) -> None:
    """A100 + H800 + A800 + A10 (HAMi) + L20 + L40S, an Ascend pool with vNPUs and a declared model."""
    expected = {
        "a100": {"nvidia.com/gpu", "nvidia.com/mig-1g.10gb"},
        "h800": {"nvidia.com/gpu", "nvidia.com/mig-3g.40gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-1g.10gb"},
        "a800": {"nvidia.com/gpu"},
        "a10-shared": {"nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores"},
        "l20": {"nvidia.com/gpu"},
        "l40s": {"nvidia.com/gpu"},
        "ascend": {"huawei.com/Ascend910", "huawei.com/Ascend910-10c.3cpu.32g"},
        "biren": {"birentech.com/gpu"},
    }
    for pool, resources in expected.items():
        assert set(mixed.pools[pool].capacity) - {"cpu", "memory"} == resources, pool
    objects = compile(mixed, cluster="lab")
    quotas = {}
    for queue in (o for o in objects if o["kind"] == "ClusterQueue"):
        for flavor in queue["spec"]["resourceGroups"][0]["flavors"]:
            for entry in flavor["resources"]:
                if entry["nominalQuota"] != "0":
                    quotas[(queue["metadata"]["name"], flavor["name"], entry["name"])] = entry["nominalQuota"]
    assert quotas[("serving", "a10-shared", "nvidia.com/gpumem")] == "48Ki"  # 48Gi as 49152 MiB units
    assert quotas[("serving", "a10-shared", "nvidia.com/gpucores")] == "200"
    assert quotas[("serving", "ascend", "huawei.com/Ascend910-10c.3cpu.32g")] == "32"
    assert quotas[("training", "ascend", "huawei.com/Ascend910")] == "16"
    assert quotas[("training", "a800", "nvidia.com/gpu")] == "16"
    assert quotas[("serving", "biren", "birentech.com/gpu")] == "8"
    assert quotas[("serving", "h800", "nvidia.com/mig-3g.40gb")] == "8"
    flavors = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ResourceFlavor"}
    assert set(expected) <= set(flavors)
    configs = next(o for o in objects if o["kind"] == "ConfigMap" and "config.yaml" in o["data"])
    h800 = yaml.safe_load(configs["data"]["config.yaml"])["mig-configs"]["h800-balanced"][0]
    assert h800["device-filter"] == ["0x232410DE", "0x232210DE"]


def test_the_mixed_cluster_simulates_each_vendors_labels(mixed) -> None:
    nodes = {n["metadata"]["name"]: n for n in simulated_nodes(mixed, "lab")}

    def labels(name: str) -> dict[str, str]:
        return nodes[name]["metadata"]["labels"]

    def allocatable(name: str) -> dict[str, str]:
        return nodes[name]["status"]["allocatable"]

    products = {"h800-b": "NVIDIA-H800-80GB-HBM3", "a800-a": "NVIDIA-A800-SXM4-80GB", "a10-a": "NVIDIA-A10",
                "l20-a": "NVIDIA-L20", "l40s-a": "NVIDIA-L40S", "a100-b": "NVIDIA-A100-SXM4-80GB"}
    for node, product in products.items():
        assert labels(node)["nvidia.com/gpu.product"] == product
        assert labels(node)["feature.node.kubernetes.io/pci-10de.present"] == "true"
    assert labels("h800-a")["nvidia.com/mig-3g.40gb.count"] == "8" and allocatable("h800-a")["nvidia.com/gpu"] == "0"
    assert labels("a10-a")["gpu"] == "on" and allocatable("a10-a")["nvidia.com/gpu"] == "20"  # 2 cards x 10 vGPUs
    assert allocatable("a10-a")["nvidia.com/gpumem"] == "48Ki"  # 2 x 24Gi in MiB
    assert labels("ascend-a")["accelerator"] == "huawei-Ascend910"
    assert labels("ascend-a")["feature.node.kubernetes.io/pci-19e5.present"] == "true"
    assert allocatable("ascend-a")["huawei.com/Ascend910-10c.3cpu.32g"] == "16"
    assert allocatable("ascend-a")["huawei.com/Ascend910"] == "0" and allocatable("ascend-c")["huawei.com/Ascend910"] == "8"
    assert labels("biren-a")["birentech.com/gpu.product"] == "BR104"
    assert allocatable("biren-a")["birentech.com/gpu"] == "8"
    assert "nvidia.com/gpu.product" not in labels("ascend-a")


def test_the_capacity_of_a_mixed_cluster_is_exact(mixed) -> None:
    assert mixed.pools["a10-shared"].capacity == {
        "cpu": Decimal(128), "memory": Decimal(1024 * 2**30), "nvidia.com/gpu": Decimal(80),
        "nvidia.com/gpucores": Decimal(800), "nvidia.com/gpumem": Decimal(8 * 24576),
    }
    guaranteed = mixed.guaranteed()
    # serving: 49152 MiB declared; training: 2 whole cards = 2 x 24576 MiB and 2 x 100 cores
    assert guaranteed[("a10-shared", "nvidia.com/gpumem")] == 49152 + 2 * 24576
    assert guaranteed[("a10-shared", "nvidia.com/gpucores")] == 200 + 200
    assert guaranteed[("a10-shared", "nvidia.com/gpu")] == 8 + 2
