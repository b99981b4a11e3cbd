"""Why a Workload waits, in plain words, from its QuotaReserved condition.

Kueue v0.17.0 writes the reason of a pending workload into the message of its QuotaReserved
condition (status False, reason Pending or Inadmissible). The pieces come from
pkg/scheduler/flavorassigner (one list per pod set: "couldn't assign flavors to pod set NAME:
r1, r2", the flavors' reasons sorted), pkg/scheduler/scheduler.go (". Pending the preemption of
N workload(s)", "Workload no longer fits after processing another workload", ClusterQueue and
namespace checks) and pkg/controller/core/workload_controller.go (LocalQueue/ClusterQueue
missing, inactive or stopped). A reason may itself contain ", " and parentheses, so the message
is scanned for each known shape rather than split; anything unrecognised is kept verbatim
(reason `other`), never guessed.

Per flavor (= gpugov pool) a pod set either
- waits for unused quota: "insufficient unused quota for R in flavor F, N more needed";
- can never fit: "insufficient quota for R in flavor F, previously considered podsets requests
  (A) + current podset request (B) > maximum capacity (C)": C is the most the queue could ever
  hold there (its nominal quota, plus what its borrowing limit and the cohort allow);
- does not match: node affinity, an untolerated taint, a topology-aware-scheduling mismatch, a
  resource the queue does not offer;
- waits for a topology domain with room: "topology T doesn't allow to fit any of N pod(s)".
Kueue counts quota, not nodes: a pod that asks more than any node of its pools has (16 GPUs on
8-GPU nodes) reads as a wait for quota there. gpugov knows the pools' node sizes
(view.node_sizes), so such a pod is told as never-fits, a finding, whatever Kueue says.
A wait for unused quota is computed again from the cohort tree (gpugov.reach, Kueue's own
arithmetic over the ClusterQueues, Cohorts and what each holds): its deficit is the request less
what the queue can take now, and it is a borrowing limit when the queue's own borrowingLimit, not
the cohort's unused quota, decides what it can take (its nominal quota plus borrowing limit, less
what it holds); a Cohort's borrowing limit up the tree is named too.

The explanations are gpugov.i18n Texts: English as strings (JSON, tests), and told again in the
reader's language by the text and markdown reports; Kueue's own words are never translated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

from gpugov.i18n import Joined, Text
from gpugov.kube.quantity import QuantityError, format_quantity
from gpugov.queueing.clusterqueue import ClusterQueue
from gpugov.queueing.workload import Workload, quantity
from gpugov.reach import Tree


class Why(StrEnum):
    ADMITTED = "admitted"
    RESERVED = "quota-reserved"  # quota held, admission checks pending
    FINISHED = "finished"
    QUOTA = "waiting-for-quota"
    BORROWING_LIMIT = "borrowing-limit"
    NEVER_FITS = "never-fits"
    NO_FLAVOR = "no-matching-flavor"
    TOPOLOGY = "waiting-for-topology"
    PREEMPTION = "waiting-for-preemption"
    MISCONFIGURED = "misconfigured-queue"
    INACTIVE = "inactive"
    NOT_CONSIDERED = "not-yet-considered"
    OTHER = "other"


# Reasons that no amount of waiting resolves: findings about the job or the declarations.
FINDINGS = frozenset({Why.NEVER_FITS, Why.NO_FLAVOR, Why.MISCONFIGURED})

_FLAVOR = r"(?P<flavor>[^\s,\"]+)"
_RESOURCE = r"(?P<resource>[^\s,]+)"
_UNUSED = re.compile(rf"insufficient unused quota for {_RESOURCE} in flavor {_FLAVOR}, (?P<more>[^\s,]+) more needed")
_MAXIMUM = re.compile(
    rf"insufficient quota for {_RESOURCE} in flavor {_FLAVOR}, previously considered podsets requests "
    r"\((?P<previous>[^)]*)\) \+ current podset request \((?P<request>[^)]*)\) > maximum capacity \((?P<maximum>[^)]*)\)"
)
_AFFINITY = re.compile(rf"flavor {_FLAVOR} doesn't match node affinity")
_TAINT = re.compile(rf"untolerated taint (?P<taint>.+?) in flavor {_FLAVOR}")
_UNAVAILABLE = re.compile(rf"resource {_RESOURCE} unavailable in ClusterQueue")
_NOT_FOUND = re.compile(rf"flavor {_FLAVOR} not found")
_TAS = re.compile(r'Flavor "(?P<flavor>[^"]+)" (?P<what>supports only TopologyAwareScheduling|does not support '
                  r"TopologyAwareScheduling|does not contain the requested level|information missing in TAS cache)")
_TOPOLOGY = re.compile(r'topology "(?P<flavor>[^"]+)" (?:doesn\'t allow to fit any of (?P<total>\d+)|allows to fit only '
                       r"(?P<fit>\d+) out of (?P<total2>\d+)) (?P<unit>[\w-]+)\(s\)")
_PREEMPTING = re.compile(r"Pending the preemption of (?P<count>\d+) workload\(s\)")
_MISCONFIGURED = re.compile(
    r"(?:LocalQueue|ClusterQueue) \S+ (?:doesn't exist|is inactive|not found|is stopped|is terminating or missing)"
    r"|Workload namespace doesn't match ClusterQueue selector|resources validation failed"
    r"|resources didn't satisfy LimitRange constraints"
)


@dataclass(frozen=True)
class Fact:
    """One thing Kueue said about one flavor (pool)."""

    kind: str  # unused, maximum, affinity, taint, tas, topology, unavailable, not-found
    flavor: str = ""
    resource: str = ""
    amount: Decimal | None = None  # unused: more needed; maximum: the request
    maximum: Decimal | None = None
    detail: str = ""


@dataclass(frozen=True)
class Parsed:
    facts: tuple[Fact, ...]
    preempting: int | None  # workloads Kueue is preempting for it
    misconfigured: str  # the misconfiguration Kueue named, "" for none


@dataclass(frozen=True)
class Deficit:
    pool: str
    resource: str
    more: Decimal  # how much more it needs than is free (or than its limit allows)
    held: Decimal | None = None  # borrowing limit: what the tenant holds there
    limit: Decimal | None = None  # borrowing limit: nominal + borrowingLimit


@dataclass(frozen=True)
class Reason:
    why: Why
    text: str
    deficits: tuple[Deficit, ...] = ()
    kueue: str = ""  # the message as Kueue wrote it

    @property
    def finding(self) -> bool:
        return self.why in FINDINGS


def _amount(text: str) -> Decimal | None:
    try:
        return quantity(text.strip())
    except QuantityError:
        return None


def parse_message(message: str) -> Parsed:
    """Every fact the message states, in the order it states them."""
    found: list[tuple[int, Fact]] = []
    for m in _UNUSED.finditer(message):
        found.append((m.start(), Fact("unused", m["flavor"], m["resource"], _amount(m["more"]))))
    for m in _MAXIMUM.finditer(message):
        previous, request = _amount(m["previous"]) or Decimal(0), _amount(m["request"])
        total = None if request is None else previous + request
        found.append((m.start(), Fact("maximum", m["flavor"], m["resource"], total, _amount(m["maximum"]))))
    for m in _AFFINITY.finditer(message):
        found.append((m.start(), Fact("affinity", m["flavor"], detail=Text("its node affinity excludes the pool"))))
    for m in _TAINT.finditer(message):
        found.append((m.start(), Fact("taint", m["flavor"], detail=Text("it does not tolerate the taint {taint}", taint=m["taint"]))))
    for m in _UNAVAILABLE.finditer(message):
        found.append((m.start(), Fact("unavailable", resource=m["resource"])))
    for m in _NOT_FOUND.finditer(message):
        found.append((m.start(), Fact("not-found", m["flavor"], detail=Text("the ResourceFlavor does not exist"))))
    for m in _TAS.finditer(message):
        found.append((m.start(), Fact("tas", m["flavor"], detail=Text("the pool {what}", what=m["what"].replace("Flavor", "")))))
    for m in _TOPOLOGY.finditer(message):
        total = int(m["total"] or m["total2"])
        fit = int(m["fit"] or 0)
        found.append((m.start(), Fact("topology", m["flavor"], amount=Decimal(fit), maximum=Decimal(total),
                                      detail=m["unit"])))
    preempting = _PREEMPTING.search(message)
    misconfigured = _MISCONFIGURED.search(message)
    return Parsed(tuple(f for _, f in sorted(found, key=lambda pair: pair[0])),
                  int(preempting["count"]) if preempting else None,
                  misconfigured.group(0) if misconfigured else "")


def _q(amount: Decimal | None) -> str:
    return "?" if amount is None else format_quantity(amount)


def _or(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else Joined("; or ", parts)


NodeSizes = Mapping[str, Mapping[str, Decimal]]  # pool -> resource -> the most one of its nodes offers


def too_big_for_nodes(workload: Workload, queue: ClusterQueue | None, node_sizes: NodeSizes) -> Reason | None:
    """A pod that asks more of a resource than any node of every pool its queue offers it in: Kueue
    counts quota, not nodes, so it reads as a wait for quota, yet it can never start."""
    for pod_set in workload.pod_sets:
        for resource in sorted(pod_set.requests):
            asked = pod_set.per_pod(resource)
            pools = queue.offers(resource) if queue is not None else sorted(p for p, r in node_sizes.items()
                                                                             if resource in r)
            pools = [p for p in pools if p in node_sizes]
            if not asked or not pools:
                continue
            largest = {p: node_sizes[p].get(resource, Decimal(0)) for p in pools}
            if all(asked > size for size in largest.values()):
                best = max(largest.values())
                where = Joined("; ", [Text("pool {pool}: {size} per node", pool=p, size=_q(size))
                                      for p, size in largest.items()])
                split = Text("; split it into pods of at most {most} {resource}", most=_q(best),
                             resource=resource) if best else ""
                biggest = max(largest, key=lambda p: (largest[p], p))
                return Reason(Why.NEVER_FITS, Text("can never start: a pod of pod set {pod_set} asks {asked} "
                                                   "{resource}, more than any node offers ({where}){split}",
                                                   pod_set=pod_set.name, asked=_q(asked), resource=resource,
                                                   where=where, split=split),
                              (Deficit(biggest, resource, asked - best),))
    return None


def alike(workload: Workload) -> tuple[object, ...]:
    """All that `explain` reads of a workload (besides its queue and the node sizes): workloads alike
    in it are explained alike, so a view explains each kind once (100,000 Workloads are a few
    hundred kinds: same size, pools and Kueue message). Equal Decimals are alike (format_quantity
    writes them alike)."""
    reserved = workload.conditions.get("QuotaReserved")
    evicted = workload.conditions.get("Evicted")
    return (workload.state, workload.cluster_queue,
            None if reserved is None else (reserved.reason, reserved.message),
            None if evicted is None else evicted.message,
            tuple((ps.name, ps.count, tuple(ps.requests.items()), tuple(ps.flavors.items()))
                  for ps in workload.pod_sets),
            workload.cluster_name, workload.checks)  # a fleet's manager: the worker, the admission checks


def explain(workload: Workload, queue: ClusterQueue | None, queue_problem: str = "",
            node_sizes: NodeSizes | None = None, tree: Tree | None = None) -> Reason:
    """Why `workload` (in ClusterQueue `queue`) is where it is. `queue_problem`: what is wrong
    with its LocalQueue or ClusterQueue as read from the cluster ("" when both exist);
    `node_sizes`: the declared pools' largest nodes, to tell a pending pod no node can hold
    (where Kueue's own reason is no finding already); `tree`: what each ClusterQueue can reach now
    (gpugov.reach), from which a wait's deficit and what limits it are computed as Kueue computes them."""
    reason = _explain(workload, queue, queue_problem, tree)
    if node_sizes and workload.state == "pending" and not reason.finding:
        oversized = too_big_for_nodes(workload, queue, node_sizes)
        if oversized is not None:
            return Reason(oversized.why, oversized.text, oversized.deficits, reason.kueue)
    if node_sizes and workload.state in ("admitted", "reserved"):
        stuck = admitted_too_big(workload, node_sizes)
        if stuck is not None:
            return stuck
    return reason


def admitted_too_big(workload: Workload, node_sizes: NodeSizes) -> Reason | None:
    """Admitted (quota is what Kueue checks), yet a pod asks more than any node of the pool it was
    admitted to: its pods can never be scheduled, and it holds that quota meanwhile."""
    for pod_set in workload.pod_sets:
        for resource, flavor in sorted(pod_set.flavors.items()):
            size = (node_sizes.get(flavor) or {}).get(resource)
            asked = pod_set.per_pod(resource)
            if size is not None and asked > size:
                return Reason(Why.NEVER_FITS, Text(
                    "admitted to pool {pool}, but can never start: a pod of pod set {pod_set} asks {asked} "
                    "{resource}, more than any node of pool {pool} offers ({size} per node); it holds that quota "
                    "meanwhile: split it into pods of at most {size} {resource}",
                    pool=flavor, pod_set=pod_set.name, asked=_q(asked), resource=resource, size=_q(size)),
                    (Deficit(flavor, resource, asked - size),))
    return None


def _explain(workload: Workload, queue: ClusterQueue | None, queue_problem: str = "", tree: Tree | None = None) -> Reason:
    state = workload.state
    if state == "finished":
        return Reason(Why.FINISHED, Text("finished"))
    if state == "admitted" and workload.cluster_name:
        return Reason(Why.ADMITTED, Text("admitted on the fleet quota ({pools}) and running on worker {cluster}",
                                         pools=", ".join(workload.flavors) or "?", cluster=workload.cluster_name))
    if state == "admitted":
        return Reason(Why.ADMITTED, Text("admitted to pool {pools}", pools=", ".join(workload.flavors) or "?"))
    if state == "reserved":
        waiting = [f"{name}: {message}" for name, check_state, message in workload.checks
                   if check_state != "Ready" and message]
        if waiting:
            return Reason(Why.RESERVED, Text("quota reserved; no worker has admitted it yet ({checks})",
                                             checks="; ".join(waiting)))
        return Reason(Why.RESERVED, Text("quota reserved; waiting for its admission checks"))
    reserved = workload.condition("QuotaReserved")
    message = reserved.message if reserved else ""
    if state == "inactive":
        evicted = workload.condition("Evicted")
        why = f": {evicted.message}" if evicted and evicted.message else ""
        return Reason(Why.INACTIVE, Text("deactivated (spec.active is false){why}", why=why), kueue=message)
    if queue_problem:
        return Reason(Why.MISCONFIGURED, Text("misconfigured queue: {problem}", problem=queue_problem), kueue=message)
    if reserved is None or not message:
        strict = queue is not None and queue.strategy == "StrictFIFO"
        behind = Text(" (StrictFIFO: Kueue considers only the head of the queue)") if strict else ""
        return Reason(Why.NOT_CONSIDERED, Text("not yet considered by Kueue{behind}", behind=behind))
    parsed = parse_message(message)
    if parsed.misconfigured or reserved.reason == "Inadmissible":
        return Reason(Why.MISCONFIGURED, Text("misconfigured queue: {problem}", problem=parsed.misconfigured or message),
                      kueue=message)
    if parsed.preempting is not None:
        return Reason(Why.PREEMPTION, Text("waiting for the preemption of {count} workload(s) to make room",
                                           count=parsed.preempting), kueue=message)
    if "preemption targets" in message or "requires preemption, but it's gated" in message:
        return Reason(Why.PREEMPTION, Text("waiting to preempt: {kueue}", kueue=message), kueue=message)
    return _from_facts(workload, queue, parsed, message, tree)


def _deficit(workload: Workload, queue: ClusterQueue | None, tree: Tree | None, fact: Fact) -> tuple[Deficit, str]:
    """The deficit of an "insufficient unused quota" fact, computed as Kueue computes it (gpugov.reach:
    the request less what the ClusterQueue can take now), and what limits it: "own" (its borrowing
    limit), "Cohort NAME" (a cohort's borrowing limit up the tree) or "" (the cohort tree's unused
    quota). Without the tree, or where it says the job fits now (Kueue has not looked again yet),
    Kueue's own number."""
    said = Deficit(fact.flavor, fact.resource, fact.amount or Decimal(0))
    room = tree.room(queue.name, fact.flavor, fact.resource) if tree is not None and queue is not None else None
    if room is None:
        return said, ""
    more = room.deficit(workload.requests.get(fact.resource, Decimal(0)))
    if more <= 0:
        return said, ""
    if room.limited_by_own and room.borrowing_limit is not None:
        return Deficit(fact.flavor, fact.resource, more, room.held, room.nominal + room.borrowing_limit), "own"
    return Deficit(fact.flavor, fact.resource, more), room.limited_by


def _from_facts(workload: Workload, queue: ClusterQueue | None, parsed: Parsed, message: str,
                tree: Tree | None = None) -> Reason:
    tenant = queue.tenant if queue else workload.cluster_queue or Text("the tenant")
    waiting = [f for f in parsed.facts if f.kind == "unused" and f.amount is not None]
    if waiting:
        limits = [_deficit(workload, queue, tree, f) for f in waiting]
        if all(by == "own" for _, by in limits):
            deficits = tuple(d for d, _ in limits)
            parts = [Text("{tenant} holds {held} {resource} in pool {pool}, its nominal quota plus borrowing limit "
                          "is {limit}: {more} more than that limit", tenant=tenant, held=_q(d.held),
                          resource=d.resource, pool=d.pool, limit=_q(d.limit), more=_q(d.more)) for d in deficits]
            return Reason(Why.BORROWING_LIMIT, Text("borrowing limit reached: {parts}; it starts when the tenant's "
                                                    "own jobs release that much", parts=_or(parts)), deficits, message)
        deficits = tuple(d for d, _ in limits)  # every pool Kueue tried, whatever limits each
        own = f"ClusterQueue {queue.name}" if queue is not None else ""
        parts = [Text("{more} more {resource} needed in pool {pool}", more=_q(d.more), resource=d.resource,
                      pool=d.pool) if not by else
                 Text("{more} more {resource} needed in pool {pool} ({cohort}'s borrowing limit)", more=_q(d.more),
                      resource=d.resource, pool=d.pool, cohort=own if by == "own" else by) for d, by in limits]
        return Reason(Why.QUOTA, Text("waiting for quota: {parts}", parts=_or(parts)), deficits, message)
    if "no longer fits after processing another workload" in message:
        return Reason(Why.QUOTA, Text("waiting for quota: another workload took it in the same scheduling cycle"),
                      kueue=message)
    topology = [f for f in parsed.facts if f.kind == "topology"]
    if topology:
        parts = [Text("pool {pool} fits {fit} of its {total} {unit}s within the required topology domain",
                      pool=f.flavor, fit=_q(f.amount), total=_q(f.maximum), unit=f.detail) for f in topology]
        return Reason(Why.TOPOLOGY, Text("waiting for room in one topology domain: {parts}", parts=_or(parts)),
                      kueue=message)
    maximum = [f for f in parsed.facts if f.kind == "maximum"]
    if maximum:
        possible = [f for f in maximum if f.maximum] or maximum
        deficits = tuple(Deficit(f.flavor, f.resource, (f.amount or Decimal(0)) - (f.maximum or Decimal(0)))
                         for f in possible)
        parts = [Text("it asks {asked} {resource}, at most {most} in pool {pool}", asked=_q(f.amount),
                      resource=f.resource, most=_q(f.maximum), pool=f.flavor) for f in possible]
        return Reason(Why.NEVER_FITS, Text("exceeds {tenant}'s maximum, can never fit as declared: {parts}",
                                           tenant=tenant, parts=_or(parts)), deficits, message)
    mismatch = [f for f in parsed.facts if f.kind in ("affinity", "taint", "tas", "unavailable", "not-found")]
    if mismatch:
        parts = [Text("{tenant}'s queue offers no {resource}", tenant=tenant, resource=f.resource)
                 if f.kind == "unavailable" else Text("pool {pool}: {detail}", pool=f.flavor, detail=f.detail)
                 for f in mismatch]
        return Reason(Why.NO_FLAVOR, Text("no matching pool: {parts}", parts=Joined("; ", parts)), kueue=message)
    if "PodsReady" in message:
        return Reason(Why.OTHER, Text("waiting for earlier admitted workloads' pods to be ready (waitForPodsReady)"),
                      kueue=message)
    return Reason(Why.OTHER, Text("Kueue says: {kueue}", kueue=message), kueue=message)
