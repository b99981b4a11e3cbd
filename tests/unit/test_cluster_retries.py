"""The cluster edge under transient failures: real HTTP servers on 127.0.0.1 that answer 500, 503
with Retry-After, 429, cut the connection mid-answer or stall, as an API server restarting or
overloaded behind a proxy does. Safe requests (reads, server-side apply) are tried again within the
command's retry deadline and succeed; a POST, a DELETE or a merge PATCH is never sent twice; when the
deadline is spent the read is incomplete, in one line naming the method, host, path and last status,
never an empty or partial list.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import TypeVar
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes import client

from gpugov.cluster.rest import (
    APPLY_PATCH,
    MERGE_PATCH,
    TIMEOUT,
    Api,
    list_all,
    read_ahead_of,
    server_side_apply,
    write,
)
from gpugov.cluster.retry import DEADLINE_ENV, RETRY_AFTER_CAP, STALL_TIMEOUTS, deadline_seconds, is_safe
from gpugov.kube.kinds import KINDS
from gpugov.sources import CheckIncomplete
from tests.helpers.local_http import serving

_T = TypeVar("_T")
POD = KINDS[("v1", "Pod")]
CONFIG_MAP = KINDS[("v1", "ConfigMap")]
PODS = 1000
PAGE = 100  # 10 pages: 10 requests when nothing fails
FAST = (2.0, 1.0)  # connect, read timeouts of the tests' clients: a stall costs a second, not twenty


@dataclass
class Fault:
    """What the server does with its n-th request (1-based): None answers normally."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    cut: bool = False  # send half the body, then close the connection
    stall: float = 0.0  # seconds to wait before answering


Policy = Callable[[int, str], Fault | None]  # (request number, method) -> fault


class FaultServer:
    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.requests: list[tuple[str, str]] = []
        self.url = ""
        self._lock = threading.Lock()

    def count(self, method: str, path: str) -> int:
        with self._lock:
            self.requests.append((method, path))
            return len(self.requests)


def pod_page(query: dict[str, list[str]]) -> bytes:
    start = int((query.get("continue") or ["0"])[0])
    limit = int((query.get("limit") or [str(PODS)])[0])
    end = min(PODS, start + limit)
    items = [{"metadata": {"name": f"pod-{i}", "namespace": "team-a"}, "spec": {}} for i in range(start, end)]
    return json.dumps({"kind": "PodList", "apiVersion": "v1", "items": items,
                       "metadata": {"continue": str(end) if end < PODS else ""}}).encode()


def status(code: int, reason: str) -> bytes:
    return json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason,
                       "message": f"the server says {reason}"}).encode()


def config_map(name: str) -> bytes:
    return json.dumps({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": name, "namespace": "gpugov"},
                       "data": {}}).encode()


@pytest.fixture
def faults() -> Iterator[Callable[[Policy], FaultServer]]:
    servers: list[FaultServer] = []
    stack: list[object] = []

    def start(policy: Policy) -> FaultServer:
        server = FaultServer(policy)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as an API server: a cut is mid-connection

            def handle_any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                url = urlsplit(self.path)
                number = server.count(self.command, url.path)
                fault = server.policy(number, self.command)
                if fault and fault.stall:
                    time.sleep(fault.stall)
                if fault and fault.status:
                    body = status(fault.status, "ServiceUnavailable")
                    self.send_response(fault.status)
                    for name, value in fault.headers.items():
                        self.send_header(name, value)
                elif url.path == POD.collection_path():
                    body = pod_page(parse_qs(url.query))
                    self.send_response(200)
                else:
                    body = config_map(url.path.rsplit("/", 1)[-1])
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if fault and fault.cut:
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up on a stalled answer
                    self.close_connection = True

            do_GET = do_PATCH = do_POST = do_DELETE = handle_any

            def log_message(self, format: str, *args: object) -> None:
                pass

        context = serving(Handler)
        server.url = context.__enter__()
        stack.append(context)
        servers.append(server)
        return server

    yield start
    for context in reversed(stack):
        context.__exit__(None, None, None)  # type: ignore[attr-defined]


def api_of(server: FaultServer) -> Api:
    config = client.Configuration()
    config.host = server.url
    return Api(client.ApiClient(config), timeout=FAST)


def read_pods(api: Api) -> list[str]:
    return [p["metadata"]["name"] for p in list_all(api, POD, page_size=PAGE)]


def timed(read: Callable[[], _T]) -> tuple[_T, float]:
    started = time.monotonic()
    result = read()
    return result, time.monotonic() - started


EVERY_POD = [f"pod-{i}" for i in range(PODS)]


def test_every_third_request_500_is_retried(faults) -> None:
    server = faults(lambda n, method: Fault(500) if n % 3 == 0 else None)
    names, seconds = timed(lambda: read_pods(api_of(server)))
    assert names == EVERY_POD
    assert len(server.requests) == 14  # 10 pages, 4 of them asked twice
    assert seconds < 5  # the first retry of a request is at once


def test_first_four_503_with_retry_after_are_waited_out(faults) -> None:
    server = faults(lambda n, method: Fault(503, {"Retry-After": "1"}) if n <= 4 else None)
    names, seconds = timed(lambda: read_pods(api_of(server)))
    assert names == EVERY_POD and len(server.requests) == 14
    assert 3.9 <= seconds < 9  # Retry-After honoured (four seconds), and not much more


def test_every_second_429_is_retried_quickly(faults) -> None:
    server = faults(lambda n, method: Fault(429) if n % 2 == 0 else None)
    names, seconds = timed(lambda: read_pods(api_of(server)))
    assert names == EVERY_POD
    assert seconds < 5


def test_a_long_retry_after_is_capped(faults, monkeypatch) -> None:
    monkeypatch.setattr("gpugov.cluster.retry.RETRY_AFTER_CAP", 0.5)
    server = faults(lambda n, method: Fault(503, {"Retry-After": "3600"}) if n == 1 else None)
    names, seconds = timed(lambda: read_pods(api_of(server)))
    assert names == EVERY_POD and seconds < 4 and RETRY_AFTER_CAP <= 60


def test_a_connection_cut_mid_answer_is_retried(faults) -> None:
    server = faults(lambda n, method: Fault(cut=True) if n in (2, 5) else None)
    names, seconds = timed(lambda: read_pods(api_of(server)))
    assert names == EVERY_POD and len(server.requests) == 12 and seconds < 5


def test_a_stalled_answer_is_asked_again(faults) -> None:
    server = faults(lambda n, method: Fault(stall=3) if n == 3 else None)
    names, seconds = timed(lambda: read_pods(api_of(server)))
    assert names == EVERY_POD and len(server.requests) == 11
    assert 0.9 <= seconds < 3  # one read timeout (1 s), not the stall


def test_a_stall_is_given_up_within_seconds_not_after_the_read_timeout(faults) -> None:
    """With the production timeouts (20 s to wait for a byte at most), a stalled answer is given up
    after the first, short timeout and asked again: seconds, not twenty."""
    server = faults(lambda n, method: Fault(stall=30) if n == 3 else None)
    config = client.Configuration()
    config.host = server.url
    names, seconds = timed(lambda: read_pods(Api(client.ApiClient(config))))
    assert names == EVERY_POD and len(server.requests) == 11
    assert STALL_TIMEOUTS[0] <= seconds < STALL_TIMEOUTS[0] + 2 and STALL_TIMEOUTS[0] <= TIMEOUT[1] / 4


def test_a_slow_server_is_waited_longer_each_time_it_stalls(faults, monkeypatch) -> None:
    """An answer that comes after 1.5 s, every time: the first attempt gives up at 0.5 s, the second
    at 1 s, the third waits 2 s and has it. A merge PATCH, which is never sent twice, waits the
    whole read timeout at once."""
    monkeypatch.setattr("gpugov.cluster.retry.STALL_TIMEOUTS", (0.5, 1.0, 2.0))
    server = faults(lambda n, method: Fault(stall=1.5))
    config = client.Configuration()
    config.host = server.url
    api = Api(client.ApiClient(config), timeout=(2.0, 3.0))
    answer, seconds = timed(lambda: api.call("GET", "/api/v1/namespaces/gpugov/configmaps/state"))
    assert answer.status == 200 and answer.attempts == 3 and len(server.requests) == 3
    assert 0.5 + 1.0 + 1.5 <= seconds < 0.5 + 1.0 + 1.5 + 2  # and the backoff of the second retry
    server.requests.clear()
    written, seconds = timed(lambda: write(api, "PATCH", CONFIG_MAP, "state", "gpugov", {"data": {}}, MERGE_PATCH))
    assert written["metadata"]["name"] == "state" and len(server.requests) == 1 and 1.5 <= seconds < 2.5


def test_a_500_on_a_post_is_not_retried(faults) -> None:
    server = faults(lambda n, method: Fault(500) if n == 1 else None)
    answer = api_of(server).call("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                                 body={"kind": "SelfSubjectAccessReview"}, content_type="application/json")
    assert answer.status == 500 and server.requests == [("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")]


def test_a_cut_delete_is_not_sent_again(faults) -> None:
    server = faults(lambda n, method: Fault(cut=True))
    with pytest.raises(CheckIncomplete, match=r"DELETE .*: ProtocolError: the connection broke"):
        api_of(server).call("DELETE", "/api/v1/namespaces/gpugov/configmaps/state")
    assert len(server.requests) == 1


def test_a_merge_patch_is_not_retried_but_server_side_apply_is(faults) -> None:
    server = faults(lambda n, method: Fault(503) if n in (1, 2) else None)
    api = api_of(server)
    with pytest.raises(Exception, match="503"):
        write(api, "PATCH", CONFIG_MAP, "state", "gpugov", {"data": {}}, MERGE_PATCH)
    assert len(server.requests) == 1
    applied = server_side_apply(api, CONFIG_MAP, {"apiVersion": "v1", "kind": "ConfigMap",
                                                  "metadata": {"name": "state", "namespace": "gpugov"}})
    assert applied["metadata"]["name"] == "state" and len(server.requests) == 3  # 503 once, then applied


def test_safe_requests() -> None:
    assert is_safe("GET") and is_safe("PATCH", APPLY_PATCH) and is_safe("patch", f"{APPLY_PATCH}; charset=utf-8")
    assert not is_safe("POST") and not is_safe("DELETE") and not is_safe("PATCH", MERGE_PATCH)
    assert not is_safe("PUT")


def test_a_spent_deadline_is_one_line_with_the_last_status(faults, monkeypatch) -> None:
    monkeypatch.setenv(DEADLINE_ENV, "3")
    server = faults(lambda n, method: Fault(503, {"Retry-After": "1"}) if n >= 2 else None)
    started = time.monotonic()
    with pytest.raises(CheckIncomplete) as caught:
        read_pods(api_of(server))
    seconds = time.monotonic() - started
    line = str(caught.value)
    assert "\n" not in line and line.startswith(f"GET {server.url}/api/v1/pods: 503 ")
    assert "attempts)" in line and "the server says ServiceUnavailable" in line
    assert 2 <= seconds < 5  # three seconds of waiting, then the last answer is final


def test_a_server_that_always_stalls_ends_within_the_deadline(faults, monkeypatch) -> None:
    monkeypatch.setenv(DEADLINE_ENV, "2.5")
    server = faults(lambda n, method: Fault(stall=4))
    started = time.monotonic()
    with pytest.raises(CheckIncomplete, match=r"^GET .*/api/v1/pods: ReadTimeoutError: timed out .*attempts in"):
        read_pods(api_of(server))
    assert time.monotonic() - started < 2.5 + FAST[1] + 1.5  # the deadline, one more read timeout, jitter


def test_a_broken_deadline_setting_is_incomplete_not_a_crash(faults, monkeypatch) -> None:
    server = faults(lambda n, method: None)
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv(DEADLINE_ENV, bad)
        with pytest.raises(ValueError):
            deadline_seconds()
        with pytest.raises(CheckIncomplete, match=DEADLINE_ENV):
            read_pods(api_of(server))
    monkeypatch.delenv(DEADLINE_ENV)
    assert deadline_seconds() == 60


# -- gpugov drift through a fault server --------------------------------------------------------------


def test_drift_rides_out_an_api_server_restart(tmp_path: Path, capsys, monkeypatch) -> None:
    """drift through the fake API server answering its first four requests 503 (Retry-After: 1),
    then every third 500: the same report as without faults, not "could not check"."""
    from gpugov.cli import main
    from tests.helpers.fake_kube import Reply, fake_kube
    from tests.helpers.repos import REPO

    def drift(fake) -> tuple[int, str]:  # type: ignore[no-untyped-def]
        code = main(["drift", str(REPO), "--cluster", "east", "--kubeconfig", str(fake.kubeconfig(tmp_path)),
                     "--format", "json"])
        return code, capsys.readouterr().out

    unavailable = Reply.of(503, json.loads(status(503, "ServiceUnavailable")), (("Retry-After", "1"),))
    failed = Reply.of(500, json.loads(status(500, "InternalError")))
    with fake_kube() as fake:
        clean_code, clean = drift(fake)
        asked = len(fake.requests)
        fake.requests.clear()
        fake.answer = lambda method, path: (unavailable if len(fake.requests) <= 4
                                            else failed if len(fake.requests) % 3 == 0 else None)
        started = time.monotonic()
        code, report = drift(fake)
    assert clean_code in (0, 1) and (code, report) == (clean_code, clean)
    assert len(fake.requests) > asked and time.monotonic() - started < 4 + 6


def test_drift_through_a_server_that_stalls_and_resets_connections_is_done_within_seconds(tmp_path: Path, capsys) -> None:
    """drift, with the production timeouts, through the fake API server that resets every seventh
    connection and stalls two requests (no byte for a minute, then a reset), once one of them twice
    in a row: the same report as without faults, in seconds (each stall waited through the whole
    read timeout took 45 s or more)."""
    from gpugov.cli import main
    from tests.helpers.fake_kube import RESET, fake_kube, stalled
    from tests.helpers.repos import REPO

    def drift(fake) -> tuple[int, str]:  # type: ignore[no-untyped-def]
        code = main(["drift", str(REPO), "--cluster", "east", "--kubeconfig", str(fake.kubeconfig(tmp_path)),
                     "--format", "json"])
        return code, capsys.readouterr().out

    with fake_kube() as fake:
        (clean_code, clean), clean_seconds = timed(lambda: drift(fake))
        fake.requests.clear()
        fake.answer = lambda method, path: (stalled(60) if len(fake.requests) in (4, 12, 13)
                                            else RESET if len(fake.requests) % 7 == 0 else None)
        (code, report), seconds = timed(lambda: drift(fake))
    assert clean_code in (0, 1) and (code, report) == (clean_code, clean)
    # three stalls (the first timeout twice, the second once) and the retries' backoff, not three read timeouts
    stalls = 2 * STALL_TIMEOUTS[0] + STALL_TIMEOUTS[1]
    assert stalls <= seconds - clean_seconds < stalls + 8 and stalls + 8 < 3 * TIMEOUT[1]


# -- reads that stream: what is kept of each page ------------------------------------------------------


def _pods() -> list[dict]:
    resources = [{}, {"limits": {"nvidia.com/gpu": "2", "cpu": "4"}}, {"requests": {"nvidia.com/mig-1g.10gb": 1}},
                 {"limits": {"memory": "1Gi", "hugepages-2Mi": "1Gi"}}, {"limits": {"huawei.com/Ascend910": "8"}}]
    labels = [{}, {"kueue.x-k8s.io/queue-name": "q", "app": "x"}, {"kueue.x-k8s.io/local-queue-name": "q"}]
    annotations = [{}, {"kueue.x-k8s.io/workload": "w", "kubectl.kubernetes.io/last-applied-configuration": "{}"}]
    pods = []
    for i in range(30):
        pods.append({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": f"p{i}", "namespace": f"ns{i % 4}", "labels": labels[i % 3],
                                  "annotations": annotations[i % 2], "managedFields": [{"manager": "kubectl"}]},
                     "spec": {"nodeName": f"n{i % 5}", "schedulerName": "volcano" if i % 2 else "default-scheduler",
                              "containers": [{"name": "a", "image": "x", "resources": resources[i % 5]},
                                             {"name": "b", "image": "y", "resources": resources[(i + 1) % 5]}]},
                     "status": {"phase": ("Running", "Pending")[i % 2], "conditions": [{"type": "Ready"}]}})
    return pods


def test_a_slim_pod_reads_as_the_whole_pod_to_every_check() -> None:
    from gpugov.cluster.observe import pod_for_drift
    from gpugov.drift.usage import accelerator_requests, went_through_kueue

    known = frozenset({"nvidia.com/gpu", "huawei.com/Ascend910"})
    for pod in _pods():
        slim = pod_for_drift(pod)
        assert accelerator_requests(slim, known) == accelerator_requests(pod, known)
        assert accelerator_requests(slim) == accelerator_requests(pod)
        assert went_through_kueue(slim) == went_through_kueue(pod)
        for part, key in (("spec", "nodeName"), ("spec", "schedulerName"), ("status", "phase"),
                          ("metadata", "name"), ("metadata", "namespace")):
            assert slim[part].get(key) == pod[part].get(key)
        assert "managedFields" not in slim["metadata"] and "conditions" not in slim["status"]


def test_finished_jobs_read_page_by_page_through_faults(faults, monkeypatch) -> None:
    """The what-if trace of a cluster's Workloads, read in one pass over pages with 500s between."""
    from gpugov.cluster import workloads as module

    def workload(i: int) -> dict:
        finished = i % 3 != 0
        conditions = [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": f"2024-01-01T01:{i:02d}:00Z"}]
        if finished:
            conditions.append({"type": "Finished", "status": "True",
                               "lastTransitionTime": f"2024-01-01T02:{i:02d}:00Z"})
        return {"metadata": {"name": f"w{i}", "namespace": "team-a",
                             "creationTimestamp": f"2024-01-01T00:{59 - i:02d}:00Z"},
                "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                    "containers": [{"resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}}]},
                "status": {"conditions": conditions}}

    everything = [workload(i) for i in range(40)]

    def paged(n: int, method: str) -> Fault | None:
        return Fault(500) if n % 2 == 0 else None

    server = faults(paged)
    path = module.WORKLOAD.collection_path()

    def page(api, kind, query):  # type: ignore[no-untyped-def]
        # The real read (through the fault server, retried), then a page of the Workloads.
        api.call("GET", path, query)
        start = int(dict(query).get("continue") or 0)
        end = min(len(everything), start + 7)
        return {"kind": "WorkloadList", "apiVersion": module.WORKLOAD.api_version,
                "metadata": {"continue": str(end) if end < len(everything) else ""},
                "items": [dict(w) for w in everything[start:end]]}

    monkeypatch.setattr("gpugov.cluster.rest.read_page", page)
    config = client.Configuration()
    config.host = server.url
    jobs, skipped = module.finished_jobs(client.ApiClient(config))
    origin = min(module._time(w["metadata"]["creationTimestamp"]) for w in everything)
    expected = [module.job_of(w, origin) for w in everything]
    expected = [j for j in expected if j is not None]
    first = min(j.submit_ms for j in expected)
    expected = sorted((replace(j, submit_ms=j.submit_ms - first) for j in expected), key=lambda j: (j.submit_ms, j.id))
    assert jobs == expected and skipped == len(everything) - len(expected) and len(server.requests) > 6


def test_a_list_read_ahead_rides_out_the_same_faults_and_fails_the_same_way(faults, monkeypatch) -> None:
    server = faults(lambda n, method: Fault(500) if n % 3 == 0 else None)
    names = [p["metadata"]["name"] for p in list_all(api_of(server), POD, page_size=PAGE, read_ahead=True)]
    assert names == EVERY_POD and len(server.requests) == 14
    monkeypatch.setenv(DEADLINE_ENV, "2")
    server = faults(lambda n, method: Fault(503, {"Retry-After": "1"}) if n >= 3 else None)
    got: list[str] = []
    with pytest.raises(CheckIncomplete, match=r"^GET .*/api/v1/pods: 503 "):
        got.extend(p["metadata"]["name"] for p in list_all(api_of(server), POD, page_size=PAGE, read_ahead=True))
    assert got == EVERY_POD[:2 * PAGE]  # the pages before the failure, then the error, as without read-ahead


def test_read_ahead_makes_the_next_item_while_the_caller_works_on_this_one() -> None:
    second_begun = threading.Event()
    overlapped: list[bool] = []

    def made() -> Iterator[int]:
        yield 1
        second_begun.set()
        yield 2
        raise CheckIncomplete("the third page")

    got: list[int] = []
    with pytest.raises(CheckIncomplete, match="the third page"):
        for item in read_ahead_of(made()):
            if item == 1:
                overlapped.append(second_begun.wait(5))  # never set while this loop holds the only thread
            got.append(item)
    assert overlapped == [True] and got == [1, 2]


def test_a_caller_that_stops_early_stops_the_reading() -> None:
    made: list[int] = []

    def endless() -> Iterator[int]:
        while True:
            made.append(len(made))
            yield made[-1]

    reader = read_ahead_of(endless())
    assert next(reader) == 0
    reader.close()
    deadline = time.monotonic() + 5
    while any(t.name == "gpugov-read-ahead" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(t.name == "gpugov-read-ahead" for t in threading.enumerate())
    assert len(made) <= 3  # the one taken, one waiting, one being offered
