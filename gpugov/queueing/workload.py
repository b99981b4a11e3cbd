"""One Kueue Workload (kueue.x-k8s.io/v1beta2), read from its raw JSON into a typed record.

What is taken from where (apis/kueue/v1beta2/workload_types.go):
- size: an admitted Workload's `status.admission.podSetAssignments[].resourceUsage` (what Kueue
  charged, with the flavor of each resource); before admission `status.resourceRequests` (what
  it asked when last considered), else the pod templates of `spec.podSets` times their count;
- times: the lastTransitionTime of the conditions Admitted, Finished, Evicted; earlier admitted
  cycles only as `status.accumulatedPastExecutionTimeSeconds`;
- expected end: Admitted + `spec.maximumExecutionTimeSeconds` (the
  `kueue.x-k8s.io/max-exec-time-seconds` label of a Job), after which Kueue deactivates it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Generic, TypeVar

from gpugov.kube.quantity import QuantityError, parse_quantity
from gpugov.kube.resources import is_accelerator


class WorkloadError(ValueError):
    """A Workload whose fields are not what Kueue writes (an unreadable quantity or time)."""


_TIMES: dict[str, datetime] = {}  # RFC 3339 text -> its instant: Workloads made in the same second share one
_TIMES_MOST = 1 << 16


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 time of the API (`2025-01-02T03:04:05Z`) as an aware UTC datetime."""
    if not isinstance(value, str) or not value:
        return None
    found = _TIMES.get(value)
    if found is not None:
        return found
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise WorkloadError(f"{value!r} is not an RFC 3339 time") from exc
    found = parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    if len(_TIMES) < _TIMES_MOST:
        _TIMES[value] = found
    return found


T = TypeVar("T")


class cached(Generic[T]):  # a decorator, named as functools.cached_property is
    """functools.cached_property without its lock: Python 3.11's takes a lock on every first read,
    and the views make that read a few times per Workload of 100,000 (a tenth of building their
    entries). Without it two threads may compute a value twice, which is harmless: it is made of
    frozen fields only. As cached_property, it writes the value into the instance's __dict__ (past a
    frozen dataclass's guard), where later reads find it."""

    def __init__(self, func: Callable[[Any], T]) -> None:
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __get__(self, instance: Any, owner: type | None = None) -> T:
        if instance is None:
            return self  # type: ignore[return-value]  # the descriptor itself, read on the class
        value = instance.__dict__[self.name] = self.func(instance)
        return value


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str
    since: datetime | None

    @property
    def true(self) -> bool:
        return self.status == "True"


@dataclass(frozen=True)
class PodSet:
    name: str
    count: int
    requests: Mapping[str, Decimal]  # the whole pod set: count pods together
    flavors: Mapping[str, str] = field(default_factory=dict)  # resource -> flavor, once admitted

    def per_pod(self, resource: str) -> Decimal:
        return self.requests.get(resource, Decimal(0)) / self.count if self.count else Decimal(0)


@dataclass(frozen=True)
class Workload:
    namespace: str
    name: str
    uid: str
    owner_kind: str  # the controlling owner (Job, Pod, ...), "" for none
    owner_name: str
    queue: str  # its LocalQueue
    cluster_queue: str  # of its admission; "" while it holds none
    priority: int
    priority_class: str
    created: datetime | None
    active: bool
    pod_sets: tuple[PodSet, ...]
    conditions: Mapping[str, Condition]
    past_admitted_seconds: int = 0
    max_execution_seconds: int | None = None
    # A fleet's manager (issue #43): the worker MultiKueue dispatched it to (status.clusterName), and
    # its admission checks' states and messages (status.admissionChecks: name, state, message).
    cluster_name: str = ""
    checks: tuple[tuple[str, str, str], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def job(self) -> str:
        """What the user submitted: the owner's name (a Job's), else the Workload's own."""
        return self.owner_name or self.name

    def condition(self, kind: str) -> Condition | None:
        return self.conditions.get(kind)

    def _is(self, kind: str) -> bool:
        found = self.conditions.get(kind)
        return found is not None and found.true

    @cached  # asked many times per Workload by the views; its conditions never change
    def state(self) -> str:
        """finished, admitted, reserved (quota held, admission checks pending), inactive or pending."""
        if self._is("Finished"):
            return "finished"
        if self._is("Admitted"):
            return "admitted"
        if self._is("QuotaReserved"):
            return "reserved"
        if not self.active:
            return "inactive"
        return "pending"

    def true_since(self, condition: str) -> datetime | None:
        """When the condition last became true; None while it is not."""
        found = self.conditions.get(condition)
        return found.since if found is not None and found.true else None

    @property
    def admitted_at(self) -> datetime | None:
        """Start of the current admission (None while not admitted)."""
        return self.true_since("Admitted")

    @property
    def finished_at(self) -> datetime | None:
        return self.true_since("Finished")

    @property
    def last_evicted_at(self) -> datetime | None:
        return self.true_since("Evicted")

    @property
    def expected_end(self) -> datetime | None:
        """When an admitted workload must end: Kueue deactivates it at its maximum execution time."""
        if self.admitted_at is None or self.max_execution_seconds is None:
            return None
        left = max(0, self.max_execution_seconds - self.past_admitted_seconds)
        return self.admitted_at + timedelta(seconds=left)

    @cached  # frozen, so computed once (a cached_property writes past the frozen guard)
    def requests(self) -> dict[str, Decimal]:
        total: dict[str, Decimal] = defaultdict(Decimal)
        for pod_set in self.pod_sets:
            for resource, amount in pod_set.requests.items():
                total[resource] += amount
        return dict(sorted(total.items()))

    @cached  # asked by every view of the Workload
    def accelerators(self) -> dict[str, Decimal]:
        return {r: a for r, a in self.requests.items() if is_accelerator(r) and a}

    def usage_by_flavor(self) -> dict[tuple[str, str], Decimal]:
        """(flavor, resource) -> amount held, for an admitted (or reserved) workload."""
        return self._usage_by_flavor

    @cached
    def _usage_by_flavor(self) -> dict[tuple[str, str], Decimal]:
        held: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
        for pod_set in self.pod_sets:
            for resource, amount in pod_set.requests.items():
                flavor = pod_set.flavors.get(resource)
                if flavor and amount:
                    held[(flavor, resource)] += amount
        return dict(sorted(held.items()))

    @cached
    def flavors(self) -> tuple[str, ...]:
        return tuple(sorted({f for ps in self.pod_sets for f in ps.flavors.values()}))


_PARSED: dict[str, Decimal] = {}  # quantity text -> its value (Decimals are immutable: shared safely)
_PARSED_MOST = 1 << 16  # a bound, should a cluster write every quantity differently


def quantity(value: Any) -> Decimal:
    """parse_quantity, each distinct string parsed once: 100,000 Workloads say "1" and "8" again and
    again, and parsing was most of reading one into its record. QuantityError as parse_quantity."""
    if type(value) is not str:  # not cached: True must not be taken for the 1 it equals
        return parse_quantity(value)
    parsed = _PARSED.get(value)
    if parsed is None:
        parsed = parse_quantity(value)
        if len(_PARSED) < _PARSED_MOST:
            _PARSED[value] = parsed
    return parsed


def _quantities(values: Any, scale: int = 1) -> dict[str, Decimal]:
    if not isinstance(values, dict):
        return {}
    result = {}
    for name, value in values.items():
        try:
            result[str(name)] = quantity(value) * scale if scale != 1 else quantity(value)
        except QuantityError as exc:
            raise WorkloadError(f"resource {name}: {exc}") from exc
    return result


def pod_requests(spec: Any) -> dict[str, Decimal]:
    """What one pod of a template asks: per resource, the larger of its containers' sum and
    its largest init container, plus the pod overhead; requests, else limits (as the API
    server defaults them)."""
    if not isinstance(spec, dict):
        return {}

    def container(c: Any) -> dict[str, Decimal]:
        resources = c.get("resources") if isinstance(c, dict) else None
        resources = resources if isinstance(resources, dict) else {}
        return {**_quantities(resources.get("limits")), **_quantities(resources.get("requests"))}

    total: dict[str, Decimal] = defaultdict(Decimal)
    for c in spec.get("containers") or []:
        for name, amount in container(c).items():
            total[name] += amount
    for c in spec.get("initContainers") or []:
        for name, amount in container(c).items():
            total[name] = max(total[name], amount)
    for name, amount in _quantities(spec.get("overhead")).items():
        total[name] += amount
    return dict(total)


_CONDITIONS: dict[tuple[Any, ...], Condition] = {}  # what a condition says -> its record, shared (frozen)
_CONDITIONS_MOST = 1 << 16


def _condition(c: dict[str, Any]) -> Condition:
    """The record of one condition; equal ones (Kueue writes the same few messages on many
    Workloads admitted or refused in the same second) are one record."""
    said = (c["type"], c.get("status", ""), c.get("reason"), c.get("message"), c.get("lastTransitionTime"))
    try:
        found = _CONDITIONS.get(said)
    except TypeError:  # a list or object where Kueue writes a string: made, never shared
        found = None
    if found is None:
        found = Condition(str(c["type"]), str(c.get("status", "")), str(c.get("reason") or ""),
                          " ".join(str(c.get("message") or "").split()), parse_time(c.get("lastTransitionTime")))
        if len(_CONDITIONS) < _CONDITIONS_MOST and all(v is None or type(v) is str for v in said):
            _CONDITIONS[said] = found
    return found


def _conditions(status: dict[str, Any]) -> dict[str, Condition]:
    found = {}
    for c in status.get("conditions") or []:
        if isinstance(c, dict) and c.get("type"):
            found[str(c["type"])] = _condition(c)
    return found


def _declared_count(declared: list[dict[str, Any]], name: str) -> Any:
    """The count spec.podSets gives the pod set `name` (the last of that name), 1 when none does."""
    by_name = {str(ps.get("name", "main")): ps for ps in declared}
    return by_name.get(name, {}).get("count", 1)


def _pod_sets(spec: dict[str, Any], status: dict[str, Any]) -> tuple[PodSet, ...]:
    declared = [ps for ps in spec.get("podSets") or [] if isinstance(ps, dict)]
    admission = status.get("admission") if isinstance(status.get("admission"), dict) else None
    if admission:
        result = []
        for assignment in admission.get("podSetAssignments") or []:
            name = str(assignment.get("name") or "main")
            count = assignment["count"] if "count" in assignment else _declared_count(declared, name)
            flavors = {str(r): str(f) for r, f in (assignment.get("flavors") or {}).items()}
            result.append(PodSet(name, int(count), _quantities(assignment.get("resourceUsage")), flavors))
        return tuple(result)
    asked = {str(r.get("name")): r for r in status.get("resourceRequests") or [] if isinstance(r, dict)}
    result = []
    for ps in declared:
        name, count = str(ps.get("name") or "main"), int(ps.get("count", 1))
        if name in asked:
            requests = _quantities(asked[name].get("resources"))
        else:
            per_pod = pod_requests((ps.get("template") or {}).get("spec"))
            requests = {r: a * count for r, a in per_pod.items()}
        result.append(PodSet(name, count, requests))
    return tuple(result)


def _object(value: Any) -> dict[str, Any]:
    """`value` where it is an object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _owner(references: list[Any]) -> dict[str, Any]:
    """The controlling owner reference, else the first, else an empty one."""
    first = None
    for reference in references:
        if isinstance(reference, dict):
            if reference.get("controller"):
                return reference
            if first is None:
                first = reference
    return first if first is not None else {}


def from_object(obj: dict[str, Any]) -> Workload:
    """The record of one raw Workload; WorkloadError when a field is not what Kueue writes."""
    meta = obj.get("metadata") or {}
    spec, status = _object(obj.get("spec")), _object(obj.get("status"))
    owner = _owner(meta.get("ownerReferences") or [])
    admission, priority_ref = _object(status.get("admission")), _object(spec.get("priorityClassRef"))
    max_seconds = spec.get("maximumExecutionTimeSeconds")
    try:
        return Workload(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            owner_kind=str(owner.get("kind") or ""),
            owner_name=str(owner.get("name") or ""),
            queue=str(spec.get("queueName") or ""),
            cluster_queue=str(admission.get("clusterQueue") or ""),
            priority=int(spec.get("priority") or 0),
            priority_class=str(priority_ref.get("name") or ""),
            created=parse_time(meta.get("creationTimestamp")),
            active=spec.get("active", True) is not False,
            pod_sets=_pod_sets(spec, status),
            conditions=_conditions(status),
            past_admitted_seconds=int(status.get("accumulatedPastExecutionTimeSeconds") or 0),
            max_execution_seconds=int(max_seconds) if max_seconds is not None else None,
            cluster_name=str(status.get("clusterName") or ""),
            checks=tuple((str(c.get("name") or ""), str(c.get("state") or ""), str(c.get("message") or ""))
                         for c in status.get("admissionChecks") or [] if isinstance(c, dict)),
        )
    except (TypeError, ValueError) as exc:  # WorkloadError is one; say which Workload
        raise WorkloadError(f"Workload {meta.get('namespace')}/{meta.get('name')}: {exc}") from exc
