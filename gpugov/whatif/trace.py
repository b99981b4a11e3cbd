"""The job trace: what was submitted when, for how long, by whom, asking for what.

One row (CSV) or one object per line (JSON lines) per job. Columns:

  id             unique name (default: the row number)
  submit         seconds since the trace's start (decimals allowed, >= 0)
  duration       seconds the job runs once admitted (> 0)
  tenant         the tenant (its first LocalQueue), or
  namespace      a namespace (its first LocalQueue), or
  queue          a LocalQueue as namespace/name      (at least one of the three)
  pods           pods of the job, all alike (default 1)
  accelerators   accelerators per pod (default 1; 0 for CPU-only jobs)
  share          the share of each of those devices the job uses, an exact decimal in (0, 1]
                 (default 1: whole devices; 0.25: a quarter of one, as a GPU-sharing pod asks)
  resource       the accelerator's resource name (default: the pool's or model's, else nvidia.com/gpu)
  pool           only this pool (its ResourceFlavor), e.g. h100
  model          only pools of this accelerator model, e.g. H100-80GB; alternatives as A|B|C
  priority_class a WorkloadPriorityClass (default: none, priority 0)
  cpu, memory    per pod, Kubernetes quantities (default: none)

Times are kept as integer milliseconds, quantities as Kubernetes integers (cpu in
millicores, memory in bytes), so that a replay never depends on float rounding.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from gpugov.kube.quantity import QuantityError, parse_quantity

COLUMNS = ("id", "submit", "duration", "tenant", "namespace", "queue", "pods", "accelerators", "share", "resource",
           "pool", "model", "priority_class", "cpu", "memory")
WHOLE = Decimal(1)
DEFAULT_RESOURCE = "nvidia.com/gpu"
MAX_JOBS = 5_000_000


class TraceError(ValueError):
    """A trace that cannot be read: names the file and line."""


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    submit_ms: int
    duration_ms: int
    tenant: str = ""
    namespace: str = ""
    queue: str = ""  # namespace/name of a LocalQueue
    pods: int = 1
    accelerators: int = 1  # per pod
    resource: str = ""
    pool: str = ""
    model: str = ""
    priority_class: str = ""
    cpu_milli: int = 0  # per pod
    memory_bytes: int = 0  # per pod
    share: Decimal = WHOLE  # of each accelerator: what the job uses of the devices it is given

    @property
    def gpu_count(self) -> int:
        return self.pods * self.accelerators

    @property
    def devices_used(self) -> Decimal:
        """Devices' worth of accelerators the job uses: its share of each device it holds."""
        return self.gpu_count * self.share

    @property
    def models(self) -> tuple[str, ...]:
        """The accelerator models it may run on, in the trace's order (A|B|C)."""
        return tuple(m.strip() for m in self.model.split("|") if m.strip())


def _seconds(value: Any, field: str) -> int:
    """Seconds (int, decimal string) as integer milliseconds."""
    try:
        number = Decimal(str(value).strip())
    except InvalidOperation:
        raise ValueError(f"{field} must be a number of seconds, got {value!r}") from None
    if not number.is_finite():
        raise ValueError(f"{field} must be a number of seconds, got {value!r}")
    return int((number * 1000).to_integral_value())


def _count(value: Any, field: str, default: int) -> int:
    if value is None or str(value).strip() == "":
        return default
    try:
        number = Decimal(str(value).strip())
    except InvalidOperation:
        raise ValueError(f"{field} must be a whole number, got {value!r}") from None
    if not number.is_finite() or number != number.to_integral_value() or number < 0:
        raise ValueError(f"{field} must be a whole number >= 0, got {value!r}")
    return int(number)


def _share(value: Any) -> Decimal:
    if value is None or str(value).strip() == "":
        return WHOLE
    try:
        number = Decimal(str(value).strip())
    except InvalidOperation:
        raise ValueError(f"share must be a decimal in (0, 1], got {value!r}") from None
    if not number.is_finite() or not 0 < number <= 1:
        raise ValueError(f"share must be a decimal in (0, 1], got {value!r}")
    return number.normalize() if number != WHOLE else WHOLE


def _quantity(value: Any, field: str, milli: bool) -> int:
    if value is None or str(value).strip() == "":
        return 0
    try:
        amount = parse_quantity(value if isinstance(value, int | str) else str(value))
    except QuantityError as exc:
        raise ValueError(f"{field}: {exc}") from None
    if amount < 0:
        raise ValueError(f"{field} must not be negative, got {value!r}")
    scaled = amount * 1000 if milli else amount
    return math.ceil(scaled)  # as Kueue counts: MilliValue for cpu, Value for the rest, rounded up


def job_from_fields(fields: dict[str, Any], default_id: str) -> Job:
    """One job from a row's fields; ValueError naming the field on bad input."""
    unknown = sorted(set(fields) - set(COLUMNS))
    if unknown:
        raise ValueError(f"unknown column {unknown[0]!r} (known: {', '.join(COLUMNS)})")

    def text(name: str) -> str:
        value = fields.get(name)
        return "" if value is None else str(value).strip()

    for required in ("submit", "duration"):
        if text(required) == "":
            raise ValueError(f"{required} is required")
    submit = _seconds(fields["submit"], "submit")
    duration = _seconds(fields["duration"], "duration")
    if submit < 0:
        raise ValueError(f"submit must be >= 0, got {fields['submit']!r}")
    if duration <= 0:
        raise ValueError(f"duration must be > 0 seconds, got {fields['duration']!r}")
    tenant, namespace, queue = text("tenant"), text("namespace"), text("queue")
    if not (tenant or namespace or queue):
        raise ValueError("a job needs a tenant, a namespace or a queue")
    if queue and queue.count("/") != 1:
        raise ValueError(f"queue must be namespace/name, got {queue!r}")
    pods = _count(fields.get("pods"), "pods", 1)
    if pods < 1:
        raise ValueError("pods must be at least 1")
    return Job(
        id=text("id") or default_id,
        submit_ms=submit,
        duration_ms=duration,
        tenant=tenant,
        namespace=namespace,
        queue=queue,
        pods=pods,
        accelerators=_count(fields.get("accelerators"), "accelerators", 1),
        resource=text("resource"),
        pool=text("pool"),
        model=text("model"),
        priority_class=text("priority_class"),
        cpu_milli=_quantity(fields.get("cpu"), "cpu", milli=True),
        memory_bytes=_quantity(fields.get("memory"), "memory", milli=False),
        share=_share(fields.get("share")),
    )


def _rows(text: str, name: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, fields) of a CSV or JSON-lines text; JSON lines when the first
    non-blank character opens an object."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError as exc:
                raise TraceError(f"{name}:{number}: not a JSON object: {exc}") from None
            if not isinstance(value, dict):
                raise TraceError(f"{name}:{number}: not a JSON object")
            yield number, value
        return
    reader = csv.reader(io.StringIO(text))
    header: list[str] | None = None
    for row in reader:
        number = reader.line_num
        if not row or all(not cell.strip() for cell in row) or row[0].lstrip().startswith("#"):
            continue
        if header is None:
            header = [cell.strip() for cell in row]
            missing = [c for c in ("submit", "duration") if c not in header]
            if missing:
                raise TraceError(f"{name}:{number}: the header names no {missing[0]!r} column "
                                 f"(a trace's header names its columns: {', '.join(COLUMNS)})")
            continue
        if len(row) != len(header):
            raise TraceError(f"{name}:{number}: {len(row)} cells where the header has {len(header)}")
        yield number, dict(zip(header, row, strict=True))


def parse_trace(text: str, name: str = "<trace>") -> list[Job]:
    """The jobs of a trace text, sorted by submit time (then file order)."""
    jobs: list[Job] = []
    seen: dict[str, int] = {}
    for number, fields in _rows(text, name):
        try:
            job = job_from_fields(fields, default_id=f"job-{len(jobs) + 1}")
        except ValueError as exc:
            raise TraceError(f"{name}:{number}: {exc}") from None
        if job.id in seen:
            raise TraceError(f"{name}:{number}: job id {job.id!r} repeats line {seen[job.id]}")
        seen[job.id] = number
        jobs.append(job)
        if len(jobs) > MAX_JOBS:
            raise TraceError(f"{name}: more than {MAX_JOBS:,} jobs")
    if not jobs:
        raise TraceError(f"{name}: no jobs")
    return sorted(jobs, key=lambda j: j.submit_ms)  # stable: file order breaks ties


def read_trace(path: Path) -> list[Job]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: cannot read the trace: {exc}") from None
    return parse_trace(text, str(path))


def format_seconds(ms: int) -> str:
    """Milliseconds as the shortest exact decimal of seconds ("12", "0.5", "3.25")."""
    whole, rest = divmod(ms, 1000)
    return str(whole) if rest == 0 else f"{whole}.{rest:03d}".rstrip("0")


def _quantity_text(amount: int, milli: bool) -> str:
    if amount == 0:
        return ""
    if milli:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if amount % size == 0:
            return f"{amount // size}{suffix}"
    return str(amount)


def job_fields(job: Job) -> dict[str, str]:
    return {
        "id": job.id,
        "submit": format_seconds(job.submit_ms),
        "duration": format_seconds(job.duration_ms),
        "tenant": job.tenant,
        "namespace": job.namespace,
        "queue": job.queue,
        "pods": str(job.pods),
        "accelerators": str(job.accelerators),
        "share": "" if job.share == WHOLE else str(job.share),
        "resource": job.resource,
        "pool": job.pool,
        "model": job.model,
        "priority_class": job.priority_class,
        "cpu": _quantity_text(job.cpu_milli, milli=True),
        "memory": _quantity_text(job.memory_bytes, milli=False),
    }


def dump_trace(jobs: Iterable[Job], fmt: str = "csv") -> str:
    """The trace as CSV (every column, in COLUMNS order) or JSON lines (only set fields)."""
    out = io.StringIO()
    if fmt == "jsonl":
        for job in jobs:
            fields: dict[str, object] = {k: v for k, v in job_fields(job).items() if v != ""}
            for name in ("submit", "duration"):
                fields[name] = json.loads(str(fields[name]))  # a JSON number, exact as written
            fields["pods"], fields["accelerators"] = job.pods, job.accelerators
            out.write(json.dumps(fields) + "\n")
        return out.getvalue()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for job in jobs:
        fields = job_fields(job)
        writer.writerow([fields[c] for c in COLUMNS])
    return out.getvalue()
