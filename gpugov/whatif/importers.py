"""Public GPU-cluster traces as gpugov traces.

Alibaba cluster-trace-gpu-v2023 (github.com/alibaba/clusterdata, cluster-trace-gpu-v2023/README.md):
`openb_pod_list_*.csv`, one pod per row:
  name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase,
  creation_time, deletion_time, scheduled_time   (times in seconds)
The trace names no tenant; its QoS class (LS, BE, Burstable, Guaranteed) is the tenant key.
A GPU-sharing pod (num_gpu 1, gpu_milli < 1000) counts as one whole GPU: fractional sharing
is outside Kueue's quota model. CPU-only pods and pods never scheduled are left out.

SenseTime Helios (github.com/S-Lab-System-Group/HeliosData, README.md): `cluster_log.csv`,
one Slurm job per row:
  job_id, user, vc, gpu_num, cpu_num, node_num, state, submit_time, start_time, end_time,
  duration, queue   (times as "YYYY-MM-DD HH:MM:SS", duration and queue in seconds)
The virtual cluster (vc) is the tenant key; a job of node_num nodes becomes that many pods,
its GPUs and CPUs split evenly among them. CPU-only jobs are left out.

Tenant keys map to tenants with `tenant_map` (key -> tenant, "*" for the rest); an unmapped
key is the tenant's name as is. `time_scale` shrinks (or stretches) every time.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation

from gpugov.whatif.trace import Job, TraceError

ALIBABA_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
                   "creation_time", "deletion_time", "scheduled_time")
HELIOS_COLUMNS = ("job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state", "submit_time", "start_time",
                  "end_time", "duration", "queue")
HELIOS_TIME = "%Y-%m-%d %H:%M:%S"


@dataclass
class Imported:
    jobs: list[Job]
    skipped: dict[str, int] = field(default_factory=dict)  # why -> rows

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


@dataclass(frozen=True)
class Mapping:
    tenant_map: dict[str, str] = field(default_factory=dict)
    model_map: dict[str, str] = field(default_factory=dict)  # Alibaba gpu_spec -> gpugov accelerator model
    time_scale: Decimal = Decimal(1)
    with_cpu_memory: bool = True

    def tenant(self, key: str) -> str:
        return self.tenant_map.get(key) or self.tenant_map.get("*") or key

    def ms(self, seconds: Decimal) -> int:
        return int((seconds * self.time_scale * 1000).to_integral_value())


def _rows(text: str, name: str, columns: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(text))
    header = tuple(c.strip() for c in reader.fieldnames or ())
    missing = [c for c in columns if c not in header]
    if missing:
        raise TraceError(f"{name}:1: not this trace's layout: no column {missing[0]!r} (expected {', '.join(columns)})")
    for row in reader:
        yield reader.line_num, {k.strip(): (v or "").strip() for k, v in row.items() if k is not None}


def _number(value: str, what: str, where: str) -> Decimal:
    try:
        number = Decimal(value)
    except InvalidOperation:
        raise TraceError(f"{where}: {what} is not a number: {value!r}") from None
    if not number.is_finite():
        raise TraceError(f"{where}: {what} is not a number: {value!r}")
    return number


def alibaba(text: str, name: str = "openb_pod_list.csv", mapping: Mapping = Mapping()) -> Imported:
    result = Imported([])
    kept = []
    for line, row in _rows(text, name, ALIBABA_COLUMNS):
        where = f"{name}:{line}"
        gpus = _number(row["num_gpu"] or "0", "num_gpu", where)
        if gpus <= 0:
            result.skip("CPU-only pod")
            continue
        if not row["scheduled_time"] or not row["deletion_time"] or row["pod_phase"] == "Pending":
            result.skip("never scheduled")
            continue
        created = _number(row["creation_time"], "creation_time", where)
        scheduled = _number(row["scheduled_time"], "scheduled_time", where)
        deleted = _number(row["deletion_time"], "deletion_time", where)
        if deleted <= scheduled:
            result.skip("ran for no time")
            continue
        cpu = _number(row["cpu_milli"] or "0", "cpu_milli", where)
        memory = _number(row["memory_mib"] or "0", "memory_mib", where)
        kept.append((created, deleted - scheduled, gpus, cpu, memory, row))
    if not kept:
        return result
    start = min(k[0] for k in kept)
    for created, ran, gpus, cpu, memory, row in kept:
        spec = row["gpu_spec"].split("|")[0] if row["gpu_spec"] and row["gpu_spec"] != "nan" else ""
        result.jobs.append(Job(
            id=row["name"],
            submit_ms=mapping.ms(created - start),
            duration_ms=max(1, mapping.ms(ran)),
            tenant=mapping.tenant(row["qos"]),
            accelerators=math.ceil(gpus),
            model=mapping.model_map.get(spec, "") if spec else "",
            cpu_milli=math.ceil(cpu) if mapping.with_cpu_memory else 0,
            memory_bytes=math.ceil(memory * 2**20) if mapping.with_cpu_memory else 0,
        ))
    result.jobs.sort(key=lambda j: j.submit_ms)
    return result


def _helios_time(value: str, what: str, where: str) -> Decimal:
    try:
        moment = datetime.strptime(value, HELIOS_TIME)
    except ValueError:
        raise TraceError(f"{where}: {what} is not {HELIOS_TIME}: {value!r}") from None
    return Decimal(int(moment.timestamp()))


def helios(text: str, name: str = "cluster_log.csv", mapping: Mapping = Mapping()) -> Imported:
    result = Imported([])
    kept = []
    for line, row in _rows(text, name, HELIOS_COLUMNS):
        where = f"{name}:{line}"
        gpus = _number(row["gpu_num"] or "0", "gpu_num", where)
        if gpus <= 0:
            result.skip("CPU-only job")
            continue
        if not row["start_time"] or not row["end_time"]:
            result.skip("never started")
            continue
        submitted = _helios_time(row["submit_time"], "submit_time", where)
        ran = (_number(row["duration"], "duration", where) if row["duration"]
               else _helios_time(row["end_time"], "end_time", where) - _helios_time(row["start_time"], "start_time", where))
        if ran <= 0:
            result.skip("ran for no time")
            continue
        nodes = max(1, int(_number(row["node_num"] or "1", "node_num", where)))
        cpus = _number(row["cpu_num"] or "0", "cpu_num", where)
        kept.append((submitted, ran, gpus, nodes, cpus, row))
    if not kept:
        return result
    start = min(k[0] for k in kept)
    for submitted, ran, gpus, nodes, cpus, row in kept:
        result.jobs.append(Job(
            id=f"helios-{row['job_id']}",
            submit_ms=mapping.ms(submitted - start),
            duration_ms=max(1, mapping.ms(ran)),
            tenant=mapping.tenant(row["vc"]),
            pods=nodes,
            accelerators=math.ceil(gpus / nodes),
            cpu_milli=math.ceil(cpus * 1000 / nodes) if mapping.with_cpu_memory else 0,
        ))
    result.jobs.sort(key=lambda j: j.submit_ms)
    return result


IMPORTERS = {"alibaba": alibaba, "helios": helios}
