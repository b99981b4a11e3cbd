"""What a Kueue ClusterQueue can reach: Kueue v0.17.0's quota arithmetic, computed once for every report.

Kueue keeps, per flavor and resource, a tree of quota nodes (pkg/cache/scheduler/resource_node.go):
ClusterQueues under Cohorts under Cohorts. A node's subtree quota is its own nominal quota plus
what each child passes up (the child's subtree quota minus its local quota); a node's local quota
is what its lendingLimit keeps from its parent (subtree quota - lendingLimit, at least 0; 0 without
a lendingLimit). Usage past a node's local quota is stored in its parent.

- ``available`` (Kueue's ``available``, ``ClusterQueueSnapshot.Available``): what a ClusterQueue
  can take now: its local quota left plus what its parent can still give, capped at each level by
  that node's borrowingLimit (what it stores in the parent, minus what it uses there, plus the limit);
- ``potential_available`` (``PotentialAvailable``): the same with nothing used anywhere, the
  "maximum capacity" of a pending Workload's message;
- a pending Workload's deficit in a flavor, as pkg/scheduler/flavorassigner's fitsResourceQuota
  writes it: ``insufficient unused quota for R in flavor F, N more needed`` with N = (what earlier
  pod sets of the workload took there + the request) - available, when that exceeds what is
  available and not the maximum capacity; above the maximum capacity it can never fit.

Values are Kueue's int64 units (cpu in millicores, everything else rounded up to whole units, as
``resources.ResourceValue``). The what-if simulator runs on these nodes; `Tree` builds them from
ClusterQueue and Cohort objects (compile's, or the live ones with their status) for why, queue,
capacity, guide, plan and doctor, so no report computes what a queue can reach on its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Set
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gpugov.kube.quantity import QuantityError, parse_quantity

FR = tuple[str, str]  # (flavor, resource)


class ReachError(ValueError):
    """A quantity Kueue would not accept in a ClusterQueue or Cohort."""


_VALUES: dict[tuple[str, Any], int] = {}  # (resource, int or str quantity) -> value: quotas repeat a lot


def resource_value(resource: str, quantity: Any) -> int:
    """Kueue's int64 for a quantity of `resource` (resources.ResourceValue: cpu in millicores,
    everything else rounded up to whole units)."""
    if quantity.__class__ is int or quantity.__class__ is str:  # exact types: True == 1, yet no quantity
        key = (resource, quantity)
        known = _VALUES.get(key)
        if known is None:
            known = _resource_value(resource, quantity)
            if len(_VALUES) < 65536:
                _VALUES[key] = known
        return known
    return _resource_value(resource, quantity)


def _resource_value(resource: str, quantity: Any) -> int:
    try:
        amount = parse_quantity(quantity if isinstance(quantity, int | str) else str(quantity))
    except QuantityError as exc:
        raise ReachError(f"{resource}: {exc}") from None
    return math.ceil(amount * 1000) if resource == "cpu" else math.ceil(amount)


def quantity_of(resource: str, value: int) -> Decimal:
    """The quantity Kueue's int64 `value` of `resource` stands for."""
    return Decimal(value) / 1000 if resource == "cpu" else Decimal(value)


@dataclass(frozen=True)
class Quota:
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None


class QuotaNode:
    __slots__ = ("borrowing_limit", "child_cohorts", "child_cqs", "height", "is_cq", "lendable", "lending_limit",
                 "local", "name", "nominal", "owner", "parent", "potential", "subtree", "usage", "version", "weight")

    def __init__(self, name: str, is_cq: bool, quotas: dict[FR, Quota], weight: float) -> None:
        self.name = name
        self.is_cq = is_cq
        self.parent: QuotaNode | None = None
        self.child_cqs: list[QuotaNode] = []
        self.child_cohorts: list[QuotaNode] = []
        self.nominal: dict[FR, int] = {fr: q.nominal for fr, q in quotas.items()}
        self.borrowing_limit: dict[FR, int] = {fr: q.borrowing_limit for fr, q in quotas.items()
                                               if q.borrowing_limit is not None}
        self.lending_limit: dict[FR, int] = {fr: q.lending_limit for fr, q in quotas.items()
                                             if q.lending_limit is not None}
        self.subtree: dict[FR, int] = dict(self.nominal)
        self.usage: dict[FR, int] = {}
        self.weight = weight
        self.lendable: dict[str, int] = {}
        self.height = 0
        self.owner: Any = None  # the simulator's ClusterQueue, for ClusterQueue nodes
        self.version = 0  # on a root: bumped whenever usage in its tree changes for good
        self.local: dict[FR, int] = {}  # local_quota, fixed once the tree is built (see freeze)
        self.potential: dict[FR, int] = {}  # potential_available, fixed too

    def __repr__(self) -> str:
        return f"QuotaNode({self.name!r})"

    def local_quota(self, fr: FR) -> int:
        """What lending limits keep inside this subtree, invisible to the parent."""
        return self.local.get(fr, 0)

    def local_available(self, fr: FR) -> int:
        return max(0, self.local.get(fr, 0) - self.usage.get(fr, 0))

    def ancestors(self) -> Iterator[QuotaNode]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def root(self) -> QuotaNode:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def subtree_cqs(self) -> list[QuotaNode]:
        result = list(self.child_cqs)
        for child in self.child_cohorts:
            result.extend(child.subtree_cqs())
        return result

    def borrowing_with(self, fr: FR, value: int) -> bool:
        quota = self.nominal.get(fr, 0) if self.is_cq else self.subtree.get(fr, 0)
        return self.usage.get(fr, 0) + value > quota

    def within_nominal(self, frs: Iterable[FR]) -> bool:
        return all(self.usage.get(fr, 0) <= self.subtree.get(fr, 0) for fr in frs)


def available(node: QuotaNode, fr: FR) -> int:
    """Capacity left for `node` now: local plus what the parent can still give, within limits.
    May be negative after over-admission (Kueue's `available`)."""
    usage = node.usage.get(fr, 0)
    parent = node.parent
    if parent is None:
        return node.subtree.get(fr, 0) - usage
    parent_available = available(parent, fr)
    local = node.local.get(fr, 0)
    limit = node.borrowing_limit.get(fr)
    if limit is not None:
        stored_in_parent = node.subtree.get(fr, 0) - local
        used_in_parent = max(0, usage - local)
        parent_available = min(stored_in_parent - used_in_parent + limit, parent_available)
    return max(0, local - usage) + parent_available


def cq_available(node: QuotaNode, fr: FR) -> int:
    return max(0, available(node, fr))


def potential_available(node: QuotaNode, fr: FR) -> int:
    """The most `node` could ever get with no usage anywhere (fixed: kept once computed)."""
    known = node.potential.get(fr)
    if known is None:
        known = node.potential[fr] = _potential_available(node, fr)
    return known


def _potential_available(node: QuotaNode, fr: FR) -> int:
    if node.parent is None:
        return node.subtree.get(fr, 0)
    result = node.local_quota(fr) + potential_available(node.parent, fr)
    limit = node.borrowing_limit.get(fr)
    if limit is not None:
        result = min(node.subtree.get(fr, 0) + limit, result)
    return result


def add_usage(node: QuotaNode, fr: FR, value: int) -> None:
    while True:
        used = node.usage.get(fr, 0)
        local_available = max(0, node.local.get(fr, 0) - used)
        node.usage[fr] = used + value
        parent = node.parent
        if parent is None or value <= local_available:
            return
        value -= local_available
        node = parent


def remove_usage(node: QuotaNode, fr: FR, value: int) -> None:
    while True:
        used = node.usage.get(fr, 0)
        stored_in_parent = used - node.local.get(fr, 0)
        node.usage[fr] = used - value
        parent = node.parent
        if stored_in_parent <= 0 or parent is None:
            return
        value = min(value, stored_in_parent)
        node = parent


def add_all(node: QuotaNode, usage: dict[FR, int]) -> None:
    for fr, value in usage.items():
        add_usage(node, fr, value)


def remove_all(node: QuotaNode, usage: dict[FR, int]) -> None:
    for fr, value in usage.items():
        remove_usage(node, fr, value)


def freeze_local(node: QuotaNode) -> None:
    """Local quotas once the subtree quota is known: what lending limits keep below the parent."""
    node.local = {fr: max(0, node.subtree.get(fr, 0) - limit) for fr, limit in node.lending_limit.items()}


def accumulate(cohort: QuotaNode) -> None:
    """Subtree quotas from the leaves up (Kueue's updateCohortResourceNode), at build time."""
    for child in cohort.child_cohorts:
        accumulate(child)
    for child in cohort.child_cqs:
        freeze_local(child)
    for child in (*cohort.child_cohorts, *cohort.child_cqs):
        for fr, quota in child.subtree.items():
            cohort.subtree[fr] = cohort.subtree.get(fr, 0) + quota - child.local_quota(fr)
    freeze_local(cohort)
    cohort.height = max([min(len(cohort.child_cqs) + len(cohort.child_cohorts), 1)]
                        + [c.height + 1 for c in cohort.child_cohorts])


def available_limited(node: QuotaNode, fr: FR) -> tuple[int, QuotaNode | None]:
    """`available`, and the node whose borrowingLimit decides it (None: the cohort tree's unused quota,
    or the node's own quota without a parent). The lowest node whose cap is below what its parent
    can give is the one that counts: nothing above it changes the answer while its cap binds."""
    usage = node.usage.get(fr, 0)
    parent = node.parent
    if parent is None:
        return node.subtree.get(fr, 0) - usage, None
    parent_available, limited_by = available_limited(parent, fr)
    local = node.local.get(fr, 0)
    limit = node.borrowing_limit.get(fr)
    if limit is not None:
        capped = node.subtree.get(fr, 0) - local - max(0, usage - local) + limit
        if capped < parent_available:
            parent_available, limited_by = capped, node
    return max(0, local - usage) + parent_available, limited_by


@dataclass(frozen=True)
class Room:
    """What ClusterQueue `cluster_queue` can reach of `resource` in `flavor`, in the resource's own
    units (cpu in cores, as Kubernetes writes quantities)."""

    cluster_queue: str
    flavor: str
    resource: str
    nominal: Decimal
    borrowing_limit: Decimal | None
    lending_limit: Decimal | None
    held: Decimal  # what its admitted (quota-reserved) workloads hold there
    available: Decimal  # Kueue's Available: what it can take now
    maximum: Decimal  # Kueue's PotentialAvailable: the most it can ever hold, nothing else running
    limited_by: str  # "" : the cohort tree's unused quota; "ClusterQueue NAME" / "Cohort NAME": that node's borrowingLimit
    limited_by_own: bool  # its own borrowingLimit decides what it can take now
    lends: Decimal = Decimal(0)  # what its quota passes up to its cohort for others (0 without a cohort)

    @property
    def may_borrow(self) -> Decimal:
        """The most it can hold beyond its nominal quota (maximum - nominal, at least 0)."""
        return max(Decimal(0), self.maximum - self.nominal)

    def fits(self, request: Decimal, previous: Decimal = Decimal(0)) -> bool:
        return previous + request <= self.available

    def never_fits(self, request: Decimal, previous: Decimal = Decimal(0)) -> bool:
        return previous + request > self.maximum

    def deficit(self, request: Decimal, previous: Decimal = Decimal(0)) -> Decimal:
        """How much more is needed than is available now: Kueue's "N more needed" (0 when it fits).
        `previous`: what earlier pod sets of the same workload take in this flavor."""
        return max(Decimal(0), previous + request - self.available)


def spec_quotas(spec: Mapping[str, Any], owner: str, only: Set[FR] | None = None) -> dict[FR, Quota]:
    """The spec's quotas per (flavor, resource); `only`: just those pairs (None: all)."""
    quotas: dict[FR, Quota] = {}
    flavors = None if only is None else {flavor for flavor, _ in only}
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            if flavors is not None and str(flavor.get("name")) not in flavors:
                continue
            for resource in flavor.get("resources") or []:
                name = str(resource.get("name"))
                if only is not None and (str(flavor.get("name")), name) not in only:
                    continue
                borrowing, lending = resource.get("borrowingLimit"), resource.get("lendingLimit")
                try:
                    quotas[(str(flavor.get("name")), name)] = Quota(
                        resource_value(name, resource.get("nominalQuota", 0)),
                        None if borrowing is None else resource_value(name, borrowing),
                        None if lending is None else resource_value(name, lending))
                except ReachError as exc:
                    raise ReachError(f"{owner} flavor {flavor.get('name')}: {exc}") from None
    return quotas


def reserved_usage(cluster_queue: Mapping[str, Any]) -> dict[FR, int]:
    """What a live ClusterQueue's status says its quota-reserved workloads hold (status.flavorsReservation:
    the usage Kueue's scheduler counts, admission checks pending or not)."""
    status = cluster_queue.get("status")
    usage: dict[FR, int] = {}
    for flavor in (status.get("flavorsReservation") or []) if isinstance(status, dict) else []:
        for resource in flavor.get("resources") or []:
            name = str(resource.get("name"))
            value = resource_value(name, resource.get("total") or 0)
            if value:
                usage[(str(flavor.get("name")), name)] = value
    return usage


class Tree:
    """The cohort trees of some ClusterQueue and Cohort objects (kueue.x-k8s.io, any version that
    writes `cohortName`/`parentName`), with what each ClusterQueue holds.

    `usage`: per ClusterQueue, what it holds per (flavor, resource) in Kueue's units; None reads it
    from each object's status (flavorsReservation), so compile's objects (no status) hold nothing.
    A Cohort named by a ClusterQueue or a child Cohort without an object of its own exists, without
    quota, as in Kueue. `only`: the tree of just those (flavor, resource) pairs (each pair's arithmetic is
    its own), for a report that needs no other."""

    def __init__(self, objects: Iterable[Mapping[str, Any]], usage: Mapping[str, Mapping[FR, int]] | None = None,
                 only: Set[FR] | None = None) -> None:
        queues: dict[str, Mapping[str, Any]] = {}
        cohorts: dict[str, Mapping[str, Any]] = {}
        for obj in objects:
            kind = obj.get("kind")
            if kind == "ClusterQueue":
                queues[str(obj["metadata"]["name"])] = obj
            elif kind == "Cohort":
                cohorts[str(obj["metadata"]["name"])] = obj
        self.cohorts: dict[str, QuotaNode] = {}
        for name, obj in sorted(cohorts.items()):
            self.cohorts[name] = QuotaNode(name, False, spec_quotas(obj.get("spec") or {}, f"Cohort {name}", only),
                                            1.0)
        parents = {name: str((obj.get("spec") or {}).get("parentName") or "") for name, obj in cohorts.items()}
        named = {str((q.get("spec") or {}).get("cohortName") or "") for q in queues.values()} | set(parents.values())
        for name in sorted(named - {""} - set(self.cohorts)):
            self.cohorts[name] = QuotaNode(name, False, {}, 1.0)
        for name, parent in sorted(parents.items()):
            if parent and not self._cycle(name, parents):
                self.cohorts[name].parent = self.cohorts[parent]
                self.cohorts[parent].child_cohorts.append(self.cohorts[name])
        self.queues: dict[str, QuotaNode] = {}
        for name, obj in sorted(queues.items()):
            spec = obj.get("spec") or {}
            node = self.queues[name] = QuotaNode(name, True, spec_quotas(spec, f"ClusterQueue {name}", only),
                                                   1.0)
            cohort = str(spec.get("cohortName") or "")
            if cohort:
                node.parent = self.cohorts[cohort]
                self.cohorts[cohort].child_cqs.append(node)
        for node in (*self.cohorts.values(), *self.queues.values()):
            if node.parent is None:
                if node.is_cq:
                    freeze_local(node)
                else:
                    accumulate(node)
        for name, node in self.queues.items():
            held = usage.get(name, {}) if usage is not None else reserved_usage(queues[name])
            if only is not None:
                held = {fr: value for fr, value in held.items() if fr in only}
            add_all(node, dict(sorted(held.items())))

    @staticmethod
    def _cycle(name: str, parents: Mapping[str, str]) -> bool:
        """Whether `name` is in a parent cycle (Kueue then links none of it: its queues are inactive)."""
        seen = {name}
        parent = parents.get(name, "")
        while parent:
            if parent in seen:
                return True
            seen.add(parent)
            parent = parents.get(parent, "")
        return False

    def flavor_resources(self, cluster_queue: str) -> list[FR]:
        """The (flavor, resource) pairs the ClusterQueue lists, sorted; [] for an unknown queue."""
        node = self.queues.get(cluster_queue)
        return sorted(node.nominal) if node is not None else []

    def room(self, cluster_queue: str, flavor: str, resource: str) -> Room | None:
        """What `cluster_queue` can reach of `resource` in `flavor`; None when it does not list them."""
        node = self.queues.get(cluster_queue)
        fr = (flavor, resource)
        if node is None or fr not in node.nominal:
            return None
        value, limited_by = available_limited(node, fr)
        borrowing, lending = node.borrowing_limit.get(fr), node.lending_limit.get(fr)

        def q(amount: int) -> Decimal:
            return quantity_of(resource, amount)

        return Room(cluster_queue, flavor, resource, q(node.nominal[fr]), None if borrowing is None else q(borrowing),
                    None if lending is None else q(lending), q(node.usage.get(fr, 0)), q(max(0, value)),
                    q(potential_available(node, fr)),
                    "" if limited_by is None else f"{'ClusterQueue' if limited_by.is_cq else 'Cohort'} {limited_by.name}",
                    limited_by is node, self.lends(cluster_queue, flavor, resource))

    def maximum(self, cluster_queue: str) -> dict[FR, Decimal]:
        """The most `cluster_queue` can hold per (flavor, resource) it lists ({} for an unknown one)."""
        node = self.queues.get(cluster_queue)
        if node is None:
            return {}
        return {fr: quantity_of(fr[1], potential_available(node, fr)) for fr in sorted(node.nominal)}

    def lends(self, cluster_queue: str, flavor: str, resource: str) -> Decimal:
        """What the ClusterQueue's quota passes up to its cohort, for others to borrow (its subtree
        quota minus the local quota its lendingLimit keeps); 0 without a cohort."""
        node = self.queues.get(cluster_queue)
        fr = (flavor, resource)
        if node is None or node.parent is None:
            return Decimal(0)
        return quantity_of(resource, node.subtree.get(fr, 0) - node.local_quota(fr))


def tenant_maxima(objects: Iterable[Mapping[str, Any]], usage: Mapping[str, Mapping[FR, int]] | None = None,
                  *, keep: Callable[[str], bool] = lambda resource: True, only: Set[FR] | None = None
                  ) -> dict[str, dict[FR, Decimal]]:
    """Per tenant (as tenant_rooms) and (flavor, resource) its queue lists whose resource `keep` takes
    (and in `only`, when given): only the most it can reach (Room.maximum), without the rest of each Room."""
    from gpugov.kube.objects import LABEL_TENANT

    objects = list(objects)
    tree = Tree(objects, usage, only)
    maxima: dict[str, dict[FR, Decimal]] = {}
    for obj in objects:
        if obj.get("kind") != "ClusterQueue":
            continue
        name = str(obj["metadata"]["name"])
        tenant = str((obj["metadata"].get("labels") or {}).get(LABEL_TENANT) or name)
        found = maxima.setdefault(tenant, {})
        node = tree.queues.get(name)
        if node is None:
            continue
        for fr in sorted(node.nominal):
            if keep(fr[1]):
                found[fr] = quantity_of(fr[1], potential_available(node, fr))
    return maxima


def tenant_rooms(objects: Iterable[Mapping[str, Any]], usage: Mapping[str, Mapping[FR, int]] | None = None
                 ) -> dict[str, dict[FR, Room]]:
    """Per tenant (its ClusterQueue's gpugov.io/tenant label, else the queue's name) and (flavor,
    resource) its queue lists: what it can reach (see Tree)."""
    from gpugov.kube.objects import LABEL_TENANT

    objects = list(objects)
    tree = Tree(objects, usage)
    rooms: dict[str, dict[FR, Room]] = {}
    for obj in objects:
        if obj.get("kind") != "ClusterQueue":
            continue
        name = str(obj["metadata"]["name"])
        tenant = str((obj["metadata"].get("labels") or {}).get(LABEL_TENANT) or name)
        found = rooms.setdefault(tenant, {})
        for flavor, resource in tree.flavor_resources(name):
            room = tree.room(name, flavor, resource)
            if room is not None:
                found[(flavor, resource)] = room
    return rooms
