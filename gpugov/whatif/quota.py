"""Fair sharing and borrowing levels over the cohort tree, as Kueue v0.17 computes them
(pkg/cache/scheduler/fair_sharing.go, resource_node.go).

The quota nodes and what a queue can reach (`available`, `potential_available`, usage stored in
parents) are gpugov.reach's, the one computation every report reads; re-exported here for the
simulator. The Dominant Resource Share (DRS) of a node is its borrowing beyond its subtree
quota, per resource, as a share of what its parent could lend it, divided by its weight.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from gpugov.reach import FR, Quota, QuotaNode, accumulate, freeze_local, potential_available


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


SHARES_KEPT = 1 << 14  # shares kept, at most (all are forgotten when there are more)


def kept_drs(known: dict[tuple[object, ...], DRS], node: QuotaNode) -> DRS:
    """drs(node), kept in `known` per node and the values of its usage. Within one set of quotas a
    node's usage only gains keys, in insertion order, so the same values are the same usage, and the
    same share (drs reads nothing else that changes). The caller forgets `known` when quotas change."""
    key = (node, *node.usage.values())
    share = known.get(key)
    if share is None:
        if len(known) >= SHARES_KEPT:
            known.clear()
        share = known[key] = drs(node)
    return share


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
