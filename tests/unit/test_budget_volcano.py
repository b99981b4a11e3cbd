"""`gpugov budget` on a Volcano cluster over a fake API: the spend from the pods Volcano bound (the
Volcano ledger), a hold as Volcano's own CloseQueue Command after gpugov's mark, a release only of a
Queue gpugov closed, and the budget CronJob's RBAC allowing exactly what the command asks for (the
real scheduler's answer: tests/e2e/test_volcano_budget_reclaim.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpugov.cli import main
from gpugov.compile.operations import BUDGET
from gpugov.drift.live import LiveState
from gpugov.drift.volcano import queue_findings
from gpugov.kube.objects import ANNOTATION_BUDGET_HELD, object_key
from gpugov.usage.budget import period_of
from tests.helpers.fake_kube import Reply, fake_kube
from tests.unit.test_budget import SSAR_PATH, Receiver, receiver  # noqa: F401
from tests.unit.test_budget_operations import BASIC_USER, CLUSTER, allowing, bound_rules, compiled, named, repo

VOLCANO_CLUSTER = CLUSTER.replace("kueue", "volcano")
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
COMMANDS = "/apis/bus.volcano.sh/v1alpha1/namespaces/{namespace}/commands"
NODES = [{"metadata": {"name": "whole-1", "labels": {"gpugov.io/pool": "whole"}}}]


def gpu_pod(name: str, namespace: str, scheduled: datetime, gpus: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"schedulerName": "volcano", "nodeName": "whole-1",
                     "containers": [{"resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": "Running", "conditions": [
                {"type": "PodScheduled", "status": "True",
                 "lastTransitionTime": f"{scheduled:%Y-%m-%dT%H:%M:%SZ}"}]}}


def live_queue(name: str, state: str, held: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}"}
    if held:
        meta["annotations"] = {ANNOTATION_BUDGET_HELD: "2026-12-01T00:00:00Z"}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": meta,
            "spec": {"weight": 1}, "status": {"state": state}}


class Cluster:
    """The fake API's answers for one run."""

    def __init__(self, pods: list[dict[str, Any]], queues: dict[str, dict[str, Any]]) -> None:
        self.pods, self.queues = pods, queues

    def answer(self, method: str, path: str) -> Reply | None:
        if method == "POST" and path == SSAR_PATH:
            return Reply.of(201, {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                                  "spec": {}, "status": {"allowed": True}})
        if method == "GET" and path == "/api/v1/nodes":
            return Reply.of(200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": NODES})
        if method == "GET" and path.startswith("/api/v1/namespaces/") and path.endswith("/pods"):
            namespace = path.split("/")[4]
            return Reply.of(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {},
                                  "items": [p for p in self.pods if p["metadata"]["namespace"] == namespace]})
        if path.startswith(QUEUES + "/"):
            name = path.rsplit("/", 1)[1]
            return Reply.of(200, self.queues[name]) if name in self.queues else None
        if method == "POST" and path.startswith("/apis/bus.volcano.sh/"):
            return Reply.of(201, {"kind": "Command", "apiVersion": "bus.volcano.sh/v1alpha1",
                                  "metadata": {"name": "c-1", "namespace": path.split("/")[5]}})
        if method == "PATCH" and path.endswith("/configmaps/gpugov-budget-notify-state"):
            return Reply.of(200, {"kind": "ConfigMap", "apiVersion": "v1",
                                  "metadata": {"name": "gpugov-budget-notify-state", "namespace": "gpugov-system"}})
        return None


def run(tmp_path: Path, root: Path, cluster: Cluster, *extra: str,
        args: list[str] | None = None) -> tuple[int, list[tuple[str, str]]]:
    with fake_kube() as kube:
        kube.answer = cluster.answer
        command = args or ["budget", str(root), "--format", "json", *extra]
        code = main([*command, "--kubeconfig", str(kube.kubeconfig(tmp_path))])
        return code, [w for w in kube.requests if w[1] != SSAR_PATH]


def spent_pods() -> list[dict[str, Any]]:
    now = datetime.now(UTC)
    return [gpu_pod("big-0", "alpha", max(now - timedelta(hours=2), period_of("month", now).since), 8)]


def test_the_spend_is_the_volcano_ledgers_and_a_hold_closes_only_the_spent_tenants_queue(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = repo(tmp_path / "repo", cluster=VOLCANO_CLUSTER.replace(
        "  operations:\n    image: registry.example.com/gpugov:1\n    agent: false\n", ""))
    cluster = Cluster(spent_pods(), {"alpha": live_queue("alpha", "Open"), "beta": live_queue("beta", "Open")})

    code, requests = run(tmp_path, root, cluster)
    report = json.loads(capsys.readouterr().out)
    alpha = next(b for b in report["budgets"] if b["holder"] == "alpha")
    assert code == 1 and alpha["held"] is True and float(alpha["spent_hours"]) > 10, report
    assert [r for r in requests if r[0] != "GET"] == []  # no --apply: nothing written

    code, requests = run(tmp_path, root, cluster, "--apply")
    writes = [r for r in requests if r[0] != "GET"]
    # marked first (gpugov-budget's annotation), then Volcano's own CloseQueue; beta untouched
    assert writes == [("PATCH", f"{QUEUES}/alpha"), ("POST", COMMANDS.format(namespace="default"))], writes
    assert "Queue alpha (tenant alpha): Open -> Closed (CloseQueue)" in capsys.readouterr().err


def test_a_release_opens_only_a_queue_gpugov_closed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = repo(tmp_path / "repo", cluster=VOLCANO_CLUSTER)
    # a new period: nothing spent; alpha closed by gpugov budget, beta closed by an operator
    cluster = Cluster([], {"alpha": live_queue("alpha", "Closed", held=True), "beta": live_queue("beta", "Closed")})
    code, requests = run(tmp_path, root, cluster, "--apply")
    writes = [r for r in requests if r[0] != "GET"]
    assert code == 0 and writes == [("POST", COMMANDS.format(namespace="gpugov-system")),
                                    ("PATCH", f"{QUEUES}/alpha")], writes
    assert "Queue alpha (tenant alpha): Closed -> Open (OpenQueue)" in capsys.readouterr().err

    # still spent, but beta's queue was closed by someone else and alpha's is already held: nothing to do
    cluster = Cluster(spent_pods(), {"alpha": live_queue("alpha", "Closing", held=True),
                                     "beta": live_queue("beta", "Closed")})
    code, requests = run(tmp_path, root, cluster, "--apply")
    assert code == 1 and [r for r in requests if r[0] not in ("GET",) and "configmaps" not in r[1]] == []


def test_the_volcano_budget_cronjobs_rbac_allows_exactly_what_it_asks(
        tmp_path: Path, receiver: tuple[Receiver, str], monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    _, url = receiver
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(proxy, raising=False)
    monkeypatch.setenv("GPUGOV_NOTIFY", "webhook")  # what the optional Secret would hold
    monkeypatch.setenv("GPUGOV_WEBHOOK_URL", url + "/hook")
    root = repo(tmp_path / "repo", cluster=VOLCANO_CLUSTER)
    objects = compiled(root, backend="volcano")
    container = named(objects, "CronJob", BUDGET)["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    for variable in container["env"]:
        monkeypatch.setenv(variable["name"], variable["value"])
    args = [root.as_posix() if a == "/config" else a for a in container["args"]]
    requests: list[tuple[str, str]] = []
    for cluster in (Cluster(spent_pods(), {"alpha": live_queue("alpha", "Open"), "beta": live_queue("beta", "Open")}),
                    Cluster([], {"alpha": live_queue("alpha", "Closed", held=True),
                                 "beta": live_queue("beta", "Open")})):
        code, seen = run(tmp_path, root, cluster, args=args)
        assert code in (0, 1)
        requests += seen
    assert ("POST", COMMANDS.format(namespace="gpugov-system")) in requests
    assert ("PATCH", f"{QUEUES}/alpha") in requests
    rules = bound_rules(objects, BUDGET)
    every = [*rules, *((None, rule) for rule in BASIC_USER)]
    used: set[int] = set()
    for method, path in [*requests, ("POST", SSAR_PATH)]:
        allowed = allowing(every, method, path)
        assert allowed, f"{method} {path} is not allowed to the {BUDGET} ServiceAccount"
        used.update(allowed)
    assert used >= set(range(len(rules))), [rules[i] for i in range(len(rules)) if i not in used]
    # what it never needs is refused: another queue, a tenant's namespace's Commands (they reach its vcjobs)
    for method, path in [("PATCH", f"{QUEUES}/lab"), ("PATCH", f"{QUEUES}/default"),
                         ("POST", COMMANDS.format(namespace="alpha")),
                         ("PATCH", "/apis/batch.volcano.sh/v1alpha1/namespaces/alpha/jobs/big"),
                         ("PATCH", "/apis/batch/v1/namespaces/alpha/jobs/big")]:
        assert allowing(every, method, path) == [], (method, path)


def test_drift_leaves_a_queue_gpugov_budget_closed_and_reports_another(tmp_path: Path) -> None:
    objects = compiled(repo(tmp_path / "repo", cluster=VOLCANO_CLUSTER), backend="volcano")
    queues = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Queue"}
    live = {object_key(queues["alpha"]): live_queue("alpha", "Closed", held=True),
            object_key(queues["beta"]): live_queue("beta", "Closed")}
    found = queue_findings(objects, LiveState(objects=live))
    assert [f.rule for f in found] == ["GD028"] and "beta" in found[0].message


def test_usage_on_volcano_shows_the_budgets_of_the_same_ledger(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    root = repo(tmp_path / "repo", cluster=VOLCANO_CLUSTER)
    cluster = Cluster(spent_pods(), {})
    with fake_kube() as kube:
        kube.answer = cluster.answer
        code = main(["usage", str(root), "--since", "1h", "--no-idle", "--format", "json",
                     "--kubeconfig", str(kube.kubeconfig(tmp_path))])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    alpha = next(b for b in data["budgets"] if b["holder"] == "tenant 'alpha'")
    assert alpha["held"] is True and float(alpha["spent_hours"]) > 10, data["budgets"]
