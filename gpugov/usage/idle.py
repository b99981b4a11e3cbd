"""Idle-but-allocated: admitted accelerator time whose DCGM utilisation stayed below the
Guardrails idle threshold (`idle.utilizationBelowPercent`).

The range query samples `max_over_time(...[STEP])` every STEP, so a sample at t below the
threshold says the pod's busiest device stayed idle for all of (t - STEP, t], where the series went on
after t (gpugov.sources.coverage). Those intervals, intersected with the workload's admitted segments,
times what each of its pods holds, are its idle accelerator-seconds. Time without samples is not idle
(nothing says so), nor is the step before a series stopped (the exporter lost it part-way). A pod belongs to
the Workload owned by its own name (Kueue's pod integration) or by its Job (`<job>-...`, the
longest such job name in its namespace, for pods that no longer exist).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from gpugov.queueing.workload import Workload
from gpugov.sources.coverage import measured
from gpugov.usage.segments import Segment
from gpugov.usage.window import seconds

Samples = Mapping[tuple[str, str], list[tuple[datetime, float]]]  # (namespace, pod) -> (time, percent)


def idle_intervals(points: list[tuple[datetime, float]], step: timedelta, below: Decimal,
                   until: datetime) -> list[tuple[datetime, datetime]]:
    """The merged (t - step, t] of every sample under `below` percent that stands for that step
    (gpugov.sources.coverage.measured: not the last one before the series stopped short of `until`)."""
    merged: list[tuple[datetime, datetime]] = []
    for start, at, value in measured(sorted(points), step, until):
        if Decimal(repr(value)) >= below:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], at))
        else:
            merged.append((start, at))
    return merged


def _overlap(intervals: list[tuple[datetime, datetime]], start: datetime, end: datetime) -> Decimal:
    total = Decimal(0)
    for low, high in intervals:
        a, b = max(low, start), min(high, end)
        if a < b:
            total += seconds(b - a)
    return total


def pods_of(workloads: Iterable[Workload], pods: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(namespace, pod) -> the namespace/name of the Workload it ran for."""
    by_pod: dict[tuple[str, str], str] = {}
    jobs: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for w in workloads:
        if w.owner_kind == "Pod":
            by_pod[(w.namespace, w.owner_name)] = w.key
        else:
            jobs[w.namespace].append((w.job, w.key))
    result = {}
    for namespace, pod in pods:
        if (namespace, pod) in by_pod:
            result[(namespace, pod)] = by_pod[(namespace, pod)]
            continue
        matches = [(len(job), key) for job, key in jobs.get(namespace, []) if pod.startswith(f"{job}-")]
        if matches:
            result[(namespace, pod)] = max(matches)[1]
    return result


@dataclass(frozen=True)
class IdleResult:
    seconds: dict[tuple[str, str, str], Decimal]  # (tenant, pool, resource) -> idle accelerator-seconds
    pods_without_samples: int  # pods of admitted workloads in the window with no series at all


def idle(workloads: list[Workload], found: list[Segment], samples: Samples, step: timedelta,
         below: Decimal, until: datetime) -> IdleResult:
    """Idle accelerator-seconds per (tenant, pool, resource); `until` is the end of the read samples."""
    owner = pods_of(workloads, samples)
    pods_by_workload: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for pod, key in owner.items():
        pods_by_workload[key].append(pod)
    counts = {w.key: sum(ps.count for ps in w.pod_sets) for w in workloads}
    intervals = {pod: idle_intervals(points, step, below, until) for pod, points in samples.items()}
    result: dict[tuple[str, str, str], Decimal] = defaultdict(Decimal)
    for segment in found:
        pods = counts.get(segment.workload) or 1
        per_pod = segment.amount / pods
        for pod in pods_by_workload.get(segment.workload, []):
            quiet = _overlap(intervals[pod], segment.start, segment.end)
            if quiet:
                result[(segment.tenant, segment.pool, segment.resource)] += per_pod * quiet
    with_samples = set(pods_by_workload)
    missing = sum(counts.get(key, 0) for key in {s.workload for s in found} - with_samples)
    return IdleResult(dict(result), missing)
