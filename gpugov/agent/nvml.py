"""Read GPUs, MIG devices, utilisation and processes through NVML (nvidia-ml-py's `pynvml`).

The NVML module is a parameter so tests can pass a fake with pynvml's names and exception classes.
Every per-field failure is recorded as a reason in `unavailable` instead of raised: a MIG GPU answers
NotSupported for utilisation, an unprivileged container NoPermission for some queries, an old driver
FunctionNotFound for newer calls. Only "NVML cannot be used at all" raises NvmlUnavailable.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

from gpugov.agent.snapshot import Gpu, MigDevice, Process, Snapshot, Utilization

_INIT_HINTS = {
    "LibraryNotFound": "libnvidia-ml.so.1 not found: is the NVIDIA driver installed on this node?",
    "DriverNotLoaded": "the NVIDIA kernel driver is not loaded",
    "NoPermission": "no permission to open the NVIDIA devices",
    "LibRmVersionMismatch": "NVML library and kernel driver versions differ: reload the driver or reboot",
}

# NVML_GPU_INSTANCE_PROFILE_* enum -> (GPU slices, name suffix), as go-nvlib's NewMigProfile maps them
# (pkg/nvlib/device/mig_profile.go). The numbers are NVML's ABI (nvml.h), stable across versions;
# 3_SLICE_GFX (0x11) is newer than go-nvlib's table and is mapped like the other GFX profiles.
GI_PROFILES: dict[int, tuple[int, str]] = {
    0x0: (1, ""),  # 1_SLICE
    0x1: (2, ""),  # 2_SLICE
    0x2: (3, ""),  # 3_SLICE
    0x3: (4, ""),  # 4_SLICE
    0x4: (7, ""),  # 7_SLICE
    0x5: (8, ""),  # 8_SLICE
    0x6: (6, ""),  # 6_SLICE
    0x7: (1, "+me"),  # 1_SLICE_REV1
    0x8: (2, "+me"),  # 2_SLICE_REV1
    0x9: (1, ""),  # 1_SLICE_REV2: the double-memory 1g (1g.20gb on an 80GB card)
    0xA: (1, "+gfx"),  # 1_SLICE_GFX
    0xB: (2, "+gfx"),  # 2_SLICE_GFX
    0xC: (4, "+gfx"),  # 4_SLICE_GFX
    0xD: (1, "-me"),  # 1_SLICE_NO_ME
    0xE: (2, "-me"),  # 2_SLICE_NO_ME
    0xF: (1, "+me.all"),  # 1_SLICE_ALL_ME
    0x10: (2, "+me.all"),  # 2_SLICE_ALL_ME
    0x11: (3, "+gfx"),  # 3_SLICE_GFX
}
_GI_PROFILE_COUNT = 0x12

_MIB = 1024 * 1024
_GIB = 1024 * 1024 * 1024


class NvmlUnavailable(RuntimeError):
    """NVML cannot be used on this node: no bindings, no library, no driver or no permission."""


def import_nvml() -> ModuleType:
    try:
        import pynvml
    except ImportError as exc:
        raise NvmlUnavailable("nvidia-ml-py is not installed (pip install 'gpugov[agent]')") from exc
    return pynvml


def reason(exc: BaseException) -> str:
    """`NVMLError_NotSupported` -> "NotSupported": stable text that needs no call into the library."""
    name = type(exc).__name__
    return name.removeprefix("NVMLError_") if name.startswith("NVMLError_") else name


def _flag(value: Any) -> bool:
    # nvmlDeviceIsMigDeviceHandle returns a ctypes.c_uint, not an int.
    return bool(getattr(value, "value", value))


def _text(value: Any) -> str:
    # Struct fields of type c_char[] come back as bytes; the decorated getters return str.
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def mig_memory_gb(total_device_bytes: int, mig_memory_mb: int) -> int:
    """The "<N>gb" of a MIG profile name, computed as go-nvlib's getMigMemorySizeGB does.

    The instance's share of memory is rounded up to eighths, then scaled by the card's size in whole GiB.
    Go's math.Round rounds halves away from zero (H200 3g: 70.5 -> 71); Python's round() would give 70.
    """
    fraction = (float(mig_memory_mb) * _MIB) / float(total_device_bytes)
    fraction = math.ceil(fraction * 8) / 8
    total_gb = float((total_device_bytes + _GIB - 1) // _GIB)
    return math.floor(fraction * total_gb + 0.5)


def mig_profile_name(gpu_slices: int, compute_slices: int, memory_gb: int, suffix: str = "") -> str:
    if compute_slices == gpu_slices:
        return f"{gpu_slices}g.{memory_gb}gb{suffix}"
    return f"{compute_slices}c.{gpu_slices}g.{memory_gb}gb{suffix}"


class NvmlReader:
    """Opens NVML once (nvmlInit) and reads a fresh Snapshot on each `snapshot()` call."""

    def __init__(self, nvml: Any | None = None, clock: Callable[[], datetime] | None = None) -> None:
        self.nv = nvml if nvml is not None else import_nvml()
        self._clock = clock or (lambda: datetime.now(UTC))
        self._open = False

    def open(self) -> NvmlReader:
        try:
            self.nv.nvmlInit()
        except self.nv.NVMLError as exc:
            why = reason(exc)
            hint = _INIT_HINTS.get(why)
            raise NvmlUnavailable(f"NVML initialisation failed ({why})" + (f": {hint}" if hint else "")) from None
        self._open = True
        return self

    def close(self) -> None:
        if self._open:
            self._open = False
            try:
                self.nv.nvmlShutdown()
            except self.nv.NVMLError:
                pass  # shutting down anyway

    def __enter__(self) -> NvmlReader:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def snapshot(self, node: str) -> Snapshot:
        try:
            count = self.nv.nvmlDeviceGetCount()
        except self.nv.NVMLError as exc:
            raise NvmlUnavailable(f"NVML cannot count the GPUs ({reason(exc)})") from None
        driver = self._call({}, "driver_version", "nvmlSystemGetDriverVersion")
        gpus = [self._gpu(index) for index in range(count)]
        return Snapshot(node, self._clock(), _text(driver) if driver is not None else None, gpus)

    def _call(self, unavailable: dict[str, str], key: str, function: str, *args: Any) -> Any:
        """Call one NVML function; on an NVML error note why under `key` and return None."""
        fn = getattr(self.nv, function, None)
        if fn is None:
            unavailable[key] = "FunctionNotFound"  # nvidia-ml-py older than the call
            return None
        try:
            return fn(*args)
        except self.nv.NVMLError as exc:
            unavailable[key] = reason(exc)
            return None

    def _gpu(self, index: int) -> Gpu:
        gpu = Gpu(index)
        u = gpu.unavailable
        handle = self._call(u, "handle", "nvmlDeviceGetHandleByIndex", index)
        if handle is None:
            return gpu
        uuid = self._call(u, "uuid", "nvmlDeviceGetUUID", handle)
        gpu.uuid = _text(uuid) if uuid is not None else None
        name = self._call(u, "name", "nvmlDeviceGetName", handle)
        gpu.name = _text(name) if name is not None else None
        pci = self._call(u, "pci", "nvmlDeviceGetPciInfo", handle)
        if pci is not None:
            gpu.pci_device_id = f"0x{int(pci.pciDeviceId):08X}"
            gpu.pci_bus_id = _text(pci.busId)
        memory = self._call(u, "memory", "nvmlDeviceGetMemoryInfo", handle)
        if memory is not None:
            gpu.memory_total_bytes, gpu.memory_used_bytes = int(memory.total), int(memory.used)
        mode = self._call(u, "mig_mode", "nvmlDeviceGetMigMode", handle)
        if mode is not None:
            gpu.mig_enabled, gpu.mig_pending = bool(mode[0]), bool(mode[1])
        gpu.utilization = self._utilization(u, handle)
        gpu.processes = self._processes(u, handle)
        if gpu.mig_enabled:
            gpu.mig_devices = self._mig_devices(handle, gpu.memory_total_bytes, u)
        return gpu

    def _utilization(self, unavailable: dict[str, str], handle: Any) -> Utilization | None:
        # NotSupported on MIG-enabled GPUs and on MIG devices: use DCGM's PROF_GR_ENGINE_ACTIVE there.
        rates = self._call(unavailable, "utilization", "nvmlDeviceGetUtilizationRates", handle)
        if rates is None:
            return None
        return Utilization(int(rates.gpu) / 100, int(rates.memory) / 100)

    def _processes(self, unavailable: dict[str, str], handle: Any) -> list[Process] | None:
        found = self._call(unavailable, "processes", "nvmlDeviceGetComputeRunningProcesses", handle)
        if found is None:
            return None
        procs = [Process(int(p.pid), None if p.usedGpuMemory is None else int(p.usedGpuMemory)) for p in found]
        return sorted(procs, key=lambda p: p.pid)

    def _mig_devices(self, parent: Any, total_bytes: int | None, unavailable: dict[str, str]) -> list[MigDevice]:
        count = self._call(unavailable, "mig_devices", "nvmlDeviceGetMaxMigDeviceCount", parent)
        profiles: dict[int, int] | None = None  # GPU instance profile id -> enum, read once per GPU
        devices = []
        for slot in range(count or 0):
            try:
                handle = self.nv.nvmlDeviceGetMigDeviceHandleByIndex(parent, slot)
            except (self.nv.NVMLError_NotFound, self.nv.NVMLError_InvalidArgument):
                continue  # an empty slot
            except self.nv.NVMLError as exc:
                unavailable[f"mig_devices[{slot}]"] = reason(exc)
                continue
            if profiles is None:
                profiles = self._gi_profile_enums(parent, unavailable)
            devices.append(self._mig_device(parent, handle, slot, total_bytes, profiles))
        return devices

    def _gi_profile_enums(self, parent: Any, unavailable: dict[str, str]) -> dict[int, int]:
        """Map the product-specific GPU instance profile ids (19, 14, 9...) back to NVML's enum."""
        enums: dict[int, int] = {}
        count = int(getattr(self.nv, "NVML_GPU_INSTANCE_PROFILE_COUNT", _GI_PROFILE_COUNT))
        for enum in range(count):
            try:
                info = self.nv.nvmlDeviceGetGpuInstanceProfileInfo(parent, enum)
            except (self.nv.NVMLError_NotSupported, self.nv.NVMLError_InvalidArgument):
                continue  # a profile this product lacks (go-nvlib skips the same two)
            except self.nv.NVMLError as exc:
                unavailable["gpu_instance_profiles"] = reason(exc)
                break
            enums[int(info.id)] = enum
        return enums

    def _mig_device(self, parent: Any, handle: Any, slot: int, total: int | None, enums: dict[int, int]) -> MigDevice:
        mig = MigDevice(slot)
        u = mig.unavailable
        is_mig = self._call(u, "is_mig", "nvmlDeviceIsMigDeviceHandle", handle)
        if is_mig is not None and not _flag(is_mig):
            u["is_mig"] = "NotMigHandle"
        uuid = self._call(u, "uuid", "nvmlDeviceGetUUID", handle)
        mig.uuid = _text(uuid) if uuid is not None else None
        memory = self._call(u, "memory", "nvmlDeviceGetMemoryInfo", handle)
        if memory is not None:
            mig.memory_total_bytes, mig.memory_used_bytes = int(memory.total), int(memory.used)
        mig.gpu_instance_id = self._call(u, "gpu_instance_id", "nvmlDeviceGetGpuInstanceId", handle)
        mig.compute_instance_id = self._call(u, "compute_instance_id", "nvmlDeviceGetComputeInstanceId", handle)
        mig.profile, mig.profile_source = self._profile(parent, handle, mig.gpu_instance_id, total, enums, u)
        mig.utilization = self._utilization(u, handle)
        mig.processes = self._processes(u, handle)
        return mig

    def _profile(
        self, parent: Any, handle: Any, gi_id: int | None, total: int | None, enums: dict[int, int], u: dict[str, str]
    ) -> tuple[str | None, str]:
        """The go-nvlib profile name: slices from the GPU instance profile, memory rounded to eighths.

        go-nvlib finds the GPU instance's profile enum (for +me/-me/+gfx) through the instance info.
        Where that is refused (e.g. no mig/monitor capability), the device attributes still give
        slices and memory, so the name is right except for those suffixes: profile_source says which.
        """
        attrs = self._call(u, "attributes", "nvmlDeviceGetAttributes", handle)
        if attrs is None or not total:
            return None, ""
        enum = None
        if gi_id is not None:
            instance = self._call(u, "gpu_instance", "nvmlDeviceGetGpuInstanceById", parent, gi_id)
            info = self._call(u, "gpu_instance", "nvmlGpuInstanceGetInfo", instance) if instance is not None else None
            if info is not None:
                enum = enums.get(int(info.profileId))
        gb = mig_memory_gb(total, int(attrs.memorySizeMB))
        compute = int(attrs.computeInstanceSliceCount)
        if enum in GI_PROFILES:
            slices, suffix = GI_PROFILES[enum]
            return mig_profile_name(slices, compute, gb, suffix), "gpu-instance-profile"
        return mig_profile_name(int(attrs.gpuInstanceSliceCount), compute, gb), "attributes"
