"""Two replays of one trace, side by side: per tenant, waiting times, use of quota, borrowing,
preemptions. Markdown for the pull-request comment, JSON for machines.

Waiting time is from submission to the admission whose run finished (time lost to preemption
counts as waiting). Utilisation is the accelerator-hours a tenant used (its preempted runs
included) over its nominal quota times the replay's window; borrowing above 100% shows as
more. Accelerators count as GPU equivalents: a MIG slice as its share of the GPU. Every
number is computed from integers and Decimals, so the same inputs give byte-identical text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from gpugov.i18n import _
from gpugov.kube.resources import is_accelerator
from gpugov.whatif.setup import FR, HAMI, MIXED, WHOLE_DEVICES, Setup
from gpugov.whatif.simulate import Options, Outcome
from gpugov.whatif.state import FINISHED, Workload
from gpugov.whatif.timeline import Timeline

MARKER = "<!-- gpugov-whatif -->"
HOUR_MS = Decimal(3_600_000)
ALL = "all tenants"


@dataclass(frozen=True)
class Run:
    label: str  # e.g. "origin/main (1a2b3c4d)"
    setup: Setup
    outcome: Outcome
    never: dict[int, str]  # workload index -> why it can never be admitted
    weights: dict[FR, Decimal]  # GPU equivalents of one unit; absent: 1 for accelerators
    runtime_cut: int = 0  # jobs ended at their queue's maximum runtime (reclaim.maxRuntime)
    timeline: Timeline | None = None  # where quotas change with time: `setup` holds until its first boundary
    held_as: dict[int, str] = field(default_factory=dict)  # index -> how a job using a share of a device is held
    views: frozenset[FR] = frozenset()  # (pool, resource) that are HAMi's views of the same devices


@dataclass(frozen=True)
class TenantMetrics:
    tenant: str
    jobs: int
    finished: int
    never: int
    wait_p50_ms: int | None
    wait_p95_ms: int | None
    wait_mean_ms: int | None
    used_gpu_ms: Decimal
    nominal_gpus: Decimal
    borrowed_gpu_ms: Decimal
    preemptions: int

    def utilisation(self, window_ms: int) -> Decimal | None:
        if not self.nominal_gpus or window_ms <= 0:
            return None
        return self.used_gpu_ms / (self.nominal_gpus * window_ms)


def percentile(sorted_values: list[int], q: int) -> int | None:
    """Nearest-rank percentile (q in 1..100) of an ascending list."""
    if not sorted_values:
        return None
    rank = max(1, -(-q * len(sorted_values) // 100))
    return sorted_values[rank - 1]


def weight_of(weights: dict[FR, Decimal], fr: FR) -> Decimal:
    if fr in weights:
        return weights[fr]
    return Decimal(1) if is_accelerator(fr[1]) else Decimal(0)


def gpu_ms(units: Mapping[FR, int | Decimal], weights: dict[FR, Decimal], views: frozenset[FR] = frozenset()) -> Decimal:
    """Device equivalents of `units` ((flavor, resource) -> amount): separate devices add up, a
    flavor's HAMi views of the same devices (`views`) count their largest."""
    total = Decimal(0)
    largest: dict[str, Decimal] = {}
    for fr, value in units.items():
        amount = weight_of(weights, fr) * value
        if fr in views:
            largest[fr[0]] = max(largest.get(fr[0], Decimal(0)), amount)
        else:
            total += amount
    return total + sum(largest.values(), Decimal(0))


def nominal_gpus(setup: Setup, weights: dict[FR, Decimal], views: frozenset[FR] = frozenset()) -> dict[str, Decimal]:
    """GPU equivalents of nominal quota per tenant."""
    nominal: dict[str, Decimal] = {}
    for spec in setup.cluster_queues.values():
        nominal[spec.tenant] = nominal.get(spec.tenant, Decimal(0)) + gpu_ms(
            {fr: q.nominal for fr, q in spec.quotas.items()}, weights, views)
    return nominal


def mean_nominal(run: Run, start_ms: int, window_ms: int) -> dict[str, Decimal]:
    """Nominal quota per tenant averaged over the window, where the timeline changes it."""
    assert run.timeline is not None
    end = start_ms + window_ms
    spans = [(start_ms, run.setup), *((b.at_ms, b.setup) for b in run.timeline.boundaries)]
    total: dict[str, Decimal] = {}
    for index, (at, setup) in enumerate(spans):
        until = spans[index + 1][0] if index + 1 < len(spans) else end
        held = min(until, end) - max(at, start_ms)
        for tenant, gpus in nominal_gpus(setup, run.weights, run.views).items():
            total[tenant] = total.get(tenant, Decimal(0)) + gpus * max(held, 0)
    return {tenant: value / window_ms for tenant, value in total.items()}


def tenant_metrics(run: Run, window: tuple[int, int] | None = None) -> dict[str, TenantMetrics]:
    """Metrics per tenant (the ClusterQueue's gpugov.io/tenant label), plus ALL. `window`: (start,
    length) in trace milliseconds, over which a quota timeline's nominal quota is averaged."""
    by_tenant: dict[str, list[Any]] = {}
    known = {run.setup.tenant_of(name) for name in run.outcome.cluster_queues}
    outside: list[Any] = []  # jobs of a tenant this revision does not have: in the total, no row of their own
    for wl in run.outcome.workloads:
        tenant = run.setup.tenant_of(wl.cq.name) if wl.cq is not None else (wl.job.tenant or wl.job.namespace
                                                                              or wl.job.queue.split("/")[0])
        if wl.cq is None and tenant not in known:
            outside.append(wl)
            continue
        by_tenant.setdefault(tenant, []).append(wl)
    nominal: dict[str, Decimal] = {}
    borrowed: dict[str, Decimal] = {}
    for name, cq in run.outcome.cluster_queues.items():
        tenant = run.setup.tenant_of(name)
        nominal[tenant] = nominal.get(tenant, Decimal(0)) + gpu_ms(cq.node.nominal, run.weights, run.views)
        borrowed[tenant] = borrowed.get(tenant, Decimal(0)) + gpu_ms(cq.borrowed_units_ms, run.weights, run.views)
        by_tenant.setdefault(tenant, [])
    if run.timeline is not None and window is not None and window[1] > 0:
        nominal = mean_nominal(run, *window)
    result = {}
    everyone: list[Any] = list(outside)
    for tenant in sorted(by_tenant):
        workloads = by_tenant[tenant]
        everyone.extend(workloads)
        result[tenant] = _metrics(tenant, workloads, run, nominal.get(tenant, Decimal(0)),
                                  borrowed.get(tenant, Decimal(0)))
    result[ALL] = _metrics(ALL, everyone, run, sum(nominal.values(), Decimal(0)), sum(borrowed.values(), Decimal(0)))
    return result


def _metrics(tenant: str, workloads: list[Any], run: Run, nominal: Decimal, borrowed: Decimal) -> TenantMetrics:
    waits = sorted(wl.waited_ms for wl in workloads if wl.state == FINISHED)
    used = Decimal(0)
    for wl in workloads:
        if wl.state == FINISHED:
            used += gpu_ms({fr: v * wl.job.duration_ms for fr, v in wl.usage.items()}, run.weights, run.views)
        used += gpu_ms(wl.lost_units_ms, run.weights, run.views)
    return TenantMetrics(
        tenant=tenant,
        jobs=len(workloads),
        finished=len(waits),
        never=len(workloads) - len(waits),
        wait_p50_ms=percentile(waits, 50),
        wait_p95_ms=percentile(waits, 95),
        wait_mean_ms=sum(waits) // len(waits) if waits else None,
        used_gpu_ms=used,
        nominal_gpus=nominal,
        borrowed_gpu_ms=borrowed,
        preemptions=sum(wl.preemptions for wl in workloads),
    )


@dataclass(frozen=True)
class Comparison:
    trace_name: str
    cluster: str
    options: Options
    jobs: int
    work_gpu_ms: Decimal  # what the trace's jobs use, in GPU-equivalent milliseconds (base's weights)
    held_gpu_ms: Decimal  # what Kueue's quota holds for them: whole devices where a job uses a share
    shared_jobs: int  # jobs that use a share of each device (trace column `share`)
    span_ms: int  # first to last submission
    window_ms: int  # first submission to the last finish of either run
    base: Run
    head: Run
    base_metrics: dict[str, TenantMetrics]
    head_metrics: dict[str, TenantMetrics]


def held_gpu_ms(wl: Workload, run: Run) -> Decimal:
    """Device-equivalent milliseconds the quota holds for a job's accelerators while it runs, on
    the pool it was first given (else the first it may use; else wherever the resource is whole)."""
    pools = sorted(wl.allowed & run.setup.flavors.keys()) if wl.allowed is not None else []
    pool = wl.flavors[0] if wl.flavors else (pools[0] if pools else "")
    units: dict[FR, int] = {}
    for resource, amount in wl.requests.items():
        if not is_accelerator(resource):
            continue
        fr = (pool, resource)
        if fr not in run.weights:
            fr = next((k for k in run.weights if k[1] == resource and k not in run.views), fr)
        units[fr] = units.get(fr, 0) + amount * wl.job.duration_ms
    return gpu_ms(units, run.weights, run.views)


def compare(trace_name: str, cluster: str, options: Options, base: Run, head: Run) -> Comparison:
    jobs = [wl.job for wl in base.outcome.workloads]
    start = min((j.submit_ms for j in jobs), default=0)
    last_submit = max((j.submit_ms for j in jobs), default=0)
    window = max(base.outcome.end_ms, head.outcome.end_ms, last_submit) - start
    work = held = Decimal(0)
    for wl in base.outcome.workloads:
        wl_held = held_gpu_ms(wl, base)
        held += wl_held
        if wl.index in base.held_as:  # a share of whole devices of its model, however they are held
            work += wl.job.devices_used * wl.job.duration_ms
        else:  # what it asks, of which it uses its share (a share of a named MIG device is of that device)
            work += wl_held * wl.job.share
    shared = sum(1 for j in jobs if j.share < 1)
    return Comparison(trace_name, cluster, options, len(jobs), work, held, shared, last_submit - start, window, base,
                      head, tenant_metrics(base, (start, window)), tenant_metrics(head, (start, window)))


# -- formatting -------------------------------------------------------------------------------


def _round(value: Decimal, places: int = 1) -> Decimal:
    return value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def duration(ms: int | None) -> str:
    """A waiting time for people: 0s, 45s, 12.5m, 3.2h, 4.1d."""
    if ms is None:
        return "—"
    seconds = Decimal(ms) / 1000
    if seconds < 60:
        return f"{_round(seconds, 0)}s"
    if seconds < 3600:
        return f"{_round(seconds / 60)}m"
    if seconds < 48 * 3600:
        return f"{_round(seconds / 3600)}h"
    return f"{_round(seconds / 86400)}d"


def hours(value: Decimal) -> str:
    return f"{_round(value / HOUR_MS):,}"


def percent(value: Decimal | None) -> str:
    return "—" if value is None else f"{_round(value * 100, 0)}%"


def cell(base: str, head: str) -> str:
    return base if base == head else f"{base} → {head}"


def _side(metrics: dict[str, TenantMetrics], tenant: str, field: Callable[[TenantMetrics], str]) -> str:
    found = metrics.get(tenant)
    return "—" if found is None else field(found)


def markdown(comparison: Comparison) -> str:
    c = comparison
    fs = _("on") if c.options.fair_sharing else _("off (classical preemption)")
    header = (_("Tenant"), _("Jobs"), _("Wait p50"), _("Wait p95"), _("Use of nominal quota"), _("Borrowed GPU-h"),
              _("Preempted"))
    lines = [
        MARKER,
        _("### What-if: this change replayed against `{trace}`").format(trace=c.trace_name),
        "",
        _("{jobs} jobs ({work} GPU-hours of work) submitted over {span} on cluster `{cluster}`, admitted by a "
          "simulation of Kueue v0.17 over compile's objects of **base** {base} and **head** {head} (fair sharing "
          "{fair_sharing}, seed {seed}). Cells read base → head where they differ.").format(
            jobs=f"{c.jobs:,}", work=hours(c.work_gpu_ms), span=duration(c.span_ms), cluster=c.cluster,
            base=c.base.label, head=c.head.label, fair_sharing=fs, seed=c.options.seed),
        "",
        "| " + " | ".join(header) + " |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    tenants = [*sorted((set(c.base_metrics) | set(c.head_metrics)) - {ALL}), ALL]
    for tenant in tenants:
        def both(field: Callable[[TenantMetrics], str], t: str = tenant) -> str:
            return cell(_side(c.base_metrics, t, field), _side(c.head_metrics, t, field))

        name = "**" + _("all tenants") + "**" if tenant == ALL else f"`{tenant}`"  # ALL's words, translated
        lines.append(
            f"| {name} | {both(lambda m: f'{m.jobs:,}')} | {both(lambda m: duration(m.wait_p50_ms))} | "
            f"{both(lambda m: duration(m.wait_p95_ms))} | {both(lambda m: percent(m.utilisation(c.window_ms)))} | "
            f"{both(lambda m: hours(m.borrowed_gpu_ms))} | {both(lambda m: str(m.preemptions))} |"
        )
    notes = []
    base_ways = held_ways(c.base)
    if c.shared_jobs and set(base_ways) <= {WHOLE_DEVICES}:
        notes.append("- " + _("{jobs} jobs use a share of a device: their work counts that share; Kueue's quota holds "
                              "whole devices for them ({held} GPU-hours held for {work} of work)").format(
            jobs=f"{c.shared_jobs:,}", held=hours(c.held_gpu_ms), work=hours(c.work_gpu_ms)))
    elif c.shared_jobs:
        notes.append("- " + _("{jobs} jobs use a share of a device: their work counts that share; Kueue's quota holds "
                              "{held} GPU-hours for them, for {work} of work: {ways}").format(
            jobs=f"{c.shared_jobs:,}", held=hours(c.held_gpu_ms), work=hours(c.work_gpu_ms),
            ways=ways_text(base_ways)))
    head_ways = held_ways(c.head)
    if c.shared_jobs and head_ways != base_ways:
        notes.append(f"- {_('head')}: " + _("the quota holds the jobs that use a share of a device: {ways}").format(
            ways=ways_text(head_ways)))
    for side, run in ((_("base"), c.base), (_("head"), c.head)):
        never = [(i, why) for i, why in sorted(run.never.items())]
        pending = [wl for wl in run.outcome.workloads if wl.state != FINISHED and wl.index not in run.never]
        if never:
            reasons: dict[str, int] = {}
            for _index, why in never:
                reasons[why] = reasons.get(why, 0) + 1
            listed = "; ".join(f"{why} ({n})" for why, n in sorted(reasons.items()))
            notes.append(f"- {side}: " + _("{jobs} jobs can never be admitted: {reasons}").format(
                jobs=f"{len(never):,}", reasons=listed))
        if pending:
            notes.append(f"- {side}: " + _("{jobs} jobs still wait when the trace ends (no flavor can ever hold "
                                           "them)").format(jobs=f"{len(pending):,}"))
        if run.runtime_cut:
            notes.append(f"- {side}: " + _("{jobs} jobs run longer than their queue's maximum runtime "
                                           "(reclaim.maxRuntime): Kueue ends them at the limit, and so does the "
                                           "replay").format(jobs=f"{run.runtime_cut:,}"))
        if run.outcome.unconverged_instants:
            notes.append(f"- {side}: " + _("{instants} instants hit the cycle limit").format(
                instants=run.outcome.unconverged_instants))
    lines += ["", *notes] if notes else []
    from gpugov.whatif import timeline_report  # it reads Run: imported where it is used

    lines += timeline_report.markdown_lines(_("base"), c.base, duration)
    lines += timeline_report.markdown_lines(_("head"), c.head, duration)
    lines += [
        "",
        "<sub>" + _("Waits exclude jobs never admitted. Modelled: cohorts, nominal quota, borrowing and lending "
                    "limits, flavor order and fungibility, priorities, preemption (fair sharing or classical), "
                    "BestEffortFIFO and StrictFIFO. Not modelled: node-level topology placement, partial admission, "
                    "admission checks, pod start-up time. See the README's What-if section.") + "</sub>",
        "",
    ]
    return "\n".join(lines)


def _metrics_json(m: TenantMetrics, window_ms: int) -> dict[str, Any]:
    util = m.utilisation(window_ms)
    return {
        "jobs": m.jobs,
        "finished": m.finished,
        "never_admitted": m.never,
        "wait_seconds": {
            "p50": None if m.wait_p50_ms is None else m.wait_p50_ms / 1000,
            "p95": None if m.wait_p95_ms is None else m.wait_p95_ms / 1000,
            "mean": None if m.wait_mean_ms is None else m.wait_mean_ms / 1000,
        },
        "used_gpu_hours": float(_round(m.used_gpu_ms / HOUR_MS, 3)),
        "nominal_gpus": float(m.nominal_gpus),
        "utilisation": None if util is None else float(_round(util, 4)),
        "borrowed_gpu_hours": float(_round(m.borrowed_gpu_ms / HOUR_MS, 3)),
        "preemptions": m.preemptions,
    }


def never_admitted(run: Run) -> dict[str, dict[str, str]]:
    """Every job that never started, by id: refused (no queue can ever take it) or still waiting
    when the replay ended, with why."""
    result: dict[str, dict[str, str]] = {}
    for wl in run.outcome.workloads:
        if wl.index in run.never:
            result[wl.job.id] = {"outcome": "refused", "reason": run.never[wl.index]}
        elif wl.state != FINISHED:
            result[wl.job.id] = {"outcome": "waiting", "reason": wl.waiting_for or "never nominated"}
    return result


def held_ways(run: Run) -> dict[str, int]:
    """How the quota holds the jobs that use a share of a device: `WHOLE_DEVICES`, `HAMI`, `MIXED`
    or a MIG resource -> jobs, sorted."""
    ways: dict[str, int] = {}
    for how in run.held_as.values():
        ways[how] = ways.get(how, 0) + 1
    return dict(sorted(ways.items()))


def ways_text(ways: dict[str, int]) -> str:
    words = []
    for how, jobs in ways.items():
        count = f"{jobs:,}"
        if how == WHOLE_DEVICES:
            words.append(_("{jobs} as whole devices").format(jobs=count))
        elif how == HAMI:
            words.append(_("{jobs} as HAMi units (a vGPU with that share of the device's memory and compute)").format(
                jobs=count))
        elif how == MIXED:
            words.append(_("{jobs} as whole devices, because the pools they may use hold a share differently and "
                           "one request cannot say both").format(jobs=count))
        else:
            words.append(_("{jobs} as the MIG device {profile}, the smallest that covers the share").format(
                jobs=count, profile=how.removeprefix("nvidia.com/mig-")))
    return "; ".join(words)


def to_json(comparison: Comparison) -> dict[str, Any]:
    c = comparison

    from gpugov.whatif import timeline_report  # it reads Run: imported where it is used

    def side(run: Run, metrics: dict[str, TenantMetrics]) -> dict[str, Any]:
        found = {
            "revision": run.label,
            "tenants": {t: _metrics_json(m, c.window_ms) for t, m in metrics.items() if t != ALL},
            "total": _metrics_json(metrics[ALL], c.window_ms),
            "never_admitted": never_admitted(run),
            "scheduling_cycles": run.outcome.cycles,
            "cut_at_max_runtime": run.runtime_cut,
            "shares_held_as": held_ways(run),
        }
        if run.timeline is not None:  # only where quotas change with time: the JSON stays as it was elsewhere
            found["quota_timeline"] = timeline_report.to_json(run)
        return found

    return {
        "trace": {"name": c.trace_name, "jobs": c.jobs, "span_seconds": c.span_ms / 1000,
                  "work_gpu_hours": float(_round(c.work_gpu_ms / HOUR_MS, 3)),
                  "held_gpu_hours": float(_round(c.held_gpu_ms / HOUR_MS, 3)), "shared_jobs": c.shared_jobs},
        "cluster": c.cluster,
        "simulation": {"kueue": "v0.17", "fair_sharing": c.options.fair_sharing, "seed": c.options.seed,
                       "window_seconds": c.window_ms / 1000},
        "base": side(c.base, c.base_metrics),
        "head": side(c.head, c.head_metrics),
    }
