"""When a pending workload may start, from the expected ends of the running ones.

A running workload's end is known only when Kueue will end it: `spec.maximumExecutionTimeSeconds`
(Job label `kueue.x-k8s.io/max-exec-time-seconds`) after its admission. For each pool where the
workload waits, the need is its deficit plus what the workloads ahead of it in its ClusterQueue
ask of that resource; the estimate is the first expected end by which the running workloads that
hold that resource there (in its cohort tree for a quota wait, in its own ClusterQueue for a
borrowing limit) release that much. Over several resources of a pool the latest such end counts;
over several pools the earliest. It is an estimate: work queued in other ClusterQueues of the
cohort, priorities and preemption can change the order, and a job may end before its limit.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from gpugov.i18n import Joined, Text
from gpugov.kube.quantity import format_quantity
from gpugov.queueing.reasons import Deficit, Reason, Why
from gpugov.queueing.workload import Workload


@dataclass(frozen=True)
class Estimate:
    at: datetime | None  # None: no estimate
    text: str  # a Text: told in the reader's language, English in JSON
    relies_on: tuple[str, ...] = ()  # namespace/job of the running workloads whose ends it uses


@dataclass(frozen=True)
class Releases:
    """What the running workloads will release of one pool resource: known ends soonest first,
    with the running total, and how many hold some with no known end."""

    pool: str
    resource: str
    ends: tuple[tuple[datetime, str, Decimal], ...]  # (expected end, namespace/job, total released by then)
    unknown: int

    @classmethod
    def of(cls, running: Iterable[Workload], pool: str, resource: str) -> Releases:
        holders = [(w, w.usage_by_flavor().get((pool, resource), Decimal(0))) for w in running]
        return cls.of_holders([(w, amount) for w, amount in holders if amount > 0], pool, resource)

    @classmethod
    def of_holders(cls, holders: list[tuple[Workload, Decimal]], pool: str, resource: str) -> Releases:
        """From the running workloads that hold some of (pool, resource), with what each holds."""
        known = sorted((w.expected_end, f"{w.namespace}/{w.job}", amount) for w, amount in holders
                       if w.expected_end is not None)
        total, ends = Decimal(0), []
        for end, name, amount in known:
            total += amount
            ends.append((end, name, total))
        return cls(pool, resource, tuple(ends), len(holders) - len(known))

    def when(self, need: Decimal, now: datetime) -> tuple[datetime | None, str, tuple[str, ...]]:
        """(first time `need` is released, why not when never, the workloads it relies on)."""
        totals = [total for _, _, total in self.ends]
        index = bisect_left(totals, need)
        if index < len(self.ends):
            return max(self.ends[index][0], now), "", tuple(name for _, name, _ in self.ends[:index + 1])
        if self.unknown:
            return None, Text("{count} running workload(s) holding {resource} in pool {pool} have no expected end "
                              "(no maximum execution time)", count=self.unknown, resource=self.resource,
                              pool=self.pool), ()
        released = totals[-1] if totals else Decimal(0)
        return None, Text("the running workloads hold only {released} {resource} in pool {pool}, it needs {need} "
                          "released", released=format_quantity(released), resource=self.resource, pool=self.pool,
                          need=format_quantity(need)), ()


Lookup = Callable[[str, str], Releases]


def releases(running: Iterable[Workload]) -> Lookup:
    """(pool, resource) -> Releases of `running`, each computed once, from one pass over `running`
    that files each workload under what it holds (not one pass per pool and resource: a cohort tree
    spanning 50 pools holds tens of thousands of running workloads at Kueue's scale)."""
    workloads = list(running)
    cache: dict[tuple[str, str], Releases] = {}
    held: dict[tuple[str, str], list[tuple[Workload, Decimal]]] = {}
    filed = [False]

    def lookup(pool: str, resource: str) -> Releases:
        if (pool, resource) not in cache:
            if not filed[0]:
                filed[0] = True
                for w in workloads:  # in `running`'s order, as Releases.of takes them
                    for key, amount in w.usage_by_flavor().items():
                        if amount > 0:
                            held.setdefault(key, []).append((w, amount))
            cache[(pool, resource)] = Releases.of_holders(held.get((pool, resource), []), pool, resource)
        return cache[(pool, resource)]

    return lookup


def estimate_start(reason: Reason, workload: Workload, ahead: Mapping[str, Decimal], cohort: Lookup, own: Lookup,
                   now: datetime) -> Estimate:
    """`ahead`: what the pending workloads before it in its ClusterQueue ask, per resource;
    `cohort`: the releases of the admitted workloads of every ClusterQueue in its cohort tree (its
    own included); `own`: those of its own ClusterQueue (see `releases`)."""
    if reason.why in (Why.ADMITTED, Why.RESERVED, Why.FINISHED):
        return Estimate(workload.admitted_at, Text("started"))
    if reason.why == Why.PREEMPTION:
        return Estimate(now, Text("as soon as the preempted workloads have left"))
    if reason.finding:  # the reason says why, in words (its code is the JSON's reason.why)
        return Estimate(None, Text("never, as declared (see the reason)"))
    if reason.why not in (Why.QUOTA, Why.BORROWING_LIMIT) or not reason.deficits:
        return Estimate(None, Text("no estimate for this reason"))
    lookup = own if reason.why == Why.BORROWING_LIMIT else cohort
    by_pool: dict[str, list[Deficit]] = {}
    for deficit in reason.deficits:
        by_pool.setdefault(deficit.pool, []).append(deficit)
    best: Estimate | None = None
    why_not: list[str] = []
    for pool, deficits in sorted(by_pool.items()):
        latest: datetime | None = None
        relies: list[str] = []
        failed = ""
        for deficit in deficits:
            need = deficit.more + ahead.get(deficit.resource, Decimal(0))
            at, failed, used = lookup(deficit.pool, deficit.resource).when(need, now)
            if at is None:
                break
            latest = at if latest is None else max(latest, at)
            relies.extend(u for u in used if u not in relies)
        if failed or latest is None:
            why_not.append(failed or Text("nothing known about pool {pool}", pool=pool))
            continue
        if best is None or best.at is None or latest < best.at:
            ends = Joined(", ", relies)
            text = Text("when {ends} reaches its maximum execution time in pool {pool}", ends=ends, pool=pool) \
                if len(relies) == 1 else \
                Text("when {ends} reach their maximum execution time in pool {pool}", ends=ends, pool=pool)
            best = Estimate(latest, text, tuple(relies))
    return best or Estimate(None, Text("no estimate: {why}", why=Joined("; ", why_not)))
