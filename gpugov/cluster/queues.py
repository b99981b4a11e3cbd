"""Reading Kueue's queues for `gpugov queue`, `why` and `usage`: read-only, paginated; what the
caller may read, every refusal kept (Denied), and any other failure CheckIncomplete.

- ClusterQueues: a cluster-wide list (limit/continue); without the right to list them nothing
  can be explained, so that alone is CheckIncomplete, naming the permission and who grants it.
- LocalQueues and Workloads (kueue.x-k8s.io/v1beta2): cluster-wide when the caller may list them
  there, else per namespace (of a LocalQueue, or declared for a tenant) where a
  SelfSubjectAccessReview says it may; names of Workloads in the other namespaces are never shown
  (gpugov.queueing.view).
- Positions: the visibility API, `clusterqueues/NAME/pendingworkloads` of
  visibility.kueue.x-k8s.io/v1beta2, page by page with its own offset/limit options; where that is
  forbidden (a tenant's roles grant no ClusterQueue's: it names other tenants' workloads), the
  `namespaces/NS/localqueues/NAME/pendingworkloads` of each LocalQueue of that ClusterQueue the
  caller may read.
Every read that is forbidden is kept as a Denied (verb, resource, where), so the report says what
it could not read instead of leaving it out. Every answer goes through gpugov.cluster.rest, which
checks it is what a Kubernetes API sends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from gpugov.app.pipeline import gc_paused
from gpugov.cluster.rest import PAGE_SIZE, Api, list_all
from gpugov.kube.kinds import KINDS, WORKLOAD, Kind
from gpugov.kube.names import KUEUE_API, KUEUE_GROUP, VISIBILITY_API, VISIBILITY_GROUP
from gpugov.queueing.access import Denied
from gpugov.sources import CheckIncomplete

CLUSTER_QUEUE = KINDS[(KUEUE_API, "ClusterQueue")]
LOCAL_QUEUE = KINDS[(KUEUE_API, "LocalQueue")]
COHORT = KINDS[(KUEUE_API, "Cohort")]
SSAR_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"

Progress = Callable[[str], None]
# Visibility requests in flight at once beside the Workload list: enough to hide the round trips
# through the aggregation layer, few enough not to crowd Kueue's visibility server.
PENDING_READERS = 4


@dataclass(frozen=True)
class InNamespace(Kind):
    """A namespaced kind listed in one namespace only (for callers without cluster-wide list)."""

    namespace: str = ""

    def collection_path(self) -> str:
        return f"/apis/{self.api_version}/namespaces/{self.namespace}/{self.plural}"


def may(api: Api, verb: str, resource: str, group: str = KUEUE_GROUP, namespace: str = "",
        subresource: str = "") -> bool:
    """Whether the caller may `verb` the resource (a SelfSubjectAccessReview, nothing is read)."""
    attributes = {"verb": verb, "group": group, "resource": resource}
    if namespace:
        attributes["namespace"] = namespace
    if subresource:
        attributes["subresource"] = subresource
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes}}
    answer = api.call("POST", SSAR_PATH, body=body, content_type="application/json")
    review = answer.body
    if not answer.ok:
        if answer.is_status:
            raise answer.incomplete(f"cannot ask what it may read: {answer.message or answer.status_reason}")
        raise answer.not_an_api("SelfSubjectAccessReview")
    if review is None or review.get("kind") != "SelfSubjectAccessReview" or not isinstance(review.get("status"), dict):
        raise answer.not_an_api("SelfSubjectAccessReview")
    return review["status"].get("allowed") is True


def lean(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without its managedFields, which the queue views never read and which are often
    most of a Workload: what is kept of 100,000 Workloads grows with what they say, not who wrote it."""
    obj["metadata"].pop("managedFields", None)
    return obj


class Forbidden(CheckIncomplete):
    """The API server answered 403 to a read (the caller's roles do not grant it)."""


def pending_workloads(api: Api, cluster_queue: str, page_size: int = PAGE_SIZE,
                      local_queue: tuple[str, str] | None = None) -> list[dict[str, Any]]:
    """The visibility API's pending workloads of one ClusterQueue (or of one of its LocalQueues,
    (namespace, name)), every page (offset/limit). Forbidden when the caller may not read them."""
    if local_queue is None:
        path, name = f"/apis/{VISIBILITY_API}/clusterqueues/{cluster_queue}/pendingworkloads", cluster_queue
        resource = "clusterqueues/pendingworkloads"
    else:
        path = f"/apis/{VISIBILITY_API}/namespaces/{local_queue[0]}/localqueues/{local_queue[1]}/pendingworkloads"
        name, resource = local_queue[1], "localqueues/pendingworkloads"
    page_size = max(1, page_size)  # a short page ends the read: an empty one must not be the first
    items: list[dict[str, Any]] = []
    while True:
        answer = api.call("GET", path, [("limit", str(page_size)), ("offset", str(len(items)))])
        body = answer.body
        if answer.status == 404 and answer.status_reason == "NotFound" and (body or {}).get("details", {}).get(
                "name") == name:
            return []  # Kueue's queue manager does not hold it (an inactive ClusterQueue): nothing pending
        if not answer.ok:
            if answer.status == 404 and not answer.is_status:
                raise answer.incomplete(f"the server does not serve {VISIBILITY_API} (is Kueue's visibility API on?)")
            if answer.is_status:
                why = answer.message or answer.status_reason
                if answer.status in (401, 403):
                    why += f" (the credentials may not read {resource})"
                if answer.status == 403:
                    raise Forbidden(str(answer.incomplete(why)))
                raise answer.incomplete(why)
            raise answer.not_an_api("PendingWorkloadsSummary")
        if (body is None or body.get("kind") != "PendingWorkloadsSummary" or body.get("apiVersion") != VISIBILITY_API
                or not isinstance(body.get("items") or [], list)):
            raise answer.not_an_api(f"PendingWorkloadsSummary of {VISIBILITY_API}")
        page = body.get("items") or []
        items.extend(page)
        if len(page) < page_size:
            return items


@dataclass
class QueueRead:
    cluster_queues: list[dict[str, Any]]
    local_queues: list[dict[str, Any]]
    workloads: list[Any]  # raw objects, or what read_queues' workload_record made of them
    pending: dict[str, list[dict[str, Any]]]  # ClusterQueue -> visibility items
    readable: frozenset[str]  # namespaces whose Workloads were read
    denied: tuple[Denied, ...] = field(default=())  # reads the API server refused, in the order asked
    # The Cohorts (their quotas and limits shape what each ClusterQueue can reach); None where the
    # caller may not list them: the reports then take compile's.
    cohorts: list[dict[str, Any]] | None = None


# Without them no job's wait can be explained: the one read whose refusal stops the command.
QUEUE_READER_HINT = ("gpugov's tenant roles grant it to every owner, member and viewer of a declared tenant "
                     "(ClusterRole gpugov-tenant-queue-reader): ask the platform team to apply them")


def _namespaced(api: Api, kind: Kind, namespaces: Iterable[str], page_size: int, progress: Progress,
                denied: list[Denied], keep: Callable[[dict[str, Any]], Any] = lean,
                read_ahead: bool = False) -> tuple[list[Any], frozenset[str] | None]:
    """What `keep` makes of every object of `kind` the caller may list (each as its page is read,
    the next one read meanwhile with `read_ahead`): cluster-wide (None as namespaces) when it may,
    else in each of `namespaces` where a SelfSubjectAccessReview says it may; the others are Denied."""
    if may(api, "list", kind.plural, group=kind.group):
        progress(f"list {kind.plural}")
        return [keep(o) for o in list_all(api, kind, page_size=page_size, read_ahead=read_ahead)], None
    found: list[Any] = []
    readable = []
    for namespace in sorted(set(namespaces)):
        if may(api, "list", kind.plural, group=kind.group, namespace=namespace):
            progress(f"list {kind.plural} in {namespace}")
            scoped = InNamespace(kind.api_version, kind.kind, kind.plural, True, namespace)
            found.extend(keep(o) for o in list_all(api, scoped, page_size=page_size, read_ahead=read_ahead))
            readable.append(namespace)
        else:
            denied.append(Denied("list", f"{kind.plural}.{kind.group}", namespace))
    return found, frozenset(readable)


def _pending(api: Api, queue: str, local_queues: list[dict[str, Any]], page_size: int,
             denied: list[Denied]) -> list[dict[str, Any]]:
    """The pending workloads of one ClusterQueue: all of them where the caller may read the
    ClusterQueue's, else those of each of its LocalQueues it may read."""
    try:
        return pending_workloads(api, queue, page_size)
    except Forbidden:
        pass
    mine = sorted((q["metadata"].get("namespace", ""), q["metadata"]["name"]) for q in local_queues
                  if (q.get("spec") or {}).get("clusterQueue") == queue)
    items: list[dict[str, Any]] = []
    refused = 0
    for local in mine:
        try:
            items.extend(pending_workloads(api, queue, page_size, local_queue=local))
        except Forbidden:
            refused += 1
            denied.append(Denied("get", f"localqueues/pendingworkloads.{VISIBILITY_GROUP}", local[0], local[1]))
    if refused or not mine:
        denied.append(Denied("get", f"clusterqueues/pendingworkloads.{VISIBILITY_GROUP}", name=queue))
    return items


def read_queues(api_client: client.ApiClient, *, page_size: int = PAGE_SIZE, with_positions: bool = True,
                on_progress: Progress | None = None, namespaces: Iterable[str] = (),
                workload_record: Callable[[dict[str, Any]], Any] | None = None) -> QueueRead:
    """What the caller may read of the queues. `namespaces`: the tenants' declared namespaces, read
    one by one where the caller may not list LocalQueues cluster-wide. `workload_record`: what to
    keep of each Workload, made as its page is read (the raw object is dropped then: 100,000 of
    them held at once were most of the command's memory); None keeps the raw objects. The pending
    workloads are asked of the visibility API while the Workloads are read (PENDING_READERS at a
    time): a request per ClusterQueue, a thousand round trips through the aggregation layer, would
    otherwise follow the list one by one."""
    api = Api(api_client)
    progress = on_progress or (lambda _step: None)
    progress("list clusterqueues")
    if not may(api, "list", "clusterqueues"):
        raise CheckIncomplete(f"forbidden: {Denied('list', f'clusterqueues.{KUEUE_GROUP}').permission}: without "
                              f"the ClusterQueues no job's wait can be explained; {QUEUE_READER_HINT}")
    cluster_queues = list(list_all(api, CLUSTER_QUEUE, page_size=page_size))
    cohorts = _cohorts(api, page_size)
    denied: list[Denied] = []
    local_queues, _ = _namespaced(api, LOCAL_QUEUE, namespaces, page_size, progress, denied)
    spaces = sorted({q["metadata"].get("namespace", "") for q in local_queues} | set(namespaces))
    seen: set[str] = set()  # the namespaces of the Workloads read

    def keep(obj: dict[str, Any]) -> Any:
        seen.add(obj["metadata"].get("namespace", ""))
        return lean(obj) if workload_record is None else workload_record(obj)

    names = [queue["metadata"]["name"] for queue in cluster_queues] if with_positions else []
    failed = threading.Event()  # one read failed: the command fails, the others need not be asked
    with ThreadPoolExecutor(PENDING_READERS) as readers:
        asked = [readers.submit(_pending_of, api, name, local_queues, page_size, failed) for name in names]
        try:
            workloads, readable = _namespaced(api, WORKLOAD, spaces, page_size, progress, denied, keep, read_ahead=True)
        except BaseException:
            failed.set()
            raise
        if names:
            progress(f"pending workloads of {len(names)} ClusterQueues")
        pending: dict[str, list[dict[str, Any]]] = {}
        for name, future in zip(names, asked, strict=True):  # in the ClusterQueues' order, as asked
            pending[name], refused = future.result()
            denied.extend(refused)
    if readable is None:
        readable = frozenset(seen | set(spaces))
    progress("done")
    return QueueRead(cluster_queues, local_queues, workloads, pending, readable, tuple(denied), cohorts)


def _cohorts(api: Api, page_size: int) -> list[dict[str, Any]] | None:
    """The Cohorts, or None where the caller may not list them or the server does not serve them
    (the reports then take compile's Cohorts: what gpugov declares for the cluster)."""
    if not may(api, "list", "cohorts"):
        return None
    try:
        return list(list_all(api, COHORT, page_size=page_size))
    except CheckIncomplete:
        return None


def _pending_of(api: Api, queue: str, local_queues: list[dict[str, Any]], page_size: int,
                failed: threading.Event) -> tuple[list[dict[str, Any]], list[Denied]]:
    """_pending with the refusals of its own (it runs beside the Workload list); nothing once a
    read has failed (its error is the command's, and it is raised in the ClusterQueues' order)."""
    denied: list[Denied] = []
    if failed.is_set():
        return [], denied
    try:
        return _pending(api, queue, local_queues, page_size, denied), denied
    except BaseException:
        failed.set()
        raise


def read_workloads(api_client: client.ApiClient, *, page_size: int = PAGE_SIZE,
                   on_progress: Progress | None = None) -> Iterator[dict[str, Any]]:
    """Every Workload in the cluster (the usage ledger needs all of them, or none). The cyclic
    collector is paused while they are read and taken in (JSON has no cycles; at 100,000 Workloads
    its scans of what the caller keeps cost more than the reading), and given back at the end."""
    api = Api(api_client)
    if not may(api, "list", "workloads"):
        raise CheckIncomplete("the credentials may not list workloads.kueue.x-k8s.io in all namespaces; "
                              "a ledger of some tenants only would not close")
    (on_progress or (lambda _step: None))("list workloads")
    with gc_paused():
        yield from (lean(w) for w in list_all(api, WORKLOAD, page_size=page_size, read_ahead=True))
