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
    """One preempt action at `now`; whether it evicted anything."""
    capacity = Capacity(sim.setup, sim.real, sim.held())
    total = sim.setup.total()
    starving: dict[str, GoHeap[VJob]] = {}
    for vjob in sim.active:
        if not vjob.ready:
            starving.setdefault(vjob.queue, GoHeap(sim.job_less(total))).push(vjob)
    pods = {v.index: len(v.bound) for v in sim.active}  # each job's pods placed, as this session has them
    kept: list[tuple[str, dict[str, int]]] = []
    evicted_any = False
    for queue in sorted(starving, key=lambda q: capacity.attrs[q].order):
        jobs = starving[queue]
        while len(jobs):
            vjob = jobs.pop()
            evictions: list[tuple[VJob, str]] = []
            placed: list[str] = []
            for _pod in range(vjob.job.pods - len(vjob.bound)):
                if len(vjob.bound) + len(placed) >= vjob.job.pods:
                    break
                node = _preempt_for(sim, capacity, vjob, pods, evictions, now, total)
                if node is not None:
                    placed.append(node)
                    pods[vjob.index] += 1
            if len(vjob.bound) + len(placed) >= vjob.job.pods:
                for victim, node in evictions:
                    sim.evict(victim, node, now, "preempt")
                evicted_any = evicted_any or bool(evictions)
                kept.extend((node, vjob.request) for node in placed)
                continue
            for node in placed:
                sim.place(node, vjob.request, -1)
                capacity.allocate(queue, vjob.request, -1)
                pods[vjob.index] -= 1
            for victim, node in evictions:
                sim.place(node, victim.request, 1)
                capacity.allocate(victim.queue, victim.request)
                pods[victim.index] += 1
    for node, request in kept:  # pipelined pods are placed by a later session's allocate
        sim.place(node, request, -1)
    return evicted_any


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
