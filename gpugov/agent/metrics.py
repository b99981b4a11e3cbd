"""Prometheus text exposition of a Snapshot, through prometheus_client's custom-collector API.

Label names follow DCGM where they mean the same thing (`gpu` = index, `uuid`), so a query can join
gpugov_* and DCGM_FI_* series on (node, gpu). Utilisation is a 0..1 ratio, like DCGM's PROF_* fields.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gpugov.agent.snapshot import SCHEMA_VERSION, Snapshot

__all__ = ["CONTENT_TYPE", "SnapshotCollector", "render"]

# The classic text format that generate_latest writes; every Prometheus version reads it.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_GPU = ["node", "gpu", "uuid"]
_MIG = ["node", "gpu", "parent_uuid", "uuid", "profile"]


def _s(value: object) -> str:
    return "" if value is None else str(value)


class SnapshotCollector(Collector):
    """Yields the metric families of one snapshot; generate_latest takes it in place of a registry."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot
        g = GaugeMetricFamily
        node_info = g(
            "gpugov_node_info",
            "The agent's node, its driver and snapshot schema.",
            labels=["node", "driver_version", "schema_version"],
        )
        node_info.add_metric([snap.node, _s(snap.driver_version), str(SCHEMA_VERSION)], 1)
        stamp = g("gpugov_snapshot_timestamp_seconds", "When NVML was read (Unix time).", labels=["node"])
        stamp.add_metric([snap.node], snap.timestamp.timestamp())

        info = g(
            "gpugov_gpu_info", "One series per GPU, value 1.", labels=[*_GPU, "model", "pci_device_id", "pci_bus_id"]
        )
        mem_total = g("gpugov_gpu_memory_total_bytes", "GPU memory size.", labels=_GPU)
        mem_used = g("gpugov_gpu_memory_used_bytes", "GPU memory in use.", labels=_GPU)
        util = g("gpugov_gpu_utilization_ratio", "Share of time a kernel ran (NVML); absent on MIG GPUs.", labels=_GPU)
        mig_on = g("gpugov_gpu_mig_enabled", "MIG mode now (1 on, 0 off); absent on GPUs without MIG.", labels=_GPU)
        mig_next = g("gpugov_gpu_mig_pending_enabled", "MIG mode after the next GPU reset.", labels=_GPU)
        procs = g("gpugov_gpu_processes", "Compute processes on the GPU.", labels=_GPU)
        mig_info = g(
            "gpugov_mig_device_info",
            "One series per MIG device, value 1.",
            labels=[*_MIG, "gpu_instance_id", "compute_instance_id"],
        )
        mig_total = g("gpugov_mig_device_memory_total_bytes", "MIG device memory size.", labels=_MIG)
        mig_used = g("gpugov_mig_device_memory_used_bytes", "MIG device memory in use.", labels=_MIG)
        mig_procs = g("gpugov_mig_device_processes", "Compute processes on the MIG device.", labels=_MIG)

        for gpu in snap.gpus:
            labels = [snap.node, str(gpu.index), _s(gpu.uuid)]
            info.add_metric([*labels, _s(gpu.name), _s(gpu.pci_device_id), _s(gpu.pci_bus_id)], 1)
            if gpu.memory_total_bytes is not None:
                mem_total.add_metric(labels, gpu.memory_total_bytes)
            if gpu.memory_used_bytes is not None:
                mem_used.add_metric(labels, gpu.memory_used_bytes)
            if gpu.utilization is not None:
                util.add_metric(labels, gpu.utilization.gpu_ratio)
            if gpu.mig_enabled is not None:
                mig_on.add_metric(labels, int(gpu.mig_enabled))
            if gpu.mig_pending is not None:
                mig_next.add_metric(labels, int(gpu.mig_pending))
            if gpu.processes is not None:
                procs.add_metric(labels, len(gpu.processes))
            for mig in gpu.mig_devices:
                ml = [snap.node, str(gpu.index), _s(gpu.uuid), _s(mig.uuid), _s(mig.profile)]
                mig_info.add_metric([*ml, _s(mig.gpu_instance_id), _s(mig.compute_instance_id)], 1)
                if mig.memory_total_bytes is not None:
                    mig_total.add_metric(ml, mig.memory_total_bytes)
                if mig.memory_used_bytes is not None:
                    mig_used.add_metric(ml, mig.memory_used_bytes)
                if mig.processes is not None:
                    mig_procs.add_metric(ml, len(mig.processes))

        yield from (node_info, stamp, info, mem_total, mem_used, util, mig_on, mig_next, procs)
        yield from (mig_info, mig_total, mig_used, mig_procs)


def render(snapshot: Snapshot) -> bytes:
    return generate_latest(SnapshotCollector(snapshot))
