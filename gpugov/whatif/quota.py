"""Quota and usage in the cohort tree, as Kueue v0.17 keeps them (pkg/cache/scheduler/resource_node.go,
fair_sharing.go).

Every ClusterQueue and Cohort is a QuotaNode. A node's subtree quota is its own nominal quota
plus what its children lend it (their subtree quota minus what their lending limits keep
local). Usage past a node's local (unlendable) quota is stored in its parent. `available`
walks up the tree, capped by borrowing limits; `potential_available` is the same with no
usage. The Dominant Resource Share (DRS) of a node is its borrowing beyond its subtree
quota, per resource, as a share of what its parent could lend it, divided by its weight.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from gpugov.whatif.setup import FR, Quota


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


def set_quotas(node: QuotaNode, quotas: dict[FR, Quota], weight: float) -> None:
    """New quotas for a node of a built tree (a boundary of the quota timeline): everything derived
    from them and the usage are cleared, for `relink` and the running workloads to fill in again."""
    node.nominal = {fr: q.nominal for fr, q in quotas.items()}
    node.borrowing_limit = {fr: q.borrowing_limit for fr, q in quotas.items() if q.borrowing_limit is not None}
    node.lending_limit = {fr: q.lending_limit for fr, q in quotas.items() if q.lending_limit is not None}
    node.subtree = dict(node.nominal)
    node.weight = weight
    node.usage, node.local, node.potential, node.lendable, node.height = {}, {}, {}, {}, 0


def relink(nodes: list[QuotaNode]) -> None:
    """Subtree quotas, local quotas and lendable amounts of a tree's nodes from their own quotas
    (`nodes`: every ClusterQueue and Cohort node, quotas set and usage empty)."""
    for node in nodes:
        if node.parent is None:
            if node.is_cq:
                freeze_local(node)
            else:
                accumulate(node)
    for node in nodes:
        compute_lendable(node)


def compute_lendable(node: QuotaNode) -> None:
    """What the parent could lend, per resource name (Kueue's calculateLendable): constant, as it
    depends on quotas only."""
    if node.parent is None:
        return
    root = node.root()
    lendable: dict[str, int] = {}
    for fr in root.subtree:
        lendable[fr[1]] = lendable.get(fr[1], 0) + potential_available(node.parent, fr)
    node.lendable = lendable


@dataclass(frozen=True, slots=True)
class DRS:
    weight: float
    ratio: float  # unweighted: max over resources of borrowed * 1000 / lendable
    borrowed: frozenset[FR]

    @property
    def borrowing(self) -> bool:
        return bool(self.borrowed)

    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and self.ratio != 0

    def weighted(self) -> float:
        if self.ratio == 0:
            return 0.0
        if self.weight == 0:
            return math.inf
        return self.ratio / self.weight

    def borrowing_on(self, frs: Iterable[FR]) -> bool:
        return any(fr in self.borrowed for fr in frs)


NEGATIVE_DRS = DRS(1.0, -1.0, frozenset())


def compare_drs(a: DRS, b: DRS) -> int:
    """-1 when a is the fairer (lower) share, as Kueue's CompareDRS."""
    if a.zero_weight_borrows() and b.zero_weight_borrows():
        return (a.ratio > b.ratio) - (a.ratio < b.ratio)
    if a.zero_weight_borrows():
        return 1
    if b.zero_weight_borrows():
        return -1
    x, y = a.weighted(), b.weighted()
    return (x > y) - (x < y)


def drs(node: QuotaNode, extra: dict[FR, int] | None = None) -> DRS:
    if node.parent is None:
        return DRS(node.weight, 0.0, frozenset())
    usage = node.usage
    borrowing: dict[str, int] = {}
    borrowed: list[FR] = []
    for fr, quota in node.subtree.items():
        amount = usage.get(fr, 0) - quota + (extra.get(fr, 0) if extra else 0)
        if amount > 0:
            borrowing[fr[1]] = borrowing.get(fr[1], 0) + amount
            borrowed.append(fr)
    if not borrowing:
        return DRS(node.weight, 0.0, frozenset())
    ratio = 0.0
    for resource, amount in borrowing.items():
        lendable = node.lendable.get(resource, 0)
        if lendable > 0:
            ratio = max(ratio, amount * 1000.0 / lendable)
    return DRS(node.weight, ratio, frozenset(borrowed))


def lowest_subtree_that_fits(cq: QuotaNode, fr: FR, value: int) -> tuple[int, bool]:
    """(height of the lowest subtree whose quota holds `value` more of fr, whether it is below
    the root): Kueue's FindHeightOfLowestSubtreeThatFits, the flavor's borrowing level."""
    if cq.parent is None or not cq.borrowing_with(fr, value):
        return 0, cq.parent is not None
    remaining = value - cq.local_available(fr)
    for node in cq.ancestors():
        if not node.borrowing_with(fr, remaining):
            return node.height, node.parent is not None
        remaining -= node.local_available(fr)
    return cq.root().height, False


def fits_in_quota(node: QuotaNode, requests: dict[FR, int]) -> tuple[bool, dict[FR, int]]:
    """Kueue's QuantitiesFitInQuota: whether requests fit the node's subtree quota, and what is
    left for its parent."""
    fits = True
    remaining = {}
    for fr, value in requests.items():
        if node.usage.get(fr, 0) + value > node.subtree.get(fr, 0):
            fits = False
        remaining[fr] = max(0, value - node.local_available(fr))
    return fits, remaining
