"""What the agent saw on one node at one moment, as plain dataclasses and versioned JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

# Bump when a field changes meaning or goes away; adding a field keeps the version.
SCHEMA_VERSION = 1
KIND = "gpugov.agent.snapshot"


@dataclass(frozen=True)
class Process:
    pid: int
    used_memory_bytes: int | None  # None where NVML cannot attribute memory (e.g. WDDM)


@dataclass(frozen=True)
class Utilization:
    gpu_ratio: float  # NVML reports percent; ratios match DCGM's PROF_* metrics (0..1)
    memory_ratio: float


@dataclass
class MigDevice:
    slot: int  # index passed to nvmlDeviceGetMigDeviceHandleByIndex
    uuid: str | None = None
    profile: str | None = None  # "1g.10gb", "1c.2g.20gb", "1g.10gb+me": go-nvlib's naming
    # "gpu-instance-profile": attributes (+me, -me, +gfx) known; "attributes": slices and memory only
    profile_source: str = ""
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    utilization: Utilization | None = None
    processes: list[Process] | None = None
    unavailable: dict[str, str] = field(default_factory=dict)  # field -> NVML error, e.g. "NotSupported"


@dataclass
class Gpu:
    index: int
    uuid: str | None = None
    name: str | None = None
    pci_device_id: str | None = None  # "0x20B210DE", as mig-parted's device-filter spells it
    pci_bus_id: str | None = None
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    mig_enabled: bool | None = None  # None: the GPU has no MIG mode (NotSupported)
    mig_pending: bool | None = None  # takes effect after a GPU reset
    mig_devices: list[MigDevice] = field(default_factory=list)
    utilization: Utilization | None = None
    processes: list[Process] | None = None
    unavailable: dict[str, str] = field(default_factory=dict)

    @property
    def mig_pending_change(self) -> bool:
        return self.mig_enabled is not None and self.mig_pending is not None and self.mig_enabled != self.mig_pending


@dataclass
class Snapshot:
    node: str
    timestamp: datetime
    driver_version: str | None
    gpus: list[Gpu]

    def to_dict(self) -> dict:
        gpus = []
        for gpu in self.gpus:
            data = asdict(gpu)
            data["mig_pending_change"] = gpu.mig_pending_change
            gpus.append(data)
        return {
            "kind": KIND,
            "schema_version": SCHEMA_VERSION,
            "node": self.node,
            "timestamp": self.timestamp.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "driver_version": self.driver_version,
            "gpus": gpus,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n"
