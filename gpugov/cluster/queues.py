"""Reading Kueue's queues for `gpugov queue`, `why` and `usage`: read-only, paginated, whole or
CheckIncomplete.

- ClusterQueues and LocalQueues: cluster-wide lists (limit/continue).
- Workloads (kueue.x-k8s.io/v1beta2): cluster-wide when the caller may list them there, else
  per namespace of a LocalQueue where a SelfSubjectAccessReview says it may; names of
  Workloads in the other namespaces are never shown (gpugov.queueing.view).
- Positions: the visibility API, `clusterqueues/NAME/pendingworkloads` of
  visibility.kueue.x-k8s.io/v1beta2, page by page with its own offset/limit options.
Every answer goes through gpugov.cluster.rest, which checks it is what a Kubernetes API sends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from gpugov.cluster.rest import PAGE_SIZE, Api, list_all
from gpugov.kube.kinds import KINDS, Kind
from gpugov.sources import CheckIncomplete

KUEUE = "kueue.x-k8s.io/v1beta2"
VISIBILITY = "visibility.kueue.x-k8s.io/v1beta2"
WORKLOAD = Kind(KUEUE, "Workload", "workloads", True)
CLUSTER_QUEUE = KINDS[(KUEUE, "ClusterQueue")]
LOCAL_QUEUE = KINDS[(KUEUE, "LocalQueue")]
SSAR_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"

Progress = Callable[[str], None]


@dataclass(frozen=True)
class InNamespace(Kind):
    """A namespaced kind listed in one namespace only (for callers without cluster-wide list)."""

    namespace: str = ""

    def collection_path(self) -> str:
        return f"/apis/{self.api_version}/namespaces/{self.namespace}/{self.plural}"


def may(api: Api, verb: str, resource: str, group: str = "kueue.x-k8s.io", namespace: str = "",
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


def pending_workloads(api: Api, cluster_queue: str, page_size: int = PAGE_SIZE) -> list[dict[str, Any]]:
    """The visibility API's pending workloads of one ClusterQueue, every page (offset/limit)."""
    path = f"/apis/{VISIBILITY}/clusterqueues/{cluster_queue}/pendingworkloads"
    page_size = max(1, page_size)  # a short page ends the read: an empty one must not be the first
    items: list[dict[str, Any]] = []
    while True:
        answer = api.call("GET", path, [("limit", str(page_size)), ("offset", str(len(items)))])
        body = answer.body
        if answer.status == 404 and answer.status_reason == "NotFound" and (body or {}).get("details", {}).get(
                "name") == cluster_queue:
            return []  # Kueue's queue manager does not hold it (an inactive ClusterQueue): nothing pending
        if not answer.ok:
            if answer.status == 404 and not answer.is_status:
                raise answer.incomplete(f"the server does not serve {VISIBILITY} (is Kueue's visibility API on?)")
            if answer.is_status:
                why = answer.message or answer.status_reason
                if answer.status in (401, 403):
                    why += " (the credentials may not read clusterqueues/pendingworkloads)"
                raise answer.incomplete(why)
            raise answer.not_an_api("PendingWorkloadsSummary")
        if (body is None or body.get("kind") != "PendingWorkloadsSummary" or body.get("apiVersion") != VISIBILITY
                or not isinstance(body.get("items") or [], list)):
            raise answer.not_an_api(f"PendingWorkloadsSummary of {VISIBILITY}")
        page = body.get("items") or []
        items.extend(page)
        if len(page) < page_size:
            return items


@dataclass
class QueueRead:
    cluster_queues: list[dict[str, Any]]
    local_queues: list[dict[str, Any]]
    workloads: list[dict[str, Any]]
    pending: dict[str, list[dict[str, Any]]]  # ClusterQueue -> visibility items
    readable: frozenset[str]  # namespaces whose Workloads were read


def _workloads(api: Api, namespaces: list[str], page_size: int, progress: Progress) -> tuple[list[dict[str, Any]],
                                                                                              frozenset[str] | None]:
    """Every Workload the caller may list; None as namespaces when it listed them cluster-wide."""
    if may(api, "list", "workloads"):
        progress("list workloads")
        return list(list_all(api, WORKLOAD, page_size=page_size)), None
    found: list[dict[str, Any]] = []
    readable = []
    for namespace in namespaces:
        if may(api, "list", "workloads", namespace=namespace):
            progress(f"list workloads in {namespace}")
            found.extend(list_all(api, InNamespace(KUEUE, "Workload", "workloads", True, namespace), page_size=page_size))
            readable.append(namespace)
    return found, frozenset(readable)


def read_queues(api_client: client.ApiClient, *, page_size: int = PAGE_SIZE, with_positions: bool = True,
                on_progress: Progress | None = None) -> QueueRead:
    api = Api(api_client)
    progress = on_progress or (lambda _step: None)
    progress("list clusterqueues")
    cluster_queues = list(list_all(api, CLUSTER_QUEUE, page_size=page_size))
    progress("list localqueues")
    local_queues = list(list_all(api, LOCAL_QUEUE, page_size=page_size))
    namespaces = sorted({q["metadata"].get("namespace", "") for q in local_queues})
    workloads, readable = _workloads(api, namespaces, page_size, progress)
    if readable is None:
        readable = frozenset({w["metadata"].get("namespace", "") for w in workloads} | set(namespaces))
    pending: dict[str, list[dict[str, Any]]] = {}
    if with_positions:
        for queue in cluster_queues:
            name = queue["metadata"]["name"]
            progress(f"pending workloads of {name}")
            pending[name] = pending_workloads(api, name, page_size)
    progress("done")
    return QueueRead(cluster_queues, local_queues, workloads, pending, readable)


def read_workloads(api_client: client.ApiClient, *, page_size: int = PAGE_SIZE,
                   on_progress: Progress | None = None) -> Iterator[dict[str, Any]]:
    """Every Workload in the cluster (the usage ledger needs all of them, or none)."""
    api = Api(api_client)
    if not may(api, "list", "workloads"):
        raise CheckIncomplete("the credentials may not list workloads.kueue.x-k8s.io in all namespaces; "
                              "a ledger of some tenants only would not close")
    (on_progress or (lambda _step: None))("list workloads")
    yield from list_all(api, WORKLOAD, page_size=page_size)
