"""Transparent queueing on Volcano, pure: why a PodGroup waits, in the organisation's own terms.

Volcano (v1.14.1) says little of why a job waits: a PodGroup's Unschedulable condition counts its
pending tasks ("1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable")
and never names the queue or the resource that is short (volcano#4311). gpugov computes it here,
once, as the capacity plugin with ``enableHierarchy: true`` does
(pkg/scheduler/plugins/capacity/capacity.go):

- the root queue's real capability is every node's allocatable summed (the scheduler counts every
  node it caches, whatever its conditions); its capability, where it declares none, is that total;
- a child's capability inherits each resource it does not declare from its parent's
  (checkHierarchicalQueue);
- a child's real capability is its parent's real capability less the guarantees of all the
  parent's children (none below zero), plus its own guarantee, and never above its capability;
- a task is allocatable when, for its queue and every ancestor up to root, what the queue holds
  plus the task stays within the queue's real capability on every resource the task asks
  (queueAllocatable, checkQueueAllocatableHierarchically); a gang's tasks are allocated in one
  statement, so its minResources must fit at once;
- only an Open leaf queue allocates.

What a queue holds is Volcano's own record (the Queue's ``status.allocated``). A pod the namespace's
ResourceQuota refused (gpugov's ceiling of the tenant) never exists: its Job's FailedCreate event
says by how much, and a gang short of pods waits for them. Nothing here talks to a cluster.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from gpugov.i18n import Joined, Text
from gpugov.kube.quantity import QuantityError, format_quantity, parse_quantity
from gpugov.queueing.reasons import Why

Resources = dict[str, Decimal]
ROOT = "root"
OPEN = "Open"
ZERO = Decimal(0)


class VolcanoError(ValueError):
    """A Queue, PodGroup or pod that is not what Volcano writes."""


def counted(resources: Mapping[str, Any] | None) -> Resources:
    """The resources Volcano's scheduler compares (api.NewResource): cpu, memory and extended
    resources; pods, count/ quotas and the ResourceQuota-style requests./limits. names are left out."""
    kept: Resources = {}
    for name, value in (resources or {}).items():
        if name == "pods" or name.startswith(("count/", "requests.", "limits.")):
            continue
        if name not in ("cpu", "memory") and "/" not in name and not name.startswith("hugepages-"):
            continue
        if "/" in name and name.split("/", 1)[0].endswith("kubernetes.io"):
            continue
        try:
            kept[name] = parse_quantity(value)
        except QuantityError as exc:
            raise VolcanoError(f"{name}: {exc}") from exc
    return kept


def add(a: Mapping[str, Decimal], b: Mapping[str, Decimal]) -> Resources:
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, ZERO) + amount
    return out


@dataclass(frozen=True)
class Queue:
    """A scheduling.volcano.sh/v1beta1 Queue as the capacity plugin reads it."""

    name: str
    parent: str  # "" for root; a queue without one is root's child
    state: str
    deserved: Resources
    guarantee: Resources
    capability: Resources
    allocated: Resources  # status.allocated: what its jobs hold (its descendants' for a parent)
    tenant: str = ""


def queue(obj: dict[str, Any]) -> Queue:
    try:
        name = obj["metadata"]["name"]
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        labels = obj["metadata"].get("labels") or {}
        return Queue(
            name=name,
            parent="" if name == ROOT else (spec.get("parent") or ROOT),
            state=status.get("state", ""),
            deserved=counted(spec.get("deserved")),
            guarantee=counted((spec.get("guarantee") or {}).get("resource")),
            capability=counted(spec.get("capability")),
            allocated=counted(status.get("allocated")),
            tenant=labels.get("gpugov.io/tenant", ""),
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise VolcanoError(f"Queue {obj.get('metadata', {}).get('name', '?')}: not what Volcano writes ({exc})") from exc


@dataclass(frozen=True)
class Capacity:
    """One queue as the capacity plugin sees it in a session."""

    queue: Queue
    ancestors: tuple[str, ...]  # root first
    children: tuple[str, ...]
    capability: Resources  # declared, with what it does not declare inherited from its parent
    real: Resources  # realCapability
    # parent's real capability and the sum of its children's guarantees, per resource (root: empty)
    parent_real: Resources = field(default_factory=dict)
    siblings_guarantee: Resources = field(default_factory=dict)

    @property
    def leaf(self) -> bool:
        return not self.children


def node_total(nodes: Iterable[dict[str, Any]]) -> Resources:
    """What the scheduler's session totals: every node's allocatable."""
    total: Resources = {}
    for node in nodes:
        total = add(total, counted((node.get("status") or {}).get("allocatable")))
    return total


def capacities(queues: Iterable[Queue], total: Mapping[str, Decimal]) -> dict[str, Capacity]:
    """realCapability of every queue, as buildHierarchicalQueueAttrs and checkHierarchicalQueue
    compute it (VolcanoError for a parent that does not exist or a cycle: Volcano then schedules
    nothing at all)."""
    by_name = {q.name: q for q in queues}
    if ROOT not in by_name:
        by_name[ROOT] = Queue(ROOT, "", OPEN, {}, {}, {}, {})
    children: dict[str, list[str]] = {name: [] for name in by_name}
    for q in by_name.values():
        if q.name == ROOT:
            continue
        if q.parent not in by_name:
            raise VolcanoError(f"the queue {q.name} has invalid parent queue {q.parent}")
        children[q.parent].append(q.name)
    out: dict[str, Capacity] = {}
    root = by_name[ROOT]
    root_cap = dict(root.capability) if root.capability else dict(total)
    out[ROOT] = Capacity(root, (), tuple(sorted(children[ROOT])), root_cap, dict(total))
    todo = [ROOT]
    while todo:
        parent = out[todo.pop()]
        kids = [by_name[n] for n in sorted(children[parent.queue.name])]
        guaranteed: Resources = {}
        for kid in kids:
            guaranteed = add(guaranteed, kid.guarantee)
        for kid in kids:
            cap = dict(kid.capability)
            for name, amount in parent.capability.items():
                if cap.get(name, ZERO) <= 0:
                    cap[name] = amount
            # ExceededPart(parent real, children's guarantees) + own guarantee, capped by capability
            real = {n: max(a - guaranteed.get(n, ZERO), ZERO) for n, a in parent.real.items()}
            real = add(real, kid.guarantee)
            real = {n: min(a, cap[n]) if n in cap else a for n, a in real.items()}
            out[kid.name] = Capacity(kid, (*parent.ancestors, parent.queue.name), tuple(sorted(children[kid.name])),
                                     cap, real, dict(parent.real), guaranteed)
            todo.append(kid.name)
    unreached = sorted(set(by_name) - set(out))
    if unreached:
        raise VolcanoError(f"cycle detected in queue hierarchy for queue {unreached[0]}")
    return out


@dataclass(frozen=True)
class Shortfall:
    """What one queue (the job's or an ancestor) lacks for the job on one resource."""

    queue: str
    resource: str
    asks: Decimal
    held: Decimal  # what the queue holds now
    real: Decimal  # its real capability
    more: Decimal  # held + asks - real

    @property
    def never(self) -> bool:
        """The job alone exceeds the queue's real capability: no release makes room."""
        return self.asks > self.real


def shortfalls(capacity: Mapping[str, Capacity], queue_name: str, asks: Mapping[str, Decimal]) -> list[Shortfall]:
    """Per queue from the job's up to root, per resource the job asks: what is short (none: it fits)."""
    own = capacity[queue_name]
    found = []
    for name in (queue_name, *reversed(own.ancestors)):
        c = capacity[name]
        for resource, amount in sorted(asks.items()):
            if amount <= 0:
                continue
            held = c.queue.allocated.get(resource, ZERO)
            real = c.real.get(resource, ZERO)
            if held + amount > real:
                found.append(Shortfall(name, resource, amount, held, real, held + amount - real))
    return found


def derivation(c: Capacity, resource: str) -> Text:
    """Why the real capability of one queue on one resource is what it is, in plain words."""
    if not c.ancestors:
        return Text("every node's allocatable")
    parent = c.ancestors[-1]
    base = max(c.parent_real.get(resource, ZERO) - c.siblings_guarantee.get(resource, ZERO), ZERO) \
        + c.queue.guarantee.get(resource, ZERO)
    cap = c.capability.get(resource)
    if cap is not None and cap < base:
        return (Text("its capability") if resource in c.queue.capability
                else Text("the capability it inherits from {parent}", parent=parent))
    return Text("{parent}'s {parent_real} less the {guaranteed} guaranteed to {parent}'s queues, plus its own "
                "guarantee {guarantee}", parent=parent,
                parent_real=format_quantity(c.parent_real.get(resource, ZERO)),
                guaranteed=format_quantity(c.siblings_guarantee.get(resource, ZERO)),
                guarantee=format_quantity(c.queue.guarantee.get(resource, ZERO)))


_QUOTA = re.compile(r"exceeded quota: (?P<quota>[^,]+), requested: (?P<requested>[^,]+), used: (?P<used>[^,]+), "
                    r"limited: (?P<limited>.+)$")


def _pairs(text: str) -> Resources:
    out: Resources = {}
    for part in text.split(","):
        name, _, value = part.strip().partition("=")
        try:
            out[name.removeprefix("requests.")] = parse_quantity(value)
        except QuantityError:
            continue
    return out


@dataclass(frozen=True)
class Refusal:
    """A pod of the job the namespace's ResourceQuota refused (its Job's FailedCreate event)."""

    quota: str
    resource: str
    requested: Decimal
    used: Decimal
    limited: Decimal
    message: str

    @property
    def more(self) -> Decimal:
        return self.used + self.requested - self.limited


def refusal(message: str) -> Refusal | None:
    """The quota refusal in a FailedCreate message (the apiserver's words), or None."""
    m = _QUOTA.search(message)
    if m is None:
        return None
    requested, used, limited = _pairs(m["requested"]), _pairs(m["used"]), _pairs(m["limited"])
    for resource, amount in requested.items():
        if resource in limited and used.get(resource, ZERO) + amount > limited[resource]:
            return Refusal(m["quota"].strip(), resource, amount, used.get(resource, ZERO), limited[resource],
                           message)
    return None


@dataclass(frozen=True)
class Job:
    """A job Volcano schedules: its PodGroup (absent while no pod of it exists) and its pods."""

    namespace: str
    job: str  # the Job's name (the PodGroup's owner), or the PodGroup's
    podgroup: str  # "" when it has none yet
    queue: str
    phase: str  # the PodGroup's phase; "" without one
    min_member: int
    asks: Resources  # minResources: what must fit at once
    pods: int  # pods of it that exist (not finished)
    bound: int  # of them, bound to a node
    condition: str  # the Unschedulable condition's message, "" for none
    priority_class: str = ""
    failed_create: str = ""  # the Job's newest FailedCreate event message

    @property
    def state(self) -> str:
        if self.phase in ("Completed", "Failed"):
            return "finished"
        if self.phase == "Running" or (self.min_member and self.bound >= self.min_member):
            return "admitted"
        return "pending"


def _owner(obj: dict[str, Any]) -> str:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("name", "")
    return ""


def jobs(podgroups: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]],
         batch_jobs: Iterable[dict[str, Any]] = (), events: Mapping[tuple[str, str], str] | None = None) -> list[Job]:
    """The jobs of the PodGroups, with their pods; and the Jobs scheduled by volcano that have no pod
    (and so no PodGroup) yet. `events`: (namespace, Job) -> its newest FailedCreate message."""
    events = events or {}
    by_group: dict[tuple[str, str], list[dict[str, Any]]] = {}
    by_job: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for pod in pods:
        meta = pod["metadata"]
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") or meta.get("deletionTimestamp"):
            continue
        group = (meta.get("annotations") or {}).get("scheduling.k8s.io/group-name", "")
        if group:
            by_group.setdefault((meta["namespace"], group), []).append(pod)
        owner = _owner(pod)
        if owner:
            by_job.setdefault((meta["namespace"], owner), []).append(pod)
    found: list[Job] = []
    named: set[tuple[str, str]] = set()
    for pg in podgroups:
        try:
            meta, spec, status = pg["metadata"], pg.get("spec") or {}, pg.get("status") or {}
            namespace, name = meta["namespace"], meta["name"]
            job_name = _owner(pg) or name
            members = by_group.get((namespace, name), [])
            unschedulable = next((c.get("message", "") for c in status.get("conditions") or []
                                  if c.get("type") == "Unschedulable" and c.get("status") == "True"), "")
            found.append(Job(namespace, job_name, name, spec.get("queue", "") or "default", status.get("phase", ""),
                             int(spec.get("minMember", 1) or 0), counted(spec.get("minResources")), len(members),
                             sum(1 for p in members if (p.get("spec") or {}).get("nodeName")), unschedulable,
                             spec.get("priorityClassName", "") or "", events.get((namespace, job_name), "")))
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise VolcanoError(f"PodGroup {pg.get('metadata', {}).get('name', '?')}: not what Volcano writes "
                               f"({exc})") from exc
        named.add((namespace, job_name))
    for obj in batch_jobs:
        meta = obj["metadata"]
        key = (meta["namespace"], meta["name"])
        template = ((obj.get("spec") or {}).get("template") or {})
        if key in named or (template.get("spec") or {}).get("schedulerName") != "volcano":
            continue
        if (obj.get("status") or {}).get("completionTime") or by_job.get(key):
            continue
        annotations = (template.get("metadata") or {}).get("annotations") or {}
        found.append(Job(key[0], key[1], "", annotations.get("scheduling.volcano.sh/queue-name", "default"), "",
                         int((obj.get("spec") or {}).get("parallelism", 1) or 1), {}, 0, 0, "",
                         failed_create=events.get(key, "")))
    return found


@dataclass(frozen=True)
class Verdict:
    """Why a Volcano job is where it is."""

    why: Why
    text: str
    shortfalls: tuple[Shortfall, ...] = ()
    refusal: Refusal | None = None
    volcano: str = ""  # Volcano's own words (the PodGroup's condition, or the Job's FailedCreate event)

    @property
    def finding(self) -> bool:
        return self.why in (Why.NEVER_FITS, Why.MISCONFIGURED)


def _short_text(s: Shortfall, c: Capacity) -> Text:
    return Text("queue {queue} may hold {real} {resource} ({derivation}) and holds {held}: {more} more needed",
                queue=s.queue, real=format_quantity(s.real), resource=s.resource, derivation=derivation(c, s.resource),
                held=format_quantity(s.held), more=format_quantity(s.more))


def _at_most(s: Shortfall, c: Capacity) -> Text:
    return Text("queue {queue} may hold at most {real} {resource} ({derivation})", queue=s.queue,
                real=format_quantity(s.real), resource=s.resource, derivation=derivation(c, s.resource))


def explain(job: Job, capacity: Mapping[str, Capacity]) -> Verdict:
    """Why the job waits (or that it runs), from the queues' capacity and its own objects."""
    if job.state == "admitted":
        return Verdict(Why.ADMITTED, Text("admitted by Volcano"))
    if job.state == "finished":
        return Verdict(Why.FINISHED, Text("finished"))
    said = job.condition or job.failed_create
    c = capacity.get(job.queue)
    if c is None:
        return Verdict(Why.MISCONFIGURED, Text("Queue {queue} does not exist", queue=job.queue), volcano=said)
    if not c.leaf:
        return Verdict(Why.MISCONFIGURED, Text("Queue {queue} has child queues: Volcano schedules jobs in leaf "
                                               "queues only", queue=job.queue), volcano=said)
    if c.queue.state != OPEN:
        return Verdict(Why.INACTIVE, Text("Queue {queue} is {state}: it admits nothing new", queue=job.queue,
                                          state=c.queue.state or "not Open"), volcano=said)
    refused = refusal(job.failed_create) if job.pods < max(job.min_member, 1) else None
    if refused is not None:
        never = refused.requested > refused.limited or (
            bool(job.asks) and job.asks.get(refused.resource, ZERO) > refused.limited)
        asks = job.asks.get(refused.resource, refused.requested) if never else refused.requested
        fields = dict(pods=job.pods, members=max(job.min_member, 1), quota=refused.quota, resource=refused.resource,
                      asks=format_quantity(asks), used=format_quantity(refused.used),
                      limit=format_quantity(refused.limited), more=format_quantity(refused.more))
        if never:
            return Verdict(Why.NEVER_FITS, Text(
                "never, as declared: {pods} of its {members} pods exist; the namespace's ResourceQuota {quota} "
                "allows {limit} {resource} and the job asks {asks}", **fields), refusal=refused, volcano=said)
        return Verdict(Why.QUOTA, Text(
            "{pods} of its {members} pods exist: the namespace's ResourceQuota {quota} refuses the next one "
            "({resource}: asks {asks}, {used} of {limit} in use: {more} more needed)", **fields),
            refusal=refused, volcano=said)
    short = shortfalls(capacity, job.queue, job.asks)
    never = [s for s in short if s.never]
    if never:
        limits = [_at_most(s, capacity[s.queue]) for s in never]
        return Verdict(Why.NEVER_FITS, Text("never, as declared: it asks {asks} at once; {reasons}",
                                            asks=_asks(job.asks), reasons=Joined("; ", limits)),
                       tuple(short), volcano=said)
    if short:
        return Verdict(Why.QUOTA, Joined("; ", [_short_text(s, capacity[s.queue]) for s in short]), tuple(short),
                       volcano=said)
    if job.pods < job.min_member:
        return Verdict(Why.OTHER, Text("{pods} of its {members} pods exist: the gang waits for the others",
                                       pods=job.pods, members=job.min_member), volcano=said)
    if job.condition:
        return Verdict(Why.OTHER, Text("its queues have room; waiting for room on the nodes"), volcano=said)
    return Verdict(Why.NOT_CONSIDERED, Text("not yet considered by Volcano"), volcano=said)


def _asks(asks: Mapping[str, Decimal]) -> str:
    return " + ".join(f"{format_quantity(a)} {r}" for r, a in sorted(asks.items()) if a > 0)
