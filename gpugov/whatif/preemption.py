"""Choosing preemption victims, as Kueue v0.17 does (pkg/scheduler/preemption).

With fair sharing on (the Configuration gpugov's weights need), victims come from the
preemptor's own queue (withinClusterQueue) and from borrowing queues of its cohort tree
(reclaimWithinCohort); the cohort tree is walked from the root towards the subtree with the
highest Dominant Resource Share, and a borrower loses a workload only while the preemptor's
share after admission stays at or below the borrower's share after the loss
(LessThanOrEqualToFinalShare), then, failing that, below its share before
(LessThanInitialShare). A preemptor within its nominal quota reclaims regardless of shares.

Without fair sharing (classical preemption), candidates over which the preemptor has a
hierarchical advantage go first, then reclaimable borrowers (borrowWithinCohort and its
maxPriorityThreshold decide whether the preemptor may itself borrow), then lower-priority
workloads of its own queue; candidates are removed until the workload fits, then added back
in reverse order while it still fits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gpugov.reach import QuotaNode, add_all, cq_available, remove_all
from gpugov.whatif.flavors import NO_CANDIDATES, PREEMPT, RECLAIM
from gpugov.whatif.quota import (
    DRS,
    NEGATIVE_DRS,
    compare_drs,
    fits_in_quota,
    kept_drs,
    lowest_subtree_that_fits,
)
from gpugov.whatif.setup import FR
from gpugov.whatif.state import EVICTING, ClusterQueue, Workload

IN_CLUSTER_QUEUE = "InClusterQueue"
RECLAMATION = "InCohortReclamation"
FAIR_SHARING = "InCohortFairSharing"
RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"

# Classical preemption variants (Kueue's preemptionVariant).
NEVER, WITHIN_CQ, HIERARCHICAL, WITHOUT_BORROWING, WHILE_BORROWING = range(5)
REASON = {WITHIN_CQ: IN_CLUSTER_QUEUE, HIERARCHICAL: RECLAMATION, WITHOUT_BORROWING: RECLAMATION,
          WHILE_BORROWING: RECLAIM_WHILE_BORROWING}

Target = tuple[Workload, str]


@dataclass(frozen=True)
class Reach:
    """Where a preemptor's fair-sharing candidates are (Preemptor._reach)."""

    own: bool  # its own queue holds one
    others: list[tuple[ClusterQueue, QuotaNode, DRS]]  # (queue holding one, its node below the LCA, that node's share)


def satisfies(preemptor: Workload, candidate: Workload, policy: str) -> bool:
    if policy == "LowerPriority":
        return preemptor.priority > candidate.priority
    if policy == "LowerOrNewerEqualPriority":
        return preemptor.priority > candidate.priority or (
            preemptor.priority == candidate.priority and preemptor.created_s < candidate.created_s)
    return policy == "Any"


def uses(candidate: Workload, frs: frozenset[FR]) -> bool:
    return any(fr in frs for fr in candidate.usage)


def ordering_key(preemptor_cq: ClusterQueue) -> Callable[[Workload], tuple[bool, bool, int, int, int]]:
    """Kueue's CandidatesOrdering: workloads already being evicted first, then other queues'
    workloads, then lower priority, then the most recently admitted (second resolution), then UID."""
    return lambda w: (w.state != EVICTING, w.cq is preemptor_cq, w.priority, -w.reserved_s, w.uid)


def workload_fits(cq: ClusterQueue, usage: dict[FR, int], allow_borrowing: bool) -> bool:
    node = cq.node
    for fr, value in usage.items():
        if not allow_borrowing and node.borrowing_with(fr, value):
            return False
        if value > cq_available(node, fr):
            return False
    return True


def _remove(target: Workload) -> None:
    assert target.cq is not None
    remove_all(target.cq.node, target.usage)


def _restore(targets: list[Target]) -> None:
    for target, _ in targets:
        assert target.cq is not None
        add_all(target.cq.node, target.usage)


def fill_back(cq: ClusterQueue, usage: dict[FR, int], targets: list[Target], allow_borrowing: bool) -> list[Target]:
    """Add victims back, last removed first, while the workload still fits (Kueue's fillBackWorkloads)."""
    for i in range(len(targets) - 2, -1, -1):
        victim = targets[i][0]
        assert victim.cq is not None
        add_all(victim.cq.node, victim.usage)
        if workload_fits(cq, usage, allow_borrowing):
            targets[i] = targets[-1]
            targets.pop()
        else:
            remove_all(victim.cq.node, victim.usage)
    return targets


class TargetOrdering:
    """Kueue's TargetClusterQueueOrdering: queues to take fair-sharing victims from, the
    subtree with the highest share first."""

    def __init__(self, preemptor: ClusterQueue, candidates: list[Workload],
                 known: dict[tuple[object, ...], DRS]) -> None:
        self.preemptor = preemptor
        self.known = known  # shares kept (quota.kept_drs)
        self.ancestors = set(map(id, preemptor.node.ancestors()))
        self.by_cq: dict[int, list[Workload]] = {}
        for candidate in candidates:
            assert candidate.cq is not None
            self.by_cq.setdefault(id(candidate.cq), []).append(candidate)
        self.pruned: set[int] = set()
        self.key = ordering_key(preemptor)

    def has(self, cq: ClusterQueue) -> bool:
        return bool(self.by_cq.get(id(cq)))

    def pop(self, cq: ClusterQueue) -> Workload:
        return self.by_cq[id(cq)].pop(0)

    def drop(self, cq: ClusterQueue) -> None:
        self.pruned.add(id(cq.node))

    def __iter__(self) -> Iterator[ClusterQueue]:
        if self.preemptor.node.parent is None:
            while self.has(self.preemptor):
                yield self.preemptor
            return
        root = self.preemptor.node.root()
        while id(root) not in self.pruned:
            target = self._next(root)
            if target is not None:
                yield target

    def _next(self, cohort: QuotaNode) -> ClusterQueue | None:
        highest_cq: ClusterQueue | None = None
        highest_cq_drs = NEGATIVE_DRS
        for child in cohort.child_cqs:
            if id(child) in self.pruned:
                continue
            cq: ClusterQueue = child.owner
            share = kept_drs(self.known, child)
            if (not share.borrowing and cq is not self.preemptor) or not self.has(cq):
                self.pruned.add(id(child))
                continue
            order = compare_drs(share, highest_cq_drs)
            if order == 0 and highest_cq is not None:
                if self.key(self.by_cq[id(cq)][0]) < self.key(self.by_cq[id(highest_cq)][0]):
                    highest_cq = cq
            elif order == 1:
                highest_cq, highest_cq_drs = cq, share
        highest_cohort: QuotaNode | None = None
        highest_cohort_drs = NEGATIVE_DRS
        for child in cohort.child_cohorts:
            if id(child) in self.pruned:
                continue
            share = kept_drs(self.known, child)
            if not share.borrowing and id(child) not in self.ancestors:
                self.pruned.add(id(child))
            elif compare_drs(share, highest_cohort_drs) >= 0:
                highest_cohort, highest_cohort_drs = child, share
        if highest_cohort is None and highest_cq is None:
            self.pruned.add(id(cohort))
            return None
        if highest_cohort is not None and compare_drs(highest_cohort_drs, highest_cq_drs) >= 0:
            return self._next(highest_cohort)
        return highest_cq


def _almost_lca(node: QuotaNode, lca: QuotaNode) -> QuotaNode:
    below = node
    for ancestor in node.ancestors():
        if ancestor is lca:
            return below
        below = ancestor
    raise AssertionError("no common ancestor")  # candidates share the preemptor's root


class Preemptor:
    def __init__(self, cluster_queues: dict[str, ClusterQueue], fair_sharing: bool) -> None:
        self.cluster_queues = cluster_queues
        self.fair_sharing = fair_sharing
        # Victims depend on the preemptor only through its queue, priority (and, for
        # LowerOrNewerEqualPriority, age), so they are kept per cohort-tree version.
        self.memo: dict[tuple[object, ...], tuple[int, list[Target], bool, bool]] = {}
        self.tree_cqs: dict[int, list[QuotaNode]] = {}  # cohort tree root id -> its ClusterQueues' nodes
        # (preemptor, target) queue ids -> the children of their lowest common ancestor that hold
        # each (what fair sharing compares): the trees keep their shape through a replay.
        self.below_lca: dict[tuple[int, int], tuple[QuotaNode, QuotaNode]] = {}
        # Who holds candidates, per cohort-tree version (see _reach).
        self.reaches: dict[tuple[object, ...], tuple[int, Reach]] = {}
        # Set when an answer since the caller last cleared it came from a search among candidates
        # (not from finding none): such an answer depends on every queue's share, not only on usage
        # of the resources asked for (the simulator's nominations rely on this).
        self.searched = False
        # Set, with `searched`, when such a search went past the shares to the candidates themselves (their
        # order reads when each was admitted, and its UID): an answer without it follows from which queue
        # holds what usage at which priority alone (the simulator keeps such nominations by tree state).
        self.ordered = False
        # Shares of nodes per usage (quota.kept_drs), for the fair-sharing tournament too; forgotten
        # when quotas change.
        self.shares: dict[tuple[object, ...], DRS] = {}

    # The oracle the flavor assigner asks while grading a flavor.
    def simulate(self, wl: Workload, cq: ClusterQueue, fr: FR, quantity: int, borrow_now: int) -> tuple[int, int]:
        frs = frozenset((fr,))
        if self.fair_sharing and self.nothing_to_take(wl, cq, frs):  # targets' own first answer, told sooner
            return NO_CANDIDATES, borrow_now
        usage = {fr: quantity}
        targets = self.targets(wl, cq, frs, usage)
        if not targets:
            return NO_CANDIDATES, borrow_now
        for target, _ in targets:
            _remove(target)
        borrow = lowest_subtree_that_fits(cq.node, fr, quantity)[0]
        _restore(targets)
        return (PREEMPT if any(t.cq is cq for t, _ in targets) else RECLAIM), borrow

    def targets(self, wl: Workload, cq: ClusterQueue, frs: frozenset[FR], usage: dict[FR, int]) -> list[Target]:
        """The workloads to evict so that `usage` fits in `cq`; [] when there is no such set."""
        policy = cq.spec.preemption
        age = wl.created_s if "LowerOrNewerEqualPriority" in (policy.within_cluster_queue,
                                                               policy.reclaim_within_cohort) else 0
        key = (id(cq), frs, tuple(usage.items()), wl.priority, age)
        known = self.memo.get(key)
        if known is not None and known[0] == cq.root.version:
            self.searched = self.searched or known[2]
            self.ordered = self.ordered or known[3]
            return known[1]
        outer, self.searched = self.searched, False
        outer_ordered, self.ordered = self.ordered, False
        found = self._fair(wl, cq, frs, usage, age) if self.fair_sharing else self._classical(wl, cq, frs, usage)
        self.memo[key] = (cq.root.version, found, self.searched, self.ordered)
        self.searched = self.searched or outer
        self.ordered = self.ordered or outer_ordered
        return found

    def nothing_to_take(self, wl: Workload, cq: ClusterQueue, frs: frozenset[FR], age: int | None = None) -> bool:
        """With fair sharing, whether no queue of the tree holds a candidate for frs: then `targets`
        is [] whatever the preemptor asks (its search ends before reading any share). `age`: what
        the queue's policy reads of wl's age (created_s or 0), when the caller knows it."""
        if not self.fair_sharing:
            return False
        if age is None:
            policy = cq.spec.preemption
            age = wl.created_s if "LowerOrNewerEqualPriority" in (policy.within_cluster_queue,
                                                                   policy.reclaim_within_cohort) else 0
        known = self.reaches.get((id(cq), frs, wl.priority, age))  # _reach's own look-up, without the call
        reach = known[1] if known is not None and known[0] == cq.root.version else self._reach(wl, cq, frs, age)
        return not reach.own and not reach.others

    # -- fair sharing ---------------------------------------------------------------------------

    @staticmethod
    def _own_candidates(wl: Workload, cq: ClusterQueue, frs: frozenset[FR]) -> Iterator[Workload]:
        policy = cq.spec.preemption.within_cluster_queue
        if policy == "Never":
            return iter(())
        return (w for w in cq.admitted.values() if satisfies(wl, w, policy) and uses(w, frs))

    def _lenders(self, cq: ClusterQueue, frs: frozenset[FR]) -> list[ClusterQueue]:
        """The other queues of the cohort tree that borrow some of frs (reclaimWithinCohort's reach)."""
        if cq.node.parent is None or cq.spec.preemption.reclaim_within_cohort == "Never":
            return []
        tree = self.tree_cqs.get(id(cq.root))
        if tree is None:  # the trees keep their shape through a replay (quotas change, not cohorts)
            tree = self.tree_cqs[id(cq.root)] = cq.root.subtree_cqs()
        return [node.owner for node in tree if node is not cq.node and any(node.borrowing_with(fr, 0) for fr in frs)]

    @staticmethod
    def _cohort_candidates(wl: Workload, cq: ClusterQueue, other: ClusterQueue,
                           frs: frozenset[FR]) -> Iterator[Workload]:
        policy = cq.spec.preemption.reclaim_within_cohort
        return (w for w in other.admitted.values() if satisfies(wl, w, policy) and uses(w, frs))

    def _reach(self, wl: Workload, cq: ClusterQueue, frs: frozenset[FR], age: int) -> Reach:
        """Whether the preemptor's own queue holds a candidate, and the other queues of its tree that
        do, with the node fair sharing compares for each and its share: the same for every workload of
        the queue, priority (and age) asking for frs until usage in the tree changes."""
        key = (id(cq), frs, wl.priority, age)
        known = self.reaches.get(key)
        if known is not None and known[0] == cq.root.version:
            return known[1]
        holders = []
        for other in self._lenders(cq, frs):
            if next(self._cohort_candidates(wl, cq, other, frs), None) is not None:
                target_node = self._below_lca(cq, other)[1]
                holders.append((other, target_node, kept_drs(self.shares, target_node)))
        reach = Reach(next(self._own_candidates(wl, cq, frs), None) is not None, holders)
        self.reaches[key] = (cq.root.version, reach)
        return reach

    def _fair(self, wl: Workload, cq: ClusterQueue, frs: frozenset[FR], usage: dict[FR, int], age: int) -> list[Target]:
        reach = self._reach(wl, cq, frs, age)
        if not reach.own and not reach.others:
            return []
        add_all(cq.node, usage)  # shares include the incoming workload
        self.searched = True  # the answer depends on the shares
        if not reach.own and self._outshared(cq, reach, frs):
            remove_all(cq.node, usage)
            return []
        self.ordered = True
        candidates = [*self._own_candidates(wl, cq, frs),
                      *(w for other, _, _ in reach.others for w in self._cohort_candidates(wl, cq, other, frs))]
        candidates.sort(key=ordering_key(cq))
        fits, targets, retry = self._first_strategy(cq, candidates, frs, usage)
        if not fits:
            fits, targets = self._second_strategy(cq, retry, usage, targets)
        remove_all(cq.node, usage)
        if not fits:
            _restore(targets)
            return []
        targets = fill_back(cq, usage, targets, allow_borrowing=True)
        _restore(targets)
        return targets

    def _outshared(self, cq: ClusterQueue, reach: Reach, frs: frozenset[FR]) -> bool:
        """Whether no strategy can take a victim from the other queues (the preemptor's own holds no
        candidate), told from the shares as they are, the incoming workload counted: the preemptor
        borrows and its share is above that of every other queue holding a candidate. A victim is
        taken only when the preemptor's share is at most the target's after the loss or below it
        before, a loss never raises a share, and while nothing is taken nothing changes: the search
        would end empty-handed, after its tournament (most of a deep backlog's nominations, where
        every queue borrows its fill). The others' shares are as `reach` read them: the incoming
        workload is below their lowest common ancestor with the preemptor, so it does not move them."""
        if not any(cq.node.borrowing_with(fr, 0) for fr in frs):
            return False  # within nominal: reclaimed regardless of shares
        for other, _, target_share in reach.others:
            if compare_drs(kept_drs(self.shares, self._below_lca(cq, other)[0]), target_share) <= 0:
                return False
        return True

    def _fits_fair(self, cq: ClusterQueue, usage: dict[FR, int]) -> bool:
        remove_all(cq.node, usage)
        result = workload_fits(cq, usage, allow_borrowing=True)
        add_all(cq.node, usage)
        return result

    def _below_lca(self, preemptor: ClusterQueue, target: ClusterQueue) -> tuple[QuotaNode, QuotaNode]:
        key = (id(preemptor), id(target))
        nodes = self.below_lca.get(key)
        if nodes is None:
            ancestors = set(map(id, preemptor.node.ancestors()))
            lca = next(a for a in target.node.ancestors() if id(a) in ancestors)
            nodes = self.below_lca[key] = (_almost_lca(preemptor.node, lca), _almost_lca(target.node, lca))
        return nodes

    def _shares(self, preemptor: ClusterQueue, target: ClusterQueue) -> tuple[DRS, QuotaNode]:
        preemptor_node, target_node = self._below_lca(preemptor, target)
        return kept_drs(self.shares, preemptor_node), target_node

    def _first_strategy(self, cq: ClusterQueue, candidates: list[Workload], frs: frozenset[FR],
                        usage: dict[FR, int]) -> tuple[bool, list[Target], list[Workload]]:
        ordering = TargetOrdering(cq, candidates, self.shares)
        targets: list[Target] = []
        retry: list[Workload] = []
        # FairSharingPreemptWithinNominal (on in 0.17): within nominal, reclaim regardless of shares.
        within_nominal = not any(cq.node.borrowing_with(fr, 0) for fr in frs)
        for target_cq in ordering:
            if target_cq is cq or within_nominal:
                victim = ordering.pop(target_cq)
                _remove(victim)
                targets.append((victim, IN_CLUSTER_QUEUE if target_cq is cq else RECLAMATION))
                if self._fits_fair(cq, usage):
                    return True, targets, []
                continue
            preemptor_new, target_node = self._shares(cq, target_cq)
            # The target's share without a victim depends on the victim's usage alone while none
            # is removed: victims of one size share it (a deep queue holds many alike).
            share_without: dict[tuple[tuple[FR, int], ...], DRS] = {}
            while ordering.has(target_cq):
                victim = ordering.pop(target_cq)
                size = tuple(victim.usage.items())
                target_new = share_without.get(size)
                if target_new is None:
                    remove_all(target_cq.node, victim.usage)
                    target_new = share_without[size] = kept_drs(self.shares, target_node)
                    add_all(target_cq.node, victim.usage)
                if compare_drs(preemptor_new, target_new) <= 0:  # LessThanOrEqualToFinalShare
                    _remove(victim)
                    targets.append((victim, FAIR_SHARING))
                    if self._fits_fair(cq, usage):
                        return True, targets, []
                    break
                retry.append(victim)
        return False, targets, retry

    def _second_strategy(self, cq: ClusterQueue, retry: list[Workload], usage: dict[FR, int],
                         targets: list[Target]) -> tuple[bool, list[Target]]:
        ordering = TargetOrdering(cq, retry, self.shares)
        for target_cq in ordering:
            preemptor_new, target_node = self._shares(cq, target_cq)
            if compare_drs(preemptor_new, kept_drs(self.shares, target_node)) < 0:  # LessThanInitialShare
                victim = ordering.pop(target_cq)
                _remove(victim)
                targets.append((victim, FAIR_SHARING))
                if self._fits_fair(cq, usage):
                    return True, targets
            ordering.drop(target_cq)
        return False, targets

    # -- classical ------------------------------------------------------------------------------

    def _classify(self, wl: Workload, cq: ClusterQueue, candidate: Workload, frs: frozenset[FR],
                  advantage: bool) -> int:
        if not uses(candidate, frs):
            return NEVER
        policy = cq.spec.preemption
        same = candidate.cq is cq
        if not satisfies(wl, candidate, policy.within_cluster_queue if same else policy.reclaim_within_cohort):
            return NEVER
        if same:
            return WITHIN_CQ
        if advantage:
            return HIERARCHICAL
        if policy.borrow_within_cohort == "Never":
            return WITHOUT_BORROWING
        threshold = policy.max_priority_threshold
        if candidate.priority >= wl.priority or (threshold is not None and candidate.priority > threshold):
            return WITHOUT_BORROWING
        return WHILE_BORROWING

    def _from_queue(self, wl: Workload, cq: ClusterQueue, other: ClusterQueue, frs: frozenset[FR], advantage: bool,
                    lca: QuotaNode | None) -> list[tuple[Workload, int, QuotaNode | None]]:
        found = []
        for candidate in other.admitted.values():
            variant = self._classify(wl, cq, candidate, frs, advantage)
            if variant != NEVER:
                found.append((candidate, variant, lca))
        return found

    def _collect(self, wl: Workload, cq: ClusterQueue, current: QuotaNode, subtree_root: QuotaNode,
                 skip: QuotaNode | None, frs: frozenset[FR], advantage: bool,
                 into: list[tuple[Workload, int, QuotaNode | None]]) -> None:
        for child in current.child_cohorts:
            if child is skip or child.within_nominal(frs):
                continue
            self._collect(wl, cq, child, subtree_root, skip, frs, advantage, into)
        for child in current.child_cqs:
            if child is not cq.node and not child.within_nominal(frs):
                into += self._from_queue(wl, cq, child.owner, frs, advantage, subtree_root)

    def _classical(self, wl: Workload, cq: ClusterQueue, frs: frozenset[FR], usage: dict[FR, int]) -> list[Target]:
        policy = cq.spec.preemption
        same_queue = [] if policy.within_cluster_queue == "Never" else self._from_queue(wl, cq, cq, frs, False, None)
        hierarchy: list[tuple[Workload, int, QuotaNode | None]] = []
        by_priority: list[tuple[Workload, int, QuotaNode | None]] = []
        if cq.node.parent is not None and policy.reclaim_within_cohort != "Never":
            advantage, remaining = fits_in_quota(cq.node, usage)
            previous: QuotaNode | None = None
            for subtree_root in cq.node.ancestors():
                self._collect(wl, cq, subtree_root, subtree_root, previous, frs, advantage,
                              hierarchy if advantage else by_priority)
                fits, remaining = fits_in_quota(subtree_root, remaining)
                advantage = advantage or fits
                previous = subtree_root
        key = ordering_key(cq)
        for group in (same_queue, hierarchy, by_priority):
            group.sort(key=lambda c: key(c[0]))
        ordered = hierarchy + by_priority + same_queue
        # Already evicted ones of every group first (Kueue's splitEvicted), each group in its order.
        candidates = [c for c in ordered if c[0].state == EVICTING] + [c for c in ordered if c[0].state != EVICTING]
        self.searched = self.searched or bool(candidates)
        self.ordered = self.ordered or bool(candidates)
        forbidden = policy.borrow_within_cohort == "Never"
        under_nominal = all(cq.node.usage.get(fr, 0) < cq.node.nominal.get(fr, 0) for fr in frs)
        if (not hierarchy and not by_priority) or (forbidden and not under_nominal):
            attempts = [True]
        elif forbidden and not hierarchy:
            attempts = [False, True]
        else:
            attempts = [True, False]
        for allow_borrowing in attempts:
            targets: list[Target] = []
            for candidate, variant, lca in candidates:
                if not self._valid(cq, candidate, variant, lca, frs, allow_borrowing):
                    continue
                _remove(candidate)
                targets.append((candidate, REASON[variant]))
                if workload_fits(cq, usage, allow_borrowing):
                    targets = fill_back(cq, usage, targets, allow_borrowing)
                    _restore(targets)
                    return targets
            _restore(targets)
        return []

    @staticmethod
    def _valid(cq: ClusterQueue, candidate: Workload, variant: int, lca: QuotaNode | None, frs: frozenset[FR],
               allow_borrowing: bool) -> bool:
        if candidate.cq is cq:
            return True
        if allow_borrowing and variant == WITHOUT_BORROWING:
            return False
        assert candidate.cq is not None
        node = candidate.cq.node
        if node.within_nominal(frs):
            return False
        for ancestor in node.ancestors():
            if ancestor is lca:
                break
            if ancestor.within_nominal(frs):
                return False
        return True
