"""GPU-hour budgets (issue #27): the declaration, the pure decision (usage.budget) and `gpugov budget`
over a fake Kubernetes API with a real webhook receiver (alerts once per threshold)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.cli import main
from gpugov.declarations.model import Budget, Model
from gpugov.usage.attribution import attribution
from gpugov.usage.budget import (
    BUDGET_ALERT,
    BUDGET_SPENT,
    alerts,
    budget_statuses,
    held_tenants,
    period_of,
    period_rows,
)
from gpugov.usage.ledger import ledger
from gpugov.usage.segments import segments
from gpugov.usage.window import Window
from tests.helpers.fake_kube import Reply, fake_kube
from tests.helpers.local_http import serving
from tests.unit.test_queueing_unit import raw_workload
from tests.unit.test_usage_unit import ORG

SSAR_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
LAB = ORG["tenants/lab.yaml"]
BUDGETED = (LAB.replace("spec: {costCenter: CC-LAB}",
                        "spec:\n  costCenter: CC-LAB\n  budget: {acceleratorHours: 100, alerts: [10, 50]}")
            .replace("  quotas: [{pool: whole, resources: {accelerators: 4}}]\n",
                     "  quotas: [{pool: whole, resources: {accelerators: 4}}]\n"
                     "  budget: {acceleratorHours: 10, action: hold}\n", 1))


def build(tmp_path: Path, lab: str = BUDGETED) -> tuple[Path, Model]:
    for rel, text in {**ORG, "tenants/lab.yaml": lab}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    result = validate_repo(tmp_path)
    assert result.model is not None and not result.errors, result.errors
    return tmp_path, result.model


def workload(name: str, namespace: str, admitted: datetime, gpus: int, *, resource: str = "nvidia.com/gpu",
             flavor: str = "whole", finished: datetime | None = None) -> dict[str, Any]:
    return raw_workload(name, namespace, gpus=gpus, resource=resource, flavor=flavor, cluster_queue=namespace,
                        admitted=admitted, finished=finished)


def test_a_budget_is_declared_with_defaults_and_absent_stays_absent(tmp_path: Path) -> None:
    _, model = build(tmp_path)
    assert model.tenants["alpha"].budget == Budget(Decimal(10), "month", (80, 100), "hold")
    assert model.departments["lab"].budget == Budget(Decimal(100), "month", (10, 50), "none")
    assert model.tenants["beta"].budget is None


def test_the_schema_refuses_a_bad_period(tmp_path: Path) -> None:
    for rel, text in {**ORG, "tenants/lab.yaml": BUDGETED.replace("action: hold", "period: year")}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    result = validate_repo(tmp_path)
    assert any(f.rule == "GG003" and "budget" in f.message for f in result.errors), result.errors


def test_periods_are_utc_months_and_iso_weeks() -> None:
    now = datetime(2026, 12, 3, 21, 30, tzinfo=UTC)  # a Thursday
    month, week = period_of("month", now), period_of("week", now)
    assert (month.label, month.since, month.until) == ("2026-12", datetime(2026, 12, 1, tzinfo=UTC),
                                                        datetime(2027, 1, 1, tzinfo=UTC))
    assert (week.label, week.since, week.until) == ("2026-W49", datetime(2026, 11, 30, tzinfo=UTC),
                                                     datetime(2026, 12, 7, tzinfo=UTC))


def test_spend_thresholds_and_hold(tmp_path: Path) -> None:
    _, model = build(tmp_path)
    now = datetime(2026, 12, 3, 12, tzinfo=UTC)
    start = now - timedelta(hours=3)
    raws = [workload("a", "alpha", start, 4),  # 12 device-hours: 120% of alpha's 10
            workload("b", "beta", start, 7, resource="nvidia.com/mig-1g.10gb", flavor="sliced"),  # 3 devices-hours
            workload("old", "beta", datetime(2026, 11, 30, tzinfo=UTC), 8,
                     finished=datetime(2026, 12, 1, 1, tzinfo=UTC))]  # last month's 24 h count 1 h this month
    from gpugov.queueing.workload import from_object

    rules = attribution(model, "default", [])
    rows = period_rows(model, "default", [from_object(r) for r in raws], rules, now)
    statuses = {s.holder.name: s for s in budget_statuses(model, rows, now)}
    alpha, lab = statuses["alpha"], statuses["lab"]
    assert (alpha.spent, alpha.percent, alpha.crossed, alpha.hold) == (Decimal(12), Decimal("120.0"), (80, 100), True)
    assert lab.spent == Decimal(12 + 3 + 8) and lab.crossed == (10,) and not lab.hold  # a department sums below it
    assert lab.tenants == ("alpha", "beta")
    assert held_tenants(statuses.values()) == {"alpha"}
    found = alerts(model, statuses.values())
    assert [(a.key, a.finding.rule) for a in found] == [
        ("Tenant/alpha/2026-12/80", BUDGET_ALERT.id), ("Tenant/alpha/2026-12/100", BUDGET_SPENT.id),
        ("Department/lab/2026-12/10", BUDGET_ALERT.id)]
    assert found[1].finding.location is not None and found[1].finding.location.file.endswith("tenants/lab.yaml")
    # the same ledger, computed by hand over the period, says the same
    window = Window(period_of("month", now).since, now)
    found_segments, _ = segments([from_object(r) for r in raws], window, now, rules.tenant_of, rules.offers)
    by_hand = ledger(model, "default", window, found_segments).rows
    assert sum(r.admitted_hours for r in by_hand if r.tenant == "alpha") == Decimal(12)


def test_under_budget_nothing_is_crossed_or_held(tmp_path: Path) -> None:
    _, model = build(tmp_path)
    now = datetime(2026, 12, 3, 12, tzinfo=UTC)
    from gpugov.queueing.workload import from_object

    rows = period_rows(model, "default", [from_object(workload("a", "alpha", now - timedelta(hours=1), 4))],
                       attribution(model, "default", []), now)
    statuses = budget_statuses(model, rows, now)
    assert [(s.holder.name, s.crossed, s.hold) for s in statuses] == [("alpha", (), False), ("lab", (), False)]
    assert alerts(model, statuses) == []


class Receiver:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    rec = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            rec.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving(Handler) as url:
        yield rec, url


def live_queue(name: str, stop: str, manager: str | None = None) -> dict[str, Any]:
    managed = [{"manager": manager, "operation": "Apply", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:stopPolicy": {}}}}] if manager else []
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": name, "managedFields": managed}, "spec": {"stopPolicy": stop}}


def run_budget(tmp_path: Path, repo: Path, workloads: list[dict[str, Any]], queues: dict[str, dict[str, Any]],
               *extra: str) -> tuple[int, list[tuple[str, str]]]:
    with fake_kube() as kube:
        def answer(method: str, path: str) -> Reply | None:
            if method == "GET" and path == "/apis/kueue.x-k8s.io/v1beta2/workloads":
                return Reply.of(200, {"kind": "WorkloadList", "apiVersion": "kueue.x-k8s.io/v1beta2",
                                      "metadata": {}, "items": workloads})
            if method == "POST" and path == SSAR_PATH:  # may it list every Workload: yes
                return Reply.of(201, {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                                      "spec": {}, "status": {"allowed": True}})
            if "/clusterqueues/" in path:
                name = path.rsplit("/", 1)[1]
                return Reply.of(200, queues[name]) if name in queues else None
            return None

        kube.answer = answer
        code = main(["budget", str(repo), "--kubeconfig", str(kube.kubeconfig(tmp_path)), *extra])
        return code, [w for w in kube.writes if w[1] != SSAR_PATH]


def test_budget_command_alerts_once_per_threshold_and_holds(tmp_path: Path, receiver: tuple[Receiver, str],
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    rec, url = receiver
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(proxy, raising=False)
    monkeypatch.setenv("GPUGOV_WEBHOOK_URL", url + "/hook")
    repo, _ = build(tmp_path / "repo")
    now = datetime.now(UTC)
    start = max(now - timedelta(hours=2), period_of("month", now).since)  # within this month's budget
    running = [workload("big", "alpha", start, 8)]  # 16 device-hours (fewer in a month's first two hours)
    state = tmp_path / "state.json"
    queues = {"alpha": live_queue("alpha", "None"), "beta": live_queue("beta", "None")}
    notify = ("--notify", "webhook", "--notify-state", str(state))

    code, writes = run_budget(tmp_path, repo, running, queues, "--format", "json", *notify)
    out, err = capsys.readouterr()
    assert out, (code, err)
    report = json.loads(out)
    assert code == 1 and writes == []  # no --apply: nothing written to the cluster
    alpha = next(b for b in report["budgets"] if b["holder"] == "alpha")
    assert alpha["crossed"] == [80, 100] and alpha["held"] is True and report["changes"] == []
    sent = sorted(b["findings"][0]["message"] for b in rec.bodies)
    assert len(sent) == 3 and all(m.startswith(("tenant 'alpha' reached", "department 'lab' reached")) for m in sent)

    code, writes = run_budget(tmp_path, repo, running, queues, "--apply", *notify)
    assert code == 1 and len(rec.bodies) == 3  # told once: the second run sends nothing
    assert writes == [("PATCH", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/alpha")]  # only the held tenant
    assert "stopPolicy None -> Hold" in capsys.readouterr().err

    # A new period (no usage yet): the queue gpugov budget held is released; a stop someone else set stays.
    held = {"alpha": live_queue("alpha", "Hold", "gpugov-budget"), "beta": live_queue("beta", "Hold", "kubectl-patch")}
    code, writes = run_budget(tmp_path, repo, [], held, "--apply", *notify)
    assert code == 0 and writes == [("PATCH", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/alpha")]
    assert "stopPolicy Hold -> None" in capsys.readouterr().err


def test_without_budgets_the_command_reads_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo, _ = build(tmp_path / "repo", LAB)
    code, writes = run_budget(tmp_path, repo, [], {})
    assert code == 0 and writes == [] and "no GPU-hour budgets declared" in capsys.readouterr().out


def test_without_budgets_apply_releases_what_it_held(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The last budget removed: --apply still sets None where gpugov budget had set Hold, and only there."""
    repo, _ = build(tmp_path / "repo", LAB)
    held = {"alpha": live_queue("alpha", "Hold", "gpugov-budget"), "beta": live_queue("beta", "Hold", "kubectl-patch")}
    code, writes = run_budget(tmp_path, repo, [], held, "--apply")
    assert code == 0 and writes == [("PATCH", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/alpha")]
    assert "stopPolicy Hold -> None" in capsys.readouterr().err


def test_usage_shows_spent_and_budget_per_period(tmp_path: Path) -> None:
    from dataclasses import replace

    from gpugov.queueing.workload import from_object
    from gpugov.usage import formats

    _, model = build(tmp_path)
    now = datetime(2026, 12, 3, 12, tzinfo=UTC)
    rules = attribution(model, "default", [])
    workloads = [from_object(workload("a", "alpha", now - timedelta(hours=3), 4))]
    rows = period_rows(model, "default", workloads, rules, now)
    window = Window(now - timedelta(hours=1), now)  # the ledger's own window: one hour of the three
    found, _ = segments(workloads, window, now, rules.tenant_of, rules.offers)
    book = replace(ledger(model, "default", window, found),
                   budgets=tuple(s.line() for s in budget_statuses(model, rows, now)))
    data = json.loads(formats.json_text(book))
    assert data["budgets"] == [
        {"holder": "tenant 'alpha'", "period": "2026-12", "since": "2026-12-01T00:00:00Z", "spent_hours": "12",
         "budget_hours": "10", "percent": "120", "action": "hold", "held": True},
        {"holder": "department 'lab'", "period": "2026-12", "since": "2026-12-01T00:00:00Z", "spent_hours": "12",
         "budget_hours": "100", "percent": "12", "action": "none", "held": False}]
    table = formats.table(book)
    assert "GPU-hour budgets, spent this period" in table
    assert any(line.split()[:6] == ["tenant", "'alpha'", "2026-12", "2026-12-01T00:00:00Z", "12", "10"]
               for line in table.splitlines())
