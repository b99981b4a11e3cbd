"""A job trace replayed through vc-scheduler v1.14's sessions over compile's Volcano Queues.

Each job of the trace is a batch Job whose pods name its tenant's Queue, all pods alike, admitted as a
gang (its PodGroup's minMember is every pod). The scheduler opens a session at every submission and
every end, and again a period later while the last one changed anything (vc-scheduler's period is
1 s). A session runs gpugov's actions in gpugov's order (allocate, preempt, reclaim):

- allocate: queues in the capacity plugin's order (volcano_capacity), each popped, one job of it
  tried, pushed back; jobs by the priority plugin (the PriorityClass's value, higher first), the gang
  plugin (jobs not yet ready first), drf (a job's share of the cluster, lower first), then creation
  (second-granular, then submission order). A job's pods are placed one at a time, each where the
  capacity plugin's allocatable check holds for its queue and every ancestor and a node of the
  queue's node groups has room (the fullest that fits: binpack); the job is kept only if every pod
  is placed (gang), else none is;
- preempt, within a queue (volcano_preempt): a starving job evicts pods of a lower priority job of
  its queue, or, without one, of a job whose share of the cluster stays at least its own (drf);
- reclaim: for a starving job of a queue the capacity plugin lets reclaim (its allocated plus the pod
  within its deserved), node by node, the running pods of other reclaimable queues that the plugin
  gives up (their queue keeps its guarantee and is above its deserved) are evicted, the nearest in
  the queue tree first, until the pod fits; kept only if every pod found room. Evicted pods are
  recreated and wait again; the reclaimer is placed by the next session's allocate.

Before the scheduler sees a job, its pods must exist: the namespace's ResourceQuota (which gpugov
compiles from the tenant's capability) counts every pod's requests from its creation, running or
waiting, so a job whose pods would pass it waits outside Volcano until earlier jobs of the tenant
end (replayed as the whole job at once, where the Job controller creates pods one by one and retries
with a back-off).

Which node a pod lands on is the fullest that fits (binpack), and the nodes are offered to reclaim
and preempt by name, where vc-scheduler scores and orders them in ways that are not deterministic;
the simulator counts the evictions whose victim that order would decide (`undetermined`).

Not replayed: backfill (pods that request nothing); only accelerator resources are counted
(gpugov's Queues bound only accelerators); a Queue's creation time is compile's order and ties of a second are broken by
the trace's order, where vc-scheduler breaks them by UID.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from gpugov.i18n import _
from gpugov.whatif.goheap import GoHeap
from gpugov.whatif.trace import Job
from gpugov.whatif.volcano_capacity import Capacity, real_capabilities
from gpugov.whatif.volcano_preempt import preempt
from gpugov.whatif.volcano_setup import Amounts, VNode, VolcanoSetup

PERIOD_MS = 1000  # vc-scheduler's schedulePeriod


@dataclass
class VJob:
    index: int
    job: Job
    queue: str
    request: Amounts  # per pod
    groups: frozenset[str]  # node groups it may run on
    priority: int
    bound: list[str] = field(default_factory=list)  # the node of each placed pod
    run_from: int | None = None  # when every pod was placed: the run in progress
    admissions: list[int] = field(default_factory=list)  # each instant every pod was placed
    reclaimed: int = 0  # runs cut short by reclaim
    preempted: int = 0  # runs cut short by a job of its own Queue (preempt)
    finished_ms: int | None = None
    ends_at: int | None = None
    placed_ms: int | None = None  # when a pod of it was last placed
    nominated: bool = False  # a pod of it keeps a nominated node (see volcano_preempt): it may not preempt

    @property
    def created_s(self) -> int:
        return self.job.submit_ms // 1000

    @property
    def ready(self) -> bool:
        return len(self.bound) >= self.job.pods

    @property
    def waiting(self) -> bool:
        return self.finished_ms is None and not self.ready


@dataclass(frozen=True)
class VOutcome:
    jobs: list[VJob]
    never: dict[int, str]  # job index -> why it can never run
    log: list[tuple[int, str, str]]  # (ms, "admit" | "reclaim" | "preempt" | "finish", job id), in order
    never_tenants: dict[int, str] = field(default_factory=dict)  # job index -> its tenant
    quota_waits: int = 0  # jobs whose pods waited for room in their namespace's ResourceQuota
    undetermined: int = 0  # evictions whose victim depends on vc-scheduler's node order


def tenant_of(job: Job) -> str:
    return job.tenant or job.namespace or job.queue.partition("/")[0]


def resolve(setup: VolcanoSetup, job: Job) -> tuple[str, Amounts, frozenset[str], int] | str:
    """The job's leaf Queue, per-pod request, node groups and priority; or why it cannot be replayed."""
    tenant = tenant_of(job)
    queue = setup.tenant_queue(tenant)
    if queue is None:
        return _("no Volcano Queue of tenant {tenant}").format(tenant=tenant)
    q = setup.queues[queue]
    if job.share != 1:
        return _("a share of a device is not replayed on Volcano")
    if job.accelerators <= 0:
        return _("a job without accelerators is not replayed on Volcano")
    pools = set(setup.resource_of_pool)
    if job.pool:
        pools &= {job.pool}
    if job.models:
        pools &= {p for m in job.models for p in setup.pools_of_model.get(m.lower(), ())}
    groups = {n.group for n in setup.nodes if n.pool in pools}
    if q.node_groups:
        groups &= set(q.node_groups)
    resources = {setup.resource_of_pool[p] for p in pools}
    resource = job.resource or (next(iter(resources)) if len(resources) == 1 else next(iter(q.deserved), ""))
    if not resource:
        return _("no accelerator resource for the job")
    if job.priority_class and job.priority_class not in setup.priorities:
        return _("no PriorityClass {name}").format(name=job.priority_class)
    return queue, {resource: job.accelerators}, frozenset(groups), setup.priorities.get(job.priority_class, 0)


class VolcanoSimulator:
    def __init__(self, setup: VolcanoSetup, jobs: list[Job]) -> None:
        self.setup = setup
        self.real = real_capabilities(setup)
        self.nodes: dict[str, VNode] = {n.name: n for n in setup.nodes}
        self.free: dict[str, Amounts] = {n.name: dict(n.allocatable) for n in setup.nodes}
        self.jobs: list[VJob] = []
        self.never: dict[int, str] = {}
        self.never_tenants: dict[int, str] = {}
        self.log: list[tuple[int, str, str]] = []
        for index, job in enumerate(jobs):
            resolved = resolve(setup, job)
            if isinstance(resolved, str):
                self.never[index] = resolved
                self.never_tenants[index] = tenant_of(job)
                continue
            queue, request, groups, priority = resolved
            vjob = VJob(index, job, queue, request, groups, priority)
            if not self._could_ever_fit(vjob):
                self.never[index] = _("larger than the Queue's realCapability or the nodes it may use")
                self.never_tenants[index] = setup.queues[queue].tenant
                continue
            self.jobs.append(vjob)
        self.active: list[VJob] = []  # submitted, its pods created, not finished
        self.by_index = {v.index: v for v in self.jobs}
        self.pipelined: dict[int, list[str]] = {}  # job index -> nodes its pods are pipelined to, this session
        self.outside: list[VJob] = []  # submitted, its pods refused by the namespace's ResourceQuota
        self.quota_waits = 0
        self.undetermined = 0  # evictions whose victim vc-scheduler's node order decides (note_choice)

    def _could_ever_fit(self, vjob: VJob) -> bool:
        capacity = Capacity(self.setup, self.real, {})
        whole = {r: v * vjob.job.pods for r, v in vjob.request.items()}
        if not capacity.allocatable(vjob.queue, whole):
            return False
        quota = self.setup.quotas.get(self.setup.queues[vjob.queue].tenant)
        if quota is not None and any(whole.get(r, 0) > v for r, v in quota.items()):
            return False
        per_node = [min((n.allocatable.get(r, 0) // v for r, v in vjob.request.items()), default=0)
                    for n in self.setup.nodes if n.group in vjob.groups]
        return sum(per_node) >= vjob.job.pods

    # -- the cluster's state --------------------------------------------------------------------
    def held(self) -> dict[str, Amounts]:
        """Each queue's allocated: its jobs' placed pods and those pipelined in this session."""
        held: dict[str, Amounts] = {}
        for vjob in self.active:
            amounts = held.setdefault(vjob.queue, {})
            for resource, value in vjob.request.items():
                amounts[resource] = amounts.get(resource, 0) + value * self.waiting_pods(vjob)
        return held

    def place(self, node: str, request: Amounts, sign: int) -> None:
        for resource, value in request.items():
            self.free[node][resource] = self.free[node].get(resource, 0) - sign * value

    def _release(self, vjob: VJob) -> None:
        for node in vjob.bound:
            self.place(node, vjob.request, -1)
        vjob.bound = []

    def fits(self, node: str, request: Amounts) -> bool:
        return all(self.free[node].get(r, 0) >= v for r, v in request.items())

    def _node_for(self, vjob: VJob) -> str | None:
        """The node for one more pod: of the job's groups, with room; the fullest (binpack), then by name."""
        fitting = [n for n in sorted(self.nodes) if self.nodes[n].group in vjob.groups and self.fits(n, vjob.request)]
        if not fitting:
            return None
        return min(fitting, key=lambda n: (sum(self.free[n].values()), n))

    def _pods_fit_quota(self, vjob: VJob) -> bool:
        tenant = self.setup.queues[vjob.queue].tenant
        quota = self.setup.quotas.get(tenant)
        if quota is None:
            return True
        used: Amounts = {}
        for other in self.active:
            if other.queue == vjob.queue:
                for r, v in other.request.items():
                    used[r] = used.get(r, 0) + v * other.job.pods
        return all(used.get(r, 0) + vjob.request.get(r, 0) * vjob.job.pods <= hard for r, hard in quota.items())

    def _create(self, vjob: VJob) -> None:
        """The Job controller creates the job's pods if the namespace's ResourceQuota has room."""
        if self._pods_fit_quota(vjob):
            self.active.append(vjob)
        else:
            self.outside.append(vjob)
            self.quota_waits += 1

    def _retry_outside(self) -> None:
        for vjob in list(self.outside):
            if self._pods_fit_quota(vjob):
                self.outside.remove(vjob)
                self.active.append(vjob)

    # -- one session -----------------------------------------------------------------------------
    def job_less(self, total: Amounts) -> Callable[[VJob, VJob], bool]:
        def share(vjob: VJob) -> float:
            return max((v * len(vjob.bound) / total[r] for r, v in vjob.request.items() if total.get(r)), default=0.0)

        def less(left: VJob, right: VJob) -> bool:
            if left.priority != right.priority:
                return left.priority > right.priority
            if left.ready != right.ready:
                return not left.ready
            if share(left) != share(right):
                return share(left) < share(right)
            return (left.created_s, left.index) < (right.created_s, right.index)
        return less

    def session(self, now: int) -> bool:
        """One scheduling cycle at `now`; whether it changed anything."""
        changed = self._allocate(now)
        changed = preempt(self, now) or changed
        changed = self._reclaim(now) or changed
        for index, nodes in self.pipelined.items():  # pipelined pods are placed by a later session's allocate
            for node in nodes:
                self.place(node, self.by_index[index].request, -1)
        self.pipelined = {}
        return changed

    def waiting_pods(self, vjob: VJob) -> int:
        """Its pods placed and pipelined (on room a session's preempt or reclaim found) in this session."""
        return len(vjob.bound) + len(self.pipelined.get(vjob.index, ()))

    def pipeline(self, vjob: VJob, nodes: list[str]) -> None:
        self.pipelined.setdefault(vjob.index, []).extend(nodes)

    def _queues_heap(self, capacity: Capacity, names: list[str]) -> GoHeap[str]:
        heap: GoHeap[str] = GoHeap(capacity.queue_less)
        for name in names:
            heap.push(name)
        return heap

    def _allocate(self, now: int) -> bool:
        capacity = Capacity(self.setup, self.real, self.held())
        less = self.job_less(self.setup.total())
        by_queue: dict[str, GoHeap[VJob]] = {}
        for vjob in self.active:
            if vjob.ready:
                continue
            by_queue.setdefault(vjob.queue, GoHeap(less)).push(vjob)
        queues = self._queues_heap(capacity, sorted(by_queue, key=lambda q: capacity.attrs[q].order))
        changed = False
        while len(queues):
            queue = queues.pop()
            jobs = by_queue[queue]
            if not len(jobs):
                continue
            vjob = jobs.pop()
            placed: list[str] = []
            while len(vjob.bound) + len(placed) < vjob.job.pods:
                if not capacity.allocatable(queue, vjob.request):
                    break
                node = self._node_for(vjob)
                if node is None:
                    break
                self.place(node, vjob.request, 1)
                capacity.allocate(queue, vjob.request)
                placed.append(node)
            if len(vjob.bound) + len(placed) >= vjob.job.pods:
                vjob.bound.extend(placed)
                vjob.placed_ms = now
                self._admit(vjob, now)
                changed = True
            else:
                for node in placed:
                    self.place(node, vjob.request, -1)
                    capacity.allocate(queue, vjob.request, -1)
            queues.push(queue)
        return changed

    def _admit(self, vjob: VJob, now: int) -> None:
        vjob.nominated = False
        vjob.run_from = now
        vjob.admissions.append(now)
        vjob.ends_at = now + vjob.job.duration_ms
        self.log.append((now, "admit", vjob.job.id))

    def _reclaim(self, now: int) -> bool:
        capacity = Capacity(self.setup, self.real, self.held())
        less = self.job_less(self.setup.total())
        starving: dict[str, GoHeap[VJob]] = {}
        for vjob in self.active:
            if self.waiting_pods(vjob) < vjob.job.pods:
                starving.setdefault(vjob.queue, GoHeap(less)).push(vjob)
        with_jobs = sorted({v.queue for v in self.active}, key=lambda q: capacity.attrs[q].order)
        queues = self._queues_heap(capacity, with_jobs)
        evicted_any = False
        while len(queues):
            queue = queues.pop()
            jobs = starving.get(queue)
            while jobs is not None and len(jobs):
                vjob = jobs.pop()
                evictions, pipelined = self._reclaim_for(capacity, vjob, now)
                if evictions:  # a pod pipelined where it evicted keeps that node as nominated, kept or not
                    vjob.nominated = True
                if self.waiting_pods(vjob) + len(pipelined) >= vjob.job.pods:
                    for victim, node in evictions:
                        self.evict(victim, node, now)
                    evicted_any = evicted_any or bool(evictions)
                    self.pipeline(vjob, pipelined)
                else:  # discarded: the evictions and placements undone
                    for node in pipelined:
                        self.place(node, vjob.request, -1)
                        capacity.allocate(queue, vjob.request, -1)
                    for victim, node in evictions:
                        self.place(node, victim.request, 1)
                        capacity.allocate(victim.queue, victim.request)
        return evicted_any

    def _reclaim_for(self, capacity: Capacity, vjob: VJob, now: int) -> tuple[list[tuple[VJob, str]], list[str]]:
        """Evictions and placements for the starving job's pods, as the reclaim action's statement holds them."""
        evictions: list[tuple[VJob, str]] = []
        pipelined: list[str] = []
        taken: set[tuple[int, int]] = set()  # (job index, pod) already evicted
        for _pod in range(vjob.job.pods - self.waiting_pods(vjob)):
            if self.waiting_pods(vjob) + len(pipelined) >= vjob.job.pods:
                break
            if not capacity.preemptive(vjob.queue, vjob.request):
                continue
            offers = []
            for node in sorted(self.nodes):
                if self.nodes[node].group not in vjob.groups:
                    continue
                running = [(victim, pod) for victim in self.active if victim.queue != vjob.queue
                           and self.setup.queues[victim.queue].reclaimable and victim.placed_ms != now
                           for pod, where in enumerate(victim.bound) if where == node and (victim.index, pod) not in taken]
                if not running:
                    continue
                chosen = [running[i] for i in capacity.reclaimable([(v.queue, v.request) for v, _p in running])]
                room = dict(self.free[node])
                for victim, _p in chosen:
                    for r, v in victim.request.items():
                        room[r] = room.get(r, 0) + v
                if all(room.get(r, 0) >= v for r, v in vjob.request.items()):
                    chosen.sort(key=lambda c: (-capacity.victim_level(c[0].queue, vjob.queue), c[0].priority,
                                               -c[0].index, c[1]))
                    offers.append((node, chosen))
            if not offers:
                continue
            node, chosen = offers[0]
            self.note_choice(node, vjob, [c[0][0] for n, c in offers if c and not self.fits(n, vjob.request)])
            for victim, pod in chosen:
                if self.fits(node, vjob.request):
                    break
                taken.add((victim.index, pod))
                self.place(node, victim.request, -1)
                capacity.allocate(victim.queue, victim.request, -1)
                evictions.append((victim, node))
            if self.fits(node, vjob.request):
                self.place(node, vjob.request, 1)
                capacity.allocate(vjob.queue, vjob.request)
                pipelined.append(node)
        return evictions, pipelined

    def note_choice(self, node: str, vjob: VJob, first_victims: list[VJob]) -> None:
        """Where the first victims of the nodes a pod could take differ in kind (tenant, size, priority, whole
        or partly running), vc-scheduler's choice depends on its node order, which is not deterministic; the
        replay takes the first node by name. Counted, so that a fidelity check can keep to traces without."""
        kinds = {(v.queue, v.job.pods, v.job.accelerators, v.priority, v.ready) for v in first_victims}
        if len(kinds) > 1:
            self.undetermined += 1

    def evict(self, victim: VJob, node: str, now: int, why: str = "reclaim") -> None:
        """One of the victim's pods evicted (its room already freed) by `why` ("reclaim" by another Queue,
        "preempt" by a job of its own): recreated, it waits again, and a run in progress is lost."""
        victim.bound.remove(node)
        if victim.run_from is not None:
            victim.run_from = None
            victim.ends_at = None
            if why == "reclaim":
                victim.reclaimed += 1
            else:
                victim.preempted += 1
            self.log.append((now, why, victim.job.id))

    # -- the replay ------------------------------------------------------------------------------
    def run(self, progress: Callable[[int, int, int], None] | None = None) -> VOutcome:
        pending = sorted(self.jobs, key=lambda v: (v.job.submit_ms, v.index))
        cursor = 0
        timers: list[int] = []
        while cursor < len(pending) or timers or any(v.ends_at is not None for v in self.active):
            ends = [v.ends_at for v in self.active if v.ends_at is not None]
            candidates = ([pending[cursor].job.submit_ms] if cursor < len(pending) else []) + ends + timers[:1]
            now = min(candidates)
            while timers and timers[0] <= now:
                heapq.heappop(timers)
            for vjob in [v for v in self.active if v.ends_at is not None and v.ends_at <= now]:
                self._release(vjob)
                vjob.finished_ms = now
                vjob.ends_at = None
                self.active.remove(vjob)
                self.log.append((now, "finish", vjob.job.id))
            self._retry_outside()
            while cursor < len(pending) and pending[cursor].job.submit_ms <= now:
                self._create(pending[cursor])
                cursor += 1
            if self.session(now):
                heapq.heappush(timers, now + PERIOD_MS)
            elif not timers and cursor >= len(pending) and all(v.ends_at is None for v in self.active):
                break  # nothing will change any more: what waits now waits for ever
            if progress is not None:
                progress(cursor, len(pending), now)
        return VOutcome(self.jobs, self.never, self.log, self.never_tenants, self.quota_waits, self.undetermined)


def replay_volcano(setup: VolcanoSetup, jobs: list[Job],
                   progress: Callable[[int, int, int], None] | None = None) -> VOutcome:
    return VolcanoSimulator(setup, jobs).run(progress)
