"""What `gpugov reclaim` took back, per tenant: the Workloads it deactivated in the window and the
accelerator-hours they held idle before it did.

How long a deactivated Workload would still have run is not knowable, so it is not counted. What
is knowable is on the Workload: `gpugov.io/reclaim-warned-at` (idle for the policy's window, owner
warned) and `gpugov.io/reclaim-deactivated-at` (grace over, `spec.active=false`). From the warning
to the deactivation it held its accelerators idle: those hours, clipped to the window, times what
it asked for (Kueue clears the admission of a deactivated Workload; its podSets keep the requests),
are "reclaimed". A deactivation counts in the window that holds its time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from gpugov.kube.objects import ANNOTATION_RECLAIM_DEACTIVATED, ANNOTATION_RECLAIM_WARNED
from gpugov.queueing.workload import Workload, WorkloadError, parse_time
from gpugov.usage.window import Window, seconds


@dataclass(frozen=True)
class Reclaimed:
    tenant: str
    resource: str
    deactivations: int  # Workloads holding this resource that gpugov deactivated in the window
    accelerator_seconds: Decimal  # held idle from the warning to the deactivation, within the window


@dataclass(frozen=True)
class ReclaimedResult:
    rows: tuple[Reclaimed, ...]
    notes: tuple[str, ...]


def _time(annotations: Mapping[str, str], key: str) -> tuple[datetime | None, bool]:
    """(the annotation's time, whether it is present but unreadable)."""
    try:
        return parse_time(annotations.get(key)), False
    except WorkloadError:
        return None, True


def reclaimed(workloads: Iterable[tuple[Workload, Mapping[str, str]]], window: Window,
              tenant_of: Callable[[Workload], str]) -> ReclaimedResult:
    """Per (tenant, accelerator resource): deactivations by gpugov in the window and the idle
    accelerator-seconds before each; `workloads` pairs each Workload with its annotations."""
    count: dict[tuple[str, str], int] = defaultdict(int)
    held: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    notes = []
    for workload, marks in workloads:
        deactivated, unreadable = _time(marks, ANNOTATION_RECLAIM_DEACTIVATED)
        if unreadable:
            notes.append(f"Workload {workload.key}: {ANNOTATION_RECLAIM_DEACTIVATED} is not an RFC 3339 time: "
                         "not counted as reclaimed")
        if deactivated is None or not window.since <= deactivated < window.until or not workload.accelerators:
            continue
        tenant = tenant_of(workload)
        warned, _ = _time(marks, ANNOTATION_RECLAIM_WARNED)
        idle = window.clip(warned, deactivated) if warned is not None and warned <= deactivated else None
        if warned is None or warned > deactivated:
            # Reactivated and warned again: the warning before this deactivation was overwritten.
            notes.append(f"Workload {workload.key}: no warning before its deactivation at "
                         f"{deactivated:%Y-%m-%dT%H:%M:%SZ} is recorded: counted, its idle hours are not")
        for resource, amount in workload.accelerators.items():
            count[(tenant, resource)] += 1
            if idle is not None:
                held[(tenant, resource)] += amount * seconds(idle[1] - idle[0])
    rows = tuple(Reclaimed(tenant, resource, count[(tenant, resource)], held[(tenant, resource)])
                 for tenant, resource in sorted(count))
    return ReclaimedResult(rows, tuple(notes))
