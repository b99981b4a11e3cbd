"""`gpugov budget` on a Volcano cluster over a fake API: the spend from the pods Volcano bound (the
Volcano ledger), a hold as Volcano's own CloseQueue Command after gpugov's mark, a release only of a
Queue gpugov closed, holds and releases right whatever Volcano's queue controller is doing with
gpugov's earlier Commands (down, slow, or taking one as gpugov withdraws it), and the budget CronJob's
RBAC allowing exactly what the command asks for (the real scheduler's answer:
tests/e2e/test_volcano_budget_reclaim.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpugov.cli import main
from gpugov.cluster.volcano_budget import WAIT, hold_volcano_queues
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


def gpugov_command(queue: str, action: str, name: str, reason: str = "GpugovBudget") -> dict[str, Any]:
    return {"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
            "metadata": {"name": name, "namespace": "gpugov-system", "uid": f"uid-{name}"},
            "target": {"kind": "Queue", "name": queue, "uid": f"uid-{queue}"}, "action": action, "reason": reason}


def not_found(name: str) -> Reply:
    return Reply.of(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                          "code": 404, "details": {"name": name, "group": "bus.volcano.sh", "kind": "commands"}})


class Cluster:
    """The fake API's answers for one run, with Volcano's queue controller as far as budget sees it: a
    Command it carries out sets the Queue's state; `acting` False is a controller that is down (its
    Commands stay pending); `taken_on_delete` makes it take a pending Command just before gpugov's delete
    (which then finds it gone), carrying it out once the Queue has been read `lands_after` more times."""

    def __init__(self, pods: list[dict[str, Any]], queues: dict[str, dict[str, Any]],
                 commands: list[dict[str, Any]] = (), acting: bool = True, taken_on_delete: bool = False,
                 lands_after: int = 0) -> None:
        self.pods, self.queues = pods, queues
        self.commands = {c["metadata"]["name"]: c for c in commands}  # pending: not taken yet
        self.acting, self.taken_on_delete, self.lands_after = acting, taken_on_delete, lands_after
        self.in_flight: list[list[Any]] = []  # [reads left, Command]: taken, not carried out yet
        self.kube: Any = None
        self.sent = 0

    def carry_out(self, cmd: dict[str, Any]) -> None:
        queue = self.queues[cmd["target"]["name"]]
        queue["status"]["state"] = "Closed" if cmd["action"] == "CloseQueue" else "Open"

    def controller_runs(self) -> None:
        """The controller comes back: it carries out every pending and taken Command."""
        for cmd in [*self.commands.values(), *(c for _, c in self.in_flight)]:
            self.carry_out(cmd)
        self.commands, self.in_flight = {}, []

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
            return self.queue(method, path.rsplit("/", 1)[1])
        if path.startswith("/apis/bus.volcano.sh/"):
            return self.command(method, path)
        if method == "PATCH" and path.endswith("/configmaps/gpugov-budget-notify-state"):
            return Reply.of(200, {"kind": "ConfigMap", "apiVersion": "v1",
                                  "metadata": {"name": "gpugov-budget-notify-state", "namespace": "gpugov-system"}})
        return None

    def queue(self, method: str, name: str) -> Reply | None:
        if name not in self.queues:
            return None
        queue = self.queues[name]
        if method == "GET":
            for entry in [e for e in self.in_flight if e[1]["target"]["name"] == name]:
                entry[0] -= 1
                if entry[0] < 0:
                    self.carry_out(entry[1])
                    self.in_flight.remove(entry)
        if method == "PATCH":  # gpugov-budget's apply: its mark, or none
            applied = json.loads(self.kube.bodies[-1])["metadata"].get("annotations") or {}
            annotations = queue["metadata"].setdefault("annotations", {})
            annotations.pop(ANNOTATION_BUDGET_HELD, None)
            annotations.update(applied)
        return Reply.of(200, queue)

    def command(self, method: str, path: str) -> Reply | None:
        parts = path.split("/")  # /apis/bus.volcano.sh/v1alpha1/namespaces/NS/commands[/NAME]
        namespace = parts[5]
        if method == "GET" and len(parts) == 7:
            return Reply.of(200, {"kind": "CommandList", "apiVersion": "bus.volcano.sh/v1alpha1", "metadata": {},
                                  "items": [c for c in self.commands.values()
                                            if c["metadata"]["namespace"] == namespace]})
        if method == "POST" and len(parts) == 7:
            cmd = json.loads(self.kube.bodies[-1])
            self.sent += 1
            name = f"{cmd['metadata']['generateName']}{self.sent}"
            cmd["metadata"] = {**cmd["metadata"], "name": name, "uid": f"uid-{name}"}
            if self.acting:
                self.carry_out(cmd)
            else:
                self.commands[name] = cmd
            return Reply.of(201, cmd)
        if method == "DELETE" and len(parts) == 8:
            name = parts[7]
            cmd = self.commands.pop(name, None)
            if cmd is None:
                return not_found(name)
            if self.taken_on_delete:  # the controller's own delete came first
                self.in_flight.append([self.lands_after, cmd])
                return not_found(name)
            return Reply.of(200, cmd)
        return None


def run(tmp_path: Path, root: Path, cluster: Cluster, *extra: str,
        args: list[str] | None = None) -> tuple[int, list[tuple[str, str]]]:
    with fake_kube() as kube:
        kube.answer, cluster.kube = cluster.answer, kube
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
                                 "beta": live_queue("beta", "Open")}),
                    Cluster([], {"alpha": live_queue("alpha", "Open", held=True), "beta": live_queue("beta", "Open")},
                            [gpugov_command("alpha", "CloseQueue", "alpha-closequeue-x")])):
        code, seen = run(tmp_path, root, cluster, args=args)
        assert code in (0, 1)
        requests += seen
    assert ("POST", COMMANDS.format(namespace="gpugov-system")) in requests
    assert ("GET", COMMANDS.format(namespace="gpugov-system")) in requests  # its own pending Commands
    assert ("DELETE", COMMANDS.format(namespace="gpugov-system") + "/alpha-closequeue-x") in requests
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


class Clock:
    """A monotonic clock that only sleeping moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def hold(tmp_path: Path, cluster: Cluster, held: set[str],
         wait: float = WAIT) -> tuple[list[str], list[tuple[str, str]], float]:
    """One `budget --apply` decision over the fake: (its lines, its writes, the seconds it waited)."""
    from kubernetes import client

    objects = compiled(repo(tmp_path / f"repo-{len(list(tmp_path.iterdir()))}", cluster=VOLCANO_CLUSTER),
                       backend="volcano")
    clock = Clock()
    with fake_kube() as kube:
        kube.answer, cluster.kube = cluster.answer, kube
        configuration = client.Configuration()
        configuration.host = kube.url
        changes = hold_volcano_queues(client.ApiClient(configuration), objects, frozenset(held), "gpugov-system",
                                      datetime(2026, 12, 5, tzinfo=UTC), clock=clock, sleep=clock.sleep, wait=wait)
        return [str(c) for c in changes], kube.writes, clock.now


def test_a_release_withdraws_gpugovs_pending_close_and_volcano_never_carries_it_out(tmp_path: Path) -> None:
    # run 1 held alpha while the controller was down: marked, its CloseQueue pending, the Queue still Open
    cluster = Cluster([], {"alpha": live_queue("alpha", "Open", held=True), "beta": live_queue("beta", "Open")},
                      [gpugov_command("alpha", "CloseQueue", "alpha-closequeue-1")], acting=False)
    lines, writes, _ = hold(tmp_path, cluster, set())
    assert writes == [("DELETE", COMMANDS.format(namespace="gpugov-system") + "/alpha-closequeue-1"),
                      ("PATCH", f"{QUEUES}/alpha")], writes  # the mark goes only after, on an Open Queue
    assert lines == ["Queue alpha (tenant alpha): Open, withdrew gpugov's pending CloseQueue before Volcano "
                     "carried it out"]
    cluster.controller_runs()  # back up: nothing of gpugov's is left for it to close the released Queue with
    assert cluster.queues["alpha"]["status"]["state"] == "Open"
    assert ANNOTATION_BUDGET_HELD not in cluster.queues["alpha"]["metadata"].get("annotations", {})


def test_a_release_awaits_a_close_volcano_took_already_then_opens(tmp_path: Path) -> None:
    cluster = Cluster([], {"alpha": live_queue("alpha", "Open", held=True), "beta": live_queue("beta", "Open")},
                      [gpugov_command("alpha", "CloseQueue", "alpha-closequeue-1")], taken_on_delete=True,
                      lands_after=3)
    lines, writes, waited = hold(tmp_path, cluster, set())
    # the taken close shows (Closed), then OpenQueue, seen carried out, and only then the mark goes
    assert writes == [("DELETE", COMMANDS.format(namespace="gpugov-system") + "/alpha-closequeue-1"),
                      ("POST", COMMANDS.format(namespace="gpugov-system")), ("PATCH", f"{QUEUES}/alpha")], writes
    assert lines == ["Queue alpha (tenant alpha): Closed -> Open (OpenQueue)"] and 0 < waited < WAIT
    assert cluster.queues["alpha"]["status"]["state"] == "Open"
    assert ANNOTATION_BUDGET_HELD not in cluster.queues["alpha"]["metadata"]["annotations"]

    # the same, but the controller then stops before the OpenQueue: the mark stays for a later run
    cluster = Cluster([], {"alpha": live_queue("alpha", "Open", held=True), "beta": live_queue("beta", "Open")},
                      [gpugov_command("alpha", "CloseQueue", "alpha-closequeue-1")], taken_on_delete=True,
                      lands_after=1)
    cluster.acting = False
    lines, writes, _ = hold(tmp_path, cluster, set())
    assert writes == [("DELETE", COMMANDS.format(namespace="gpugov-system") + "/alpha-closequeue-1"),
                      ("POST", COMMANDS.format(namespace="gpugov-system"))], writes
    assert cluster.queues["alpha"]["metadata"]["annotations"][ANNOTATION_BUDGET_HELD]
    lines, writes, _ = hold(tmp_path, cluster, set())  # its OpenQueue still pending: nothing more sent
    assert writes == [] and lines == ["Queue alpha (tenant alpha): Closed, gpugov's OpenQueue of an earlier run is "
                                      "still pending; nothing more sent"]
    cluster.controller_runs()
    lines, writes, _ = hold(tmp_path, cluster, set())
    assert writes == [("PATCH", f"{QUEUES}/alpha")] and lines == []
    assert cluster.queues["alpha"]["status"]["state"] == "Open"
    assert ANNOTATION_BUDGET_HELD not in cluster.queues["alpha"]["metadata"]["annotations"]


def test_a_second_hold_while_the_close_is_pending_sends_nothing_new(tmp_path: Path) -> None:
    cluster = Cluster([], {"alpha": live_queue("alpha", "Open", held=True), "beta": live_queue("beta", "Open")},
                      [gpugov_command("alpha", "CloseQueue", "alpha-closequeue-1")], acting=False)
    lines, writes, waited = hold(tmp_path, cluster, {"alpha"})
    assert writes == [] and waited == 0
    assert lines == ["Queue alpha (tenant alpha): Open, gpugov's CloseQueue of an earlier run is still pending; "
                     "nothing more sent"]
    assert list(cluster.commands) == ["alpha-closequeue-1"]


def test_a_hold_withdraws_gpugovs_pending_open(tmp_path: Path) -> None:
    cluster = Cluster([], {"alpha": live_queue("alpha", "Closed", held=True), "beta": live_queue("beta", "Open")},
                      [gpugov_command("alpha", "OpenQueue", "alpha-openqueue-1")], acting=False)
    lines, writes, _ = hold(tmp_path, cluster, {"alpha"})
    assert writes == [("DELETE", COMMANDS.format(namespace="gpugov-system") + "/alpha-openqueue-1")], writes
    assert lines == ["Queue alpha (tenant alpha): Closed, withdrew gpugov's pending OpenQueue before Volcano "
                     "carried it out"]
    cluster.controller_runs()
    assert cluster.queues["alpha"]["status"]["state"] == "Closed"


def test_a_close_not_carried_out_in_time_is_reported_pending_and_keeps_the_mark(tmp_path: Path) -> None:
    cluster = Cluster([], {"alpha": live_queue("alpha", "Open"), "beta": live_queue("beta", "Open")}, acting=False)
    lines, writes, waited = hold(tmp_path, cluster, {"alpha"})
    assert writes == [("PATCH", f"{QUEUES}/alpha"), ("POST", COMMANDS.format(namespace="gpugov-system"))], writes
    assert lines == [f"Queue alpha (tenant alpha): Open, CloseQueue sent; Volcano's queue controller has not carried "
                     f"it out within {WAIT:g} s (the mark stays: a later run goes on)"]
    assert waited >= WAIT and cluster.queues["alpha"]["metadata"]["annotations"][ANNOTATION_BUDGET_HELD]
    # released before the controller came back (the audit's race): the close is withdrawn, never carried out
    lines, writes, _ = hold(tmp_path, cluster, set())
    assert [w[0] for w in writes] == ["DELETE", "PATCH"], writes
    cluster.controller_runs()
    assert cluster.queues["alpha"]["status"]["state"] == "Open"


def test_a_run_waits_as_long_as_it_is_told_for_volcano_to_carry_out_its_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--wait: a busy cluster's queue controller may take longer than the default; the run waits that long,
    no longer, and says how long it waited."""
    cluster = Cluster([], {"alpha": live_queue("alpha", "Open"), "beta": live_queue("beta", "Open")}, acting=False)
    lines, _, waited = hold(tmp_path, cluster, {"alpha"}, wait=30)
    assert lines == ["Queue alpha (tenant alpha): Open, CloseQueue sent; Volcano's queue controller has not carried "
                     "it out within 30 s (the mark stays: a later run goes on)"]
    assert 30 <= waited < 30 + 1, waited
    # the command line's --wait reaches the run (1 s, on the real clock)
    root = repo(tmp_path / "repo", cluster=VOLCANO_CLUSTER)
    cluster = Cluster(spent_pods(), {"alpha": live_queue("alpha", "Open"), "beta": live_queue("beta", "Open")},
                      acting=False)
    code, _ = run(tmp_path, root, cluster, "--apply", "--wait", "1")
    assert code == 1 and "has not carried it out within 1 s" in capsys.readouterr().err
    for bad in ("0", "-3", "soon"):
        with pytest.raises(SystemExit) as refused:  # argparse's usage error
            run(tmp_path, root, cluster, "--apply", "--wait", bad)
        said = capsys.readouterr().err
        assert refused.value.code == 2 and f"argument --wait: '{bad}' is not a whole number" in said, said


def test_a_queue_closed_by_someone_else_is_left_alone(tmp_path: Path) -> None:
    theirs = gpugov_command("beta", "CloseQueue", "beta-close", reason="Operator")
    for held in (set(), {"beta"}):
        cluster = Cluster([], {"alpha": live_queue("alpha", "Open"), "beta": live_queue("beta", "Closed")}, [theirs],
                          acting=False)
        lines, writes, waited = hold(tmp_path, cluster, held)
        assert (lines, writes, waited) == ([], [], 0)
        assert list(cluster.commands) == ["beta-close"]
