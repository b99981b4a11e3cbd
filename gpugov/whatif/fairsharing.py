"""The order in which one cycle's heads are taken with fair sharing on, as Kueue v0.17's
fairSharingIterator (pkg/scheduler/fair_sharing_iterator.go).

Per root cohort, a tournament runs down the cohort tree: at every cohort, among the winners of
its child cohorts and the heads of its own ClusterQueues, the one that borrows nothing of its
own flavors wins (FairSharingPrioritizeNonBorrowing), then the lowest Dominant Resource Share
after its admission, then the higher priority, then the older. Shares are recomputed after each
winner, since its admission changes them. A ClusterQueue alone in its tree needs no tournament.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
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
Shares = dict[tuple[int, int], DRS]  # (id of a cohort, id of a head's queue) -> the share it competes with there
TOURNAMENTS_KEPT = 1 << 12  # tournaments kept, at most (as SHARES_KEPT)


def fair_order(heads: list[H], known: dict[tuple[object, ...], DRS] | None = None,
               kept: dict[tuple[object, ...], Shares] | None = None, held: list[object] | None = None,
               state: Callable[[ClusterQueue], int] | None = None) -> Iterator[H]:
    """The heads, each tournament's winner first; a lazy iterator, so that shares are computed
    against the usage left by the heads admitted before. `known`: shares kept (quota.kept_drs).
    `kept`: each tournament's shares, per cohort tree version and its heads' queues and usage, taken
    while `held` (what the caller holds in the tree for this cycle only, outside of any version) is
    empty: at rest a tree's version stands for its usage (every lasting change makes a new one), and
    a cycle whose heads are the same as the last one's, in the same version, competes with the same
    shares. `state`: a number for a queue's tree's state that stands for its usage at rest, if the caller
    has one, instead of the version (the shares read nothing else)."""
    if known is None:
        known = {}
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
        if kept is not None and not held:
            key = (id(root), root.version if state is None else state(first.cq),
                   *[(id(h.cq), *h.assignment.usage.items()) for h in rivals])
            values = kept.get(key)
            if values is None:
                if len(kept) >= TOURNAMENTS_KEPT:
                    kept.clear()
                values = kept[key] = _shares(root, remaining, known)
        else:
            values = _shares(root, remaining, known)
        winner = _tournament(root, remaining, values)
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
            values[(id(ancestor), id(node.owner))] = share
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
    a_share, b_share = values[(parent, id(a.cq))], values[(parent, id(b.cq))]
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
