"""The queues as a tenant sees them: per tenant and LocalQueue, the admitted and pending
workloads with size, priority, position, why each pending one waits, and an estimated start.

Names are shown only where the caller may read the Workloads of that namespace (a
SelfSubjectAccessReview the reader asked); elsewhere an entry keeps its tenant, size, priority
and position but not its namespace or job name.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from gpugov.declarations.model import Model
from gpugov.i18n import Text
from gpugov.kube.quantity import format_quantity
from gpugov.queueing.access import Denied, NotShown, contacts, denial_lines
from gpugov.queueing.clusterqueue import ClusterQueue, LocalQueue, cluster_queue, local_queue
from gpugov.queueing.estimate import Estimate, Lookup, estimate_start, releases
from gpugov.queueing.positions import Position, positions
from gpugov.queueing.reasons import Reason, Why, alike, explain
from gpugov.queueing.workload import Workload, WorkloadError, from_object
from gpugov.reach import ReachError, Tree

HIDDEN = "(hidden)"


@dataclass
class Snapshot:
    """What the reader found, at one instant."""

    now: datetime
    cluster_queues: dict[str, ClusterQueue]
    local_queues: dict[tuple[str, str], LocalQueue]
    workloads: list[Workload]
    positions: dict[tuple[str, str], Position]
    readable: frozenset[str]  # namespaces whose Workloads (and job names) the caller may read
    # Pending workloads the visibility API listed in namespaces the caller may not read.
    unreadable_pending: dict[tuple[str, str], Position] = field(default_factory=dict)
    tenant_of_namespace: dict[str, str] = field(default_factory=dict)
    cohort_root: dict[str, str] = field(default_factory=dict)  # ClusterQueue -> root of its cohort tree
    denied: tuple[Denied, ...] = ()  # reads the API server refused (gpugov.queueing.access)
    contacts: dict[str, str] = field(default_factory=dict)  # tenant -> which declaration grants, whom to ask
    node_sizes: dict[str, dict[str, Decimal]] = field(default_factory=dict)  # pool -> the most one node offers
    tree: Tree | None = None  # what each ClusterQueue can reach now (gpugov.reach), None: not known


def node_sizes(model: Model) -> dict[str, dict[str, Decimal]]:
    """Per pool and resource, the most one of its nodes offers (its accelerators in the node's
    MIG or vNPU layout, with no whole device left on a split node; its declared cpu and memory)."""
    sizes: dict[str, dict[str, Decimal]] = {}
    for pool in model.pools.values():
        layouts = {(n.mig_layout, n.vnpu_layout) for n in pool.nodes} or {(None, None)}
        largest: dict[str, Decimal] = {}
        for mig, vnpu in sorted(layouts, key=lambda pair: (pair[0] or "", pair[1] or "")):
            offered = dict(pool.node_accelerators(mig, vnpu))
            offered.setdefault(pool.model.resource, Decimal(0))  # every device of a split node is split
            for resource, amount in offered.items():
                largest[resource] = max(largest.get(resource, Decimal(0)), amount)
        for resource, amount in (("cpu", pool.node_cpu), ("memory", pool.node_memory)):
            if amount is not None:
                largest[resource] = amount
        sizes[pool.name] = dict(sorted(largest.items()))
    return sizes


def snapshot(model: Model, now: datetime, cluster_queues: list[dict[str, Any]], local_queues: list[dict[str, Any]],
             workloads: list[Workload] | list[dict[str, Any]], pending: dict[str, list[dict[str, Any]]],
             readable: frozenset[str], denied: tuple[Denied, ...] = (),
             cohorts: list[dict[str, Any]] | None = None) -> Snapshot:
    """The Snapshot of raw reads (WorkloadError for a Workload or queue Kueue would not write);
    `workloads` raw, or already records (from_object as each page was read); `cohorts`: the Cohort
    objects (live, or compile's where the caller may not list them), for what each ClusterQueue can
    reach (gpugov.reach, with what each holds from its status)."""
    queues = {q.name: q for q in map(cluster_queue, cluster_queues)}
    try:
        tree = Tree([*cluster_queues, *(cohorts or [])])
    except (ReachError, KeyError, TypeError, AttributeError) as exc:
        raise WorkloadError(f"ClusterQueues and Cohorts: not what Kueue writes ({exc})") from exc
    table = positions(sorted(pending.items()))
    records = [w if isinstance(w, Workload) else from_object(w) for w in workloads]
    known = {(w.namespace, w.name) for w in records}
    return Snapshot(
        now=now,
        cluster_queues=queues,
        local_queues={(q.namespace, q.name): q for q in map(local_queue, local_queues)},
        workloads=records,
        positions=table,
        readable=readable,
        unreadable_pending={k: p for k, p in table.items() if k not in known and k[0] not in readable},
        tenant_of_namespace=model.tenant_of_namespace(),
        cohort_root={q.name: (model.root_department(q.cohort) if q.cohort else "") for q in queues.values()},
        denied=denied,
        contacts=contacts(model),
        node_sizes=node_sizes(model),
        tree=tree,
    )


@dataclass(frozen=True)
class Entry:
    tenant: str
    namespace: str  # HIDDEN when hidden
    job: str  # HIDDEN when hidden
    workload: str  # namespace/name of the Workload, HIDDEN when hidden
    local_queue: str
    cluster_queue: str
    state: str
    size: dict[str, Decimal]  # accelerators (all resources when it asks for none)
    flavors: tuple[str, ...]
    priority: int
    priority_class: str
    position: Position | None
    reason: Reason
    estimate: Estimate | None
    hidden: bool
    expected_end: datetime | None = None  # admitted: when Kueue ends it (maximum execution time)

    @property
    def label(self) -> str:
        """What the user submitted: namespace/job, or HIDDEN."""
        return HIDDEN if self.hidden else f"{self.namespace}/{self.job}"

    @property
    def size_text(self) -> str:
        if not self.size:
            return "?" if self.hidden and self.state == "pending" else "-"
        amounts = " + ".join(f"{format_quantity(a)} {r}" for r, a in self.size.items())
        return f"{amounts} on {', '.join(self.flavors)}" if self.flavors else amounts


def cluster_queue_of(snapshot: Snapshot, workload: Workload) -> tuple[str, str]:
    """(ClusterQueue name, what is wrong with its queues: "" when nothing)."""
    if workload.cluster_queue:
        return workload.cluster_queue, ""
    local = snapshot.local_queues.get((workload.namespace, workload.queue))
    if local is None:
        return "", f"LocalQueue {workload.namespace}/{workload.queue or '(none)'} does not exist"
    if local.cluster_queue not in snapshot.cluster_queues:
        return local.cluster_queue, f"ClusterQueue {local.cluster_queue} of LocalQueue {local.namespace}/{local.name} does not exist"
    queue = snapshot.cluster_queues[local.cluster_queue]
    if not queue.active:
        return local.cluster_queue, f"ClusterQueue {queue.name} is not active: {queue.inactive_reason or 'no reason given'}"
    return local.cluster_queue, ""


def _tenant(snapshot: Snapshot, cluster_queue: str, namespace: str) -> str:
    queue = snapshot.cluster_queues.get(cluster_queue)
    if queue is not None:
        return queue.tenant
    return snapshot.tenant_of_namespace.get(namespace, "")


class _Reasons(dict[tuple[str, str], tuple[str, Reason]]):
    """(namespace, name) -> (its ClusterQueue, why it is where it is), each workload explained when
    first asked (`--tenant` asks only for that tenant's), workloads alike explained once
    (reasons.alike: 100,000 Workloads are a few hundred kinds)."""

    def __init__(self, snapshot: Snapshot, by_key: dict[tuple[str, str], Workload]) -> None:
        super().__init__()
        self.snapshot, self.by_key = snapshot, by_key
        self.explained: dict[tuple[object, ...], Reason] = {}

    def __missing__(self, key: tuple[str, str]) -> tuple[str, Reason]:
        w, snapshot = self.by_key[key], self.snapshot
        cq, problem = cluster_queue_of(snapshot, w)
        kind = (cq, problem, alike(w))
        reason = self.explained.get(kind)
        if reason is None:
            reason = self.explained[kind] = explain(w, snapshot.cluster_queues.get(cq), problem, snapshot.node_sizes,
                                                    snapshot.tree)
        self[key] = (cq, reason)
        return cq, reason


@dataclass
class _Index:
    """What every entry needs, computed once per snapshot (queues of thousands stay linear), and what
    only some entries need when first one asks (see _Reasons, _file_ahead)."""

    reasons: _Reasons  # workload -> (its ClusterQueue, why)
    admitted: dict[str, list[Workload]]  # ClusterQueue -> workloads holding quota there
    queued: dict[str, list[tuple[int, tuple[str, str]]]]  # ClusterQueue -> (position, pending workload)
    ahead: dict[tuple[str, str], dict[str, Decimal]] = field(default_factory=dict)  # what those ahead of it ask
    hidden_ahead: dict[tuple[str, str], int] = field(default_factory=dict)  # unreadable ones ahead of it
    filed: set[str] = field(default_factory=set)  # the ClusterQueues whose ahead and hidden_ahead are filled
    releases: dict[str, tuple[Lookup, Lookup]] = field(default_factory=dict)  # ClusterQueue -> (cohort, own)
    # cohort tree (its ClusterQueues) -> the releases of its admitted workloads, shared by its ClusterQueues
    tree_releases: dict[tuple[str, ...], Lookup] = field(default_factory=dict)


def _index(snapshot: Snapshot) -> _Index:
    cached = snapshot.__dict__.get("_index")
    if cached is not None:
        return cached
    admitted: dict[str, list[Workload]] = {}
    by_key = {}
    for w in snapshot.workloads:
        by_key[(w.namespace, w.name)] = w
        if w.state in ("admitted", "reserved"):
            admitted.setdefault(w.cluster_queue, []).append(w)
    queued: dict[str, list[tuple[int, tuple[str, str]]]] = {}
    for key, position in snapshot.positions.items():
        queued.setdefault(position.cluster_queue, []).append((position.in_cluster_queue, key))
    index = _Index(_Reasons(snapshot, by_key), admitted, queued)
    snapshot.__dict__["_index"] = index
    return index


def _file_ahead(index: _Index, cluster_queue: str) -> None:
    """What the pending workloads ahead of each one in `cluster_queue` ask, and how many of them
    the caller may not read: once per ClusterQueue, when an entry of it first needs it."""
    if cluster_queue in index.filed:
        return
    index.filed.add(cluster_queue)
    asked: dict[str, Decimal] = {}
    hidden = 0
    for _, key in sorted(index.queued.get(cluster_queue, [])):
        index.ahead[key], index.hidden_ahead[key] = dict(asked), hidden
        workload = index.reasons.by_key.get(key)
        if workload is None:
            hidden += 1
        elif not index.reasons[key][1].finding:  # what can never start holds nobody back (BestEffortFIFO)
            for resource, amount in workload.requests.items():
                asked[resource] = asked.get(resource, Decimal(0)) + amount


def _cohort(snapshot: Snapshot, cq: str) -> set[str]:
    root = snapshot.cohort_root.get(cq, "")
    return {name for name, r in snapshot.cohort_root.items() if root and r == root} | {cq}


def entry(snapshot: Snapshot, workload: Workload) -> Entry:
    index = _index(snapshot)
    key = (workload.namespace, workload.name)
    cq, reason = index.reasons[key]  # every workload of the snapshot is indexed
    position = snapshot.positions.get(key)
    estimate = None
    if workload.state in ("pending", "inactive"):
        if cq not in index.releases:
            tree = tuple(sorted(_cohort(snapshot, cq)))
            if tree not in index.tree_releases:  # once per cohort tree, not per ClusterQueue in it
                index.tree_releases[tree] = releases(w for name in tree for w in index.admitted.get(name, []))
            index.releases[cq] = (index.tree_releases[tree], releases(index.admitted.get(cq, [])))
        cohort_releases, own_releases = index.releases[cq]
        if position is not None:
            _file_ahead(index, position.cluster_queue)
        estimate = estimate_start(reason, workload, index.ahead.get(key, {}), cohort_releases, own_releases,
                                  snapshot.now)
        hidden_ahead = index.hidden_ahead.get(key, 0)
        if hidden_ahead and estimate.at is not None:
            estimate = Estimate(estimate.at, f"{estimate.text}; not counting {hidden_ahead} workload(s) ahead that "
                                             "you may not read", estimate.relies_on)
    hidden = workload.namespace not in snapshot.readable
    accelerators = workload.accelerators or workload.requests
    return Entry(
        tenant=_tenant(snapshot, cq, workload.namespace),
        namespace=HIDDEN if hidden else workload.namespace,
        job=HIDDEN if hidden else workload.job,
        workload=HIDDEN if hidden else workload.key,
        local_queue=workload.queue,
        cluster_queue=cq,
        state=workload.state,
        size=accelerators,
        flavors=workload.flavors,
        priority=workload.priority,
        priority_class=workload.priority_class,
        position=position,
        reason=reason,
        estimate=estimate,
        hidden=hidden,
        expected_end=workload.expected_end,
    )


def unreadable_entry(snapshot: Snapshot, key: tuple[str, str], position: Position) -> Entry:
    """A pending workload known only from the visibility API."""
    return Entry(
        tenant=_tenant(snapshot, position.cluster_queue, key[0]), namespace=HIDDEN, job=HIDDEN, workload=HIDDEN,
        local_queue=position.local_queue, cluster_queue=position.cluster_queue, state="pending", size={}, flavors=(),
        priority=position.priority, priority_class="", position=position,
        reason=Reason(Why.OTHER, Text("you may not read this tenant's Workloads")), estimate=None, hidden=True,
    )


def _order(e: Entry) -> tuple:
    pending = e.state not in ("admitted", "reserved")
    return (e.tenant, e.cluster_queue, e.local_queue, pending,
            e.position.in_cluster_queue if e.position else 1 << 30, e.workload)


def entries(snapshot: Snapshot, tenants: Iterable[str] = ()) -> list[Entry]:
    """Every admitted and pending workload (finished ones left out), per tenant and queue."""
    wanted = set(tenants)
    found = [entry(snapshot, w) for w in snapshot.workloads if w.state != "finished"
             and (not wanted or _tenant(snapshot, cluster_queue_of(snapshot, w)[0], w.namespace) in wanted)]
    found += [unreadable_entry(snapshot, k, p) for k, p in snapshot.unreadable_pending.items()]
    return sorted((e for e in found if not wanted or e.tenant in wanted), key=_order)


@dataclass(frozen=True)
class Explanation:
    """`gpugov why`: one job, what is ahead of it, what it waits on."""

    entry: Entry
    ahead: list[Entry]
    holding: list[Entry]  # running workloads holding what it waits for, soonest expected end first


def explain_job(snapshot: Snapshot, workload: Workload) -> Explanation:
    mine = entry(snapshot, workload)
    everything = entries(snapshot)
    ahead = [e for e in everything if mine.position and e.position and e.state != "admitted"
             and e.position.cluster_queue == mine.position.cluster_queue
             and e.position.in_cluster_queue < mine.position.in_cluster_queue]
    pools = {d.pool for d in mine.reason.deficits}
    resources = {d.resource for d in mine.reason.deficits}
    tree = {mine.cluster_queue} if mine.reason.why == Why.BORROWING_LIMIT else _cohort(snapshot, mine.cluster_queue)
    holding = []
    for w in snapshot.workloads:
        if w.state not in ("admitted", "reserved") or w.cluster_queue not in tree:
            continue
        held = w.usage_by_flavor()
        if pools and not any((p, r) in held for p in pools for r in resources):
            continue
        holding.append(entry(snapshot, w))
    holding.sort(key=lambda e: (e.expected_end is None, e.expected_end or snapshot.now, e.workload))
    return Explanation(mine, ahead, holding)


@dataclass(frozen=True)
class Gaps:
    """What the report could not show: one line per refused read, and the workloads counted, not named."""

    lines: list[str]
    not_shown: list[NotShown]
    denied: tuple[Denied, ...]


def gaps(snapshot: Snapshot, tenants: Iterable[str] = ()) -> Gaps:
    """The refused reads of `tenants` (all when empty; then the caller's own tenants, those of a namespace
    it read, are named one read a line and the others summed up in one line per permission), and per
    ClusterQueue of a tenant whose Workloads were refused somewhere, the admitted and pending workloads
    its status counts beyond those shown."""
    wanted = set(tenants)
    own = {snapshot.tenant_of_namespace[n] for n in snapshot.readable if n in snapshot.tenant_of_namespace}
    queue_tenant = {name: q.tenant for name, q in snapshot.cluster_queues.items()}
    lines = denial_lines(snapshot.denied, snapshot.tenant_of_namespace, queue_tenant, snapshot.contacts,
                         wanted or own, others_shown=not wanted)
    refused = {snapshot.tenant_of_namespace.get(d.namespace, "") for d in snapshot.denied
               if d.namespace and d.resource.startswith("workloads.")}
    admitted: dict[str, int] = {}
    pending: dict[str, int] = {}
    for w in snapshot.workloads:
        cq = w.cluster_queue or cluster_queue_of(snapshot, w)[0]
        if w.state == "admitted":
            admitted[cq] = admitted.get(cq, 0) + 1
        elif w.state == "pending":
            pending[cq] = pending.get(cq, 0) + 1
    for position in snapshot.unreadable_pending.values():
        pending[position.cluster_queue] = pending.get(position.cluster_queue, 0) + 1
    hidden = []
    for name, queue in sorted(snapshot.cluster_queues.items()):
        if queue.tenant not in refused or (wanted and queue.tenant not in wanted):
            continue
        more = NotShown(queue.tenant, name, max(0, queue.admitted - admitted.get(name, 0)),
                        max(0, queue.pending - pending.get(name, 0)))
        if more.admitted or more.pending:
            hidden.append(more)
    return Gaps(lines, hidden, snapshot.denied)
