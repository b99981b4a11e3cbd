"""The quota timeline of a replay (issue #27): where a revision declares QuotaGrants or QuotaWindows,
the quotas the simulator starts with and each boundary inside the trace's span, with what it changes.

Nothing is re-derived here: the instants are `declarations.timeline.boundaries`, the quotas at each
are compile's objects of `model_at(model, instant)` read by `setup.read_setup`, as the
gpugov-timeline CronJob applies them (`gpugov apply --at now --only-quotas`: ClusterQueues and
Cohorts). A trace's times are relative: `start` is the calendar instant of its second 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from gpugov.compile import compile
from gpugov.declarations.model import Model
from gpugov.declarations.timeline import HORIZON, boundaries, grant_active, model_at, window_open
from gpugov.whatif.setup import FR, Quota, Setup, read_setup

# Without a QuotaGrant, a trace's second 0 falls on a Monday at midnight UTC (windows repeat weekly,
# so any week gives the same replay but for a time zone's daylight-saving changes).
DEFAULT_START = datetime(2024, 1, 1, tzinfo=UTC)
# Boundaries are looked for until this long after the last submission: a job may wait for a grant.
SLACK = HORIZON


@dataclass(frozen=True)
class QuotaChange:
    """One (flavor, resource) of a ClusterQueue or Cohort whose quota a boundary changes."""

    kind: str  # ClusterQueue | Cohort
    name: str
    tenant: str  # the ClusterQueue's tenant; the Cohort's name
    flavor: str
    resource: str
    before: Quota | None  # None: no quota there
    after: Quota | None


@dataclass(frozen=True)
class Boundary:
    at_ms: int  # in the trace's time
    instant: datetime  # UTC
    declarations: tuple[tuple[str, str, str], ...]  # (kind, name, what happens): QuotaGrant x starts
    changes: tuple[QuotaChange, ...]
    setup: Setup  # the quotas from this boundary on


@dataclass(frozen=True)
class Timeline:
    start: datetime  # the calendar instant of the trace's second 0, UTC
    in_force: tuple[tuple[str, str], ...]  # (kind, name) of grants in force and windows open at the first submission
    boundaries: tuple[Boundary, ...]

    def steps(self) -> list[tuple[int, Setup]]:
        """What the simulator applies: (trace millisecond, quotas from then on)."""
        return [(b.at_ms, b.setup) for b in self.boundaries]


def default_start(models: Iterable[Model]) -> datetime:
    """The trace's second 0 when --start is not given: the earliest start of a QuotaGrant either
    revision declares (a pull request that adds a grant is replayed while it holds), else
    DEFAULT_START."""
    starts = [g.starts for m in models for g in m.grants.values() if g.starts is not None]
    return min(starts).astimezone(UTC) if starts else DEFAULT_START


def trace_ms(start: datetime, instant: datetime) -> int:
    delta = instant - start
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _in_force(model: Model, at: datetime) -> frozenset[tuple[str, str]]:
    """The grants in force and the windows open at `at`: what decides model_at's quotas."""
    return frozenset({("QuotaGrant", name) for name, g in model.grants.items() if grant_active(g, at)}
                     | {("QuotaWindow", name) for name, w in model.windows.items() if window_open(w, at)})


def _what_happens(before: frozenset[tuple[str, str]], after: frozenset[tuple[str, str]]) -> tuple[
        tuple[str, str, str], ...]:
    words = {("QuotaGrant", True): "starts", ("QuotaGrant", False): "ends",
             ("QuotaWindow", True): "opens", ("QuotaWindow", False): "closes"}
    return tuple(sorted([(kind, name, words[kind, False]) for kind, name in before - after]
                        + [(kind, name, words[kind, True]) for kind, name in after - before]))


def _quotas(setup: Setup) -> dict[tuple[str, str], tuple[str, dict[FR, Quota]]]:
    found: dict[tuple[str, str], tuple[str, dict[FR, Quota]]] = {
        ("ClusterQueue", name): (spec.tenant, spec.quotas) for name, spec in setup.cluster_queues.items()}
    found.update({("Cohort", name): (name, spec.quotas) for name, spec in setup.cohorts.items()})
    return found


def quota_changes(before: Setup, after: Setup) -> tuple[QuotaChange, ...]:
    """Every (flavor, resource) of a ClusterQueue or Cohort whose nominal quota or limits differ."""
    old, new = _quotas(before), _quotas(after)
    changes = []
    for key in sorted(set(old) | set(new)):
        tenant, was = old.get(key, ("", {}))
        tenant, now = new.get(key, (tenant, {}))
        for fr in sorted(set(was) | set(now)):
            if was.get(fr) != now.get(fr):
                changes.append(QuotaChange(key[0], key[1], tenant, fr[0], fr[1], was.get(fr), now.get(fr)))
    return tuple(changes)


def quota_timeline(model: Model, cluster: str, start: datetime, first_ms: int, last_ms: int) -> tuple[
        Setup, Timeline]:
    """The quotas at the trace's first submission and every boundary after it until SLACK past
    its last that changes the cluster's ClusterQueues or Cohorts."""
    compiled: dict[frozenset[tuple[str, str]], Setup] = {}  # instants alike compile alike

    def setup_at(at: datetime) -> tuple[frozenset[tuple[str, str]], Setup]:
        key = _in_force(model, at)
        if key not in compiled:
            compiled[key] = read_setup(compile(model_at(model, at), backend="kueue", cluster=cluster))
        return key, compiled[key]

    first = start + timedelta(milliseconds=first_ms)
    in_force, setup = setup_at(first)
    initial = setup
    found = []
    for instant in boundaries(model, first, start + timedelta(milliseconds=last_ms) + SLACK):
        if instant <= first:
            continue
        key, after = setup_at(instant)
        changes = quota_changes(setup, after)
        groups_changed = any(after.cluster_queues[n].groups != spec.groups
                             for n, spec in setup.cluster_queues.items() if n in after.cluster_queues)
        if changes or groups_changed:
            found.append(Boundary(trace_ms(start, instant), instant, _what_happens(in_force, key), changes, after))
            setup = after
        in_force = key
    return initial, Timeline(start, tuple(sorted(_in_force(model, first))), tuple(found))
