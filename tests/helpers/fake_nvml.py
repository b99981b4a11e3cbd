"""A fake `pynvml` for tests: pynvml's function names, signatures, return types and exception classes.

With nvidia-ml-py installed, the exceptions *are* pynvml's classes and the returned structs are pynvml's
ctypes structs, so `except pynvml.NVMLError_NotSupported` and `struct.busId` (bytes) behave as on a real
node. Without it, local stand-ins with the same names, codes and fields are used.

Behaviour copied from NVML/pynvml (nvidia-ml-py 13.615.71's pynvml.py and the NVML API docs):
- any call before nvmlInit raises NVMLError_Uninitialized;
- nvmlDeviceGetUtilizationRates raises NotSupported on a MIG-enabled GPU and on MIG devices;
- nvmlDeviceGetMigMode raises NotSupported on a GPU without MIG;
- nvmlDeviceGetMigDeviceHandleByIndex raises NotFound for an empty slot, InvalidArgument past the last;
- nvmlDeviceGetGpuInstanceProfileInfo raises NotSupported for a profile the product lacks;
- nvmlDeviceGetAttributes works only on MIG handles;
- nvmlDeviceIsMigDeviceHandle returns a ctypes.c_uint.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

try:
    import pynvml as _real
except ImportError:  # pragma: no cover - the test extra installs nvidia-ml-py
    _real = None

MIB = 1024 * 1024
GIB = 1024 * MIB

# NVML_ERROR_* codes (nvml.h; pynvml generates one NVMLError_<Name> class per code).
ERROR_CODES = {
    "Uninitialized": 1, "InvalidArgument": 2, "NotSupported": 3, "NoPermission": 4, "AlreadyInitialized": 5,
    "NotFound": 6, "InsufficientSize": 7, "InsufficientPower": 8, "DriverNotLoaded": 9, "Timeout": 10,
    "IrqIssue": 11, "LibraryNotFound": 12, "FunctionNotFound": 13, "CorruptedInforom": 14, "GpuIsLost": 15,
    "ResetRequired": 16, "OperatingSystem": 17, "LibRmVersionMismatch": 18, "InUse": 19, "Memory": 20,
    "NoData": 21, "VgpuEccNotSupported": 22, "InsufficientResources": 23, "FreqNotSupported": 24,
    "ArgumentVersionMismatch": 25, "Deprecated": 26, "NotReady": 27, "GpuNotFound": 28, "InvalidState": 29,
    "ResetTypeNotSupported": 30, "Unknown": 999,
}  # fmt: skip


if _real is not None:
    NVMLError = _real.NVMLError
    ERRORS: dict[str, type[Exception]] = {name: getattr(_real, f"NVMLError_{name}") for name in ERROR_CODES}
else:  # pragma: no cover

    class NVMLError(Exception):  # type: ignore[no-redef]
        value = 0

        def __str__(self) -> str:
            return f"NVML Error with code {self.value}"

    ERRORS = {name: type(f"NVMLError_{name}", (NVMLError,), {"value": code}) for name, code in ERROR_CODES.items()}


# ctypes structs: pynvml's own where installed, else copies with the same fields.
class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class _Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class _PciInfo(ctypes.Structure):
    _fields_ = [
        ("busIdLegacy", ctypes.c_char * 16), ("domain", ctypes.c_uint), ("bus", ctypes.c_uint),
        ("device", ctypes.c_uint), ("pciDeviceId", ctypes.c_uint), ("pciSubSystemId", ctypes.c_uint),
        ("busId", ctypes.c_char * 32),
    ]  # fmt: skip


class _DeviceAttributes(ctypes.Structure):
    _fields_ = [
        ("multiprocessorCount", ctypes.c_uint), ("sharedCopyEngineCount", ctypes.c_uint),
        ("sharedDecoderCount", ctypes.c_uint), ("sharedEncoderCount", ctypes.c_uint),
        ("sharedJpegCount", ctypes.c_uint), ("sharedOfaCount", ctypes.c_uint),
        ("gpuInstanceSliceCount", ctypes.c_uint), ("computeInstanceSliceCount", ctypes.c_uint),
        ("memorySizeMB", ctypes.c_ulonglong),
    ]  # fmt: skip


class _GpuInstanceProfileInfo(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint), ("id", ctypes.c_uint), ("isP2pSupported", ctypes.c_uint),
        ("sliceCount", ctypes.c_uint), ("instanceCount", ctypes.c_uint), ("multiprocessorCount", ctypes.c_uint),
        ("copyEngineCount", ctypes.c_uint), ("decoderCount", ctypes.c_uint), ("encoderCount", ctypes.c_uint),
        ("jpegCount", ctypes.c_uint), ("ofaCount", ctypes.c_uint), ("memorySizeMB", ctypes.c_ulonglong),
        ("name", ctypes.c_char * 96),
    ]  # fmt: skip


LOCAL_STRUCTS = {
    "c_nvmlMemory_t": _Memory,
    "c_nvmlUtilization_t": _Utilization,
    "nvmlPciInfo_t": _PciInfo,
    "c_nvmlDeviceAttributes": _DeviceAttributes,
    "c_nvmlGpuInstanceProfileInfo_v2_t": _GpuInstanceProfileInfo,
}
STRUCTS: dict[str, type] = {name: getattr(_real, name) if _real else local for name, local in LOCAL_STRUCTS.items()}


def _friendly(**values: Any) -> Any:
    # What pynvml returns for process lists: nvmlStructToFriendlyObject(...).
    return _real.nvmlFriendlyObject(values) if _real else SimpleNamespace(**values)


# --- the hardware the fake pretends to have -------------------------------------------------------


@dataclass(frozen=True)
class GiProfile:
    """One row of `nvidia-smi mig -lgip`: the enum NVML is asked with, and what the product answers."""

    enum: int  # NVML_GPU_INSTANCE_PROFILE_*
    id: int  # the product-specific profile id (19, 14, 9...)
    slices: int
    memory_mb: int
    name: str


@dataclass
class FakeMig:
    gi_profile: GiProfile
    uuid: str
    gpu_instance_id: int
    compute_instance_id: int = 0
    compute_slices: int | None = None  # None: one compute instance spanning the GPU instance
    used_bytes: int = 0
    processes: list[tuple[int, int]] = field(default_factory=list)  # (pid, used bytes)


@dataclass
class FakeGpu:
    name: str
    uuid: str
    pci_device_id: int
    bus_id: str
    memory_total: int
    memory_used: int
    mig_mode: tuple[int, int] | None = None  # (current, pending); None: no MIG on this GPU
    utilization: tuple[int, int] = (0, 0)  # percent (gpu, memory), when the GPU is not in MIG mode
    processes: list[tuple[int, int]] = field(default_factory=list)
    max_mig_devices: int = 0
    migs: dict[int, FakeMig] = field(default_factory=dict)  # slot -> device; other slots are empty
    gi_profiles: list[GiProfile] = field(default_factory=list)


# A100-80GB / H100-80GB GPU instance profiles: ids from `nvidia-smi mig -lgip`, memory in MiB.
A100_80GB_PROFILES = [
    GiProfile(0x0, 19, 1, 9728, "MIG 1g.10gb"),
    GiProfile(0x7, 20, 1, 9728, "MIG 1g.10gb+me"),
    GiProfile(0x9, 15, 1, 19968, "MIG 1g.20gb"),
    GiProfile(0x1, 14, 2, 19968, "MIG 2g.20gb"),
    GiProfile(0x2, 9, 3, 40192, "MIG 3g.40gb"),
    GiProfile(0x3, 5, 4, 40192, "MIG 4g.40gb"),
    GiProfile(0x4, 0, 7, 80384, "MIG 7g.80gb"),
]


def a100_profile(name: str) -> GiProfile:
    return next(p for p in A100_80GB_PROFILES if p.name == f"MIG {name}")


def h100(uuid: str = "GPU-11111111-1111-1111-1111-111111111111", bus: str = "00000000:18:00.0") -> FakeGpu:
    """An H100 with MIG off: utilisation works, two training processes."""
    return FakeGpu(
        name="NVIDIA H100 80GB HBM3",
        uuid=uuid,
        pci_device_id=0x233010DE,
        bus_id=bus,
        memory_total=81559 * MIB,
        memory_used=30 * GIB + 512 * MIB,
        mig_mode=(0, 0),
        utilization=(87, 41),
        processes=[(4242, 20 * GIB), (4343, 10 * GIB)],
        max_mig_devices=7,
        gi_profiles=A100_80GB_PROFILES,
    )


def a100_mig(uuid: str = "GPU-22222222-2222-2222-2222-222222222222", bus: str = "00000000:3B:00.0") -> FakeGpu:
    """An A100-80GB in MIG mode laid out as 3g.40gb + 2g.20gb + 2x 1g.10gb; slots 4-6 empty."""
    return FakeGpu(
        name="NVIDIA A100-SXM4-80GB",
        uuid=uuid,
        pci_device_id=0x20B210DE,
        bus_id=bus,
        memory_total=81920 * MIB,
        memory_used=12 * GIB,
        mig_mode=(1, 1),
        max_mig_devices=7,
        gi_profiles=A100_80GB_PROFILES,
        migs={
            0: FakeMig(
                a100_profile("3g.40gb"),
                "MIG-aaaaaaaa-0000-0000-0000-000000000001",
                2,
                used_bytes=8 * GIB,
                processes=[(5151, 8 * GIB)],
            ),
            1: FakeMig(a100_profile("2g.20gb"), "MIG-aaaaaaaa-0000-0000-0000-000000000002", 3),
            2: FakeMig(
                a100_profile("1g.10gb"),
                "MIG-aaaaaaaa-0000-0000-0000-000000000003",
                9,
                used_bytes=GIB,
                processes=[(5252, GIB)],
            ),
            3: FakeMig(a100_profile("1g.10gb"), "MIG-aaaaaaaa-0000-0000-0000-000000000004", 10),
        },
    )


def mig_pending(uuid: str = "GPU-33333333-3333-3333-3333-333333333333", bus: str = "00000000:86:00.0") -> FakeGpu:
    """An H100 whose MIG mode was switched on but the GPU not reset yet: current 0, pending 1."""
    gpu = h100(uuid, bus)
    gpu.mig_mode = (0, 1)
    gpu.processes = []
    gpu.memory_used = 0
    gpu.utilization = (0, 0)
    return gpu


def l4(uuid: str = "GPU-44444444-4444-4444-4444-444444444444", bus: str = "00000000:AF:00.0") -> FakeGpu:
    """A GPU without MIG at all: nvmlDeviceGetMigMode answers NotSupported."""
    return FakeGpu("NVIDIA L4", uuid, 0x27B810DE, bus, 23034 * MIB, 0, mig_mode=None, utilization=(5, 1))


# --- the module stand-in ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Handle:
    gpu: int
    slot: int | None = None  # set on MIG device handles


@dataclass(frozen=True)
class GpuInstanceHandle:
    gpu: int
    id: int


class FakeNVML:
    """Pass an instance where the agent takes an nvml module, or put it in sys.modules["pynvml"].

    `init_error`: the NVMLError_<Name> that nvmlInit raises ("LibraryNotFound", "DriverNotLoaded"...).
    `failures`: function name -> NVMLError_<Name> it raises for every handle (NoPermission, GpuIsLost...).
    """

    NVML_DEVICE_MIG_DISABLE = 0
    NVML_DEVICE_MIG_ENABLE = 1
    NVML_GPU_INSTANCE_PROFILE_COUNT = 0x12

    def __init__(
        self,
        gpus: list[FakeGpu] | None = None,
        *,
        driver: str = "580.82.07",
        init_error: str | None = None,
        failures: dict[str, str] | None = None,
    ) -> None:
        self.gpus = gpus if gpus is not None else [h100(), a100_mig(), mig_pending()]
        self.driver = driver
        self.init_error = init_error
        self.failures = failures or {}
        self.initialised = 0
        self.calls: list[str] = []
        self.NVMLError = NVMLError
        for name, cls in ERRORS.items():
            setattr(self, f"NVMLError_{name}", cls)

    # helpers

    def _enter(self, function: str) -> None:
        self.calls.append(function)
        if not self.initialised:
            raise ERRORS["Uninitialized"]()
        if function in self.failures:
            raise ERRORS[self.failures[function]]()

    def _gpu(self, handle: Any, function: str, mig: bool | None = False) -> FakeGpu:
        self._enter(function)
        if not isinstance(handle, Handle) or not 0 <= handle.gpu < len(self.gpus):
            raise ERRORS["InvalidArgument"]()
        if mig is not None and (handle.slot is not None) != mig:
            raise ERRORS["InvalidArgument"]()
        return self.gpus[handle.gpu]

    def _mig(self, handle: Handle, function: str) -> FakeMig:
        gpu = self._gpu(handle, function, mig=True)
        assert handle.slot is not None
        return gpu.migs[handle.slot]

    # library

    def nvmlInit(self) -> None:
        self.calls.append("nvmlInit")
        if self.init_error:
            raise ERRORS[self.init_error]()
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.initialised -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return self.driver

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Handle:
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.gpus):
            raise ERRORS["InvalidArgument"]()
        return Handle(index)

    # device queries (parent GPUs and, where NVML allows, MIG devices)

    def nvmlDeviceGetUUID(self, handle: Handle) -> str:
        gpu = self._gpu(handle, "nvmlDeviceGetUUID", mig=None)
        return gpu.uuid if handle.slot is None else gpu.migs[handle.slot].uuid

    def nvmlDeviceGetName(self, handle: Handle) -> str:
        return self._gpu(handle, "nvmlDeviceGetName").name

    def nvmlDeviceGetPciInfo(self, handle: Handle) -> Any:
        gpu = self._gpu(handle, "nvmlDeviceGetPciInfo")
        bus = gpu.bus_id.encode()
        return STRUCTS["nvmlPciInfo_t"](
            busIdLegacy=bus[:15], busId=bus, pciDeviceId=gpu.pci_device_id, pciSubSystemId=0x16BE10DE
        )

    def nvmlDeviceGetMemoryInfo(self, handle: Handle, version: int | None = None) -> Any:
        gpu = self._gpu(handle, "nvmlDeviceGetMemoryInfo", mig=None)
        if handle.slot is None:
            total, used = gpu.memory_total, gpu.memory_used
        else:
            mig = gpu.migs[handle.slot]
            total, used = mig.gi_profile.memory_mb * MIB, mig.used_bytes
        return STRUCTS["c_nvmlMemory_t"](total=total, free=total - used, used=used)

    def nvmlDeviceGetUtilizationRates(self, handle: Handle) -> Any:
        gpu = self._gpu(handle, "nvmlDeviceGetUtilizationRates", mig=None)
        if handle.slot is not None or (gpu.mig_mode and gpu.mig_mode[0]):
            raise ERRORS["NotSupported"]()  # NVML does not attribute utilisation to MIG (MIG user guide)
        return STRUCTS["c_nvmlUtilization_t"](gpu=gpu.utilization[0], memory=gpu.utilization[1])

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Handle) -> list[Any]:
        gpu = self._gpu(handle, "nvmlDeviceGetComputeRunningProcesses", mig=None)
        if handle.slot is not None:
            mig = gpu.migs[handle.slot]
            found = [(pid, used, mig.gpu_instance_id, mig.compute_instance_id) for pid, used in mig.processes]
        elif gpu.migs:
            found = [
                (pid, used, m.gpu_instance_id, m.compute_instance_id)
                for m in gpu.migs.values()
                for pid, used in m.processes
            ]
        else:
            found = [(pid, used, 0xFFFFFFFF, 0xFFFFFFFF) for pid, used in gpu.processes]
        return [_friendly(pid=p, usedGpuMemory=u, gpuInstanceId=g, computeInstanceId=c) for p, u, g, c in found]

    # MIG

    def nvmlDeviceGetMigMode(self, device: Handle) -> list[int]:
        gpu = self._gpu(device, "nvmlDeviceGetMigMode")
        if gpu.mig_mode is None:
            raise ERRORS["NotSupported"]()
        return list(gpu.mig_mode)

    def nvmlDeviceGetMaxMigDeviceCount(self, device: Handle) -> int:
        return self._gpu(device, "nvmlDeviceGetMaxMigDeviceCount").max_mig_devices

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: Handle, index: int) -> Handle:
        gpu = self._gpu(device, "nvmlDeviceGetMigDeviceHandleByIndex")
        if not 0 <= index < gpu.max_mig_devices:
            raise ERRORS["InvalidArgument"]()
        if index not in gpu.migs:
            raise ERRORS["NotFound"]()
        return Handle(device.gpu, index)

    def nvmlDeviceIsMigDeviceHandle(self, device: Handle) -> ctypes.c_uint:
        self._gpu(device, "nvmlDeviceIsMigDeviceHandle", mig=None)
        return ctypes.c_uint(int(device.slot is not None))

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, migDevice: Handle) -> Handle:
        self._mig(migDevice, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle")
        return Handle(migDevice.gpu)

    def nvmlDeviceGetGpuInstanceId(self, device: Handle) -> int:
        return self._mig(device, "nvmlDeviceGetGpuInstanceId").gpu_instance_id

    def nvmlDeviceGetComputeInstanceId(self, device: Handle) -> int:
        return self._mig(device, "nvmlDeviceGetComputeInstanceId").compute_instance_id

    def nvmlDeviceGetAttributes(self, device: Handle) -> Any:
        if device.slot is None:
            self._enter("nvmlDeviceGetAttributes")
            raise ERRORS["NotSupported"]()  # "GetAttributes is only supported for MIG devices"
        mig = self._mig(device, "nvmlDeviceGetAttributes")
        slices = mig.gi_profile.slices
        return STRUCTS["c_nvmlDeviceAttributes"](
            multiprocessorCount=16 * slices,
            gpuInstanceSliceCount=slices,
            computeInstanceSliceCount=mig.compute_slices or slices,
            memorySizeMB=mig.gi_profile.memory_mb,
        )

    def nvmlDeviceGetGpuInstanceProfileInfo(self, device: Handle, profile: int, version: int = 2) -> Any:
        gpu = self._gpu(device, "nvmlDeviceGetGpuInstanceProfileInfo")
        if not 0 <= profile < self.NVML_GPU_INSTANCE_PROFILE_COUNT:
            raise ERRORS["InvalidArgument"]()
        match = next((p for p in gpu.gi_profiles if p.enum == profile), None)
        if match is None or not gpu.mig_mode:
            raise ERRORS["NotSupported"]()
        info = STRUCTS["c_nvmlGpuInstanceProfileInfo_v2_t"]()
        info.id, info.sliceCount, info.memorySizeMB = match.id, match.slices, match.memory_mb
        info.instanceCount = 7 // match.slices
        info.name = match.name.encode()
        return info

    def nvmlDeviceGetGpuInstanceById(self, device: Handle, gpuInstanceId: int) -> GpuInstanceHandle:
        gpu = self._gpu(device, "nvmlDeviceGetGpuInstanceById")
        if not any(m.gpu_instance_id == gpuInstanceId for m in gpu.migs.values()):
            raise ERRORS["NotFound"]()
        return GpuInstanceHandle(device.gpu, gpuInstanceId)

    def nvmlGpuInstanceGetInfo(self, gpuInstance: GpuInstanceHandle) -> Any:
        self._enter("nvmlGpuInstanceGetInfo")
        gpu = self.gpus[gpuInstance.gpu]
        mig = next(m for m in gpu.migs.values() if m.gpu_instance_id == gpuInstance.id)
        return SimpleNamespace(
            device=Handle(gpuInstance.gpu), id=gpuInstance.id, profileId=mig.gi_profile.id, placement=None
        )


def public_functions() -> list[str]:
    return sorted(name for name in dir(FakeNVML) if name.startswith("nvml"))
