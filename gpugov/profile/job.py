"""One job's profile, pure: its pods' DCGM samples over its admitted life against what it asked for.

Activity is the pod's busiest device (percent: DCGM_FI_DEV_GPU_UTIL on whole GPUs,
DCGM_FI_PROF_GR_ENGINE_ACTIVE x 100 on MIG), memory the framebuffer used (MiB), host I/O the PCIe bytes per
second from the host, each sample standing for the step before it only where the series went on
(gpugov.sources.coverage): time without samples is neither idle nor busy, it is not measured.

Idle time is measured time under Guardrails.idle.utilizationBelowPercent (the ledger's and reclaim's
threshold), low-activity time under Guardrails.profile.lowActivityBelowPercent. The smallest MIG profile
that would hold the job is the one of the card's model with the fewest compute slices (then the least
memory) whose memory holds the peak plus memoryHeadroomPercent and whose share of the card's compute
(slices of 7) is at least the busiest step's activity; the HAMi share is that memory in the model's
memory unit and the cores the busiest step used.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from gpugov.catalog.accelerators import AcceleratorModel
from gpugov.declarations.model import ProfileThresholds
from gpugov.i18n import Text
from gpugov.sources.coverage import measured

Series = Sequence[tuple[datetime, float]]
MIB = 1048576
_MIG = re.compile(r"^([0-9]+)g\.([0-9]+)gb$")


@dataclass(frozen=True)
class JobFacts:
    """What the Workload and the declarations say about one job."""

    key: str  # namespace/job
    tenant: str
    resource: str  # the accelerator resource it asked for, e.g. nvidia.com/gpu
    devices: int  # of that resource, all pods together
    model: AcceleratorModel | None  # the card of the pool it ran in, where known
    created: datetime
    admitted: datetime | None  # None: still waiting
    finished: datetime | None = None


@dataclass(frozen=True)
class Profile:
    key: str
    tenant: str
    resource: str
    devices: int
    queue_wait: float  # seconds from creation to admission (to now while waiting)
    measured: float  # seconds of admitted life with samples
    admitted_for: float  # seconds admitted
    activity_mean: float | None  # percent, over measured time
    activity_peak: float | None
    idle_share: float | None  # of measured time, 0..1
    low_share: float | None
    memory_peak_mib: float | None
    card_mib: float | None
    fits_mig: str | None  # smallest MIG profile that would hold it
    hami_share: str | None
    host_io_mean: float | None  # bytes per second while low activity
    advice: tuple[str, ...] = field(default_factory=tuple)


def _spans(series: Series, step: timedelta, until: datetime, start: datetime) -> list[tuple[float, float]]:
    """(seconds within [start, until], value) of every sample's measured step."""
    out = []
    for low, high, value in measured(sorted(series), step, until):
        a, b = max(low, start), min(high, until)
        if a < b:
            out.append(((b - a).total_seconds(), value))
    return out


def smallest_mig(model: AcceleratorModel | None, need_mib: float, peak_percent: float) -> str | None:
    """The MIG profile of `model` with the fewest compute slices (then least memory) that holds `need_mib`
    and whose compute share (slices of 7) covers `peak_percent`; None when none does or the model has none."""
    if model is None:
        return None
    fitting = []
    for name in model.mig_profiles:
        match = _MIG.match(name)  # +me and other variants are not suggested
        if not match:
            continue
        slices, gigabytes = int(match.group(1)), int(match.group(2))
        if gigabytes * 1024 >= need_mib and slices / 7 * 100 >= peak_percent and slices < 7:
            fitting.append((slices, gigabytes, name))
    return min(fitting)[2] if fitting else None


def hami_share(model: AcceleratorModel | None, need_mib: float, peak_percent: float) -> str | None:
    """The HAMi resources that would hold the job: memory in the model's unit, cores as used at its peak."""
    units = model.hami if model is not None else None
    if units is None or units.memory is None or not units.memory_unit:
        return None
    memory = math.ceil(Decimal(str(need_mib)) * MIB / units.memory_unit)
    share = f"{units.memory}: {memory}"
    if units.cores and units.cores_per_device:
        share += f", {units.cores}: {max(1, math.ceil(peak_percent * units.cores_per_device / 100))}"
    return share


def profile(facts: JobFacts, activity: Mapping[str, Series], memory: Mapping[str, Series],
            host_io: Mapping[str, Series], step: timedelta, now: datetime, idle_below: Decimal,
            thresholds: ProfileThresholds) -> Profile:
    """The profile of one job from its pods' series (pod name -> samples)."""
    end = facts.finished or now
    wait = ((facts.admitted or now) - facts.created).total_seconds()
    start = facts.admitted or end
    admitted_for = max(0.0, (end - start).total_seconds())
    seen = 0.0
    weighted = 0.0
    idle = low = 0.0
    peak: float | None = None
    for _pod, series in sorted(activity.items()):
        for seconds, value in _spans(series, step, end, start):
            seen += seconds
            weighted += seconds * value
            idle += seconds if Decimal(repr(value)) < idle_below else 0.0
            low += seconds if Decimal(repr(value)) < thresholds.low_activity_below_percent else 0.0
            peak = value if peak is None else max(peak, value)
    memory_peak = max((v for s in memory.values() for t, v in s if start - step <= t <= end), default=None)
    io = [v for s in host_io.values() for _, v in _spans(s, step, end, start)]
    card = float(facts.model.memory / MIB) if facts.model is not None and facts.model.memory else None
    mean = weighted / seen if seen else None
    need = None if memory_peak is None else float(
        Decimal(repr(memory_peak)) * (1 + thresholds.memory_headroom_percent / 100))
    fits = smallest_mig(facts.model, need, peak or 0.0) if need is not None and facts.resource == "nvidia.com/gpu" else None
    hami = hami_share(facts.model, need, peak or 0.0) if need is not None else None
    io_mean = sum(io) / len(io) if io else None
    result = Profile(facts.key, facts.tenant, facts.resource, facts.devices, wait, seen / max(1, len(activity)),
                     admitted_for, mean, peak, idle / seen if seen else None, low / seen if seen else None,
                     memory_peak, card, fits, hami, io_mean)
    return Profile(**{**result.__dict__, "advice": tuple(advice(result, thresholds))})


def advice(p: Profile, thresholds: ProfileThresholds) -> list[str]:
    """What a user can do about it, most telling first."""
    if p.activity_mean is None:
        if p.admitted_for == 0:
            return [Text("waiting in the queue for {wait}: not admitted yet", wait=_duration(p.queue_wait))]
        return [Text("no DCGM samples over its admitted time: nothing can be said about its use")]
    out = []
    if p.idle_share is not None and p.idle_share * 100 >= float(thresholds.advise_idle_share_percent):
        # The percent signs are in the fields: "% o" in a message reads to gettext as a printf conversion.
        out.append(Text("idle {share} of its measured life: release the cards between runs, or let gpugov reclaim "
                        "do it", share=f"{p.idle_share * 100:.0f}%"))
    low = p.low_share is not None and p.low_share >= 0.5
    if low and p.host_io_mean is not None and p.host_io_mean >= float(thresholds.host_io_bytes_per_second):
        out.append(Text("low activity with high host I/O ({rate}/s from the host): data loading holds the GPU "
                        "back; more loader workers, local or cached data", rate=_bytes(p.host_io_mean)))
    elif low and p.activity_mean >= 0:
        out.append(Text("low activity: {mean} on average, under {threshold} for {share} of its measured life",
                        mean=f"{p.activity_mean:.0f}%", threshold=f"{thresholds.low_activity_below_percent:g}%",
                        share=f"{p.low_share * 100:.0f}%"))
    if p.fits_mig and p.memory_peak_mib is not None and p.card_mib:
        out.append(Text("fits a {profile}: its memory peak is {peak} of the card's {card}, its busiest step "
                        "{busiest}%", profile=p.fits_mig, peak=_mib(p.memory_peak_mib), card=_mib(p.card_mib),
                        busiest=f"{p.activity_peak or 0:.0f}"))
    if p.hami_share:
        out.append(Text("on a HAMi pool it would fit {share}", share=p.hami_share))
    if p.queue_wait >= 600:
        out.append(Text("waited {wait} in the queue before admission", wait=_duration(p.queue_wait)))
    return out


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def _mib(value: float) -> str:
    return f"{value / 1024:.1f} GiB"


def _bytes(value: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"
