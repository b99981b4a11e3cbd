"""Workloads as admitted intervals: which tenant held how much of which pool resource, from when
to when.

- The current admission: from the Admitted condition's lastTransitionTime to the Finished
  condition's (Kueue keeps the admission of a finished Workload), or to the read while it runs,
  on the flavors of `status.admission` and at its resourceUsage (what Kueue charged the queue;
  pods that finish early within a Job are not credited back: Kueue records no time for that).
- Earlier admissions, ended by eviction or preemption: Kueue keeps only their total,
  `status.accumulatedPastExecutionTimeSeconds` (whole seconds), and the time the last one ended
  (the Admitted condition turning False, else the Evicted condition). They are placed ending
  then, exact for a workload evicted once. Their flavor is the one of its current admission, or
  the only pool its ClusterQueue offers the resource in; when neither tells, the workload is
  `unplaced` and the ledger cannot be complete.
Accelerator resources only: cpu and memory are not billed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from gpugov.kube.resources import is_accelerator
from gpugov.queueing.workload import Workload
from gpugov.usage.window import Window


@dataclass(frozen=True)
class Segment:
    workload: str  # namespace/name
    tenant: str
    pool: str
    resource: str
    amount: Decimal
    start: datetime
    end: datetime

    @property
    def seconds(self) -> int:
        return int((self.end - self.start).total_seconds())


@dataclass(frozen=True)
class Unplaced:
    workload: str
    seconds: int
    why: str


def _earlier_end(workload: Workload) -> datetime | None:
    admitted = workload.condition("Admitted")
    if admitted is not None and not admitted.true and admitted.since is not None:
        return admitted.since
    evicted = workload.condition("Evicted")
    if evicted is not None and evicted.since is not None:
        return evicted.since
    return workload.admitted_at


def segments(workloads: Iterable[Workload], window: Window, now: datetime, tenant_of: Callable[[Workload], str],
             offers: Callable[[Workload, str], list[str]]) -> tuple[list[Segment], list[Unplaced]]:
    """Every admitted interval within `window`, and the earlier admissions that could not be placed.

    `tenant_of(w)`: the tenant charged; `offers(w, resource)`: the pools its ClusterQueue offers
    the resource in."""
    found: list[Segment] = []
    unplaced: list[Unplaced] = []
    for w in workloads:
        admitted = w.admitted_at
        if admitted is None and w.past_admitted_seconds <= 0:
            continue  # never admitted (still pending): nothing to charge, nothing to place
        tenant = tenant_of(w)
        held = {k: a for k, a in w.usage_by_flavor().items() if is_accelerator(k[1])}
        if admitted is not None:
            end = w.finished_at or min(now, window.until)
            clipped = window.clip(admitted, end)
            if clipped:
                found.extend(Segment(w.key, tenant, pool, resource, amount, *clipped)
                             for (pool, resource), amount in held.items())
        if w.past_admitted_seconds <= 0:
            continue
        end = _earlier_end(w)
        if end is None:
            unplaced.append(Unplaced(w.key, w.past_admitted_seconds, "no time says when its earlier admission ended"))
            continue
        start = end - timedelta(seconds=w.past_admitted_seconds)
        clipped = window.clip(start, end)
        if clipped is None:
            continue
        earlier = held
        if not earlier:
            earlier = {}
            for resource, amount in w.accelerators.items():
                pools = offers(w, resource)
                if len(pools) != 1:
                    unplaced.append(Unplaced(w.key, w.past_admitted_seconds,
                                             f"it may have held {resource} in any of {', '.join(pools) or 'no pool'}"))
                    earlier = {}
                    break
                earlier[(pools[0], resource)] = amount
        found.extend(Segment(w.key, tenant, pool, resource, amount, *clipped)
                     for (pool, resource), amount in earlier.items())
    return found, unplaced
