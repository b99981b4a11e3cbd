"""The order in which one cycle's heads are taken with fair sharing on, as Kueue v0.17's
fairSharingIterator (pkg/scheduler/fair_sharing_iterator.go).

Per root cohort, a tournament runs down the cohort tree: at every cohort, among the winners of
its child cohorts and the heads of its own ClusterQueues, the one that borrows nothing of its
own flavors wins (FairSharingPrioritizeNonBorrowing), then the lowest Dominant Resource Share
after its admission, then the higher priority, then the older. Shares are recomputed after each
winner, since its admission changes them. A ClusterQueue alone in its tree needs no tournament.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, TypeVar

from gpugov.reach import QuotaNode, add_all, remove_all
from gpugov.whatif.flavors import Assignment
from gpugov.whatif.quota import DRS, compare_drs, kept_drs
from gpugov.whatif.state import ClusterQueue, Workload


class Head(Protocol):
    """A ClusterQueue's head in this cycle, with its flavor assignment."""

    @property
    def wl(self) -> Workload: ...

    @property
    def cq(self) -> ClusterQueue: ...

    @property
    def assignment(self) -> Assignment: ...


H = TypeVar("H", bound=Head)
Shares = dict[tuple[int, int], DRS]  # (id of a cohort, id of a head) -> the share it competes with there


def fair_order(heads: list[H], known: dict[tuple[object, ...], DRS]) -> Iterator[H]:
    """The heads, each tournament's winner first; a lazy iterator, so that shares are computed
    against the usage left by the heads admitted before. `known`: shares kept (quota.kept_drs)."""
    remaining = {id(h.cq): h for h in heads}
    while remaining:
        first = min(remaining.values(), key=lambda h: h.cq.name)
        if first.cq.node.parent is None:
            del remaining[id(first.cq)]
            yield first
            continue
        root = first.cq.root
        rivals = [h for h in remaining.values() if h.cq.root is root]
        if len(rivals) == 1:  # alone in its cohort tree: no tournament to run
            del remaining[id(first.cq)]
            yield first
            continue
        winner = _tournament(root, remaining, _shares(root, remaining, known))
        assert winner is not None
        del remaining[id(winner.cq)]
        yield winner


def _shares(root: QuotaNode, remaining: dict[int, H], known: dict[tuple[object, ...], DRS]) -> Shares:
    """Each head's share at every cohort above its queue, as if it alone were admitted."""
    values: Shares = {}
    for node in root.subtree_cqs():
        head = remaining.get(id(node.owner))
        if head is None:
            continue
        usage = head.assignment.usage
        add_all(node, usage)
        share = kept_drs(known, node)
        for ancestor in node.ancestors():
            values[(id(ancestor), id(head))] = share
            share = kept_drs(known, ancestor)
        remove_all(node, usage)
    return values


def _tournament(cohort: QuotaNode, remaining: dict[int, H], values: Shares) -> H | None:
    candidates = [c for child in cohort.child_cohorts if (c := _tournament(child, remaining, values))]
    candidates += [remaining[id(child.owner)] for child in cohort.child_cqs if id(child.owner) in remaining]
    if not candidates:
        return None
    best = candidates[0]
    for current in candidates[1:]:
        if _fairer(current, best, id(cohort), values):
            best = current
    return best


def _fairer(a: Head, b: Head, parent: int, values: Shares) -> bool:
    a_share, b_share = values[(parent, id(a))], values[(parent, id(b))]
    # FairSharingPrioritizeNonBorrowing (on in 0.17): not borrowing on its own flavors wins.
    a_borrows = a_share.borrowing_on(a.assignment.usage)
    b_borrows = b_share.borrowing_on(b.assignment.usage)
    if a_borrows != b_borrows:
        return not a_borrows
    order = compare_drs(a_share, b_share)
    if order:
        return order < 0
    if a.wl.priority != b.wl.priority:
        return a.wl.priority > b.wl.priority
    return (a.wl.created_s, a.wl.uid) < (b.wl.created_s, b.wl.uid)
