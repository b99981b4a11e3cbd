"""vc-scheduler v1.14's preempt action between the jobs of one Queue, as gpugov's configuration runs it.

For each Queue's starving jobs (job order), pod by pod, node by node (those of the job's node groups):
the pods of the Queue's other jobs running there are offered as victims. The first tier decides if it
finds any: the priority plugin gives those of a lower priority job (gang's victim check is off:
enablePreemptable false; conformance keeps only system pods). Without one, the second tier's drf gives
those whose job, less them, keeps a share of the cluster at least the preemptor's with the pod (so a
job of several pods yields one to a job of one of the same priority). Victims are evicted, lowest
priority first, until the capacity plugin lets the Queue take the pod and the node has room; the
pod is then placed there. The job's evictions stand only if every pod of it found a place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpugov.whatif.goheap import GoHeap
from gpugov.whatif.volcano_capacity import Capacity

if TYPE_CHECKING:
    from gpugov.whatif.volcano import VJob, VolcanoSimulator

SHARE_DELTA = 0.000001  # drf's shareDelta


def share(pods: int, vjob: VJob, total: dict[str, int]) -> float:
    return max((v * pods / total[r] for r, v in vjob.request.items() if total.get(r)), default=0.0)


def preempt(sim: VolcanoSimulator, now: int) -> bool:
    """One preempt action at `now`; whether it evicted anything. What it pipelines stays for the session."""
    capacity = Capacity(sim.setup, sim.real, sim.held())
    total = sim.setup.total()
    starving: dict[str, GoHeap[VJob]] = {}
    under: list[VJob] = []
    for vjob in sim.active:
        if sim.waiting_pods(vjob) < vjob.job.pods:
            starving.setdefault(vjob.queue, GoHeap(sim.job_less(total))).push(vjob)
            under.append(vjob)
    pods = {v.index: sim.waiting_pods(v) for v in sim.active}  # each job's pods placed, as this session has them
    evicted_any = False
    for queue in sorted(starving, key=lambda q: capacity.attrs[q].order):
        jobs = starving[queue]
        while len(jobs):
            vjob = jobs.pop()
            evictions: list[tuple[VJob, str]] = []
            placed: list[str] = []
            for pod in range(vjob.job.pods - sim.waiting_pods(vjob)):
                if sim.waiting_pods(vjob) + len(placed) >= vjob.job.pods:
                    break
                if pod == 0 and vjob.nominated:
                    continue  # not eligible: its nominated node passes the predicates
                node = _preempt_for(sim, capacity, vjob, pods, evictions, now, total)
                if node is not None:
                    placed.append(node)
                    pods[vjob.index] += 1
            if evictions and placed:
                vjob.nominated = True
            if sim.waiting_pods(vjob) + len(placed) >= vjob.job.pods:
                for victim, node in evictions:
                    sim.evict(victim, node, now, "preempt")
                evicted_any = evicted_any or bool(evictions)
                sim.pipeline(vjob, placed)
                continue
            for node in placed:
                sim.place(node, vjob.request, -1)
                capacity.allocate(queue, vjob.request, -1)
                pods[vjob.index] -= 1
            for victim, node in evictions:
                sim.place(node, victim.request, 1)
                capacity.allocate(victim.queue, victim.request)
                pods[victim.index] += 1
    _within_jobs(sim, capacity, sorted(under, key=lambda v: (capacity.attrs[v.queue].order, v.job.submit_ms, v.index)))
    return evicted_any


def _within_jobs(sim: VolcanoSimulator, capacity: Capacity, under: list[VJob]) -> None:
    """The action's second part, preemption between the pods of one job: with every pod alike it evicts
    nothing, but it pipelines each waiting pod on a node with room for it where the capacity plugin
    allows, and keeps that (the statement is committed whether or not the gang is complete), so a
    later reclaim in the session counts those pods as the job's. vc-scheduler takes the jobs in its
    map's order; where they compete for the room, which wins is counted as undetermined.

    A pod that a session pipelined where it evicted others keeps that node as its nominated node (written
    when the session closes, whether its statement was kept or not) until it is bound; such a pod is not
    eligible to preempt (its nominated node passes the predicates, which do not count resources), and
    in the within-job part the job's turn ends at it. Replayed for the job's first pod."""
    wanting = [v for v in under if sim.waiting_pods(v) < v.job.pods]
    room = sum(1 for n in sim.nodes for v in wanting[:1] if sim.nodes[n].group in v.groups and sim.fits(n, v.request))
    if len({(v.queue, v.job.pods) for v in wanting}) > 1 and room and \
            room < sum(v.job.pods - sim.waiting_pods(v) for v in wanting):
        sim.undetermined += 1
    for vjob in wanting:
        if vjob.nominated:
            continue  # its first pod is not eligible, and the job's turn ends there
        while sim.waiting_pods(vjob) < vjob.job.pods and capacity.allocatable(vjob.queue, vjob.request):
            node = next((n for n in sorted(sim.nodes) if sim.nodes[n].group in vjob.groups
                         and sim.fits(n, vjob.request)), None)
            if node is None:
                break
            sim.place(node, vjob.request, 1)
            capacity.allocate(vjob.queue, vjob.request)
            sim.pipeline(vjob, [node])


def _preempt_for(sim: VolcanoSimulator, capacity: Capacity, vjob: VJob, pods: dict[int, int],
                 evictions: list[tuple[VJob, str]], now: int, total: dict[str, int]) -> str | None:
    offers = []
    for node in sorted(sim.nodes):
        if sim.nodes[node].group not in vjob.groups:
            continue
        offered = [(victim, slot) for victim in sim.active
                   if victim.queue == vjob.queue and victim is not vjob and victim.placed_ms != now
                   for slot in range(victim.bound.count(node) - evictions.count((victim, node)))]
        lower = [(v, s) for v, s in offered if v.priority < vjob.priority]
        victims = lower or _drf_victims(vjob, offered, pods, total)
        room = dict(sim.free[node])
        for victim, _slot in victims:
            for r, v in victim.request.items():
                room[r] = room.get(r, 0) + v
        if all(room.get(r, 0) >= v for r, v in vjob.request.items()):
            victims.sort(key=lambda c: (c[0].priority, -c[0].index))
            offers.append((node, victims))
    sim.note_choice("", vjob, [c[0][0] for n, c in offers if c and not sim.fits(n, vjob.request)])
    for node, victims in offers:
        for victim, _slot in victims:
            if capacity.allocatable(vjob.queue, vjob.request) and sim.fits(node, vjob.request):
                break
            sim.place(node, victim.request, -1)
            capacity.allocate(victim.queue, victim.request, -1)
            pods[victim.index] -= 1
            evictions.append((victim, node))
        if capacity.allocatable(vjob.queue, vjob.request) and sim.fits(node, vjob.request):
            sim.place(node, vjob.request, 1)
            capacity.allocate(vjob.queue, vjob.request)
            return node
    return None


def _drf_victims(vjob: VJob, offered: list[tuple[VJob, int]], pods: dict[int, int],
                 total: dict[str, int]) -> list[tuple[VJob, int]]:
    mine = share(pods[vjob.index] + 1, vjob, total)
    left: dict[int, int] = {}
    victims = []
    for victim, slot in offered:
        left[victim.index] = left.get(victim.index, pods[victim.index]) - 1
        theirs = share(left[victim.index], victim, total)
        if mine < theirs or abs(mine - theirs) <= SHARE_DELTA:
            victims.append((victim, slot))
    return victims
