"""Flavor assignment, as Kueue v0.17's flavorassigner does it for a single-podset workload.

For each resource group the workload asks from, the flavors are tried in the ClusterQueue's
order. A flavor the job is not pinned to (its trace `pool` or `model`), or whose taints the
flavor's own tolerations leave open, is skipped. Per resource the flavor is graded: fit now, fit after
preempting (reclaim from a borrower, or preempt by priority), fit after preemption but no
candidate, or no fit; and by borrowing level (0: within the queue's nominal quota, more: from
ever wider cohort subtrees). flavorFungibility decides whether to stop at the first flavor
that fits or keep looking for a better one (whenCanBorrow / whenCanPreempt: TryNextFlavor).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from gpugov.reach import cq_available, potential_available
from gpugov.whatif.quota import lowest_subtree_that_fits
from gpugov.whatif.setup import FR, Flavor, Fungibility
from gpugov.whatif.state import ClusterQueue, Workload

# Granular preemption modes, worst to best (Kueue's preemptionMode).
NO_FIT, NO_CANDIDATES, PREEMPT, RECLAIM, FIT = range(5)
# Assignment modes (Kueue's FlavorAssignmentMode).
MODE_NO_FIT, MODE_PREEMPT, MODE_FIT = range(3)
WORST = (NO_FIT, 1 << 62)


def assignment_mode(preemption_mode: int) -> int:
    if preemption_mode == NO_FIT:
        return MODE_NO_FIT
    return MODE_FIT if preemption_mode == FIT else MODE_PREEMPT


@dataclass
class Assignment:
    mode: int  # MODE_*
    borrowing: int  # the highest borrowing level among its flavors
    usage: dict[FR, int]  # quota it takes per (flavor, resource)
    needs_preemption: frozenset[FR]  # where it would have to preempt
    reason: str = ""

    @property
    def flavors(self) -> tuple[str, ...]:
        return tuple(sorted({f for f, _ in self.usage}))


class Oracle(Protocol):
    def simulate(self, wl: Workload, cq: ClusterQueue, fr: FR, quantity: int, borrow_now: int) -> tuple[int, int]:
        """(NO_CANDIDATES | PREEMPT | RECLAIM, borrowing level after the preemptions; `borrow_now`,
        the level without them, when there is none)."""
        ...


def is_preferred(a: tuple[int, int], b: tuple[int, int], fungibility: Fungibility) -> bool:
    """Whether grade a (preemption mode, borrowing level) beats b."""
    if a[0] == NO_FIT:
        return False
    if b[0] == NO_FIT:
        return True
    if fungibility.preference == "PreemptionOverBorrowing":
        return a[1] < b[1] if a[1] != b[1] else a[0] > b[0]
    return a[0] > b[0] if a[0] != b[0] else a[1] < b[1]


def should_try_next_flavor(grade: tuple[int, int], fungibility: Fungibility) -> bool:
    if grade[0] in (NO_FIT, NO_CANDIDATES):
        return True
    if grade[0] in (PREEMPT, RECLAIM) and fungibility.when_can_preempt == "TryNextFlavor":
        return True
    return grade[1] != 0 and fungibility.when_can_borrow == "TryNextFlavor"


def can_preempt_while_borrowing(cq: ClusterQueue, fair_sharing: bool) -> bool:
    preemption = cq.spec.preemption
    return preemption.borrow_within_cohort != "Never" or (fair_sharing and preemption.reclaim_within_cohort != "Never")


def grade_resource(wl: Workload, cq: ClusterQueue, fr: FR, value: int, oracle: Oracle,
                   fair_sharing: bool) -> tuple[int, int]:
    """Kueue's fitsResourceQuota: (preemption mode, borrowing level)."""
    node = cq.node
    if value > potential_available(node, fr):
        return NO_FIT, 0
    borrow, may_reclaim_in_hierarchy = lowest_subtree_that_fits(node, fr, value)
    if value <= cq_available(node, fr):
        return FIT, borrow
    if value <= node.nominal.get(fr, 0) or may_reclaim_in_hierarchy or can_preempt_while_borrowing(cq, fair_sharing):
        return oracle.simulate(wl, cq, fr, value, borrow)
    return NO_FIT, borrow


def flavor_matches(flavor: Flavor, allowed: frozenset[str] | None) -> bool:
    """Whether the workload's pods may use the flavor: its taints are tolerated (a trace's pods
    carry no tolerations of their own) and the job is not pinned to other pools."""
    return not flavor.untolerated_taints and (allowed is None or flavor.name in allowed)


Grader = Callable[[FR, int], tuple[int, int]]
Grades = list[tuple[FR, int, tuple[int, int]]]  # ((flavor, resource), quantity, its grade), in the order read


@dataclass
class Made:
    """An assignment and the grades it was made of, ((flavor, resource), quantity, grade) in the order
    they were read: for workloads asking the same of the same queue, with the same objects (`epoch`)."""

    epoch: int
    grades: Grades = field(default_factory=list)
    assignment: Assignment | None = None
    marks: tuple[tuple[int, FR], ...] | None = None  # where the caller counts changes for it (Simulator's quiet)



def assign(wl: Workload, cq: ClusterQueue, flavors: dict[str, Flavor], oracle: Oracle, fair_sharing: bool,
           grader: Grader | None = None, made: Made | None = None,
           same: Callable[[Grades], bool] | None = None) -> Assignment:
    """The flavors Kueue would give the workload now, and how (fit, preempt, no fit). `grader`, when
    given, is grade_resource for this workload and queue as things are now (the caller may keep its
    answers for workloads that would get the same). `made`: the last assignment of a workload that
    asks the same of the same queue under the same objects; when every grade it was made of is the
    same now, so is the assignment (nothing else assign reads changes), and it is the answer.
    Otherwise `made` records the new one. `same`: whether every grade of such a list is the same now
    (by default, `grader` is asked each in turn)."""
    def plain(fr: FR, value: int) -> tuple[int, int]:
        return grade_resource(wl, cq, fr, value, oracle, fair_sharing)

    grade = grader or plain
    if made is None:
        return _assign(wl, cq, flavors, grade)
    if made.assignment is not None and (same(made.grades) if same is not None else
                                        all(grade(fr, value) == answer for fr, value, answer in made.grades)):
        return made.assignment
    grades: Grades = []

    def recorded(fr: FR, value: int) -> tuple[int, int]:
        answer = grade(fr, value)
        grades.append((fr, value, answer))
        return answer

    made.assignment = _assign(wl, cq, flavors, recorded)
    made.grades = grades
    return made.assignment


def _assign(wl: Workload, cq: ClusterQueue, flavors: dict[str, Flavor], grader: Grader) -> Assignment:
    groups: dict[int, dict[str, int]] = {}
    for resource in sorted(wl.requests):
        index = cq.rg_of.get(resource)
        if index is None:
            return Assignment(MODE_NO_FIT, 0, {}, frozenset(), f"resource {resource} unavailable in ClusterQueue")
        groups.setdefault(index, {})[resource] = wl.requests[resource]
    fungibility = cq.spec.fungibility
    usage: dict[FR, int] = {}
    modes: dict[FR, int] = {}
    borrowing = 0
    for index in sorted(groups):
        group = cq.spec.groups[index]
        requests = groups[index]
        best: dict[str, tuple[int, int]] | None = None
        best_flavor = ""
        best_grade = WORST
        for name in group.flavors:
            if not flavor_matches(flavors[name], wl.allowed):
                continue
            grade = (FIT, 0)
            graded: dict[str, tuple[int, int]] = {}
            for resource, value in requests.items():
                mode = grader((name, resource), value)
                if is_preferred(grade, mode, fungibility):
                    grade = mode
                if grade[0] == NO_FIT:
                    break
                graded[resource] = mode
            if not should_try_next_flavor(grade, fungibility):
                best, best_flavor, best_grade = graded, name, grade
                break
            if is_preferred(grade, best_grade, fungibility):
                best, best_flavor, best_grade = graded, name, grade
        if best is None:
            matching = [n for n in group.flavors if flavor_matches(flavors[n], wl.allowed)]
            why = (f"no flavor of ClusterQueue {cq.name} can ever hold {', '.join(sorted(requests))} for it"
                   if not matching else f"no flavor fits ({', '.join(matching)})")
            return Assignment(MODE_NO_FIT, 0, {}, frozenset(), why)
        for resource, (mode, borrow) in best.items():
            fr = (best_flavor, resource)
            usage[fr] = requests[resource]
            modes[fr] = mode
            borrowing = max(borrowing, borrow)
    mode = min((assignment_mode(m) for m in modes.values()), default=MODE_FIT)
    needs = frozenset(fr for fr, m in modes.items() if assignment_mode(m) == MODE_PREEMPT)
    if mode == MODE_PREEMPT and cq.spec.tas_only:
        # Topology-aware podsets: Kueue marks every flavor of the podset Preempt (updateMode).
        needs = frozenset(usage)
    return Assignment(mode, borrowing, usage, needs)
