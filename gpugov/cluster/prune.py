"""prune: remove from a cluster what gpugov put there and no longer declares.

What gpugov owns is what carries its label (`app.kubernetes.io/managed-by: gpugov`) *and* a
managedFields entry of its field manager: an object someone else labelled by hand is never
touched. Of those, what compile no longer emits for this cluster is pruned, in reverse apply
order (admission policies and queues before the flavors and cohorts they name; Volcano's
child Queues before their parents, which its webhook requires):

- objects are deleted. A ClusterQueue first gets `stopPolicy: HoldAndDrain`, so Kueue evicts
  its admitted workloads, and is deleted once Kueue reports it empty in a status written after
  it saw the stop (at most DRAIN_TIMEOUT later): Kueue then lifts its
  `kueue.x-k8s.io/resource-in-use` finalizer when it next reconciles it. One still held by the
  finalizer RELEASE_GRACE seconds after its delete (or deleted at the deadline, still reserving)
  is reported as deleting, not deleted;
- Namespaces and Nodes are released, never deleted (a namespace holds the tenant's workloads
  and data, a node is hardware): gpugov's own labels and annotations are removed by a
  server-side apply of an empty body under its field manager, which drops exactly the
  fields gpugov owned (a label another manager set too stays); a Node also loses the taints
  gpugov recorded in its ``gpugov.io/taints`` annotation, every other taint is kept.

A kind whose API group the server does not serve has no objects, so it is skipped. compile
gives objects no cluster label, so prune takes the API server to hold one gpugov cluster (as
a Cluster declaration means); put several in one server and apply with --no-prune. Which
cluster a server is, apply checks first (identity.py); a plan past the Cluster's
spec.pruneLimit is a mass prune (mass_prune), which apply refuses without --allow-mass-prune.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from kubernetes import client

from gpugov.cluster.apply import NODE, merge_taints, queue_depth, recorded_taints
from gpugov.cluster.ownership import release_marker
from gpugov.cluster.rest import (
    FIELD_MANAGER,
    MERGE_PATCH,
    Api,
    Rejected,
    delete,
    list_all,
    read_object,
    served_versions,
    server_side_apply,
    write,
)
from gpugov.kube.kinds import DEPENDENCY_ORDER, KINDS, Kind
from gpugov.kube.names import KUEUE_API
from gpugov.kube.objects import MANAGED_BY, MANAGER, Object, object_key

RELEASED_KINDS = ("Namespace", "Node")  # their own labels are removed; the object stays
DRAINED = "HoldAndDrain"
DRAIN_TIMEOUT = 60.0  # seconds apply waits for Kueue to evict a removed tenant's admitted workloads
DRAIN_POLL = 1.0
KUEUE_FINALIZER = "kueue.x-k8s.io/resource-in-use"
RELEASE_GRACE = 10.0  # seconds a drained, empty ClusterQueue is given for Kueue to lift its finalizer
CLUSTER_QUEUE = (KUEUE_API, "ClusterQueue")


class PruneError(Exception):
    """The cluster refused to delete or release an object; names it."""


@dataclass(frozen=True)
class Prunable:
    """One live object gpugov owns and no longer declares."""

    action: str  # "delete" or "release"
    obj: Object  # the live object as read
    owned: tuple[str, ...] = ()  # release: gpugov's labels and annotations on it
    taints: tuple[str, ...] = ()  # release of a Node: the taints gpugov recorded

    @property
    def kind(self) -> Kind:
        return KINDS[(self.obj["apiVersion"], self.obj["kind"])]

    @property
    def label(self) -> str:
        meta = self.obj["metadata"]
        return f"{self.obj['kind']} {meta['namespace'] + '/' if meta.get('namespace') else ''}{meta['name']}"

    @property
    def drains(self) -> bool:
        return (self.obj["apiVersion"], self.obj["kind"]) == CLUSTER_QUEUE

    def describe(self, done: bool = False) -> str:
        """What pruning does (or, `done`, did) to it: the same words with --dry-run and without."""
        if self.action == "delete":
            if not self.drains:
                return ""
            return f"stopPolicy {DRAINED} set first" if done else f"stopPolicy {DRAINED} first, so Kueue evicts its admitted workloads"
        parts = [f"labels and annotations {', '.join(self.owned)}" if self.owned else "no labels of gpugov's left"]
        if self.taints:
            parts.append(f"taints {', '.join(self.taints)}")
        return ("removed " if done else "removes ") + "; ".join(parts)


@dataclass(frozen=True)
class Pruned:
    item: Prunable
    outcome: str  # "deleted", "deleting" (a finalizer holds it), "released"
    note: str = ""


def owned_by_gpugov(obj: Object) -> bool:
    labels = obj["metadata"].get("labels") or {}
    managers = {entry.get("manager") for entry in obj["metadata"].get("managedFields") or []}
    return labels.get(MANAGED_BY) == MANAGER and FIELD_MANAGER in managers


def owned_metadata(obj: Object) -> tuple[str, ...]:
    """Label and annotation keys in gpugov's server-side apply entry of managedFields."""
    keys: set[str] = set()
    for entry in obj["metadata"].get("managedFields") or []:
        if entry.get("manager") != FIELD_MANAGER or entry.get("operation") != "Apply":
            continue
        meta = (entry.get("fieldsV1") or {}).get("f:metadata") or {}
        for section in ("f:labels", "f:annotations"):
            keys.update(k.removeprefix("f:") for k in meta.get(section) or {} if k.startswith("f:"))
    return tuple(sorted(keys))


def _prune_kinds(served: set[str]) -> list[Kind]:
    """The kinds gpugov writes, in reverse apply order, that this server serves."""
    rank = {name: i for i, name in enumerate(DEPENDENCY_ORDER)}
    kinds = [k for k in KINDS.values() if k.kind in rank and k.api_version in served]
    return sorted(kinds, key=lambda k: (-rank[k.kind], k.api_version))


def _children_first(items: list[Object]) -> list[Object]:
    """Volcano Queues ordered so a child goes before its parent (the webhook refuses a parent with children)."""
    parent_of = {q["metadata"]["name"]: (q.get("spec") or {}).get("parent") for q in items}
    parents = {name: parent for name, parent in parent_of.items() if parent}
    return sorted(items, key=lambda q: (-queue_depth(q["metadata"]["name"], parents), q["metadata"]["name"]))


def owned_objects(api_client: client.ApiClient, served: set[str] | None = None) -> list[Object]:
    """Every live object gpugov owns, kind by kind in reverse apply order; reads only."""
    api = Api(api_client)
    owned: list[Object] = []
    for kind in _prune_kinds(served_versions(api) if served is None else served):
        owned.extend(o for o in list_all(api, kind, label_selector=f"{MANAGED_BY}={MANAGER}") if owned_by_gpugov(o))
    return owned


def prune_plan(api_client: client.ApiClient, desired: list[Object], owned: list[Object] | None = None) -> list[Prunable]:
    """What prune would do, in order; reads only (`owned`: owned_objects, when already read).
    CheckIncomplete when a read is not whole."""
    wanted = {object_key(o) for o in desired}
    plan: list[Prunable] = []
    by_kind: dict[Kind, list[Object]] = {}
    for obj in owned_objects(api_client) if owned is None else owned:
        by_kind.setdefault(KINDS[(obj["apiVersion"], obj["kind"])], []).append(obj)
    for kind, objects in by_kind.items():  # owned_objects' order: reverse apply order
        found = [o for o in objects if object_key(o) not in wanted]
        found.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        if kind.kind == "Queue":
            found = _children_first(found)
        for obj in found:
            if kind.kind in RELEASED_KINDS:
                taints = tuple(recorded_taints(obj)) if kind.kind == "Node" else ()
                plan.append(Prunable("release", obj, owned_metadata(obj), taints))
            else:
                plan.append(Prunable("delete", obj))
    return plan


def mass_prune(plan: list[Prunable], owned: int, max_objects: int, max_fraction: Decimal) -> str:
    """Why `plan` is a mass prune (more than `max_objects` objects, or more than `max_fraction` of the
    `owned` objects gpugov has on the cluster); "" when it is within both limits."""
    if not plan or (len(plan) <= max_objects and len(plan) <= max_fraction * owned):
        return ""
    deletes = sum(item.action == "delete" for item in plan)
    share = f"{Decimal(len(plan) * 100) / owned:.0f}%" if owned else "all"
    return (f"prune would delete {deletes} and release {len(plan) - deletes} objects, {len(plan)} of the {owned} "
            f"gpugov owns on this cluster ({share}); the limit is {max_objects} objects or "
            f"{max_fraction * 100:.0f}% (the Cluster's spec.pruneLimit)")


def prune(api_client: client.ApiClient, plan: list[Prunable], drain_timeout: float = DRAIN_TIMEOUT,
          clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> list[Pruned]:
    """Carry out `plan`: drain the ClusterQueues, delete and release in order, then read back.
    PruneError names the object the server refused."""
    api = Api(api_client)
    item: Prunable | None = None
    try:
        draining: list[Prunable] = []
        stopped: dict[str, int] = {}  # queue -> the generation whose stopPolicy is HoldAndDrain
        for item in plan:  # every drain first: deleting a LocalQueue must not strand admitted work
            if item.drains:
                draining.append(item)
                live = item.obj
                if (item.obj.get("spec") or {}).get("stopPolicy") != DRAINED:
                    live = write(api, "PATCH", item.kind, item.obj["metadata"]["name"], "",
                                 {"spec": {"stopPolicy": DRAINED}}, MERGE_PATCH, [("fieldManager", FIELD_MANAGER)])
                stopped[item.obj["metadata"]["name"]] = int(live["metadata"].get("generation") or 0)
        full = _wait_drained(api, draining, stopped, clock() + drain_timeout, clock, sleep)
        for item in plan:
            meta = item.obj["metadata"]
            if item.action == "delete":
                delete(api, item.kind, meta["name"], meta.get("namespace", ""))
                continue
            if item.kind is NODE:  # taints first: their record is one of the annotations removed next
                merge_taints(api, {"metadata": {"name": meta["name"]}})
            empty = {"apiVersion": item.obj["apiVersion"], "kind": item.obj["kind"],
                     "metadata": {"name": meta["name"], **release_marker(item.obj)}}  # a Namespace: whose it was
            server_side_apply(api, item.kind, empty)
    except Rejected as exc:
        assert item is not None
        raise PruneError(f"{item.label}: {exc}") from exc
    _wait_released(api, [q for q in draining if q not in full], clock() + RELEASE_GRACE, clock, sleep)
    return [_outcome(api, item) for item in plan]


def _reserving(queue: Object | None, stopped: int = 0) -> int:
    """What the queue's status says it reserves; 1 while the status predates Kueue's view of the stop
    (generation `stopped`, which its Active condition observes): Kueue writes the counts a second
    after a workload changes, so an older status can say 0 for a workload admitted moments ago. A
    status without conditions Kueue never wrote: nothing to wait for."""
    status = (queue or {}).get("status") or {}
    conditions = status.get("conditions") or []
    if conditions and not any(c.get("type") == "Active" and int(c.get("observedGeneration") or 0) >= stopped
                              for c in conditions):
        return 1
    return int(status.get("reservingWorkloads") or 0) + int(status.get("admittedWorkloads") or 0)


def _wait_drained(api: Api, queues: list[Prunable], stopped: dict[str, int], deadline: float,
                  clock: Callable[[], float], sleep: Callable[[float], None]) -> list[Prunable]:
    """Until Kueue reports the drained ClusterQueues empty, in a status written after it saw their
    stop, or the deadline; the ones still reserving then. Kueue lifts its finalizer only when it
    reconciles a deleted ClusterQueue that is already empty, so deleting one that is still draining
    can leave it held after its workloads are gone; deleting once it is empty does not. Past the
    deadline they are deleted anyway (and reported as deleting)."""
    waiting = list(queues)
    while waiting:
        waiting = [q for q in waiting if _reserving(read_object(api, q.kind, q.obj["metadata"]["name"]),
                                                     stopped.get(q.obj["metadata"]["name"], 0)) > 0]
        if not waiting or clock() >= deadline:
            return waiting
        sleep(DRAIN_POLL)
    return waiting


def _wait_released(api: Api, queues: list[Prunable], deadline: float, clock: Callable[[], float],
                   sleep: Callable[[float], None]) -> None:
    """Until the deleted, empty ClusterQueues are gone or held by another controller's finalizer
    only, or the deadline. Kueue lifts its finalizer from such a queue when it next reconciles
    it, which a busy controller does seconds after the delete: reading at once would call a
    queue that is on its way out held."""
    waiting = list(queues)
    while waiting:
        waiting = [q for q in waiting if _held_by_kueue(read_object(api, q.kind, q.obj["metadata"]["name"]))]
        if not waiting or clock() >= deadline:
            return
        sleep(DRAIN_POLL)


def _held_by_kueue(queue: Object | None) -> bool:
    return queue is not None and KUEUE_FINALIZER in (queue["metadata"].get("finalizers") or [])


def _outcome(api: Api, item: Prunable) -> Pruned:
    meta = item.obj["metadata"]
    if item.action == "release":
        return Pruned(item, "released")
    live = read_object(api, item.kind, meta["name"], meta.get("namespace", ""))
    if live is None:
        return Pruned(item, "deleted")
    finalizers = ", ".join(live["metadata"].get("finalizers") or []) or "none"
    return Pruned(item, "deleting", f"held by finalizers {finalizers} until its controller lets go")
