"""Two Volcano replays of one trace, side by side, per tenant (its leaf Queue): waits, use of the
Queue's deserved share, runs reclaimed by other Queues and preempted within it. Markdown for the pull request, JSON for machines.

Volcano has no flavors and no cohorts: a tenant's line speaks of its Queue's deserved (what the
capacity plugin lets it keep against reclaim) and of its department, the parent Queue.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gpugov.i18n import _
from gpugov.whatif.report import MARKER, cell, duration, hours, percent, percentile
from gpugov.whatif.trace import Job
from gpugov.whatif.volcano import VJob, VOutcome, replay_volcano
from gpugov.whatif.volcano_setup import VolcanoSetup


@dataclass(frozen=True)
class VRun:
    label: str
    setup: VolcanoSetup
    outcome: VOutcome


def volcano_run(label: str, setup: VolcanoSetup, jobs: list[Job],
                progress: Callable[[int, int, int], None] | None = None) -> VRun:
    """One revision's replay through vc-scheduler's sessions (gpugov.whatif.pair's `work` for Volcano)."""
    return VRun(label, setup, replay_volcano(setup, jobs, progress))


@dataclass(frozen=True)
class VMetrics:
    tenant: str
    queue: str
    department: str
    jobs: int
    finished: int
    never: int
    wait_p50_ms: int | None
    wait_p95_ms: int | None
    used_device_ms: Decimal
    deserved: int
    reclaimed: int
    preempted: int

    def use(self, window_ms: int) -> Decimal | None:
        if not self.deserved or window_ms <= 0:
            return None
        return self.used_device_ms / (self.deserved * window_ms)


def used_ms(vjob: VJob) -> Decimal:
    """Device-milliseconds of its finished run (runs cut by reclaim are not counted)."""
    if vjob.finished_ms is None or not vjob.admissions:
        return Decimal(0)
    devices = sum(vjob.request.values()) * vjob.job.pods
    return Decimal(devices * (vjob.finished_ms - vjob.admissions[-1]))


def metrics(run: VRun) -> dict[str, VMetrics]:
    by_queue: dict[str, list[VJob]] = {}
    for vjob in run.outcome.jobs:
        by_queue.setdefault(vjob.queue, []).append(vjob)
    never: dict[str, int] = {}
    for tenant in run.outcome.never_tenants.values():
        never[tenant] = never.get(tenant, 0) + 1
    out: dict[str, VMetrics] = {}
    for name in run.setup.leaves():
        q = run.setup.queues[name]
        if not q.tenant:
            continue
        jobs = by_queue.get(name, [])
        finished = [j for j in jobs if j.finished_ms is not None]
        waits = sorted(j.admissions[-1] - j.job.submit_ms for j in finished)
        out[q.tenant] = VMetrics(q.tenant, name, q.parent or "", len(jobs), len(finished), never.get(q.tenant, 0),
                                 percentile(waits, 50), percentile(waits, 95),
                                 sum((used_ms(j) for j in jobs), Decimal(0)), sum(q.deserved.values()),
                                 sum(j.reclaimed for j in jobs), sum(j.preempted for j in jobs))
    return out


def window_of(*runs: VRun) -> int:
    jobs = [j for run in runs for j in run.outcome.jobs]
    if not jobs:
        return 0
    start = min(j.job.submit_ms for j in jobs)
    end = max([j.finished_ms or j.job.submit_ms for j in jobs])
    return end - start


def markdown(trace_name: str, cluster: str, base: VRun, head: VRun) -> str:
    window = window_of(base, head)
    bm, hm = metrics(base), metrics(head)
    lines = [MARKER, "", _("### gpugov whatif: cluster `{cluster}` (Volcano)").format(cluster=cluster), "",
             _("Replayed {trace} through Volcano v1.14's allocate, preempt and reclaim actions (capacity "
               "plugin with hierarchy) over the base {base} and the head {head}.").format(
                 trace=trace_name, base=base.label, head=head.label), "",
             "| " + " | ".join([_("tenant"), _("department"), _("jobs"), _("wait p50"), _("wait p95"),
                                 _("use of deserved"), _("device-hours"), _("runs reclaimed"), _("runs preempted"),
                                 _("never run")]) + " |",
             "|" + "---|" * 10]
    for tenant in sorted(set(bm) | set(hm)):
        b, h = bm.get(tenant), hm.get(tenant)

        def both(field: Any, b: VMetrics | None = b, h: VMetrics | None = h) -> str:
            return cell("—" if b is None else field(b), "—" if h is None else field(h))
        lines.append("| " + " | ".join([
            tenant, both(lambda m: m.department), both(lambda m: f"{m.jobs:,}"),
            both(lambda m: duration(m.wait_p50_ms)), both(lambda m: duration(m.wait_p95_ms)),
            both(lambda m: percent(m.use(window))), both(lambda m: hours(m.used_device_ms)),
            both(lambda m: f"{m.reclaimed:,}"), both(lambda m: f"{m.preempted:,}"),
            both(lambda m: f"{m.never:,}")]) + " |")
    never = sorted(set(base.outcome.never.values()) | set(head.outcome.never.values()))
    if never:
        lines += ["", _("Not replayed: {reasons}.").format(reasons="; ".join(never))]
    lines += ["", _("Not replayed on Volcano: backfill (pods that request nothing); only accelerators are "
                    "counted."), ""]
    return "\n".join(lines)


def to_json(trace_name: str, cluster: str, base: VRun, head: VRun) -> dict[str, Any]:
    window = window_of(base, head)

    def side(run: VRun) -> dict[str, Any]:
        return {"label": run.label, "never": len(run.outcome.never), "tenants": {
            t: {"queue": m.queue, "department": m.department, "jobs": m.jobs, "finished": m.finished,
                "wait_p50_s": None if m.wait_p50_ms is None else m.wait_p50_ms / 1000,
                "wait_p95_s": None if m.wait_p95_ms is None else m.wait_p95_ms / 1000,
                "use_of_deserved": None if m.use(window) is None else str(m.use(window)),
                "device_hours": str(m.used_device_ms / 3_600_000), "runs_reclaimed": m.reclaimed,
                "runs_preempted": m.preempted}
            for t, m in sorted(metrics(run).items())}}
    return {"trace": trace_name, "cluster": cluster, "scheduler": "volcano", "base": side(base), "head": side(head)}
