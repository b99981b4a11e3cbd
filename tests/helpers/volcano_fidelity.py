"""The seeded trace and the expected states of the Volcano what-if fidelity test (tests/e2e/test_whatif_volcano_fidelity.py).

A trace of gang jobs across cluster west's tenants, each pod asking a whole Ascend node (8), so that
which node a pod lands on never decides what fits later. The replay (gpugov.whatif.volcano) says,
after each event of the trace (a submission, or the end of a run the replay itself scheduled), which
jobs run; the test does the same events on the real vc-scheduler and compares.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

from gpugov.whatif.trace import Job
from gpugov.whatif.volcano import VOutcome

TENANTS = (("llm-pretrain", 3, (1, 1, 2, 3)), ("speech", 2, (1, 1, 2)), ("recsys", 1, (1,)))  # weight, pods
GAP_S = 30  # between submissions
SETTLE_MS = 3000  # the replay's consequences of an event fall within this of it


def fidelity_trace(seed: int, jobs: int = 14) -> list[Job]:
    rng = random.Random(seed)
    trace = []
    for index in range(jobs):
        tenant, _weight, sizes = rng.choices(TENANTS, [t[1] for t in TENANTS])[0]
        trace.append(Job(id=f"f{index:02d}-{tenant}", submit_ms=index * GAP_S * 1000,
                         duration_ms=rng.choice((40, 60, 80, 100)) * 1000 + rng.randint(1, 999),
                         tenant=tenant, pods=rng.choice(sizes), accelerators=8))
    return trace


@dataclass(frozen=True)
class Step:
    at_ms: int
    kind: str  # "submit" | "finish"
    job: str
    running: frozenset[str]  # the jobs running once the event's consequences have played out
    reclaims: bool  # the event leads to a reclaim or a preemption


def steps(trace: list[Job], outcome: VOutcome) -> list[Step]:
    """The events in the replay's order and, after each, the jobs the replay has running."""
    events = sorted([(j.submit_ms, 0, "submit", j.id) for j in trace]
                    + [(ms, 1, "finish", job) for ms, what, job in outcome.log if what == "finish"])
    consequences = [(ms, what, job) for ms, what, job in outcome.log if what in ("admit", "reclaim", "preempt")]
    out: list[Step] = []
    running: set[str] = set()
    for index, (at, _order, kind, job) in enumerate(events):
        if kind == "finish":
            running.discard(job)
        until = events[index + 1][0] if index + 1 < len(events) else at + SETTLE_MS + 1
        reclaims = False
        for ms, what, who in consequences:
            if at <= ms < until:
                (running.add if what == "admit" else running.discard)(who)
                reclaims = reclaims or what in ("reclaim", "preempt")
        out.append(Step(at, kind, job, frozenset(running), reclaims))
    return out


def separated(trace: list[Job], outcome: VOutcome) -> list[str]:
    """Where the real scheduler, which settles after each event before the test does the next, could
    differ from the replay for timing alone: two events at one instant, or an event that comes before
    the consequences of the one before it (a reclaimer placed a period after its reclaim) are done."""
    events = sorted([j.submit_ms for j in trace] + [ms for ms, what, _ in outcome.log if what == "finish"])
    problems = [f"two events at {a} ms" for a, b in itertools.pairwise(events) if a == b]
    for ms, what, job in outcome.log:
        if what not in ("admit", "reclaim", "preempt"):
            continue
        before = max(e for e in events if e <= ms)
        if ms - before > SETTLE_MS:
            problems.append(f"{what} of {job} at {ms} ms, long after the event at {before} ms")
        if what in ("reclaim", "preempt") and any(ms < e <= ms + SETTLE_MS for e in events):
            problems.append(f"an event within {SETTLE_MS} ms of the reclaim of {job} at {ms} ms")
    return problems
