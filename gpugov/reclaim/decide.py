"""The decision for one admitted Workload: leave it, warn its owner, deactivate it, or clear a warning.

Pure: the Workload's facts (Subject), its pods' utilisation samples over the policy's window and the
time in, one Decision out. Missing data is never idleness: a pod without a series, a series that does
not cover the window up to its end (gpugov.sources.coverage: it stopped reporting, however recently), or a
workload without running pods is `unknown`, and nothing is done to it.

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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from gpugov.declarations.model import IdlePolicy
from gpugov.i18n import Text
from gpugov.sources import coverage

Series = Sequence[tuple[datetime, float]]  # (time, percent), sorted

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


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _instant(at: datetime) -> str:
    return f"{at:%Y-%m-%dT%H:%M:%SZ}"


def decide(subject: Subject, policy: IdlePolicy | None, samples: Mapping[str, Series], now: datetime,
           step: timedelta, snooze_maximum: int, volcano: bool = False) -> Decision:
    """The table above for one Workload (on Volcano: one Job); `samples` maps its pods' names to their
    series over the window."""
    def out(state: str, action: str, why: str, peak: float | None = None) -> Decision:
        return Decision(subject.key, subject.tenant, state, action, why, peak)

    if policy is None:
        return out("no-policy", NONE, Text("tenant {tenant} declares no idle policy", tenant=subject.tenant))
    if subject.priority_class and subject.priority_class in policy.exempt_classes:
        return out("exempt", NONE, Text("priority class {name} is exempt", name=subject.priority_class))
    if subject.queue in policy.exempt_queues:
        return out("exempt", NONE, Text("queue {name} is exempt", name=subject.queue))
    if policy.exempt_non_preemptible and subject.non_preemptible:
        return out("exempt", NONE, Text("priority class {name} is not preemptible", name=subject.priority_class))
    snooze = ""  # a suffix of every reason below: why a snooze annotation does not count
    if subject.snooze_unreadable:
        snooze = Text("; its snooze annotation is not an RFC 3339 time and is ignored")
    elif subject.snooze_until is not None and subject.snooze_until > now:
        if subject.snooze_until - now <= timedelta(seconds=snooze_maximum):
            return out("snoozed", NONE, Text("snoozed until {until}", until=_instant(subject.snooze_until)))
        snooze = Text("; its snooze until {until} is further ahead than the declared maximum ({maximum}) and is "
                      "ignored", until=_instant(subject.snooze_until), maximum=_duration(snooze_maximum))
    window = timedelta(seconds=policy.window)
    start = now - window
    if subject.admitted_at > start:
        return out("young", NONE, Text("admitted for less than the window ({window}){snooze}",
                                       window=_duration(policy.window), snooze=snooze))
    if not subject.pods:
        return out("unknown", NONE, Text("no running pods to measure{snooze}", snooze=snooze))
    peak = 0.0
    for pod in sorted(subject.pods):
        series = [(t, v) for t, v in samples.get(pod, ()) if t >= start - step]
        missing = coverage.missing(series, start, now, step)
        if missing:
            return out("unknown", NONE, Text("{metric} of pod {pod}: {missing}{snooze}", metric=policy.metric, pod=pod,
                                             missing=missing, snooze=snooze))
        peak = max(peak, max(v for _, v in series))
    threshold = float(policy.below_percent)
    used, limit = f"{peak:.1f}%", f"{threshold:g}%"
    if peak >= threshold:
        if subject.warned_at is not None:
            return out("busy", CLEAR, Text("used {used} (threshold {threshold}): its warning is cleared", used=used,
                                           threshold=limit), peak)
        return out("busy", NONE, Text("used {used} (threshold {threshold})", used=used, threshold=limit), peak)
    idle = Text("at most {used} over {window} (threshold {threshold})", used=used, window=_duration(policy.window),
                threshold=limit)
    grace = _duration(policy.grace)
    if subject.warned_at is None:
        if policy.action == "deactivate":
            return out("idle", WARN, Text("{idle}; warned, deactivated after {grace} unless used or snoozed{snooze}",
                                          idle=idle, grace=grace, snooze=snooze), peak)
        return out("idle", WARN, Text("{idle}; warned, reported again after {grace} unless used or snoozed{snooze}",
                                      idle=idle, grace=grace, snooze=snooze), peak)
    due = subject.warned_at + timedelta(seconds=policy.grace)
    warned = _instant(subject.warned_at)
    if now < due:
        return out("grace", NONE, Text("{idle}; warned at {warned}, grace until {due}{snooze}", idle=idle,
                                       warned=warned, due=_instant(due), snooze=snooze), peak)
    if policy.action != "deactivate":
        return out("warned", NONE, Text("{idle}; warned at {warned} (the policy only notifies){snooze}", idle=idle,
                                        warned=warned, snooze=snooze), peak)
    if volcano:
        return out("reclaim", DEACTIVATE, Text("{idle}; warned at {warned}, grace of {grace} over: deactivated "
                                               "(a Job suspended, a Volcano Job aborted: its pods end and "
                                               "Volcano frees their accelerators){snooze}", idle=idle, warned=warned, grace=grace,
                                               snooze=snooze), peak)
    return out("reclaim", DEACTIVATE, Text("{idle}; warned at {warned}, grace of {grace} over: deactivated "
                                           "(spec.active=false, Kueue frees its quota){snooze}", idle=idle,
                                           warned=warned, grace=grace, snooze=snooze), peak)
