"""GPU allocation and activity history per tenant and per pool, read from the recording rules gpugov
compiles (gpugov.monitoring.rules) with Prometheus range queries (gpugov.sources.prometheus.query_range).

Every STEP seconds of the window (aligned to whole multiples of STEP since the epoch, so the same window reads
the same instants) four sums are read: the devices held (gpugov:tenant_devices:count), the idle devices
(gpugov:tenant_idle_devices:count) and the activity (gpugov:tenant_device_activity:ratio) summed per tenant
or per pool, and the devices the exporter reports on each node of a pool. A pool is measured at an
instant where every one of its declared nodes reports devices (a node whose exporter is not scraped leaves
its pool unknown, not emptier); a tenant where every pool of its quotas is measured. At a measured
instant a subject without series holds 0 devices; at an unmeasured one it is unknown, never 0 and never
idle (the coverage rule of gpugov.sources.coverage). Buckets average over their measured instants only;
a bucket without any is a gap.

Numbers are Decimals summed exactly from Prometheus' decimal strings: the same answers give the same
History, and the same SVG (gpugov.capacity.charts).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation

from gpugov.declarations.model import Model
from gpugov.usage.ledger import cluster_pools

# The windows `gpugov history` draws by default and their buckets: 15 min, 2 h and 6 h.
WINDOWS = {"24h": 96, "7d": 84, "30d": 120}
DEFAULT_BUCKETS = 60
HOUR = Decimal(3600)
SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}

ALLOCATED = "sum by ({by}) (gpugov:tenant_devices:count)"
IDLE = "sum by ({by}) (gpugov:tenant_idle_devices:count)"
ACTIVITY = "sum by ({by}) (gpugov:tenant_device_activity:ratio)"
REPORTING = ("count by (pool, node) "
             "(gpugov:device_activity:ratio * on (node) group_left (pool) gpugov:node_pool:info)")

QueryRange = Callable[[str, datetime, datetime, int], list[dict]]  # (promql, start, end, step) -> matrix


class HistoryError(ValueError):
    """A window or step that cannot be read as buckets."""


def window_seconds(text: str) -> int:
    """`24h`, `7d`, `90m`, `30s`, `2w` in seconds."""
    text = text.strip()
    unit = text[-1:]
    if unit not in SECONDS or not text[:-1].isdigit() or int(text[:-1]) < 1:
        raise HistoryError(f"{text!r} is not a window such as 24h, 7d or 30d")
    return int(text[:-1]) * SECONDS[unit]


@dataclass(frozen=True)
class Span:
    """One window to draw: its name as given (24h), its end and how it is cut."""

    name: str
    until: datetime
    seconds: int
    step: int  # seconds between the instants read
    bucket: int  # seconds per bucket, a whole number of steps

    @property
    def since(self) -> datetime:
        return self.until - timedelta(seconds=self.seconds)

    @property
    def buckets(self) -> int:
        return self.seconds // self.bucket


def span(name: str, until: datetime, step: int) -> Span:
    """The window `name` ending at `until` (rounded down to a whole step since the epoch), cut into
    WINDOWS' buckets, or about DEFAULT_BUCKETS for another length; HistoryError where the buckets
    would not be whole steps."""
    seconds = window_seconds(name)
    end = int(until.timestamp()) // step * step
    count = WINDOWS.get(name, 0)
    if count:
        bucket = seconds // count
    else:
        bucket = max(step, -(-seconds // (DEFAULT_BUCKETS * step)) * step)
    if bucket % step or seconds % bucket:
        raise HistoryError(f"window {name} ({seconds} s) is not cut into whole buckets of whole {step} s steps: "
                           f"choose a step that divides {bucket} s")
    return Span(name, datetime.fromtimestamp(end, UTC), seconds, step, bucket)


@dataclass(frozen=True)
class Bucket:
    start: datetime
    end: datetime
    measured: int  # instants measured of `steps`
    steps: int
    devices: Decimal | None  # mean devices held over the measured instants; None: unknown (a gap)
    idle: Decimal | None  # mean idle devices
    activity: Decimal | None  # activity per held device, 0..1; None where unknown or nothing held

    @property
    def coverage(self) -> Decimal:
        return Decimal(self.measured) / Decimal(self.steps)


@dataclass(frozen=True)
class History:
    kind: str  # tenant | pool
    name: str
    span: Span
    buckets: tuple[Bucket, ...]
    device_seconds: Decimal  # over the measured instants, each standing for one step (exact)
    idle_device_seconds: Decimal
    activity: Decimal | None  # over the measured device-steps, 0..1
    unknown_seconds: int

    @property
    def device_hours(self) -> Decimal:
        return self.device_seconds / HOUR

    @property
    def idle_device_hours(self) -> Decimal:
        return self.idle_device_seconds / HOUR

    @property
    def unknown_hours(self) -> Decimal:
        return self.unknown_seconds / HOUR

    @property
    def idle_share(self) -> Decimal | None:
        return self.idle_device_seconds / self.device_seconds if self.device_seconds else None


def _number(text: object) -> Decimal:
    try:
        value = Decimal(str(text))
    except InvalidOperation:
        value = Decimal("NaN")
    return value


def _by_instant(matrix: Iterable[dict], *labels: str) -> dict[str, dict[int, Decimal]]:
    """labels' values (joined by '/') -> epoch second -> value, NaN samples dropped (they measure nothing)."""
    out: dict[str, dict[int, Decimal]] = {}
    for series in matrix:
        name = "/".join(str(series["metric"].get(label, "")) for label in labels)
        into = out.setdefault(name, {})
        for at, value in series["values"]:
            number = _number(value)
            if number.is_finite():
                into[round(float(at))] = into.get(round(float(at)), Decimal(0)) + number
    return out


def subjects(model: Model, cluster: str) -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]]:
    """(tenant -> the cluster's pools of its quotas, pools of the cluster), sorted; a tenant with no
    quota in the cluster's pools is left out (it can hold nothing there)."""
    pools = tuple(cluster_pools(model, cluster))
    tenants = {}
    for name, tenant in sorted(model.tenants.items()):
        if tenant.clusters and cluster not in tenant.clusters:
            continue
        own = tuple(sorted({q.pool for q in tenant.quotas if q.pool in pools}))
        if own:
            tenants[name] = own
    return tenants, pools


def read(model: Model, cluster: str, window: Span, query_range: QueryRange) -> list[History]:
    """The history of every tenant and pool of `cluster` over `window`: tenants first, then pools, by name."""
    tenants, pools = subjects(model, cluster)
    start = window.since + timedelta(seconds=window.step)

    def ask(promql: str, *labels: str) -> dict[str, dict[int, Decimal]]:
        return _by_instant(query_range(promql, start, window.until, window.step), *labels)

    reporting = ask(REPORTING, "pool", "node")
    declared = cluster_pools(model, cluster)
    measured_pools = {}
    for pool in pools:
        nodes = [{t for t, v in reporting.get(f"{pool}/{node.name}", {}).items() if v > 0}
                 for node in declared[pool].nodes]
        measured_pools[pool] = set.intersection(*nodes) if nodes else set()
    out = []
    for kind, names in (("tenant", tenants), ("pool", {p: (p,) for p in pools})):
        allocated, idle, active = (ask(q.format(by=kind), kind) for q in (ALLOCATED, IDLE, ACTIVITY))
        for name, own in names.items():
            known = set.intersection(*(measured_pools[p] for p in own))
            out.append(history(kind, name, window, known, allocated.get(name, {}), idle.get(name, {}),
                               active.get(name, {})))
    return out


def history(kind: str, name: str, window: Span, known: set[int], allocated: dict[int, Decimal],
            idle: dict[int, Decimal], active: dict[int, Decimal]) -> History:
    """One subject's buckets from its per-instant sums; `known`: the instants measured."""
    first = int(window.since.timestamp())
    per_bucket = window.bucket // window.step
    buckets = []
    held_steps = idle_steps = active_sum = Decimal(0)
    unknown = 0
    for index in range(window.buckets):
        low = first + index * window.bucket
        instants = [low + window.step * (k + 1) for k in range(per_bucket)]
        seen = [t for t in instants if t in known]
        unknown += per_bucket - len(seen)
        held = sum((allocated.get(t, Decimal(0)) for t in seen), Decimal(0))
        quiet = sum((idle.get(t, Decimal(0)) for t in seen), Decimal(0))
        busy = sum((active.get(t, Decimal(0)) for t in seen), Decimal(0))
        held_steps, idle_steps, active_sum = held_steps + held, idle_steps + quiet, active_sum + busy
        count = Decimal(len(seen))
        buckets.append(Bucket(
            datetime.fromtimestamp(low, UTC), datetime.fromtimestamp(low + window.bucket, UTC), len(seen), per_bucket,
            held / count if seen else None, quiet / count if seen else None, busy / held if seen and held else None))
    return History(kind, name, window, tuple(buckets), held_steps * window.step, idle_steps * window.step,
                   active_sum / held_steps if held_steps else None, unknown * window.step)
