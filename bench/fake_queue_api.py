"""A fake Kubernetes API holding Kueue's queues at scale, for bench/queue_usage_bench.py --fake.

    python bench/fake_queue_api.py ORG --workloads 100000 --ready FILE

Serves, over plain HTTP on 127.0.0.1, what `gpugov queue` and `gpugov usage` read: the
ClusterQueues and LocalQueues compile makes of the organisation ORG (its only cluster), --workloads
Workloads spread over the LocalQueues (three in four admitted to their ClusterQueue's first flavor,
the others pending), each with the managedFields an API server keeps, paginated with limit and
continue; Kueue's visibility API (clusterqueues/NAME/pendingworkloads, offset and limit) with every
pending Workload's positions; and SelfSubjectAccessReviews that allow every read. Every item is
encoded once when the server starts, so a page costs the server a join: what a run spends is the
client's. When it listens it writes a kubeconfig to FILE (no credentials: the fake asks none).
The bench runs it as a process of its own, so that serving never shares a core's time with a
command measured in the bench's process.

With --tls CERT KEY it serves HTTPS and answers discovery of the visibility API, so that a real
API server's aggregation layer can put it behind an APIService: the bench's control-plane mode
creates the same Workloads there (`planned_workloads`) and lets the real server pass the visibility
requests through to this one.
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpugov.app.pipeline import validate_repo
from gpugov.cluster.queues import CLUSTER_QUEUE, LOCAL_QUEUE, SSAR_PATH
from gpugov.compile import compile
from gpugov.kube.kinds import WORKLOAD, Kind
from gpugov.kube.names import VISIBILITY_API

CREATED = "2026-01-05T08:00:00Z"
PENDING_EVERY = 4  # one Workload in four waits
CONTAINER = {"name": "main", "image": "trainer", "resources": {"limits": {"nvidia.com/gpu": "1"}}}


def _managed_fields(manager: str) -> list[dict[str, Any]]:
    """What an API server records of a create (a few hundred bytes per object, as on a real one)."""
    return [{"manager": manager, "operation": "Update", "apiVersion": WORKLOAD.api_version, "time": CREATED,
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {".": {}, "f:active": {}, "f:podSets": {},
                                                                "f:priority": {}, "f:queueName": {}}}}]


def workload(i: int, namespace: str, queue: str, cluster_queue: str, flavor: str) -> dict[str, Any]:
    pending = i % PENDING_EVERY == 0
    condition = ({"type": "QuotaReserved", "status": "False", "reason": "Pending", "lastTransitionTime": CREATED,
                  "message": f"couldn't assign flavors to pod set main: insufficient unused quota for "
                             f"nvidia.com/gpu in flavor {flavor}, 1 more needed"} if pending else
                 {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "lastTransitionTime": CREATED,
                  "message": f"Quota reserved in ClusterQueue {cluster_queue}"})
    status: dict[str, Any] = {"conditions": [condition]}
    if not pending:
        status["conditions"].append({"type": "Admitted", "status": "True", "reason": "Admitted",
                                     "lastTransitionTime": CREATED, "message": "The workload is admitted"})
        status["admission"] = {"clusterQueue": cluster_queue, "podSetAssignments": [
            {"name": "main", "count": 1, "flavors": {"nvidia.com/gpu": flavor},
             "resourceUsage": {"nvidia.com/gpu": "1"}}]}
    return {
        "apiVersion": WORKLOAD.api_version, "kind": "Workload",
        "metadata": {"name": f"job-{i}", "namespace": namespace, "uid": f"00000000-0000-4000-8000-{i:012d}",
                     "resourceVersion": str(1000 + i), "generation": 1, "creationTimestamp": CREATED,
                     "labels": {"kueue.x-k8s.io/queue-name": queue},
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": f"job-{i}",
                                          "uid": f"10000000-0000-4000-8000-{i:012d}", "controller": True}],
                     "managedFields": _managed_fields("kueue")},
        "spec": {"active": True, "priority": 0, "queueName": queue,
                 "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [CONTAINER]}}}]},
        "status": status,
    }


def planned_workloads(objects: list[dict[str, Any]], workloads: int) -> Iterator[dict[str, Any]]:
    """The Workloads the fake serves for compile's `objects`, spread over their LocalQueues in turn."""
    cluster_queues = [o for o in objects if o["kind"] == "ClusterQueue"]
    local_queues = [o for o in objects if o["kind"] == "LocalQueue"]
    first_flavor = {q["metadata"]["name"]: q["spec"]["resourceGroups"][0]["flavors"][0]["name"]
                    for q in cluster_queues}
    for i in range(workloads):
        local = local_queues[i % len(local_queues)]
        cluster_queue = local["spec"]["clusterQueue"]
        yield workload(i, local["metadata"]["namespace"], local["metadata"]["name"], cluster_queue,
                       first_flavor[cluster_queue])


class Cluster:
    """The organisation's queues and `workloads` Workloads, every item encoded once."""

    def __init__(self, org: Path, workloads: int) -> None:
        model = validate_repo(org).model
        objects = compile(model)
        cluster_queues = [o for o in objects if o["kind"] == "ClusterQueue"]
        local_queues = [o for o in objects if o["kind"] == "LocalQueue"]
        self.lists: dict[str, tuple[Kind, list[bytes]]] = {
            CLUSTER_QUEUE.collection_path(): (CLUSTER_QUEUE, [_encode(o) for o in cluster_queues]),
            LOCAL_QUEUE.collection_path(): (LOCAL_QUEUE, [_encode(o) for o in local_queues]),
        }
        encoded: list[bytes] = []
        self.pending: dict[str, list[bytes]] = {q["metadata"]["name"]: [] for q in cluster_queues}
        cluster_queue_of = {(q["metadata"]["namespace"], q["metadata"]["name"]): q["spec"]["clusterQueue"]
                            for q in local_queues}
        in_local: dict[tuple[str, str], int] = {}
        for i, item in enumerate(planned_workloads(objects, workloads)):
            namespace, queue = item["metadata"]["namespace"], item["spec"]["queueName"]
            cluster_queue = cluster_queue_of[namespace, queue]
            encoded.append(_encode(item))
            if i % PENDING_EVERY == 0:
                position = in_local[(namespace, queue)] = in_local.get((namespace, queue), -1) + 1
                self.pending[cluster_queue].append(_encode({
                    "metadata": {"name": f"job-{i}", "namespace": namespace, "creationTimestamp": CREATED},
                    "priority": 0, "localQueueName": queue,
                    "positionInClusterQueue": len(self.pending[cluster_queue]), "positionInLocalQueue": position}))
        self.lists[WORKLOAD.collection_path()] = (WORKLOAD, encoded)
        self.counts = {kind.kind: len(items) for kind, items in self.lists.values()}
        self.counts["pending"] = sum(len(items) for items in self.pending.values())

    def answer(self, method: str, path: str, query: dict[str, list[str]]) -> tuple[int, bytes]:
        limit = int(query.get("limit", ["0"])[0])
        if method == "POST" and path == SSAR_PATH:
            return 200, _encode({"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                                 "status": {"allowed": True}})
        if method == "GET" and path in self.lists:
            kind, items = self.lists[path]
            start = int(query.get("continue", ["0"])[0] or 0)
            end = start + limit if limit else len(items)
            more = {"continue": str(end), "remainingItemCount": len(items) - end} if end < len(items) else {}
            head = _encode({"kind": f"{kind.kind}List", "apiVersion": kind.api_version,
                            "metadata": {"resourceVersion": "1", **more}})
            return 200, head[:-1] + b', "items": [' + b",".join(items[start:end]) + b"]}"
        if method == "GET" and path in DISCOVERY:
            return 200, _encode(DISCOVERY[path])
        prefix, _, rest = path.partition(f"/apis/{VISIBILITY_API}/clusterqueues/")
        name, _, tail = rest.partition("/")
        if method == "GET" and not prefix and tail == "pendingworkloads" and name in self.pending:
            items = self.pending[name]
            start = int(query.get("offset", ["0"])[0])
            page = items[start:start + limit] if limit else items[start:]
            head = _encode({"kind": "PendingWorkloadsSummary", "apiVersion": VISIBILITY_API, "metadata": {}})
            return 200, head[:-1] + b', "items": [' + b",".join(page) + b"]}"
        return 404, b"404 page not found\n"


# What the aggregation layer asks of an API server behind an APIService (legacy discovery).
_GROUP, _VERSION = VISIBILITY_API.split("/")
_GROUP_VERSION = {"groupVersion": VISIBILITY_API, "version": _VERSION}
_API_GROUP = {"name": _GROUP, "versions": [_GROUP_VERSION], "preferredVersion": _GROUP_VERSION}
DISCOVERY: dict[str, dict[str, Any]] = {
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_API_GROUP]},
    f"/apis/{_GROUP}": {"kind": "APIGroup", "apiVersion": "v1", **_API_GROUP},
    f"/apis/{VISIBILITY_API}": {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": VISIBILITY_API,
                                "resources": [
                                    {"name": "clusterqueues/pendingworkloads", "namespaced": False,
                                     "kind": "PendingWorkloadsSummary", "verbs": ["get"]},
                                    {"name": "localqueues/pendingworkloads", "namespaced": True,
                                     "kind": "PendingWorkloadsSummary", "verbs": ["get"]}]},
}


def _encode(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def serve(cluster: Cluster, ready: Path, tls: tuple[Path, Path] | None = None) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the API server
        disable_nagle_algorithm = True  # headers and body leave at once, not after the client's delayed ACK

        def handle_any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            url = urlsplit(self.path)
            status, body = cluster.answer(self.command, url.path, parse_qs(url.query))
            self.send_response(status)
            self.send_header("Content-Type", "application/json" if status == 200 else "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = handle_any

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(tls[0]), str(tls[1]))
        server.socket = context.wrap_socket(server.socket, server_side=True)
    host, port = server.server_address[:2]
    ready.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": f"{'https' if tls else 'http'}://{host}:{port}"}}],
        "users": [{"name": "fake", "user": {"token": "fake-token"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        "counts": cluster.counts,  # what it serves, for the bench's report (kubeconfig readers ignore it)
        "port": port,
    }))
    server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("org", type=Path)
    parser.add_argument("--workloads", type=int, required=True)
    parser.add_argument("--ready", type=Path, required=True, help="where to write the kubeconfig once listening")
    parser.add_argument("--tls", type=Path, nargs=2, metavar=("CERT", "KEY"), help="serve HTTPS with this key pair")
    args = parser.parse_args()
    serve(Cluster(args.org, args.workloads), args.ready, tuple(args.tls) if args.tls else None)


if __name__ == "__main__":
    main()
