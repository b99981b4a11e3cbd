"""The built-in accelerator catalog.

Resource names are each vendor's device-plugin defaults (shared/reference/gpu-hardware.md
sections 3.3 and 4). `gfd_products` are the `nvidia.com/gpu.product` values GPU Feature
Discovery writes for the model (NVML name, sanitised); the drift checker compares them.
Where NVML names were not confirmed upstream, a pool can override the expected label.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpugov.catalog.mig import MigProfile, a30_profiles, g7m8_profiles


@dataclass(frozen=True)
class AcceleratorModel:
    name: str
    vendor: str
    resource: str  # whole-device resource name of the vendor's device plugin
    memory_gb: int
    gfd_products: tuple[str, ...] = ()
    pci_device_ids: tuple[str, ...] = ()  # mig-parted device-filter values
    mig_geometry: str | None = None
    mig_profiles: dict[str, MigProfile] = field(default_factory=dict)

    @property
    def mig_capable(self) -> bool:
        return self.mig_geometry is not None


def _nvidia(name: str, memory: int, products: tuple[str, ...], pci: tuple[str, ...], **mig: object) -> AcceleratorModel:
    return AcceleratorModel(name, "nvidia", "nvidia.com/gpu", memory, products, pci, **mig)  # type: ignore[arg-type]


_MODELS = [
    _nvidia(
        "A100-40GB",
        40,
        ("NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-PCIE-40GB"),
        ("0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"),
        mig_geometry="g7m8",
        mig_profiles=g7m8_profiles(5, 10, 10, 20, 20, 40),
    ),
    _nvidia(
        "A100-80GB",
        80,
        ("NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-80GB-PCIe"),
        ("0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE"),
        mig_geometry="g7m8",
        mig_profiles=g7m8_profiles(10, 20, 20, 40, 40, 80),
    ),
    _nvidia("A30", 24, ("NVIDIA-A30",), ("0x20B710DE",), mig_geometry="g4m4", mig_profiles=a30_profiles()),
    _nvidia(
        "H100-80GB",
        80,
        ("NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-PCIe"),
        ("0x233010DE", "0x233110DE", "0x232210DE", "0x232410DE"),
        mig_geometry="g7m8",
        mig_profiles=g7m8_profiles(10, 20, 20, 40, 40, 80),
    ),
    _nvidia(
        "H100-NVL",
        94,
        ("NVIDIA-H100-NVL",),
        ("0x232110DE", "0x233A10DE"),
        mig_geometry="g7m8",
        mig_profiles=g7m8_profiles(12, 24, 24, 47, 47, 94),
    ),
    _nvidia(
        "H200",
        141,
        ("NVIDIA-H200", "NVIDIA-H200-NVL"),
        ("0x233510DE", "0x233B10DE"),
        mig_geometry="g7m8",
        mig_profiles=g7m8_profiles(18, 35, 35, 71, 71, 141),
    ),
    _nvidia(
        "H20",
        96,
        ("NVIDIA-H20",),
        ("0x232910DE",),
        mig_geometry="g7m8",
        mig_profiles=g7m8_profiles(12, 24, 24, 48, 48, 96),
    ),
    _nvidia(
        "B200",
        180,
        ("NVIDIA-B200",),
        ("0x290110DE",),
        mig_geometry="g7m8",
        mig_profiles=g7m8_profiles(23, 45, 45, 90, 90, 180),
    ),
    AcceleratorModel("Ascend-910B", "huawei", "huawei.com/Ascend910", 64),
    AcceleratorModel("Hygon-DCU", "hygon", "hygon.com/dcu", 64),
    AcceleratorModel("Cambricon-MLU", "cambricon", "cambricon.com/mlu", 48),
    AcceleratorModel("MI300X", "amd", "amd.com/gpu", 192),
]

MODELS: dict[str, AcceleratorModel] = {model.name: model for model in _MODELS}


def lookup_model(name: str) -> AcceleratorModel | None:
    return MODELS.get(name)
