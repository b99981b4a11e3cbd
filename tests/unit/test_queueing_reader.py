"""The queue reader at the edge, against a real HTTP server on 127.0.0.1 that answers as a
Kubernetes API server with Kueue's visibility API does (and, on purpose, as one that does not):
access reviews decide which namespaces are read, the visibility API is read page by page, and
anything but a whole, well-formed answer is CheckIncomplete. The real API server and Kueue are
in tests/e2e/test_queueing.py."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes import client

from gpugov.cluster.queues import PENDING_READERS, pending_workloads, read_queues, read_workloads
from gpugov.cluster.rest import Api
from gpugov.queueing.access import Denied
from gpugov.sources import CheckIncomplete
from tests.helpers.local_http import serving

Reply = tuple[int, Any]  # status, JSON body (bytes: sent as is)
Route = Callable[[str, dict[str, str], Any], Reply]


def kube_list(kind: str, items: list[dict[str, Any]], version: str = "kueue.x-k8s.io/v1beta2") -> Reply:
    return 200, {"kind": f"{kind}List", "apiVersion": version, "metadata": {}, "items": items}


def named(name: str, namespace: str = "") -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"metadata": meta, "spec": {}}


class FakeApi(BaseHTTPRequestHandler):
    routes: ClassVar[dict[tuple[str, str], Route]] = {}
    seen: ClassVar[list[tuple[str, str, dict[str, str]]]] = []
    identities: ClassVar[list[tuple[list[str], list[str]]]] = []  # (Impersonate-User, Impersonate-Group) lines

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        type(self).seen.append((method, url.path, query))
        type(self).identities.append((self.headers.get_all("Impersonate-User") or [],
                                      self.headers.get_all("Impersonate-Group") or []))
        route = self.routes.get((method, url.path))
        status, data = route(url.path, query, body) if route else (404, b"404 page not found\n")
        raw = data if isinstance(data, bytes) else json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if isinstance(data, bytes) else "application/json")
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def fake_api(routes: dict[tuple[str, str], Route]) -> Iterator[client.ApiClient]:
    FakeApi.routes, FakeApi.seen, FakeApi.identities = routes, [], []
    with serving(FakeApi) as url:
        config = client.Configuration()
        config.host = url
        yield client.ApiClient(config)


def access(allowed_namespaces: set[str], cluster_wide: bool, queues: bool = True) -> Route:
    """Access reviews: ClusterQueues as `queues` says, the rest cluster-wide or in the allowed namespaces."""
    def review(_path: str, _query: dict[str, str], body: Any) -> Reply:
        attributes = body["spec"]["resourceAttributes"]
        namespace = attributes.get("namespace", "")
        allowed = cluster_wide if not namespace else (cluster_wide or namespace in allowed_namespaces)
        if attributes["resource"] == "clusterqueues":
            allowed = queues
        return 201, {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                     "spec": body["spec"], "status": {"allowed": allowed}}
    return review


def pending_pages(items: list[dict[str, Any]]) -> Route:
    def page(_path: str, query: dict[str, str], _body: Any) -> Reply:
        offset, limit = int(query.get("offset", 0)), int(query.get("limit", 1000))
        return 200, {"kind": "PendingWorkloadsSummary", "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
                     "metadata": {}, "items": items[offset:offset + limit]}
    return page


VIS = "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
SSAR = ("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")


def routes(cluster_wide: bool) -> dict[tuple[str, str], Route]:
    items = [{"metadata": {"name": f"w{i}", "namespace": "vision"}, "positionInClusterQueue": i,
              "positionInLocalQueue": i, "priority": 1, "localQueueName": "training"} for i in range(5)]
    return {
        SSAR: access({"vision"}, cluster_wide),
        ("GET", f"{KUEUE}/clusterqueues"): lambda *_: kube_list("ClusterQueue", [named("vision")]),
        ("GET", f"{KUEUE}/localqueues"): lambda *_: kube_list("LocalQueue", [named("training", "vision"),
                                                                             named("default", "speech")]),
        ("GET", f"{KUEUE}/workloads"): lambda *_: kube_list("Workload", [named("w0", "vision"), named("s", "speech")]),
        ("GET", f"{KUEUE}/namespaces/vision/workloads"): lambda *_: kube_list("Workload", [named("w0", "vision")]),
        ("GET", f"{KUEUE}/namespaces/vision/localqueues"): lambda *_: kube_list("LocalQueue", [named("training",
                                                                                                     "vision")]),
        ("GET", f"{VIS}/vision/pendingworkloads"): pending_pages(items),
    }


def test_positions_are_read_page_by_page() -> None:
    with fake_api(routes(True)) as api:
        found = pending_workloads(Api(api), "vision", page_size=2)
    assert [i["metadata"]["name"] for i in found] == [f"w{i}" for i in range(5)]
    offsets = [q["offset"] for m, p, q in FakeApi.seen if p.endswith("pendingworkloads")]
    assert offsets == ["0", "2", "4"]


def test_without_cluster_wide_rights_only_allowed_namespaces_are_read() -> None:
    with fake_api(routes(False)) as api:
        read = read_queues(api, page_size=10, namespaces=["speech", "vision"])
    assert read.readable == frozenset({"vision"})
    assert [w["metadata"]["name"] for w in read.workloads] == ["w0"]
    assert not any(p == f"{KUEUE}/workloads" for _, p, _ in FakeApi.seen)
    with fake_api(routes(False)) as api, pytest.raises(CheckIncomplete, match="ledger of some tenants"):
        list(read_workloads(api))


def test_workloads_are_made_records_as_read_and_the_namespaces_read_are_kept() -> None:
    for cluster_wide in (True, False):
        with fake_api(routes(cluster_wide)) as api:
            raw = read_queues(api, page_size=1, namespaces=["speech", "vision"])
        with fake_api(routes(cluster_wide)) as api:
            made = read_queues(api, page_size=1, namespaces=["speech", "vision"],
                               workload_record=lambda w: ("record", w["metadata"]["name"]))
        assert made.workloads == [("record", w["metadata"]["name"]) for w in raw.workloads]
        assert made.readable == raw.readable and made.denied == raw.denied


def test_cluster_wide_rights_read_every_namespace() -> None:
    with fake_api(routes(True)) as api:
        read = read_queues(api, page_size=10)
    assert read.readable == frozenset({"vision", "speech"})
    assert sorted(w["metadata"]["name"] for w in read.workloads) == ["s", "w0"]
    assert len(read.pending["vision"]) == 5


@pytest.mark.parametrize(("reply", "words"), [
    ((404, b"404 page not found\n"), "does not serve visibility.kueue.x-k8s.io/v1beta2"),
    ((200, {"kind": "ClusterQueue", "apiVersion": "kueue.x-k8s.io/v1beta2", "items": []}), "PendingWorkloadsSummary of visibility.kueue.x-k8s.io"),
    ((200, b"<html>sign in</html>"), "not JSON"),
])
def test_a_visibility_answer_that_is_not_whole_is_incomplete(reply: Reply, words: str) -> None:
    table = routes(True)
    table[("GET", f"{VIS}/vision/pendingworkloads")] = lambda *_: reply
    with fake_api(table) as api, pytest.raises(CheckIncomplete, match=words):
        read_queues(api)


def test_an_inactive_cluster_queue_has_nothing_pending() -> None:
    table = routes(True)
    table[("GET", f"{VIS}/vision/pendingworkloads")] = lambda *_: (404, {
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
        "message": 'clusterqueue.visibility.kueue.x-k8s.io "vision" not found', "details": {"name": "vision"}})
    with fake_api(table) as api:
        assert read_queues(api).pending == {"vision": []}


def test_a_refused_access_review_is_incomplete() -> None:
    table = routes(True)
    table[SSAR] = lambda *_: (403, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
                                    "code": 403, "message": "selfsubjectaccessreviews is forbidden"})
    with fake_api(table) as api, pytest.raises(CheckIncomplete, match="cannot ask what it may read"):
        read_queues(api)


FORBIDDEN: Reply = (403, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
                          "code": 403, "message": "forbidden"})
VIS_NS = "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces"


def test_without_the_right_to_list_cluster_queues_it_says_which_permission_and_who_grants_it() -> None:
    table = routes(True)
    table[SSAR] = access({"vision"}, True, queues=False)
    with fake_api(table) as api, pytest.raises(CheckIncomplete) as refused:
        read_queues(api)
    assert "forbidden: list clusterqueues.kueue.x-k8s.io (cluster-wide)" in str(refused.value)
    assert "gpugov-tenant-queue-reader" in str(refused.value)
    assert not any(p == f"{KUEUE}/clusterqueues" for _, p, _ in FakeApi.seen)


def test_a_tenant_reads_its_declared_namespaces_and_every_refusal_is_kept() -> None:
    """No cluster-wide LocalQueue or Workload list: the declared namespaces are read one by one where
    allowed; what is refused becomes a Denied, not a silent gap."""
    table = routes(False)
    table[("GET", f"{KUEUE}/namespaces/vision/localqueues")] = lambda *_: kube_list(
        "LocalQueue", [{"metadata": {"name": "training", "namespace": "vision"}, "spec": {"clusterQueue": "vision"}}])
    table[("GET", f"{KUEUE}/clusterqueues")] = lambda *_: kube_list("ClusterQueue", [named("vision"), named("speech")])
    mine = [{"metadata": {"name": "w0", "namespace": "vision"}, "positionInClusterQueue": 0, "positionInLocalQueue": 0,
             "localQueueName": "training"}]
    table[("GET", f"{VIS}/vision/pendingworkloads")] = lambda *_: FORBIDDEN
    table[("GET", f"{VIS}/speech/pendingworkloads")] = lambda *_: FORBIDDEN
    table[("GET", f"{VIS_NS}/vision/localqueues/training/pendingworkloads")] = pending_pages(mine)
    with fake_api(table) as api:
        read = read_queues(api, namespaces=["vision", "speech"])
    assert [q["metadata"]["name"] for q in read.local_queues] == ["training"]
    assert read.readable == frozenset({"vision"}) and [w["metadata"]["name"] for w in read.workloads] == ["w0"]
    assert read.pending == {"vision": mine, "speech": []}
    assert read.denied == (
        Denied("list", "localqueues.kueue.x-k8s.io", "speech"),
        Denied("list", "workloads.kueue.x-k8s.io", "speech"),
        Denied("get", "clusterqueues/pendingworkloads.visibility.kueue.x-k8s.io", name="speech"),
    )
    assert read.denied[1].permission == "list workloads.kueue.x-k8s.io in namespace speech"
    assert not any(p in (f"{KUEUE}/localqueues", f"{KUEUE}/workloads") for _, p, _ in FakeApi.seen)


def test_a_refused_local_queue_position_read_is_kept() -> None:
    table = routes(True)
    table[("GET", f"{KUEUE}/localqueues")] = lambda *_: kube_list(
        "LocalQueue", [{"metadata": {"name": "training", "namespace": "vision"}, "spec": {"clusterQueue": "vision"}}])
    table[("GET", f"{VIS}/vision/pendingworkloads")] = lambda *_: FORBIDDEN
    table[("GET", f"{VIS_NS}/vision/localqueues/training/pendingworkloads")] = lambda *_: FORBIDDEN
    with fake_api(table) as api:
        read = read_queues(api)
    assert read.pending == {"vision": []}
    assert read.denied == (Denied("get", "localqueues/pendingworkloads.visibility.kueue.x-k8s.io", "vision", "training"),
                           Denied("get", "clusterqueues/pendingworkloads.visibility.kueue.x-k8s.io", name="vision"))


def test_impersonation_sends_the_user_and_one_header_line_per_group() -> None:
    """--as/--as-group: every request (access reviews, lists, the visibility API) carries the user and each
    group on a header line of its own, as kubectl sends them (a comma-joined line would be one group)."""
    from gpugov.cluster.impersonate import impersonate

    with fake_api(routes(True)) as api:
        impersonate(api, "erin@example.com", ["vision-researchers", "team, with comma"])
        read_queues(api)
    assert len(FakeApi.identities) > 3
    assert set(map(repr, FakeApi.identities)) == {repr((["erin@example.com"], ["vision-researchers",
                                                                                 "team, with comma"]))}


def _many_queues(count: int) -> dict[tuple[str, str], Route]:
    table = routes(True)
    names = [f"q{i}" for i in range(count)]
    table[("GET", f"{KUEUE}/clusterqueues")] = lambda *_: kube_list("ClusterQueue", [named(n) for n in names])
    return table


def test_positions_are_asked_while_the_workloads_are_read_and_kept_in_the_queues_order() -> None:
    """A thousand ClusterQueues are a thousand visibility round trips: they overlap the Workload
    list (which here answers only once a position read has arrived, or after 5 s), and what comes
    back is in the ClusterQueues' order whatever order the answers came in."""
    table = _many_queues(6)
    asked = threading.Event()
    overlapped: list[bool] = []

    def workloads(*_: Any) -> Reply:
        overlapped.append(asked.wait(5))
        return kube_list("Workload", [named("w0", "vision")])

    def refused(path: str, _query: dict[str, str], _body: Any) -> Reply:
        asked.set()
        if path == f"{VIS}/q0/pendingworkloads":
            time.sleep(0.3)  # the first queue answers last
        return FORBIDDEN

    table[("GET", f"{KUEUE}/workloads")] = workloads
    for i in range(6):
        table[("GET", f"{VIS}/q{i}/pendingworkloads")] = refused
    with fake_api(table) as api:
        read = read_queues(api)
    assert overlapped == [True]
    assert list(read.pending) == [f"q{i}" for i in range(6)]
    assert read.denied == tuple(Denied("get", "clusterqueues/pendingworkloads.visibility.kueue.x-k8s.io", name=f"q{i}")
                                for i in range(6))


def test_once_a_position_read_fails_the_other_queues_are_not_asked() -> None:
    """A cluster without Kueue's visibility API: the first 404 fails the command, and the rest of a
    thousand ClusterQueues are not asked in vain."""
    table = _many_queues(60)
    with fake_api(table) as api, pytest.raises(CheckIncomplete, match="does not serve visibility"):
        read_queues(api)
    asked = [p for _, p, _ in FakeApi.seen if p.endswith("/pendingworkloads")]
    assert 1 <= len(asked) <= 2 * PENDING_READERS
