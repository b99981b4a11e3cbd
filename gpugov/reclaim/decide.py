"""The decision for one admitted Workload: leave it, warn its owner, deactivate it, or clear a warning.

Pure: the Workload's facts (Subject), its pods' utilisation samples over the policy's window and the
time in, one Decision out. Missing data is never idleness: a pod without a series, a series that does
not cover the window or stopped reporting (stale), or a workload without running pods is `unknown`,
and nothing is done to it.

The table, in order (the first row that holds decides):

| state         | when                                                          | action     |
|---------------|---------------------------------------------------------------|------------|
| no-policy     | the tenant declares no idle policy                            | none       |
| exempt        | its priority class or queue is exempt (or non-preemptible)    | none       |
| snoozed       | its snooze annotation is in the future, within the maximum    | none       |
| young         | admitted for less than the window                             | none       |
| unknown       | a pod without samples, samples stale or not covering the window | none     |
| busy          | a pod reached the threshold in the window (a warning is cleared) | clear / none |
| idle          | not yet warned                                                | warn       |
| grace         | warned, grace not over                                        | none       |
| warned        | warned, grace over, the policy only notifies                  | none       |
| reclaim       | warned, grace over, the policy deactivates                    | deactivate |
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from gpugov.declarations.model import IdlePolicy

Series = Sequence[tuple[datetime, float]]  # (time, percent), sorted
STALE_AFTER = timedelta(minutes=5)  # a series whose last sample is older than this stopped reporting

WARN, DEACTIVATE, CLEAR, NONE = "warn", "deactivate", "clear", ""


@dataclass(frozen=True)
class Subject:
    """What the decision needs of one admitted Workload."""

    key: str  # namespace/name
    tenant: str
    queue: str
    priority_class: str
    non_preemptible: bool  # its class is declared preemptible: false
    admitted_at: datetime
    pods: tuple[str, ...]  # its running pods
    warned_at: datetime | None = None
    snooze_until: datetime | None = None
    snooze_unreadable: bool = False  # the snooze annotation is not an RFC 3339 time


@dataclass(frozen=True)
class Decision:
    key: str
    tenant: str
    state: str  # one of the table's states
    action: str  # warn, deactivate, clear or "" (nothing)
    why: str
    peak: float | None = None  # highest utilisation in the window (percent), where known


def _coverage(series: Series, start: datetime, now: datetime, step: timedelta) -> str:
    """'' when the series covers [start, now] without a gap; else what is missing."""
    if not series:
        return "no samples"
    if series[-1][0] < now - max(STALE_AFTER, 2 * step):
        return f"stale (last sample {series[-1][0]:%Y-%m-%dT%H:%M:%SZ})"
    if series[0][0] > start + 2 * step:
        return f"samples start at {series[0][0]:%Y-%m-%dT%H:%M:%SZ}, after the window's start"
    for (before, _), (after, _) in itertools.pairwise(series):
        if after - before > 2 * step:
            return f"a gap from {before:%H:%M:%S} to {after:%H:%M:%S}"
    if any(math.isnan(v) for _, v in series):
        return "a sample without a value"
    return ""


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def decide(subject: Subject, policy: IdlePolicy | None, samples: Mapping[str, Series], now: datetime,
           step: timedelta, snooze_maximum: int) -> Decision:
    """The table above for one Workload; `samples` maps its pods' names to their series over the window."""
    def out(state: str, action: str, why: str, peak: float | None = None) -> Decision:
        return Decision(subject.key, subject.tenant, state, action, why, peak)

    if policy is None:
        return out("no-policy", NONE, f"tenant {subject.tenant} declares no idle policy")
    if subject.priority_class and subject.priority_class in policy.exempt_classes:
        return out("exempt", NONE, f"priority class {subject.priority_class} is exempt")
    if subject.queue in policy.exempt_queues:
        return out("exempt", NONE, f"queue {subject.queue} is exempt")
    if policy.exempt_non_preemptible and subject.non_preemptible:
        return out("exempt", NONE, f"priority class {subject.priority_class} is not preemptible")
    snooze = ""
    if subject.snooze_unreadable:
        snooze = "; its snooze annotation is not an RFC 3339 time and is ignored"
    elif subject.snooze_until is not None and subject.snooze_until > now:
        if subject.snooze_until - now <= timedelta(seconds=snooze_maximum):
            return out("snoozed", NONE, f"snoozed until {subject.snooze_until:%Y-%m-%dT%H:%M:%SZ}")
        snooze = (f"; its snooze until {subject.snooze_until:%Y-%m-%dT%H:%M:%SZ} is further ahead than the "
                  f"declared maximum ({_duration(snooze_maximum)}) and is ignored")
    window = timedelta(seconds=policy.window)
    start = now - window
    if subject.admitted_at > start:
        return out("young", NONE, f"admitted for less than the window ({_duration(policy.window)})" + snooze)
    if not subject.pods:
        return out("unknown", NONE, "no running pods to measure" + snooze)
    peak = 0.0
    for pod in sorted(subject.pods):
        series = [(t, v) for t, v in samples.get(pod, ()) if t >= start - step]
        missing = _coverage(series, start, now, step)
        if missing:
            return out("unknown", NONE, f"{policy.metric} of pod {pod}: {missing}" + snooze)
        peak = max(peak, max(v for _, v in series))
    threshold = float(policy.below_percent)
    if peak >= threshold:
        if subject.warned_at is not None:
            return out("busy", CLEAR, f"used {peak:.1f}% (threshold {threshold:g}%): its warning is cleared", peak)
        return out("busy", NONE, f"used {peak:.1f}% (threshold {threshold:g}%)", peak)
    idle = f"at most {peak:.1f}% over {_duration(policy.window)} (threshold {threshold:g}%)"
    if subject.warned_at is None:
        then = "deactivated" if policy.action == "deactivate" else "reported again"
        return out("idle", WARN, f"{idle}; warned, {then} after {_duration(policy.grace)} unless used or snoozed"
                   + snooze, peak)
    due = subject.warned_at + timedelta(seconds=policy.grace)
    if now < due:
        return out("grace", NONE, f"{idle}; warned at {subject.warned_at:%Y-%m-%dT%H:%M:%SZ}, grace until "
                   f"{due:%Y-%m-%dT%H:%M:%SZ}" + snooze, peak)
    if policy.action != "deactivate":
        return out("warned", NONE, f"{idle}; warned at {subject.warned_at:%Y-%m-%dT%H:%M:%SZ} (the policy only "
                   "notifies)" + snooze, peak)
    return out("reclaim", DEACTIVATE, f"{idle}; warned at {subject.warned_at:%Y-%m-%dT%H:%M:%SZ}, grace of "
               f"{_duration(policy.grace)} over: deactivated (spec.active=false, Kueue frees its quota)" + snooze, peak)
