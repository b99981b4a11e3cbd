"""Replaying a trace through Kueue v0.17's admission, event by event.

Time advances from event to event (a job submitted, a job finished, an evicted job's quota
coming free, parked jobs retried, a boundary of the quota timeline changing the quotas).
Between events the scheduler runs cycles, as Kueue's loop does:

- each cycle pops the head of every ClusterQueue (highest priority, then oldest creation
  second, then UID; a BestEffortFIFO queue's preemptor stays at its head while its victims
  leave);
- every head gets a flavor assignment against the state at the start of the cycle;
- heads are taken in Kueue's order (fair sharing: a tournament of Dominant Resource Shares
  down the cohort tree, `fairsharing`; classical: non-borrowing first, then priority, then age); a head that
  fits is admitted, one that needs preemption evicts its victims and waits for the next
  cycle, one that no longer fits after an earlier admission is skipped;
- a head that did not get in goes back: to the heap at once (StrictFIFO, skipped,
  preempting), or, in a BestEffortFIFO queue, to the parked (inadmissible) ones, which are
  retried one second after quota frees up in their cohort tree (Kueue's requeue batch), so
  later, smaller jobs can pass them.

A preempted workload keeps its quota until its pods are gone (`eviction_delay_ms`), then
queues again and runs from the beginning when readmitted, as a Job whose pods are deleted
does. Cycles take no time unless `status_write_ms` says what one status write costs. An
instant that keeps cycling without time passing (a preemption livelock) stops after
MAX_CYCLES_PER_INSTANT cycles and is counted. Deterministic: the same trace, objects and
seed give the same result; the seed only draws the UIDs that break ties of priority and
creation second.
"""

from __future__ import annotations

import bisect
import heapq
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import repeat

from gpugov.kube.objects import selector_matches
from gpugov.reach import QuotaNode, add_all, cq_available, potential_available, remove_all
from gpugov.whatif.fairsharing import fair_order
from gpugov.whatif.flavors import (
    FIT,
    MODE_FIT,
    MODE_NO_FIT,
    MODE_PREEMPT,
    Assignment,
    Grader,
    Grades,
    Made,
    assign,
    grade_resource,
)
from gpugov.whatif.preemption import Preemptor, Target
from gpugov.whatif.quota import relink, set_quotas
from gpugov.whatif.setup import DEFAULT_PLACEMENT, FR, NAMESPACE_NAME_LABEL, Placement, Setup, SetupError
from gpugov.whatif.state import (
    EVICTING,
    FINISHED,
    INADMISSIBLE,
    INFLIGHT,
    NEVER,
    PENDING,
    RUNNING,
    ClusterQueue,
    Workload,
)
from gpugov.whatif.trace import WHOLE, Job
from gpugov.whatif.treestates import TreeStates

FIT_NOW = (FIT, 0)  # a grade: fits now, within nominal quota
PROGRESS_EVERY = 4096  # replay loop steps between two calls of run()'s progress callback

# Entry outcomes within one cycle.
NOT_NOMINATED, SKIPPED, PREEMPTING, ADMITTED = range(4)
MAX_CYCLES_PER_INSTANT = 10_000
# The kind_byte of a queue's kinds past its first MANY_KINDS: their parked workloads are looked at
# one by one (a byte names 256 kinds at most).
MANY_KINDS = 255
STALE_MARKS = 8  # see _hopeless_run
# Targets of a nomination without victims: one list, never changed (nominations' targets are only read,
# and Preemptor.targets shares its lists too), so that nominations kept do not each keep one.
NO_TARGETS: list[Target] = []
ALL_MARKED = b"\x01" * 256  # _hopeless_run's table before a kind of the version is known to pass


@dataclass(frozen=True)
class Options:
    fair_sharing: bool = True  # Kueue's Configuration fairSharing block (gpugov's weights need it)
    seed: int = 0
    # From a preemption to the victim's quota coming free: its Job is suspended and its pods
    # terminate first (about a second on the sandbox's KWOK nodes; a pod's grace period on real ones).
    eviction_delay_ms: int = 1000
    # Kueue retries parked workloads this long after quota frees up in their cohort tree
    # (pkg/cache/queue requeueBatchPeriod: one second).
    requeue_delay_ms: int = 1000
    # What the scheduler spends per head it does not admit, writing its Pending status before the
    # next cycle: one API round trip. Milliseconds on a healthy API server (0: cycles take no
    # time); on a loaded one it decides how fast a long queue is re-evaluated.
    status_write_ms: int = 0


@dataclass
class Outcome:
    """A finished replay: every workload's history, and each queue's borrowing."""

    workloads: list[Workload]
    cluster_queues: dict[str, ClusterQueue]
    end_ms: int
    cycles: int
    admission_log: list[tuple[int, int, str]] = field(default_factory=list)  # (ms, cycle, job id)
    preemption_log: list[tuple[int, str, str, str]] = field(default_factory=list)  # (ms, victim, preemptor, reason)
    unconverged_instants: int = 0
    boundaries_applied: int = 0  # of the quota timeline's, in order (see Simulator's `boundaries`)


# A head's nomination, kept per cohort-tree version: (version, assignment, targets, hopeless,
# why it waits when not admitted, whether it reserves quota for its cycle).
Nomination = tuple[int, Assignment, list[Target], bool, str, bool]


class Entry:
    __slots__ = ("assignment", "cq", "status", "targets", "wl")

    def __init__(self, wl: Workload, cq: ClusterQueue, assignment: Assignment, targets: list[Target]) -> None:
        self.wl = wl
        self.cq = cq
        self.assignment = assignment
        self.targets = targets
        self.status = NOT_NOMINATED


def waiting_reason(entry: Entry) -> str:
    """Why a head was not admitted in its cycle, for the report of jobs that never started."""
    if entry.status == SKIPPED:
        return "did not fit after the cycle's earlier admissions"
    if entry.status == PREEMPTING:
        return "waiting for its victims to leave"
    return nominated_reason(entry.assignment, entry.targets)


def nominated_reason(assignment: Assignment, targets: list[Target]) -> str:
    """Why a head that was neither skipped nor preempting was not admitted."""
    if assignment.mode == MODE_NO_FIT:
        return assignment.reason or "no flavor fits"
    if assignment.mode == MODE_PREEMPT and not targets:
        return "needs preemption, but no workload can be preempted"
    return "not admitted"


def hopeless(assignment: Assignment, targets: list[Target]) -> bool:
    """A head that cannot be admitted nor preempt, whatever the cycle's other heads do: it goes
    back untouched, and what it holds for the cycle (resourcesToReserve) matters to no one when
    every head is like it."""
    return assignment.mode == MODE_NO_FIT or (assignment.mode == MODE_PREEMPT and not targets)


def build_queues(setup: Setup) -> dict[str, ClusterQueue]:
    """ClusterQueues with their quota nodes linked into the cohort tree."""
    cohorts = {name: QuotaNode(name, False, spec.quotas, spec.weight) for name, spec in setup.cohorts.items()}
    for name, spec in setup.cohorts.items():
        if spec.parent is not None and spec.parent in cohorts:
            cohorts[name].parent = cohorts[spec.parent]
            cohorts[spec.parent].child_cohorts.append(cohorts[name])
    queues: dict[str, ClusterQueue] = {}
    for name, spec in setup.cluster_queues.items():
        node = QuotaNode(name, True, spec.quotas, spec.weight)
        if spec.cohort is not None:
            node.parent = cohorts[spec.cohort]
            cohorts[spec.cohort].child_cqs.append(node)
        cq = ClusterQueue(spec, node, resource_groups(setup, name))
        node.owner = cq
        queues[name] = cq
    for cq in queues.values():
        cq.root = cq.node.root()
    for cohort in cohorts.values():
        cohort.child_cqs.sort(key=lambda n: n.name)
        cohort.child_cohorts.sort(key=lambda n: n.name)
    relink([*cohorts.values(), *(cq.node for cq in queues.values())])
    return queues


def resource_groups(setup: Setup, name: str) -> dict[str, int]:
    """resource -> index of its resource group in ClusterQueue `name`."""
    return {resource: i for i, group in enumerate(setup.cluster_queues[name].groups) for resource in group.covered}


def make_workloads(jobs: list[Job], setup: Setup, queues: dict[str, ClusterQueue], seed: int,
                   placement: Placement = DEFAULT_PLACEMENT) -> tuple[list[Workload], dict[int, str], dict[int, str]]:
    """One workload per job, routed to its LocalQueue's ClusterQueue; the second value names,
    per workload index, why it can never be admitted (no queue, namespace refused, ...); the
    third, for each job that uses a share of a device, how its requests hold it
    (`Placement.share_requests`)."""
    rng = random.Random(seed)
    workloads: list[Workload] = []
    never: dict[int, str] = {}
    held_as: dict[int, str] = {}
    flavors = frozenset(setup.flavors)
    for index, job in enumerate(jobs):
        uid = rng.getrandbits(63)
        queue = setup.queue_for(job.tenant, job.namespace, job.queue) or ""
        cq = queues.get(setup.local_queues.get(queue, ""))
        resource, allowed = placement.resolve(job)
        requests: dict[str, int] = {}
        if job.accelerators and job.share < WHOLE and not job.resource:  # a named resource is asked as named
            pools = allowed & flavors if allowed is not None else None
            accelerators, wl_held_as = placement.share_requests(job, resource, pools)
            requests.update(accelerators)
            held_as[index] = wl_held_as
        elif job.accelerators:
            requests[resource] = job.gpu_count
        if job.cpu_milli:
            requests["cpu"] = job.cpu_milli * job.pods
        if job.memory_bytes:
            requests["memory"] = job.memory_bytes * job.pods
        priority = setup.priority_classes.get(job.priority_class, 0)
        wl = Workload(job, index, uid, queue, cq, priority, requests, allowed)
        wl.hash = (tuple(sorted(requests.items())), allowed, priority)
        namespace = queue.split("/", 1)[0]
        why = ""
        if cq is None:
            who = job.queue or (f"namespace {job.namespace}" if job.namespace else f"tenant {job.tenant}")
            why = f"no LocalQueue for {who}"
        elif job.priority_class and job.priority_class not in setup.priority_classes:
            why = f"unknown WorkloadPriorityClass {job.priority_class}"
        elif allowed is not None and not allowed & set(setup.flavors):
            why = f"no ResourceFlavor for {'pool ' + job.pool if job.pool else 'model ' + job.model}"
        elif cq.spec.stopped:
            why = f"ClusterQueue {cq.name} is stopped"
        elif not selector_matches(cq.spec.namespace_selector, setup.namespace_labels.get(
                namespace, {NAMESPACE_NAME_LABEL: namespace})):
            why = f"ClusterQueue {cq.name} does not admit namespace {namespace}"
        if why:
            wl.state = NEVER
            never[index] = why
        workloads.append(wl)
    return workloads, never, held_as


def order_of(wl: Workload) -> tuple[int, int, int, int]:
    return wl.order


def fit_within_nominal(node: QuotaNode, fr: FR) -> int:
    """The most of fr a workload may ask that grade_resource grades (FIT, borrowing level 0) now, without
    asking the oracle: what is available to the queue, within what it may ever get and, in a cohort, within
    its nominal quota (more would borrow)."""
    most = min(potential_available(node, fr), cq_available(node, fr))
    if node.parent is not None:
        most = min(most, node.nominal.get(fr, 0) - node.usage.get(fr, 0))
    return most


def heap_top(heap: list[tuple[int, int, int, int, int, Workload]]) -> tuple[int, int, int, int, int, Workload] | None:
    """The heap's first live entry (stale ones, whose workload was popped or pushed again, go)."""
    while heap:
        top = heap[0]
        wl = top[-1]
        if wl.state == PENDING and top[-2] == wl.heap_token:
            return top
        heapq.heappop(heap)
    return None


class Simulator:
    """`boundaries`: where quotas change with time (issue #27), (trace millisecond, the objects'
    quotas from then on) in time order; empty, the quotas of `setup` hold throughout."""

    def __init__(self, setup: Setup, jobs: list[Job], options: Options = Options(),
                 placement: Placement = DEFAULT_PLACEMENT, boundaries: list[tuple[int, Setup]] | None = None) -> None:
        self.setup = setup
        self.boundaries = boundaries or []
        self.options = options
        self.queues = build_queues(setup)
        self.queue_order = [self.queues[name] for name in sorted(self.queues)]
        self.workloads, self.never, self.held_as = make_workloads(jobs, setup, self.queues, options.seed, placement)
        self.preemptor = Preemptor(self.queues, options.fair_sharing)
        self.finishing: list[tuple[int, int, int, Workload]] = []
        self.releasing: list[tuple[int, int, Workload]] = []
        self.requeuing: list[tuple[int, int, int]] = []  # (due, sequence, root id)
        self.requeue_pending: dict[int, tuple[ClusterQueue, int]] = {}  # root id -> (a queue of it, due)
        self.sequence = 0
        self.cycles = 0
        kinds: dict[tuple[int, tuple[object, ...], int], int] = {}
        local_kinds: dict[tuple[int, int], int] = {}  # (queue, kind) -> kind_byte
        # By kind: whether its grades and preemption reach read the workload's age (its queue's policy)
        self.reads_age: list[bool] = []
        for wl in self.workloads:
            if wl.cq is not None:
                # Workloads alike get the same nomination until usage changes (see _nominate).
                policy = wl.cq.spec.preemption
                by_age = policy.within_cluster_queue == "LowerOrNewerEqualPriority"
                wl.nomination_key = (id(wl.cq), wl.hash, wl.created_s if by_age else 0)
                wl.kind = kinds.setdefault(wl.nomination_key, len(kinds))
                if wl.kind == len(self.reads_age):
                    self.reads_age.append("LowerOrNewerEqualPriority" in (policy.within_cluster_queue,
                                                                          policy.reclaim_within_cohort))
                wl.kind_byte = local_kinds.setdefault((id(wl.cq), wl.kind), min(len(wl.cq.kinds), MANY_KINDS))
                if wl.kind_byte == len(wl.cq.kinds):
                    wl.cq.kinds.append(wl.kind)
        self.assignments: list[Nomination | None] = [None] * len(kinds)  # by kind
        # A hopeless nomination that found no preemption candidate reads only the usage of the
        # resources the kind asks for, in its flavors, and which workloads use them: it holds until
        # a lasting usage change of one of them in its cohort tree (marks) or a quota boundary
        # (epoch). By kind: (epoch, those (root id, (flavor, resource)), their marks' sum then).
        self.quiet: list[tuple[int, tuple[tuple[int, FR], ...], int] | None] = [None] * len(kinds)
        # Each kind's last assignment and the grades it was made of (assign reuses it while they hold),
        # within one epoch of the quota timeline.
        self.made: list[Made | None] = [None] * len(kinds)
        # By kind: (the grades of its Made, the age read, what _known_same looks up for each grade)
        self.checks: list[tuple[Grades, int, tuple[tuple[tuple[object, ...], int, tuple[int, int] | None], ...]] | None] = (
            [None] * len(kinds))
        self.marks: dict[tuple[int, FR], int] = {}  # (cohort tree root id, (flavor, resource)) -> changes
        self.changes = 0  # how many times marks changed: a sum of marks holds while it is the same
        self.mark_sums: dict[int, tuple[int, int, tuple[tuple[int, FR], ...]]] = {}  # id(keys) -> (changes, sum, keys)
        self.keysets: dict[tuple[tuple[int, FR], ...], tuple[tuple[int, FR], ...]] = {}  # one tuple per content
        self.epoch = 0
        # (queue, priority, age, (flavor, resource), quantity) -> (its root's version, grade, whether it searched:
        # 0 no, 1 searched, 2 searched and ordered; see Preemptor.ordered)
        self.grades: dict[tuple[int, int, int, FR, int], tuple[int, tuple[int, int], int]] = {}
        # (queue, (flavor, resource)) -> (its root's version, the most of it that fits now within nominal quota)
        self.room: dict[tuple[int, FR], tuple[int, int]] = {}
        # A nomination that ordered no candidates (Preemptor.ordered) reads of its cohort tree only what
        # follows from its state (treestates): once a tree had a hopeless one (it holds a backlog), its
        # states are tracked and such nominations of kinds that read no age kept by kind and state (one
        # attribute: with 30 or more, every attribute a Simulator reads is slower, the floor's replay 5%).
        self.states: TreeStates[tuple[Nomination, bool]] = TreeStates(len(kinds))
        self.outcome = Outcome(self.workloads, self.queues, 0, 0)

    # -- queues -------------------------------------------------------------------------------

    def _push(self, wl: Workload) -> None:
        assert wl.cq is not None
        wl.state = PENDING
        wl.heap_token += 1
        heapq.heappush(wl.cq.heap, (-wl.priority, wl.created_s, wl.uid, wl.index, wl.heap_token, wl))

    def _pop(self, cq: ClusterQueue) -> Workload | None:
        """The queue's head: its sticky preemptor, else the first of the heap and the requeued."""
        sticky = cq.sticky
        if sticky is not None and sticky.state == PENDING:
            sticky.heap_token += 1  # its heap entry goes stale
            sticky.state = INFLIGHT
            return sticky
        if sticky is not None and sticky.state == INADMISSIBLE and self._unpark(cq, sticky):
            return sticky
        top = heap_top(cq.heap)
        parked, first = cq.parked, cq.pending_from
        if first < len(parked) and (top is None or parked[first].order < top):
            wl = cq.unpark_at(first)
        elif top is not None:
            heapq.heappop(cq.heap)
            wl = top[-1]
        else:
            return None
        wl.state = INFLIGHT
        return wl

    @staticmethod
    def _sticky_pending(cq: ClusterQueue) -> bool:
        """Whether the queue's sticky preemptor is queued (in the heap, or parked and requeued)."""
        sticky = cq.sticky
        if sticky is None:
            return False
        if sticky.state == PENDING:
            return True
        if sticky.state != INADMISSIBLE:
            return False
        at = bisect.bisect_left(cq.parked, sticky.order, key=order_of)
        return at >= cq.pending_from

    def _unpark(self, cq: ClusterQueue, wl: Workload) -> bool:
        """Take a requeued workload out of the parked list, in flight; False when it is still parked."""
        parked = cq.parked
        at = bisect.bisect_left(parked, wl.order, key=order_of)
        if at < cq.pending_from:
            return False
        assert parked[at] is wl
        cq.unpark_at(at)
        wl.state = INFLIGHT
        return True

    def _park(self, wl: Workload) -> None:
        cq = wl.cq
        assert cq is not None
        wl.state = INADMISSIBLE
        parked = cq.parked
        at = bisect.bisect_left(parked, wl.order, key=order_of)
        if at > cq.pending_from:
            # A sticky preemptor, popped before its turn: the requeued that sort before it move to
            # the heap (queued all the same), so that the parked still come first.
            for before in parked[cq.pending_from:at]:
                self._push(before)
            cq.unpark_range(cq.pending_from, at)
            at = cq.pending_from
        cq.park_at(at, wl)
        cq.pending_from += 1

    def _notify(self, cq: ClusterQueue, now: int) -> None:
        """Quota came free in cq's cohort tree: its parked workloads get another try after the
        requeue delay (notifications for the same tree coalesce into the first)."""
        root = id(cq.root)
        if root in self.requeue_pending:
            return
        due = now + self.options.requeue_delay_ms
        self.requeue_pending[root] = (cq, due)
        self.sequence += 1
        heapq.heappush(self.requeuing, (due, self.sequence, root))
        if self.options.requeue_delay_ms == 0:
            self._requeue_due(now)

    def _requeue_due(self, now: int) -> None:
        while self.requeuing and self.requeuing[0][0] <= now:
            _, _, root = heapq.heappop(self.requeuing)
            self._requeue_inadmissible(self.requeue_pending.pop(root)[0])

    def _requeue_inadmissible(self, cq: ClusterQueue) -> None:
        """Kueue's QueueAssociatedInadmissibleWorkloadsAfter: the whole cohort tree."""
        node = cq.node.root()
        for queue in (node.subtree_cqs() if not node.is_cq else [node]):
            # All of its parked are queued again, in their order (see ClusterQueue.parked): no work
            # per workload, where pushing each onto the heap cost a backlog its length at each finish.
            queue.owner.pending_from = 0

    # -- the quota timeline --------------------------------------------------------------------

    def _apply_quotas(self, setup: Setup, now: int) -> None:
        """A boundary: the ClusterQueues and Cohorts take the quotas of `setup`, as `gpugov apply
        --only-quotas` updates them in place. Kueue (v0.17 UpdateClusterQueue) only recomputes its
        cache: what runs keeps running, counted against the new quotas (above nominal it now
        borrows, so reclaim and preemption may take it), and every parked workload of the tree is
        queued again at once (requeueWorkloadsCohort on a spec update)."""
        if set(setup.cluster_queues) != set(self.queues):
            changed = sorted(set(setup.cluster_queues) ^ set(self.queues))
            raise SetupError(f"the quota timeline adds or removes ClusterQueue {changed[0]}: the replay keeps "
                             "the queues of the trace's start")
        self.epoch += 1  # every nomination is made again
        self.states.answers.clear()  # states stay (what the admitted hold), their nominations do not
        self.preemptor.shares.clear()  # kept per usage, not per quotas
        for cq in self.queue_order:
            self._account(cq, now)  # borrowing until now is counted against the quotas until now
        nodes: list[QuotaNode] = []
        for root in {id(cq.root): cq.root for cq in self.queue_order}.values():
            stack = [root]
            while stack:
                node = stack.pop()
                nodes.append(node)
                stack += node.child_cohorts + node.child_cqs
        for node in nodes:
            if node.is_cq:
                cq: ClusterQueue = node.owner
                spec = setup.cluster_queues[node.name]
                if spec.cohort != cq.spec.cohort:
                    raise SetupError(f"the quota timeline moves ClusterQueue {node.name} to another cohort")
                cq.spec, cq.rg_of = spec, resource_groups(setup, node.name)
                set_quotas(node, spec.quotas, spec.weight)
            else:
                cohort = setup.cohorts.get(node.name)
                set_quotas(node, cohort.quotas if cohort else {}, cohort.weight if cohort else 1.0)
        relink(nodes)
        for cq in self.queue_order:
            for wl in cq.admitted.values():  # evicting ones too: they hold their quota until released
                add_all(cq.node, wl.usage)
        for root in {id(cq.root): cq for cq in self.queue_order}.values():
            self._requeue_inadmissible(root)
        for wl in self.workloads:  # the new specs' preemption policy decides which ages are read
            if wl.cq is not None:
                policy = wl.cq.spec.preemption
                self.reads_age[wl.kind] = "LowerOrNewerEqualPriority" in (policy.within_cluster_queue,
                                                                          policy.reclaim_within_cohort)

    def _waiting(self) -> bool:
        """Whether a workload waits for admission (a boundary may still let it in)."""
        return any(cq.parked or any(item[-1].state == PENDING and item[-2] == item[-1].heap_token
                                          for item in cq.heap) for cq in self.queue_order)

    # -- usage and accounting -----------------------------------------------------------------

    def _account(self, cq: ClusterQueue, now: int) -> None:
        """Integrate borrowed accelerators (usage above nominal) since the queue's last change;
        called before every lasting change of the queue's usage (which also outdates the
        assignments kept for its cohort tree)."""
        cq.root.version += 1
        elapsed = now - cq.borrowed_since_ms
        if elapsed:
            node = cq.node
            for fr, used in node.usage.items():
                if used:
                    cq.used_units_ms[fr] = cq.used_units_ms.get(fr, 0) + used * elapsed
                over = used - node.nominal.get(fr, 0)
                if over > 0:
                    cq.borrowed_units_ms[fr] = cq.borrowed_units_ms.get(fr, 0) + over * elapsed
        cq.borrowed_since_ms = now

    def _admit(self, entry: Entry, now: int) -> None:
        wl, cq = entry.wl, entry.cq
        wl.usage = dict(entry.assignment.usage)
        wl.flavors = entry.assignment.flavors
        wl.borrow_level = entry.assignment.borrowing
        wl.state = RUNNING
        wl.admitted_ms = now
        wl.reserved_s = now // 1000
        if wl.first_admitted_ms < 0:
            wl.first_admitted_ms = now
        wl.admissions += 1
        wl.run_token += 1
        cq.admitted[wl.index] = wl
        if self.states.tracked and id(cq.root) in self.states.tracked:
            self.states.move(cq, wl, 1)
        if cq.sticky is wl:
            cq.sticky = None
        self.sequence += 1
        heapq.heappush(self.finishing, (now + wl.job.duration_ms, self.sequence, wl.run_token, wl))
        self.outcome.admission_log.append((now, self.cycles, wl.job.id))

    def _finish(self, wl: Workload, now: int) -> None:
        cq = wl.cq
        assert cq is not None
        self._account(cq, now)
        remove_all(cq.node, wl.usage)
        self._changed(cq, wl.usage)
        del cq.admitted[wl.index]
        if self.states.tracked and id(cq.root) in self.states.tracked:
            self.states.move(cq, wl, -1)
        wl.state = FINISHED
        wl.waited_ms = wl.admitted_ms - wl.job.submit_ms

    def _evict(self, victim: Workload, now: int) -> None:
        """Preempted: it stops, but holds its quota (and stays a candidate, evicted ones first)
        until its pods are gone."""
        victim.state = EVICTING
        victim.preemptions += 1
        victim.run_token += 1  # its pending finish no longer counts
        self.sequence += 1
        heapq.heappush(self.releasing, (now + self.options.eviction_delay_ms, self.sequence, victim))

    def _release(self, victim: Workload, now: int) -> None:
        """An evicted workload's quota comes free; it queues again from the start."""
        cq = victim.cq
        assert cq is not None
        self._account(cq, now)
        remove_all(cq.node, victim.usage)
        self._changed(cq, victim.usage)
        del cq.admitted[victim.index]
        if self.states.tracked and id(cq.root) in self.states.tracked:
            self.states.move(cq, victim, -1)
        ran = now - victim.admitted_ms
        for fr, value in victim.usage.items():
            victim.lost_units_ms[fr] = victim.lost_units_ms.get(fr, 0) + value * ran
        victim.usage = {}
        self._push(victim)

    # -- one scheduling cycle -----------------------------------------------------------------

    def _nominate(self, wl: Workload) -> Entry:
        """The workload's flavor assignment (and victims) against the state now. Workloads alike
        (same queue, requests, pools and priority) get the same answer until usage changes, so
        the answer is kept for them: a backlog of equal jobs costs one evaluation, not one each."""
        cq = wl.cq
        assert cq is not None
        nomination = self._nomination(wl, cq)
        return Entry(wl, cq, nomination[1], nomination[2])

    def _nomination(self, wl: Workload, cq: ClusterQueue) -> Nomination:
        kind = wl.kind
        cached = self.assignments[kind]
        quiet_marks: tuple[tuple[tuple[int, FR], ...], int] | None = None
        if cached is not None:
            if cached[0] == cq.root.version:
                return cached
            quiet = self.quiet[kind]
            if quiet is not None and quiet[0] == self.epoch:
                marks = self._marks(cq, quiet[1])
                if quiet[2] == marks:
                    cached = self.assignments[kind] = (cq.root.version, *cached[1:])
                    return cached
                quiet_marks = (quiet[1], marks)  # as they are now: nothing changes before they are kept again
        self.preemptor.searched = self.preemptor.ordered = False
        made = self.made[kind]
        if made is None or made.epoch != self.epoch:
            made = self.made[kind] = Made(self.epoch)
        age = wl.created_s if self.reads_age[kind] else 0  # what _grader and the preemptor read of its age
        known: tuple[Nomination, bool] | None = None
        state: int | None = None
        if made.assignment is not None and self._known_same(wl, cq, made.grades, age):
            reused = True
            assignment = made.assignment  # what assign would answer, without making its grader
        else:
            # Where assign would grade, a nomination made before in this tree state without ordering candidates
            # is the same (kept with whether it searched: one that read shares is not quiet).
            reused = False
            if self.states.tracked and not self.reads_age[kind]:
                state, known = self.states.look_up(cq, kind)
            if known is None:
                grade, same = self._grader(wl, cq)
                assignment = assign(wl, cq, self.setup.flavors, self.preemptor, self.options.fair_sharing, grade,
                                    made, same)
        if known is not None:
            cached = self.assignments[kind] = (cq.root.version, *known[0][1:])
            self.preemptor.searched = known[1]
        else:
            targets = NO_TARGETS
            if assignment.mode == MODE_PREEMPT and not self.preemptor.nothing_to_take(
                    wl, cq, assignment.needs_preemption, age):
                targets = self.preemptor.targets(wl, cq, assignment.needs_preemption, assignment.usage)
            if cached is not None and cached[1] is assignment and not targets and not cached[2]:
                cached = self.assignments[kind] = (cq.root.version, *cached[1:])
            else:
                cached = self.assignments[kind] = (
                    cq.root.version, assignment, targets, hopeless(assignment, targets),
                    nominated_reason(assignment, targets), self._holds(cq, assignment))
            if (not reused and (state is not None or cached[3]) and not self.preemptor.ordered
                    and not self.reads_age[kind]):
                # Kept by state; a hopeless one in a tree not tracked yet: it holds a backlog, tracked from now.
                if state is None:
                    state = self.states.track(cq, kind)
                if state is not None:
                    self.states.keep(state, (cached, self.preemptor.searched))
        quiet = None
        if cached[3] and not self.preemptor.searched:
            keys = made.marks
            if keys is None:
                root = id(cq.root)
                keys = tuple((root, (flavor, resource)) for group in cq.spec.groups
                             for flavor in group.flavors for resource in sorted(wl.requests))
                keys = made.marks = self.keysets.setdefault(keys, keys)  # kinds alike share it, and its sum
            quiet = (self.epoch, keys, quiet_marks[1] if quiet_marks is not None and quiet_marks[0] is keys
                     else self._marks(cq, keys))
        self.quiet[kind] = quiet
        return cached

    def _grader(self, wl: Workload, cq: ClusterQueue) -> tuple[Grader, Callable[[Grades], bool]]:
        """grade_resource for wl in cq, its answers kept per cohort-tree version for every workload of
        the queue with the same priority (and age, where the queue's preemption reads it) asking the
        same quantity of the same (flavor, resource): that is all a grade reads of the workload (its
        victims are found by the same; see Preemptor.targets), and nothing it reads of the tree
        changes within a version. A backlog's kinds differ mostly in what else they ask (cpu,
        memory), so a change of usage costs a grade per distinct request, not per kind and flavor.
        With it, whether every grade of a list is the same now: what the grader would say, read
        where it keeps it (a list is mostly quantities that fit within nominal quota)."""
        policy = cq.spec.preemption
        age = wl.created_s if "LowerOrNewerEqualPriority" in (policy.within_cluster_queue,
                                                               policy.reclaim_within_cohort) else 0
        version, memo, preemptor, fair_sharing = cq.root.version, self.grades, self.preemptor, self.options.fair_sharing
        queue, priority, node, room = id(cq), wl.priority, cq.node, self.room

        def grade(fr: FR, value: int) -> tuple[int, int]:
            fits = room.get((queue, fr))
            if fits is None or fits[0] != version:
                fits = room[queue, fr] = (version, fit_within_nominal(node, fr))
            if value <= fits[1]:
                return FIT_NOW
            key = (queue, priority, age, fr, value)
            known = memo.get(key)
            if known is not None and known[0] == version:
                if known[2]:
                    preemptor.searched = True
                    if known[2] > 1:
                        preemptor.ordered = True
                return known[1]
            outer, preemptor.searched = preemptor.searched, False
            outer_ordered, preemptor.ordered = preemptor.ordered, False
            result = grade_resource(wl, cq, fr, value, preemptor, fair_sharing)
            memo[key] = (version, result, preemptor.searched + preemptor.ordered)
            preemptor.searched = preemptor.searched or outer
            preemptor.ordered = preemptor.ordered or outer_ordered
            return result

        def same(grades: Grades) -> bool:
            for fr, value, answer in grades:
                if answer is FIT_NOW:
                    fits = room.get((queue, fr))
                    if fits is not None and fits[0] == version and value <= fits[1]:
                        continue
                else:
                    known = memo.get((queue, priority, age, fr, value))
                    if known is not None and known[0] == version:
                        if known[1] != answer:
                            return False
                        if known[2]:
                            preemptor.searched = True
                            if known[2] > 1:
                                preemptor.ordered = True
                        continue
                if grade(fr, value) != answer:
                    return False
            return True

        return grade, same

    def _known_same(self, wl: Workload, cq: ClusterQueue, grades: Grades, age: int) -> bool:
        """Whether every grade of `grades` is the same now, as far as _grader's `same` can tell from
        what the grader keeps for this version, without grading anything (False: a grade differs,
        or one would have to be made; the caller then asks `same` through assign, which reads the
        same and sets the same flags up to there). The keys it reads are made once per list of
        grades (and age, the one _grader reads) of the kind: the queue, priority and quantities are
        the kind's."""
        kept = self.checks[wl.kind]
        if kept is None or kept[0] is not grades or kept[1] != age:
            queue, priority = id(cq), wl.priority
            kept = self.checks[wl.kind] = (grades, age, tuple(
                ((queue, fr), value, None) if answer is FIT_NOW else ((queue, priority, age, fr, value), 0, answer)
                for fr, value, answer in grades))
        version, room, memo = cq.root.version, self.room, self.grades
        searched = 0
        for key, value, answer in kept[2]:
            if answer is None:  # fitted now: still within the queue's room in this version
                fits = room.get(key)
                if fits is None or fits[0] != version or value > fits[1]:
                    return False
            else:
                known = memo.get(key)
                if known is None or known[0] != version or known[1] != answer:
                    return False
                if known[2] > searched:
                    searched = known[2]
        if searched:
            self.preemptor.searched = True
            if searched > 1:
                self.preemptor.ordered = True
        return True

    def _marks(self, cq: ClusterQueue, keys: tuple[tuple[int, FR], ...]) -> int:
        """How many lasting changes of usage there were of the (cohort tree root id, (flavor, resource))
        pairs `keys` (of cq's tree): it grows with each, so an equal count means none changed."""
        known = self.mark_sums.get(id(keys))
        if known is not None and known[0] == self.changes and known[2] is keys:
            return known[1]
        total = sum(map(self.marks.get, keys, repeat(0)))
        self.mark_sums[id(keys)] = (self.changes, total, keys)
        return total

    def _changed(self, cq: ClusterQueue, usage: dict[FR, int]) -> None:
        """A lasting change of usage in cq's cohort tree: quiet nominations that read it are retried."""
        root, marks = id(cq.root), self.marks
        self.changes += 1
        for fr in usage:
            marks[root, fr] = marks.get((root, fr), 0) + 1

    def _classical_order(self, entries: list[Entry]) -> list[Entry]:
        return sorted(entries, key=lambda e: (e.assignment.borrowing, -e.wl.priority, e.wl.created_s, e.wl.uid))

    def _fits(self, entry: Entry, preempted: dict[int, Workload]) -> bool:
        """Kueue's fits(): the assignment fits once this cycle's victims (and its own) are gone."""
        gone = dict(preempted)
        for victim, _ in entry.targets:
            gone[victim.index] = victim
        for victim in gone.values():
            assert victim.cq is not None
            remove_all(victim.cq.node, victim.usage)
        node = entry.cq.node
        result = all(cq_available(node, fr) >= value for fr, value in entry.assignment.usage.items())
        for victim in gone.values():
            assert victim.cq is not None
            add_all(victim.cq.node, victim.usage)
        return result

    def _reserve(self, entry: Entry) -> dict[FR, int]:
        """What a preemptor without candidates holds for the rest of the cycle (resourcesToReserve)."""
        node = entry.cq.node
        reserved = {}
        for fr, value in entry.assignment.usage.items():
            nominal = node.nominal.get(fr, 0)
            used = node.usage.get(fr, 0)
            if entry.assignment.borrowing > 0:
                limit = node.borrowing_limit.get(fr)
                reserved[fr] = value if limit is None else min(value, nominal + limit - used)
            else:
                reserved[fr] = max(0, min(value, nominal - used))
        return reserved

    def _requeue(self, entries: list[Entry], now: int) -> bool:
        """Heads that were not admitted go back (Kueue's requeueAndUpdate), one status write
        after the other; whether one was parked. A head whose cohort tree had its parked
        workloads requeued since the cycle began goes back to the heap, not to the parked ones
        (Kueue's queueInadmissibleCycle >= popCycle)."""
        parked = False
        written = 0
        for entry in entries:
            if entry.status == ADMITTED:
                continue
            wl, cq = entry.wl, entry.cq
            wl.waiting_for = waiting_reason(entry)
            if entry.status == PREEMPTING and cq.best_effort:
                cq.sticky = wl
            requeued_meanwhile = written and self._requeue_due_by(cq, now + written * self.options.status_write_ms)
            written += 1
            if not cq.best_effort or entry.status in (SKIPPED, PREEMPTING) or requeued_meanwhile:
                self._push(wl)
            else:
                self._park(wl)
                parked = True
        return parked

    def _requeue_due_by(self, cq: ClusterQueue, when: int) -> bool:
        due = self.requeue_pending.get(id(cq.root))
        return due is not None and due[1] <= when

    def _cycle(self, now: int) -> tuple[bool, int]:
        """One scheduling cycle: whether anything changed, and how long it kept the scheduler busy
        (Kueue writes the status of each head it did not admit before it starts the next cycle)."""
        heads = [wl for cq in self.queue_order if (wl := self._pop(cq)) is not None]
        if not heads:
            return False, 0
        self.cycles += 1
        entries = [self._nominate(wl) for wl in heads]
        if all(hopeless(e.assignment, e.targets) for e in entries):
            # Nobody can be admitted or preempt: the order does not matter, all go back.
            return self._requeue(entries, now), self.options.status_write_ms * len(entries)
        ordered: Iterable[Entry]
        if self.options.fair_sharing:
            # A head that fits nowhere, or has no candidates and holds nothing (CanAlwaysReclaim), does nothing
            # below: it changes no usage, so the tournaments of its tree order the others the same without it.
            # Trees take turns by the first name among all their heads: where the others span two, all run.
            acting = [e for e in entries if e.assignment.mode == MODE_FIT or e.targets or (
                e.assignment.mode == MODE_PREEMPT and e.cq.spec.preemption.reclaim_within_cohort != "Any")]
            if len(acting) < len(entries) and len({id(e.cq.root) for e in acting}) > 1:
                acting = entries
            ordered = fair_order(acting, self.preemptor.shares)
        else:
            ordered = self._classical_order(entries)
        preempted: dict[int, Workload] = {}
        held: list[tuple[ClusterQueue, dict[FR, int]]] = []  # usage added to the snapshot for this cycle only
        victims: list[tuple[Workload, Workload, str]] = []
        changed = False
        for entry in ordered:
            mode = entry.assignment.mode
            if mode == MODE_NO_FIT:
                continue
            if mode == MODE_PREEMPT and not entry.targets:
                if entry.cq.spec.preemption.reclaim_within_cohort != "Any":  # CanAlwaysReclaim
                    reserved = self._reserve(entry)
                    add_all(entry.cq.node, reserved)
                    held.append((entry.cq, reserved))
                continue
            if any(victim.index in preempted for victim, _ in entry.targets):
                entry.status = SKIPPED
                continue
            if not self._fits(entry, preempted):
                entry.status = SKIPPED
                continue
            for victim, reason in entry.targets:
                preempted[victim.index] = victim
                victims.append((victim, entry.wl, reason))
            if mode == MODE_PREEMPT:
                add_all(entry.cq.node, entry.assignment.usage)
                held.append((entry.cq, entry.assignment.usage))
                entry.status = PREEMPTING
                continue
            assert mode == MODE_FIT
            self._account(entry.cq, now)
            add_all(entry.cq.node, entry.assignment.usage)
            self._changed(entry.cq, entry.assignment.usage)
            entry.status = ADMITTED
            self._admit(entry, now)
            changed = True
        for cq, usage in held:
            remove_all(cq.node, usage)
        changed = self._requeue(entries, now) or changed
        for victim, preemptor, reason in victims:
            if victim.state == RUNNING:  # not already on its way out
                self._evict(victim, now)
                self.outcome.preemption_log.append((now, victim.job.id, preemptor.job.id, reason))
                changed = True
        if self.options.eviction_delay_ms == 0:
            self._release_due(now)
        return changed, self.options.status_write_ms * sum(1 for e in entries if e.status != ADMITTED)

    # -- cycles that change nothing but the parked -------------------------------------------

    def _skip_hopeless(self, now: int, limit: int) -> int:
        """Run, in one go, the next cycles (at most `limit`) in which nothing changes but the
        parked: every head is hopeless, or one is a preemptor whose victims are already on their
        way out, and at least one head is parked; how many. The state stays the same through such
        cycles, so every nomination is made against it: a BestEffortFIFO queue parks its next
        heads in order, a StrictFIFO queue and a waiting preemptor keep theirs. Exactly what
        cycling would do, without each cycle's tournament (a backlog re-examines every parked job
        at each finish in its cohort tree, and almost all are hopeless)."""
        if self.options.status_write_ms or (self.requeuing and self.requeuing[0][0] <= now):
            return 0  # a cycle takes time, or a requeue is due within it: cycle by cycle
        best_effort: list[ClusterQueue] = []
        kept: list[tuple[Workload, str]] = []  # heads that stay, with why they wait
        waiting: Entry | None = None  # a preemptor waiting for its victims to leave
        holds = False  # a hopeless head reserves quota for the rest of its cycle
        for cq in self.queue_order:
            if self._sticky_pending(cq):
                assert cq.sticky is not None
                wl = cq.sticky
            else:
                top = heap_top(cq.heap)  # stale entries go: _pop would drop them too
                parked, first = cq.parked, cq.pending_from
                if top is None and first == len(parked):
                    continue
                if cq.best_effort:
                    best_effort.append(cq)
                    continue
                wl = parked[first] if first < len(parked) and (top is None or parked[first].order < top) else top[-1]
            _, assignment, targets, is_hopeless, reason, reserves = self._nomination(wl, cq)
            if is_hopeless:
                if cq.best_effort:
                    return 0  # a sticky head that would be parked: its queue moves on
                holds = holds or reserves
                kept.append((wl, reason))
            elif (waiting is None and assignment.mode == MODE_PREEMPT
                  and all(victim.state != RUNNING for victim, _ in targets)):
                waiting = Entry(wl, cq, assignment, targets)
            else:
                return 0
        if not best_effort or (waiting is not None and holds):
            return 0  # nothing parked, or the preemptor's fit depends on the cycle's order
        # The shortest bounds the run soonest.
        best_effort.sort(key=lambda cq: len(cq.heap) + len(cq.parked) - cq.pending_from)
        runs: list[tuple[ClusterQueue, list[Workload], dict[int, tuple[int, int, int, int, int, Workload]], int]] = []
        cache = self.assignments
        stop_at_holds = waiting is not None
        for cq in best_effort:
            # The queue's next heads in order, from the heap and the requeued, while hopeless; then,
            # where the heap has none left, a run of requeued ones, parked[run_start:run_end] (not copied).
            taken: list[Workload] = []
            from_heap: dict[int, tuple[int, int, int, int, int, Workload]] = {}  # index -> its heap entry
            heap, parked, at = cq.heap, cq.parked, cq.pending_from
            count = len(parked)
            version = cq.root.version
            top = heap_top(heap)
            run_start = run_end = 0
            while len(taken) < limit:
                if top is None:  # only requeued ones left: the bulk of a backlog
                    run_start = at
                    run_end = self._hopeless_run(cq, at, min(count, at + limit - len(taken)), stop_at_holds)
                    break
                if at < count and parked[at].order < top:
                    wl, entry = parked[at], None
                elif top is not None:
                    wl, entry = top[-1], top
                else:
                    break
                nomination = cache[wl.kind]
                if nomination is None or nomination[0] != version:
                    nomination = self._nomination(wl, cq)
                if not nomination[3] or (stop_at_holds and nomination[5]):
                    break
                taken.append(wl)
                if entry is None:
                    at += 1
                else:
                    heapq.heappop(heap)
                    from_heap[wl.index] = entry
                    top = heap_top(heap)
            limit = min(limit, len(taken) + run_end - run_start)
            runs.append((cq, taken, from_heap, run_start))
        for cq, taken, from_heap, _ in runs:
            for wl in taken[limit:] if from_heap else ():  # not parked after all: heap entries go back
                entry = from_heap.get(wl.index)
                if entry is not None:
                    heapq.heappush(cq.heap, entry)
        if not limit:
            return 0
        for cq, taken, from_heap, run_start in runs:
            parked = cq.parked
            for wl in taken[:limit]:  # parked again (state INADMISSIBLE), with why they wait
                wl.waiting_for = cache[wl.kind][4]  # type: ignore[index]
            for wl in parked[run_start:run_start + limit - len(taken)] if len(taken) < limit else ():
                wl.waiting_for = cache[wl.kind][4]  # type: ignore[index]
            for wl in taken[:limit] if from_heap else ():  # those from the heap join the parked, as _park does
                if wl.index in from_heap:
                    wl.state = INADMISSIBLE
                    cq.park_at(bisect.bisect_left(parked, wl.order, key=order_of), wl)
            cq.pending_from += limit
        for wl, reason in kept:
            wl.waiting_for = reason
        if waiting is not None:
            # No victim of another head and no reservation in these cycles: it fits (and waits) or not.
            waiting.status = PREEMPTING if self._fits(waiting, {}) else SKIPPED
            waiting.wl.waiting_for = waiting_reason(waiting)
        self.cycles += limit
        return limit

    def _hopeless_run(self, cq: ClusterQueue, start: int, end: int, stop_at_holds: bool) -> int:
        """Where the run of hopeless workloads from cq.parked[start] ends (before `end`): the first
        whose nomination admits, preempts, or (`stop_at_holds`) holds quota. Kinds are looked up, not
        workloads: parked_kinds is translated to a 1 wherever the kind is not yet known to be hopeless
        in this version, and only those places are nominated (a requeued backlog is scanned whole at
        each finish in its tree, and holds few kinds)."""
        version = cq.root.version

        def passes(nomination: Nomination | None) -> bool:
            return (nomination is not None and nomination[0] == version and nomination[3]
                    and not (stop_at_holds and nomination[5]))

        # The table is kept per queue for its tree's version: a kind's nomination, once made in a
        # version, stays for it, so a 0 stays true; a kind nominated elsewhere since is looked up again.
        # A new version's table starts all 1s: a kind already nominated in it (a head, by the cycle)
        # is found in the run and looked up (its kept nomination, no work), instead of every kind of
        # the queue being looked up here (a backlog holds many kinds, few nominated before this).
        key = (id(cq.root), version, stop_at_holds)
        kept = cq.hopeless_table
        if kept is not None and kept[0] == key:
            table = kept[1]
        else:
            table = bytearray(ALL_MARKED)
            cq.hopeless_table = (key, table)
        # A kind that passes is unmarked in the table at once; `marked` is made again from the table
        # only once it has led to STALE_MARKS places of kinds unmarked since (each made again costs
        # the rest of the run; most kinds of a backlog appear once between two that do not pass).
        parked, kinds = cq.parked, cq.parked_kinds
        marked, base = kinds[start:end].translate(table), start
        at = marked.find(1)
        stale = 0
        while at >= 0:
            if not table[kinds[base + at]]:  # its kind passed since `marked` was made
                stale += 1
                if stale >= STALE_MARKS:
                    base += at
                    marked = kinds[base:end].translate(table)
                    stale = 0
                    at = marked.find(1)
                else:
                    at = marked.find(1, at + 1)
                continue
            wl = parked[base + at]
            if not passes(self._nomination(wl, cq)):
                return base + at
            if wl.kind_byte < MANY_KINDS:  # its kind passes from here on
                table[wl.kind_byte] = 0
            at = marked.find(1, at + 1)
        return end

    @staticmethod
    def _holds(cq: ClusterQueue, assignment: Assignment) -> bool:
        """Whether a head without preemption candidates reserves quota in its cycle (CanAlwaysReclaim)."""
        return assignment.mode == MODE_PREEMPT and cq.spec.preemption.reclaim_within_cohort != "Any"

    def _release_due(self, now: int) -> None:
        while self.releasing and self.releasing[0][0] <= now:
            _, _, victim = heapq.heappop(self.releasing)
            self._release(victim, now)
            assert victim.cq is not None
            self._notify(victim.cq, now)

    # -- the replay ---------------------------------------------------------------------------

    def run(self, progress: Callable[[int, int, int], None] | None = None) -> Outcome:
        """Replay the trace. `progress`: called now and then (at most every PROGRESS_EVERY loop steps and
        when the last job has been submitted) with (jobs submitted, jobs in all, simulated ms); it never
        changes the replay."""
        pending = sorted((wl for wl in self.workloads if wl.state != NEVER), key=lambda wl: wl.job.submit_ms)
        position = 0
        steps = 0
        now = 0
        next_cycle: int | None = None  # when the scheduler runs its next cycle; None: idle until an event
        cycles_now = (0, 0)  # (instant, cycles run at it): the livelock guard
        boundaries, applied = self.boundaries, 0
        quiet_since: int | None = None  # since when only boundaries that changed nothing happened
        while True:
            steps += 1
            if progress is not None and steps % PROGRESS_EVERY == 0:
                progress(position, len(pending), now)
            due = [t for t in (pending[position].job.submit_ms if position < len(pending) else None,
                               self.finishing[0][0] if self.finishing else None,
                               self.releasing[0][0] if self.releasing else None,
                               self.requeuing[0][0] if self.requeuing else None) if t is not None]
            # A boundary is an event while anything else is to come or a workload waits for one.
            boundary = boundaries[applied][0] if applied < len(boundaries) else None
            if boundary is not None and (due or next_cycle is not None or self._waiting()):
                due.append(boundary)
            event = min(due) if due else None
            if next_cycle is not None and (event is None or next_cycle < event):
                now = next_cycle
                cycles_now = (now, cycles_now[1]) if cycles_now[0] == now else (now, 0)
                changed, busy_ms = self._cycle(now)
                count = cycles_now[1] + 1
                while changed and busy_ms == 0 and count < MAX_CYCLES_PER_INSTANT:  # cycles that take no time
                    skipped = self._skip_hopeless(now, MAX_CYCLES_PER_INSTANT - count)
                    if skipped:
                        count += skipped
                        continue
                    changed, busy_ms = self._cycle(now)
                    count += 1
                cycles_now = (now, count)
                next_cycle = now + busy_ms if changed else None
                if changed:
                    quiet_since = None
                if changed and busy_ms == 0:
                    self.outcome.unconverged_instants += 1
                    next_cycle = None
                continue
            if event is None:
                break
            previous, now = now, event
            if boundary is not None and boundary == now:
                while applied < len(boundaries) and boundaries[applied][0] == now:
                    self._apply_quotas(boundaries[applied][1], now)
                    applied += 1
                only_boundaries = due.count(now) == 1  # nothing else is due at this instant
                quiet_since = (previous if quiet_since is None else quiet_since) if only_boundaries else None
            else:
                quiet_since = None
            self._requeue_due(now)
            self._release_due(now)
            while self.finishing and self.finishing[0][0] == now:
                _, _, token, wl = heapq.heappop(self.finishing)
                if wl.state == RUNNING and token == wl.run_token:
                    self._finish(wl, now)
                    assert wl.cq is not None
                    self._notify(wl.cq, now)
            while position < len(pending) and pending[position].job.submit_ms == now:
                self._push(pending[position])
                position += 1
            if next_cycle is None:
                next_cycle = now  # the scheduler wakes up; a busy one finishes its cycle first
        if progress is not None:
            progress(position, len(pending), now)
        # Boundaries where nothing happened after the last job left do not lengthen the replay.
        end = now if quiet_since is None else quiet_since
        for cq in self.queue_order:
            for wl in cq.parked[cq.pending_from:]:
                wl.state = PENDING  # requeued, not popped again before the end
        for cq in self.queue_order:
            self._account(cq, end)
        self.outcome.end_ms = end
        self.outcome.cycles = self.cycles
        self.outcome.boundaries_applied = applied
        return self.outcome


def simulate(setup: Setup, jobs: list[Job], options: Options = Options(),
             placement: Placement = DEFAULT_PLACEMENT, boundaries: list[tuple[int, Setup]] | None = None) -> Outcome:
    return Simulator(setup, jobs, options, placement, boundaries).run()
