"""Fractional and virtual devices other than MIG: HAMi's shared units and Ascend vNPU templates.

HAMi (Project-HAMi/HAMi) splits each device into vGPUs: its device plugin advertises
`deviceSplitCount` virtual devices per device under a count resource (for NVIDIA the same
nvidia.com/gpu), and its scheduler accounts device memory (nvidia.com/gpumem, in MiB) and
compute (nvidia.com/gpucores, percent of a device) per device. Ascend static vNPUs are
fixed templates (AI cores, AI CPUs, memory) cut from one NPU, each its own resource
(huawei.com/Ascend910-5c.1cpu.16g). Sources: the catalog's models.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from gpugov.i18n import Text


@dataclass(frozen=True)
class HamiUnits:
    count: str  # virtual devices (vGPU slots)
    memory: str | None = None
    memory_unit: Decimal | None = None  # bytes in one unit of the memory resource
    cores: str | None = None
    cores_per_device: int | None = None


@dataclass(frozen=True)
class VnpuTemplate:
    name: str  # e.g. vir05_1c_16g
    resource: str
    memory: Decimal  # bytes
    ai_cores: int | None = None
    ai_cpus: int | None = None


@dataclass(frozen=True, eq=False)
class VnpuGeometry:
    templates: dict[str, VnpuTemplate]
    ai_cores: int | None = None
    ai_cpus: int | None = None


def vnpu_layout_fits(geometry: VnpuGeometry, device_memory: Decimal | None, mix: dict[str, int]) -> str | None:
    """None when the templates of `mix` can be cut from one device, else the reason they cannot.

    Memory is always checked when the device's memory is known; AI cores and AI CPUs only
    where both the device and the templates state them (they differ between SKUs of one
    model, e.g. 910B2 and 910B3)."""
    templates = [(geometry.templates[name], count) for name, count in mix.items()]
    memory = sum((t.memory * count for t, count in templates), Decimal(0))
    if device_memory is not None and memory > device_memory:
        return Text("needs {needed} of memory, the device has {memory}", needed=_gib(memory),
                    memory=_gib(device_memory))
    for total, part, what in (
        (geometry.ai_cores, lambda t: t.ai_cores, Text("AI cores")),
        (geometry.ai_cpus, lambda t: t.ai_cpus, Text("AI CPUs")),
    ):
        amounts = [(part(t), count) for t, count in templates]
        if total is None or any(amount is None for amount, _ in amounts):
            continue
        used = sum(amount * count for amount, count in amounts)  # type: ignore[operator]
        if used > total:
            return Text("needs {needed} {what}, the device has {total}", needed=used, what=what, total=total)
    return None


def _gib(amount: Decimal) -> str:
    return f"{(amount / 2**30).normalize():f}Gi"
