"""Public GPU-cluster traces as gpugov traces.

Alibaba cluster-trace-gpu-v2023 (github.com/alibaba/clusterdata, cluster-trace-gpu-v2023/README.md):
`openb_pod_list_*.csv`, one pod per row:
  name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase,
  creation_time, deletion_time, scheduled_time   (times in seconds)
The trace names no tenant; its QoS class (LS, BE, Burstable, Guaranteed) is the tenant key.
A GPU-sharing pod (num_gpu 1, gpu_milli < 1000) keeps its share of the device (the trace's
`share`, exactly gpu_milli / 1000), so GPU-hours are conserved; the replay holds it as the pools it
may use share a device (HAMi units, a MIG device, else whole devices: `Placement.share_requests`).
Every alternative of gpu_spec (V100M16|V100M32) that `model_map` maps is kept; each constraint, mapping and drop is counted (`notes`), and `strict` refuses a
drop. CPU-only pods and pods never scheduled are left out; the multigpu* files, which have no
times, are refused.

SenseTime Helios (github.com/S-Lab-System-Group/HeliosData, README.md): `cluster_log.csv`,
one Slurm job per row:
  job_id, user, vc, gpu_num, cpu_num, node_num, state, submit_time, start_time, end_time,
  duration, queue   (times as "YYYY-MM-DD HH:MM:SS", duration and queue in seconds)
The virtual cluster (vc) is the tenant key; a job of node_num nodes becomes that many pods,
its GPUs and CPUs split evenly among them. CPU-only jobs are left out.

Shanghai AI Lab AcmeTrace (github.com/InternLM/AcmeTrace, README.md): `trace_seren.csv`,
`trace_kalos.csv`; see `acme`.

Tenant keys map to tenants with `tenant_map` (key -> tenant, "*" for the rest); an unmapped
key is the tenant's name as is. `time_scale` shrinks (or stretches) every time.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Iterator
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
    notes: dict[str, int] = field(default_factory=dict)  # what the import did to the demand -> rows

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1

    def note(self, what: str) -> None:
        self.notes[what] = self.notes.get(what, 0) + 1


@dataclass(frozen=True)
class Mapping:
    tenant_map: dict[str, str] = field(default_factory=dict)
    model_map: dict[str, str] = field(default_factory=dict)  # Alibaba gpu_spec -> gpugov accelerator model
    time_scale: Decimal = Decimal(1)
    with_cpu_memory: bool = True
    strict: bool = False  # a constraint the mapping cannot keep is an error, not a note

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


ALIBABA_TIMES = ("creation_time", "scheduled_time", "deletion_time")


def _alibaba_rows(text: str, name: str) -> Iterator[tuple[int, dict[str, str]]]:
    header = next(csv.reader(io.StringIO(text)), [])
    if not any(c.strip() in ALIBABA_TIMES for c in header):
        raise TraceError(f"{name}:1: no submit or start time column (an openb_pod_list has {', '.join(ALIBABA_TIMES)}; "
                         "the multigpu* files list pods without times, so they cannot be replayed)")
    return _rows(text, name, ALIBABA_COLUMNS)


def _alibaba_models(spec: str, mapping: Mapping, result: Imported, where: str) -> str:
    """The job's `model`: every alternative of gpu_spec (A|B|C) that --model maps, in order.
    Each constraint, mapping and drop is counted in the summary; --strict refuses a drop."""
    if not spec or spec == "nan":
        return ""
    result.note(f"gpu_spec {spec}")
    kept = []
    for alternative in (a.strip() for a in spec.split("|")):
        model = mapping.model_map.get(alternative, "")
        if model:
            result.note(f"{alternative} mapped to {model}")
            kept.append(model)
        else:
            if mapping.strict:
                raise TraceError(f"{where}: gpu_spec {spec!r}: {alternative} has no --model mapping (--strict)")
            result.note(f"{alternative} dropped (no --model)")
    if not kept:
        result.note(f"gpu_spec {spec} dropped: the job may run on any model")
    return "|".join(dict.fromkeys(kept))


def alibaba(text: str, name: str = "openb_pod_list.csv", mapping: Mapping = Mapping()) -> Imported:
    """A GPU-sharing pod (gpu_milli below 1000) keeps its exact share of the device (trace
    column `share`), so the imported GPU-hours equal the trace's."""
    result = Imported([])
    kept = []
    for line, row in _alibaba_rows(text, name):
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
        milli = _number(row["gpu_milli"] or "1000", "gpu_milli", where)
        if gpus != gpus.to_integral_value() or not 0 < milli <= 1000:
            raise TraceError(f"{where}: num_gpu {row['num_gpu']!r} and gpu_milli {row['gpu_milli']!r} are not "
                             "a whole number of devices and a share of each (1-1000)")
        cpu = _number(row["cpu_milli"] or "0", "cpu_milli", where)
        memory = _number(row["memory_mib"] or "0", "memory_mib", where)
        model = _alibaba_models(row["gpu_spec"], mapping, result, where)
        kept.append((created, deleted - scheduled, int(gpus), milli / 1000, cpu, memory, model, row))
    if not kept:
        return result
    start = min(k[0] for k in kept)
    for created, ran, gpus, share, cpu, memory, model, row in kept:
        if share < 1:
            result.note("GPU-sharing pod: kept as a share of one device")
        result.jobs.append(Job(
            id=row["name"],
            submit_ms=mapping.ms(created - start),
            duration_ms=max(1, mapping.ms(ran)),
            tenant=mapping.tenant(row["qos"]),
            accelerators=gpus,
            share=share.normalize() if share < 1 else Decimal(1),
            model=model,
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


@dataclass(frozen=True)
class _NodeJob:
    """A row of a trace that counts jobs in nodes (Helios, AcmeTrace): when, how long, how big."""

    submitted: Decimal
    ran: Decimal
    gpus: Decimal
    nodes: int
    cpus: Decimal
    row: dict[str, str]
    where: str


def _node_jobs(text: str, name: str, columns: tuple[str, ...], time: Callable[[str, str, str], Decimal],
               result: Imported) -> list[_NodeJob]:
    """The rows that ran on accelerators; the others counted as skipped in `result`, with why."""
    kept = []
    for line, row in _rows(text, name, columns):
        where = f"{name}:{line}"
        gpus = _number(row["gpu_num"] or "0", "gpu_num", where)
        if gpus <= 0:
            result.skip("CPU-only job")
            continue
        if not row["start_time"] or not row["end_time"]:
            result.skip("never started")
            continue
        submitted = time(row["submit_time"], "submit_time", where)
        ran = (_number(row["duration"], "duration", where) if row["duration"]
               else time(row["end_time"], "end_time", where) - time(row["start_time"], "start_time", where))
        if ran <= 0:
            result.skip("ran for no time")
            continue
        nodes = max(1, int(_number(row["node_num"] or "1", "node_num", where)))
        kept.append(_NodeJob(submitted, ran, gpus, nodes, _number(row["cpu_num"] or "0", "cpu_num", where), row, where))
    return kept


def helios(text: str, name: str = "cluster_log.csv", mapping: Mapping = Mapping()) -> Imported:
    result = Imported([])
    kept = _node_jobs(text, name, HELIOS_COLUMNS, _helios_time, result)
    if not kept:
        return result
    start = min(k.submitted for k in kept)
    for k in kept:
        submitted, ran, gpus, nodes, cpus, row = k.submitted, k.ran, k.gpus, k.nodes, k.cpus, k.row
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


ACME_COLUMNS = ("job_id", "user", "node_num", "gpu_num", "cpu_num", "type", "state", "submit_time", "start_time",
                "end_time", "duration", "queue", "gpu_time")
ACME_TIMES = ("submit_time", "start_time")


def _acme_time(value: str, what: str, where: str) -> Decimal:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise TraceError(f"{where}: {what} is not a time like 2023-03-01 00:18:22+08:00: {value!r}") from None
    return Decimal(int(moment.timestamp()))


def acme(text: str, name: str = "trace_seren.csv", mapping: Mapping = Mapping()) -> Imported:
    """Shanghai AI Lab's AcmeTrace (github.com/InternLM/AcmeTrace, README.md), `trace_seren.csv`
    and `trace_kalos.csv`, one job per row:
      job_id, user, node_num, gpu_num, cpu_num, type, state, submit_time, start_time, end_time,
      duration, queue, gpu_time   (times with their UTC offset, duration and queue in seconds);
    Kalos adds mem_per_pod_GB, shared_mem_per_pod, fail_time, stop_time.
    The workload type (Pretrain, SFT, Evaluation, Debug, Other) is the tenant key; a job of N
    nodes becomes N pods with its GPUs and CPUs split evenly, memory per pod from Kalos's
    mem_per_pod_GB (GB, 10^9 bytes). CPU-only jobs and jobs that never started are left out."""
    header = next(csv.reader(io.StringIO(text)), [])
    if not all(c in (h.strip() for h in header) for c in ACME_TIMES):
        raise TraceError(f"{name}:1: no submit or start time column (AcmeTrace has {', '.join(ACME_TIMES)})")
    result = Imported([])
    kept = _node_jobs(text, name, ACME_COLUMNS, _acme_time, result)
    if not kept:
        return result
    start = min(k.submitted for k in kept)
    for k in kept:
        submitted, ran, gpus, nodes, cpus, row = k.submitted, k.ran, k.gpus, k.nodes, k.cpus, k.row
        if gpus % nodes:
            result.note(f"GPUs not divisible by nodes: {nodes} pods of {math.ceil(gpus / nodes)} (rounded up)")
        memory = _number(row.get("mem_per_pod_GB") or "0", "mem_per_pod_GB", k.where)
        result.jobs.append(Job(
            id=f"acme-{row['job_id']}",
            submit_ms=mapping.ms(submitted - start),
            duration_ms=max(1, mapping.ms(ran)),
            tenant=mapping.tenant(row["type"] or "Other"),
            pods=nodes,
            accelerators=math.ceil(gpus / nodes),
            cpu_milli=math.ceil(cpus * 1000 / nodes) if mapping.with_cpu_memory else 0,
            memory_bytes=math.ceil(memory * 10**9) if mapping.with_cpu_memory else 0,
        ))
    result.jobs.sort(key=lambda j: j.submit_ms)
    return result


IMPORTERS = {"alibaba": alibaba, "helios": helios, "acme": acme}
