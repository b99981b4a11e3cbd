"""What a DCGM utilisation series measured, for every reader that calls time idle (drift's idle check,
the ledger's idle hours, gpugov reclaim): missing data is never idleness.

Every reader asks Prometheus for `max_over_time(METRIC[STEP])` every STEP seconds, so a sample at t is the
highest value of the raw samples in (t - STEP, t]. It says nothing about the time after the last raw sample:
a series the exporter lost at 12:03 still answers 12:04 with the sample of 12:03. So a sample stands for
(t - STEP, t] only where the series went on after it (its next sample at most GAP_STEPS steps later) or t is
the last step the reader asked about; a series that stopped before the reader's end covers nothing after
its last sample, however old or recent that is.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from datetime import datetime, timedelta

from gpugov.i18n import Text

Series = Sequence[tuple[datetime, float]]  # (time, percent), sorted by time
GAP_STEPS = 2  # samples further apart than this many steps leave a gap between them


def missing(series: Series, start: datetime, end: datetime, step: timedelta) -> str:
    """'' when `series` covers [start, end] (its first sample within GAP_STEPS steps of start, its last
    within GAP_STEPS steps of end, no gap between samples and no sample without a value); else what
    is missing, in words."""
    tolerance = GAP_STEPS * step
    if not series:
        return Text("no samples")
    if series[-1][0] < end - tolerance:
        return Text("stale (last sample {at})", at=_instant(series[-1][0]))
    if series[0][0] > start + tolerance:
        return Text("samples start at {at}, after the window's start", at=_instant(series[0][0]))
    for (before, _), (after, _) in itertools.pairwise(series):
        if after - before > tolerance:
            since, until = f"{before:%H:%M:%S}", f"{after:%H:%M:%S}"
            return Text("a gap from {since} to {until}", since=since, until=until)
    if any(math.isnan(v) for _, v in series):
        return Text("a sample without a value")
    return ""


def measured(series: Series, step: timedelta, end: datetime) -> list[tuple[datetime, datetime, float]]:
    """(t - step, t, value) for every sample that stands for the step before it: the series went on after
    it (a next sample within GAP_STEPS steps) or t is the last step asked about (within one step of `end`).
    A sample without a value (NaN) stands for nothing."""
    out = []
    tolerance = GAP_STEPS * step
    for i, (at, value) in enumerate(series):
        if math.isnan(value):
            continue
        went_on = i + 1 < len(series) and series[i + 1][0] - at <= tolerance
        if went_on or at > end - step:
            out.append((at - step, at, value))
    return out


def _instant(at: datetime) -> str:
    return f"{at:%Y-%m-%dT%H:%M:%SZ}"
