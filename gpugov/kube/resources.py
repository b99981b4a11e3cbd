"""Which resource names are accelerators: one test for compile, the queues, usage, capacity and
the simulator. Everything a pod or queue counts that is not cpu, memory, pods, ephemeral storage
or huge pages is an accelerator (whole devices, MIG slices, vNPU templates, HAMi's units)."""

from __future__ import annotations

NON_ACCELERATOR = frozenset({"cpu", "memory", "pods", "ephemeral-storage"})
_HUGEPAGES = "hugepages-"  # hugepages-2Mi, hugepages-1Gi...


def is_accelerator(resource: str) -> bool:
    return resource not in NON_ACCELERATOR and not resource.startswith(_HUGEPAGES)
