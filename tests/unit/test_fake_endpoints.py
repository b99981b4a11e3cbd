"""drift and apply against endpoints that are not a (complete) Kubernetes API: real HTTP servers on
127.0.0.1 answering a 404 page, `{}`, an HTML login page, a list of another kind. Every such read is
incomplete: exit 3 and one `gpugov: ...` line naming the host and path, never "everything missing",
never a traceback. The same fake answering as an empty API server gives ordinary drift (the fake is
not what makes the other cases fail).
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpugov.cli import main
from gpugov.cluster.rest import Api, read_object, read_page
from gpugov.kube.kinds import KINDS
from gpugov.sources import CheckIncomplete
from tests.helpers.fake_kube import EMPTY_OBJECT, HTML_PAGE, NOT_FOUND_PAGE, POD_LIST, FakeKube, Reply, fake_kube
from tests.helpers.repos import REPO

CLUSTER_QUEUE = KINDS[("kueue.x-k8s.io/v1beta2", "ClusterQueue")]
BROKEN = {"404 page": NOT_FOUND_PAGE, "empty object": EMPTY_OBJECT, "HTML page": HTML_PAGE, "list of pods": POD_LIST}


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    with fake_kube() as server:
        yield server


def run(capsys: pytest.CaptureFixture[str], fake: FakeKube, tmp_path: Path, *argv: str) -> tuple[int, str, list[str]]:
    code = main([argv[0], str(REPO), "--cluster", "east", "--kubeconfig", str(fake.kubeconfig(tmp_path)), *argv[1:]])
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


def one_line(err: list[str], start: str, fake: FakeKube, path: str) -> str:
    assert len(err) == 1, err
    (line,) = err
    assert line.startswith(start), line
    assert f"{fake.url}{path}" in line, line
    assert "Traceback" not in line
    return line


@pytest.mark.parametrize("reply", BROKEN.values(), ids=BROKEN.keys())
def test_drift_against_a_non_kubernetes_endpoint_is_incomplete(fake, tmp_path, capsys, reply: Reply) -> None:
    fake.answer = lambda method, path: reply
    code, out, err = run(capsys, fake, tmp_path, "drift", "--format", "text")
    assert (code, out) == (3, "")
    first_get = fake.requests[0][1]
    line = one_line(err, "gpugov: could not check drift: GET ", fake, first_get)
    assert "GD001" not in line and len(fake.requests) == 1  # stopped at the first bad answer


@pytest.mark.parametrize("reply", BROKEN.values(), ids=BROKEN.keys())
def test_apply_against_a_non_kubernetes_endpoint_is_incomplete_and_writes_nothing(fake, tmp_path, capsys,
                                                                                  reply: Reply) -> None:
    fake.answer = lambda method, path: reply
    code, out, err = run(capsys, fake, tmp_path, "apply")
    assert (code, out) == (3, "")
    one_line(err, "gpugov: apply failed: GET ", fake, "/apis")
    assert fake.writes == []


def test_a_well_formed_empty_api_is_drift_not_incomplete(fake, tmp_path, capsys) -> None:
    code, out, err = run(capsys, fake, tmp_path, "drift", "--format", "json")
    report = json.loads(out)
    assert code == 1 and err == [] and "incomplete" not in report
    assert {f["rule"] for f in report["findings"]} == {"GD001", "GD010"}  # objects and nodes missing


def test_a_collection_whose_crd_is_missing_is_incomplete_not_everything_missing(fake, tmp_path, capsys) -> None:
    fake.served = [k for k in KINDS.values() if k.group != "kueue.x-k8s.io"]  # Kueue not installed
    code, out, err = run(capsys, fake, tmp_path, "drift", "--format", "text")
    assert (code, out) == (3, "")
    line = one_line(err, "gpugov: could not check drift: GET ", fake, "/apis/kueue.x-k8s.io/v1beta2/")
    assert "is Kueue (v0.16 or later) installed?" in line
    code, out, err = run(capsys, fake, tmp_path, "apply")
    line = one_line(err, "gpugov: apply failed: GET ", fake, "/apis")
    assert code == 3 and "does not serve clusterqueues of kueue.x-k8s.io/v1beta2" in line
    assert fake.writes == []  # refused before the first write


def test_a_list_of_the_right_kind_but_another_api_version_is_incomplete(fake) -> None:
    old = {"kind": "ClusterQueueList", "apiVersion": "kueue.x-k8s.io/v1beta1", "metadata": {}, "items": []}
    fake.answer = lambda method, path: Reply.of(200, old) if path == CLUSTER_QUEUE.collection_path() else None
    api = Api(api_client(fake))
    with pytest.raises(CheckIncomplete, match=re.escape("expected ClusterQueueList of kueue.x-k8s.io/v1beta2")):
        read_page(api, CLUSTER_QUEUE, [])


def test_list_items_must_be_named_objects(fake) -> None:
    page = {"kind": "ClusterQueueList", "apiVersion": "kueue.x-k8s.io/v1beta2", "metadata": {}, "items": [{}]}
    fake.answer = lambda method, path: Reply.of(200, page)
    with pytest.raises(CheckIncomplete, match=re.escape("has no metadata.name")):
        read_page(Api(api_client(fake)), CLUSTER_QUEUE, [])


@pytest.mark.parametrize("reply", [NOT_FOUND_PAGE, EMPTY_OBJECT, HTML_PAGE, Reply.of(404, {})],
                         ids=["404 page", "empty object", "HTML page", "404 without Status"])
def test_not_found_is_only_the_apis_own_status(fake, reply: Reply) -> None:
    api = Api(api_client(fake))
    assert read_object(api, CLUSTER_QUEUE, "nlp") is None  # the empty API: NotFound Status naming it
    fake.answer = lambda method, path: reply if path.endswith("/nlp") else None
    with pytest.raises(CheckIncomplete, match=re.escape(f"GET {fake.url}/apis/kueue.x-k8s.io/v1beta2/clusterqueues/nlp: ")):
        read_object(api, CLUSTER_QUEUE, "nlp")


def test_drift_reads_single_objects_as_carefully_as_lists(fake, tmp_path, capsys) -> None:
    """A desired object absent from the managed-by list is read by name: `{}` there is no answer."""
    fake.answer = lambda method, path: EMPTY_OBJECT if path.endswith("/clusterqueues/nlp") else None
    code, out, err = run(capsys, fake, tmp_path, "drift", "--format", "text")
    assert (code, out) == (3, "")
    one_line(err, "gpugov: could not check drift: GET ", fake, "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/nlp")


def test_forbidden_names_the_credentials(fake, tmp_path, capsys) -> None:
    denied = Reply.of(403, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
                            "message": 'nodes is forbidden: User "drift" cannot list resource "nodes"', "code": 403})
    fake.answer = lambda method, path: denied if path == "/api/v1/nodes" else None
    code, _, err = run(capsys, fake, tmp_path, "drift", "--format", "text")
    line = one_line(err, "gpugov: could not check drift: GET ", fake, "/api/v1/nodes")
    assert code == 3 and 'cannot list resource "nodes" (the credentials may not read this kind)' in line


def test_unreachable_cluster_is_incomplete(tmp_path, capsys) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    fake = FakeKube()
    fake.url = f"http://127.0.0.1:{port}"
    code, out, err = run(capsys, fake, tmp_path, "drift", "--format", "text")
    assert (code, out) == (3, "")
    assert "cluster unreachable or timed out" in one_line(err, "gpugov: could not check drift: GET ", fake, "/apis/")


@pytest.mark.parametrize("fmt", ["json", "github", "markdown"])
def test_exit_3_still_prints_a_report_that_says_so(fake, tmp_path, capsys, fmt: str) -> None:
    fake.answer = lambda method, path: HTML_PAGE
    code, out, err = run(capsys, fake, tmp_path, "drift", "--format", fmt)
    reason = err[0].removeprefix("gpugov: could not check drift: ")
    assert code == 3 and len(err) == 1 and reason.startswith("GET ")
    if fmt == "json":
        report = json.loads(out)
        assert (report["incomplete"], report["reason"], report["errors"]) == (True, reason, 1)
        (finding,) = report["findings"]
        assert finding["rule"] == "GD000" and finding["message"] == f"could not check drift on cluster east: {reason}"
        assert finding["object"] == "Cluster east"
    elif fmt == "github":
        assert out.startswith("::error title=GD000::could not check drift on cluster east: GET ")
    else:
        assert "could not check" in out.splitlines()[0] and "| error |  | GD000 |" in out


def test_apply_dry_run_lists_and_writes_nothing(fake, tmp_path, capsys) -> None:
    code, out, err = run(capsys, fake, tmp_path, "apply", "--dry-run")
    lines = out.splitlines()
    assert code == 0 and err == []
    assert lines[-1].startswith("dry run: ") and lines[-1].endswith("; 0 would be deleted and 0 released; nothing was changed")
    assert any(line.split()[:4] == ["would", "create", "ClusterQueue", "nlp"] for line in lines)  # not there yet
    assert any(line.split()[:3] == ["would", "skip", "Node"] for line in lines)  # nodes are never created
    assert fake.writes == []
    assert ("GET", "/apis") in fake.requests  # it did read what it would prune


def api_client(fake: FakeKube):
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = fake.url
    return client.ApiClient(configuration)


KUEUE = "kueue.x-k8s.io/resource-in-use"


def clusterqueue(reserving: int, finalizers: list[str] = ()) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "gone", "finalizers": list(finalizers)},
            "spec": {"stopPolicy": "HoldAndDrain"}, "status": {"reservingWorkloads": reserving}}


@pytest.mark.parametrize(("empty_after", "held_for", "expected", "polls_after_delete", "finalizer"), [
    (3, 0, "deleted", 2, KUEUE),
    (3, 4, "deleted", 6, KUEUE),
    (3, None, "deleting", 12, KUEUE),
    (None, None, "deleting", 1, KUEUE),
    (3, None, "deleting", 2, "example.com/backup"),
], ids=["drained in time", "released seconds after the delete", "held past the grace", "still draining at the deadline",
        "held by another controller"])
def test_prune_deletes_a_drained_clusterqueue_once_kueue_reports_it_empty(fake, empty_after, held_for, expected,
                                                                          polls_after_delete, finalizer) -> None:
    """Kueue lifts its finalizer only when it reconciles a deleted ClusterQueue that is already
    empty: prune drains, waits for the status to say so, and only then deletes (or at the deadline);
    a queue deleted empty is given RELEASE_GRACE seconds to go before it is called held, unless
    what holds it is not Kueue's finalizer (nothing Kueue does would lift it)."""
    from gpugov.cluster.prune import RELEASE_GRACE, Prunable, prune

    assert RELEASE_GRACE == 10.0  # the 11 reads of "held past the grace": one each second, and one at the end
    path = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/gone"
    reads: list[int] = []
    deleted: list[bool] = []
    read_after_delete: list[int] = []

    def answer(method: str, where: str) -> Reply | None:
        if where != path:
            return None
        if method == "DELETE":
            deleted.append(True)
            return Reply.of(200, clusterqueue(1, [finalizer]))
        if method == "GET" and deleted:
            read_after_delete.append(1)
            if held_for is not None and len(read_after_delete) > held_for:
                return None  # the empty API's NotFound: gone
            return Reply.of(200, clusterqueue(0 if empty_after else 1, [finalizer]))
        if method == "GET":
            reads.append(1)
            return Reply.of(200, clusterqueue(0 if empty_after and len(reads) >= empty_after else 1))
        return Reply.of(200, clusterqueue(1))  # the stopPolicy patch

    fake.answer = answer
    live = clusterqueue(1)
    live["spec"]["stopPolicy"] = "None"
    now = [0.0]
    (result,) = prune(api_client(fake), [Prunable("delete", live)], drain_timeout=30,
                      clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    methods = [m for m, p in fake.requests if p == path]
    assert methods[0] == "PATCH" and methods.count("DELETE") == 1
    polls = methods[1:methods.index("DELETE")]
    assert polls == ["GET"] * (3 if empty_after else 31)  # polled each second until empty, or 30 s
    # a queue deleted still reserving, or held by another finalizer, is read once or twice; one
    # deleted empty is read until Kueue lets it go, or for 10 s, and then once more for the outcome
    assert methods[methods.index("DELETE") + 1:] == ["GET"] * polls_after_delete
    assert result.outcome == expected
    if expected == "deleting":
        assert f"held by finalizers {finalizer}" in result.note


def test_prune_trusts_only_a_status_kueue_wrote_after_it_saw_the_drain(fake) -> None:
    """Kueue writes a ClusterQueue's counts a second after its workloads change: right after the
    stopPolicy patch (generation 2) its status can still be one written before a workload was
    admitted, saying 0. prune waits for a status whose Active condition observes generation 2, and
    deletes the queue only once that one says it is empty."""
    from gpugov.cluster.prune import Prunable, prune

    path = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/gone"
    statuses = [(1, 0), (1, 0), (2, 1), (2, 1), (2, 0)]  # (the Active condition's observedGeneration, reserving)
    reads: list[int] = []

    def queue(generation: int, observed: int, reserving: int) -> dict:
        body = clusterqueue(reserving, [KUEUE])
        body["metadata"]["generation"] = generation
        body["status"]["conditions"] = [{"type": "Active", "status": "False", "reason": "Stopped",
                                         "observedGeneration": observed}]
        return body

    def answer(method: str, where: str) -> Reply | None:
        if where != path:
            return None
        if method == "PATCH":
            return Reply.of(200, queue(2, 1, 0))
        if method == "DELETE":
            return Reply.of(200, queue(2, 2, 0))
        if "DELETE" in [m for m, p in fake.requests if p == path]:
            return None  # gone
        reads.append(1)
        return Reply.of(200, queue(2, *statuses[min(len(reads), len(statuses)) - 1]))

    fake.answer = answer
    live = queue(1, 1, 0)
    live["spec"]["stopPolicy"] = "None"
    now = [0.0]
    (result,) = prune(api_client(fake), [Prunable("delete", live)], drain_timeout=30,
                      clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    methods = [m for m, p in fake.requests if p == path]
    assert methods[:methods.index("DELETE")] == ["PATCH"] + ["GET"] * len(statuses)  # not at the first stale 0
    assert result.outcome == "deleted"
