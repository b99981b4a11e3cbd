"""The simulator's running state: workloads and ClusterQueues (with their quota nodes).

Kept apart from the algorithms so flavor assignment, preemption and the scheduling loop share
one vocabulary without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpugov.reach import QuotaNode
from gpugov.whatif.setup import FR, ClusterQueueSpec
from gpugov.whatif.trace import Job

# Workload states
PENDING = "pending"  # in its ClusterQueue's heap
INADMISSIBLE = "inadmissible"  # in its ClusterQueue's parked list (pending once requeued: see ClusterQueue)
INFLIGHT = "inflight"  # popped by the scheduling cycle that is evaluating it
RUNNING = "running"
EVICTING = "evicting"  # preempted; holds its quota until its pods are gone
FINISHED = "finished"
NEVER = "never"  # no queue, or a queue that can never admit it


class Workload:
    __slots__ = (
        "admissions",
        "admitted_ms",
        "allowed",
        "borrow_level",
        "cq",
        "created_s",
        "first_admitted_ms",
        "flavors",
        "hash",
        "heap_token",
        "index",
        "job",
        "kind",
        "kind_byte",
        "lost_units_ms",
        "nomination_key",
        "order",
        "preemptions",
        "priority",
        "queue",
        "requests",
        "reserved_s",
        "run_token",
        "state",
        "uid",
        "usage",
        "waited_ms",
        "waiting_for",
    )

    def __init__(self, job: Job, index: int, uid: int, queue: str, cq: ClusterQueue | None, priority: int,
                 requests: dict[str, int], allowed: frozenset[str] | None) -> None:
        self.job = job
        self.index = index
        self.uid = uid  # Kueue breaks ties of priority and (second-resolution) time by UID
        self.queue = queue
        self.cq = cq
        self.priority = priority
        self.created_s = job.submit_ms // 1000  # creationTimestamp has second resolution
        self.requests = requests  # resource -> total over the job's pods
        self.allowed = allowed  # the flavors (pools) its pods may use; None: any
        self.state = PENDING
        self.usage: dict[FR, int] = {}  # while running: quota held per (flavor, resource)
        self.flavors: tuple[str, ...] = ()
        self.admitted_ms = -1
        self.first_admitted_ms = -1
        self.reserved_s = 0
        self.preemptions = 0
        self.admissions = 0
        self.lost_units_ms: dict[FR, int] = {}  # resource-unit milliseconds lost to preemption
        self.waited_ms = -1
        self.heap_token = 0
        self.run_token = 0
        self.borrow_level = 0
        self.hash: tuple[object, ...] = ()
        self.nomination_key: tuple[int, tuple[object, ...], int] = (0, (), 0)  # set by the simulator
        self.kind = 0  # the simulator's number for its nomination_key (an int hashes and indexes faster)
        self.kind_byte = 0  # its kind's number within its ClusterQueue (ClusterQueue.parked_kinds)
        self.order = (-priority, self.created_s, uid, index)  # its place in its queue, as the heap orders it
        self.waiting_for = ""  # why its last nomination did not admit it

    def __repr__(self) -> str:
        return f"Workload({self.job.id!r}, {self.state})"


@dataclass
class ClusterQueue:
    spec: ClusterQueueSpec
    node: QuotaNode
    rg_of: dict[str, int]  # resource -> index of its resource group
    admitted: dict[int, Workload] = field(default_factory=dict)  # index -> workload, in admission order
    heap: list[tuple[int, int, int, int, Workload]] = field(default_factory=list)
    # Parked workloads and requeued ones not yet popped, in queue order: parked[:pending_from] wait
    # for quota to free up (INADMISSIBLE), parked[pending_from:] are queued again (pending, beside the
    # heap). Requeueing the cohort tree sets pending_from to 0, with no work per workload; every parked
    # one sorts before every requeued one, as a parked head was the queue's first when it was popped.
    parked: list[Workload] = field(default_factory=list)
    # Each parked workload's kind_byte, in the same order, so that a run of parked workloads of
    # kinds known to be hopeless is found at the speed of bytes.find (ClusterQueue.kinds names them).
    parked_kinds: bytearray = field(default_factory=bytearray)
    kinds: list[int] = field(default_factory=list)  # kind_byte -> the simulator's kind (simulate.MANY_KINDS)
    pending_from: int = 0
    sticky: Workload | None = None
    no_fit_hashes: set[tuple[object, ...]] = field(default_factory=set)
    # ((its root's id, the root's version, stop_at_holds), which kinds pass): Simulator._hopeless_run's
    hopeless_table: tuple[tuple[int, int, bool], bytearray] | None = None
    borrowed_units_ms: dict[FR, int] = field(default_factory=dict)  # integral of usage above nominal
    used_units_ms: dict[FR, int] = field(default_factory=dict)  # integral of usage
    borrowed_since_ms: int = 0
    root: QuotaNode = field(init=False)  # the root of its cohort tree (itself without a cohort)

    @property
    def name(self) -> str:
        return self.spec.name

    def park_at(self, at: int, wl: Workload) -> None:
        self.parked.insert(at, wl)
        self.parked_kinds.insert(at, wl.kind_byte)

    def unpark_at(self, at: int) -> Workload:
        del self.parked_kinds[at]
        return self.parked.pop(at)

    def unpark_range(self, start: int, end: int) -> None:
        del self.parked[start:end]
        del self.parked_kinds[start:end]

    @property
    def best_effort(self) -> bool:
        return self.spec.queueing_strategy != "StrictFIFO"
