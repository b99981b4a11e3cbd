"""Issue #26, `gpugov reclaim`: the decision table (pure), the per-pod metric read from a real local
Prometheus-like HTTP server, and the command over a fake Kubernetes API (tests/helpers/fake_kube.py)
with that server: dry run lists, --apply patches and records Events, a Prometheus that cannot be read
ends the run with exit 3 and nothing written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from gpugov.cli import main
from gpugov.cluster.reclaim import event_for, patch_for
from gpugov.declarations.model import IdlePolicy
from gpugov.kube.objects import ANNOTATION_RECLAIM_DEACTIVATED, ANNOTATION_RECLAIM_SNOOZE, ANNOTATION_RECLAIM_WARNED
from gpugov.reclaim.decide import CLEAR, DEACTIVATE, NONE, WARN, Decision, Subject, decide
from gpugov.sources.pod_metrics import pod_series
from gpugov.sources.prometheus import PrometheusError
from tests.helpers.fake_kube import Reply, fake_kube
from tests.helpers.local_http import serving
from tests.helpers.repos import overlay_repo, write

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
STEP = timedelta(seconds=60)
POLICY = IdlePolicy(metric="DCGM_FI_PROF_GR_ENGINE_ACTIVE", below_percent=Decimal(5), window=7200, grace=1800,
                    action="deactivate", exempt_classes=("serving",), exempt_queues=("notebooks",))
SNOOZE_MAX = 8 * 3600


def subject(**changes: Any) -> Subject:
    base: dict[str, Any] = {"key": "alpha/job-a", "tenant": "alpha", "queue": "main", "priority_class": "batch",
                            "non_preemptible": False, "admitted_at": NOW - timedelta(hours=3), "pods": ("job-a-0",)}
    return Subject(**{**base, **changes})


def flat(percent: float, start: datetime = NOW - timedelta(hours=2, minutes=1), end: datetime = NOW,
         step: timedelta = STEP) -> list[tuple[datetime, float]]:
    points, at = [], start
    while at <= end:
        points.append((at, percent))
        at += step
    return points


def run(sub: Subject, samples: dict[str, list[tuple[datetime, float]]] | None = None,
        policy: IdlePolicy | None = POLICY) -> Decision:
    return decide(sub, policy, {"job-a-0": flat(1.0)} if samples is None else samples, NOW, STEP, SNOOZE_MAX)


# -- the decision table ------------------------------------------------------------------------------

def test_idle_for_the_window_is_warned_then_deactivated_after_the_grace() -> None:
    first = run(subject())
    assert (first.state, first.action) == ("idle", WARN)
    assert "at most 1.0% over 2h (threshold 5%)" in first.why and "deactivated after 30m" in first.why
    during = run(subject(warned_at=NOW - timedelta(minutes=29)))
    assert (during.state, during.action) == ("grace", NONE)
    after = run(subject(warned_at=NOW - timedelta(minutes=30)))
    assert (after.state, after.action) == ("reclaim", DEACTIVATE)
    notify_only = run(subject(warned_at=NOW - timedelta(hours=5)),
                      policy=IdlePolicy(**{**POLICY.__dict__, "action": "notify"}))
    assert (notify_only.state, notify_only.action) == ("warned", NONE)


def test_busy_is_left_alone_and_a_warning_is_cleared() -> None:
    spike = flat(1.0)
    spike[40] = (spike[40][0], 5.0)  # one step at the threshold: not idle
    assert (run(subject(), {"job-a-0": spike}).state, run(subject(), {"job-a-0": spike}).action) == ("busy", NONE)
    cleared = run(subject(warned_at=NOW - timedelta(hours=1)), {"job-a-0": spike})
    assert (cleared.state, cleared.action, cleared.peak) == ("busy", CLEAR, 5.0)


def test_exemptions_by_class_queue_and_non_preemptible() -> None:
    assert run(subject(priority_class="serving")).state == "exempt"
    assert run(subject(queue="notebooks")).state == "exempt"
    assert run(subject(non_preemptible=True, priority_class="critical")).state == "exempt"
    keep = IdlePolicy(**{**POLICY.__dict__, "exempt_non_preemptible": False})
    assert run(subject(non_preemptible=True), policy=keep).action == WARN
    assert run(subject(), policy=None).state == "no-policy"


def test_a_snooze_within_the_maximum_holds_one_beyond_it_is_ignored() -> None:
    snoozed = run(subject(snooze_until=NOW + timedelta(hours=8)))
    assert (snoozed.state, snoozed.action) == ("snoozed", NONE)
    too_far = run(subject(snooze_until=NOW + timedelta(hours=8, seconds=1)))
    assert too_far.action == WARN and "further ahead than the declared maximum (8h) and is ignored" in too_far.why
    expired = run(subject(snooze_until=NOW - timedelta(seconds=1)))
    assert expired.action == WARN
    unreadable = run(subject(snooze_unreadable=True))
    assert unreadable.action == WARN and "not an RFC 3339 time" in unreadable.why


@pytest.mark.parametrize(("case", "samples", "why"), [
    ("no series", {}, "no samples"),
    ("stale", {"job-a-0": flat(1.0, end=NOW - timedelta(minutes=6))}, "stale"),
    # the exporter lost the series 4 minutes ago, the pod runs on: however recent, not measured to the end
    ("stopped part-way", {"job-a-0": flat(1.0, end=NOW - timedelta(minutes=4))}, "stale (last sample 2026-12-01T11:56:00Z)"),
    ("stopped three steps ago", {"job-a-0": flat(1.0, end=NOW - 3 * STEP)}, "stale"),
    ("starts late", {"job-a-0": flat(1.0, start=NOW - timedelta(hours=1))}, "after the window's start"),
    ("gap", {"job-a-0": [p for p in flat(1.0) if not NOW - timedelta(minutes=50) < p[0] < NOW - timedelta(minutes=40)]},
     "a gap from"),
    ("NaN", {"job-a-0": [*flat(1.0)[:-1], (NOW, float("nan"))]}, "a sample without a value"),
])
def test_missing_stale_or_partial_metrics_are_unknown_never_idle(case: str, samples: dict[str, Any], why: str) -> None:
    decision = run(subject(warned_at=NOW - timedelta(hours=4)), samples)  # even past its grace
    assert (decision.state, decision.action) == ("unknown", NONE), case
    assert why in decision.why


def test_a_series_up_to_two_steps_short_of_the_end_still_covers_the_window() -> None:
    # the read's last step may miss a scrape that is about to land: two steps are the same tolerance as a gap
    assert run(subject(), {"job-a-0": flat(1.0, end=NOW - 2 * STEP)}).action == WARN


def test_one_pod_without_metrics_makes_a_multi_pod_workload_unknown() -> None:
    sub = subject(pods=("job-a-0", "job-a-1"))
    assert run(sub, {"job-a-0": flat(0.0)}).state == "unknown"
    assert run(sub, {"job-a-0": flat(0.0), "job-a-1": flat(0.0)}).action == WARN
    assert run(sub, {"job-a-0": flat(0.0), "job-a-1": flat(60.0)}).state == "busy"


def test_young_and_podless_workloads_are_not_judged() -> None:
    assert run(subject(admitted_at=NOW - timedelta(hours=1))).state == "young"
    assert run(subject(pods=())).state == "unknown"


def test_the_patches_and_the_event_say_what_was_done() -> None:
    warn = Decision("alpha/job-a", "alpha", "idle", WARN, "idle")
    assert patch_for(warn, NOW) == {"metadata": {"annotations": {ANNOTATION_RECLAIM_WARNED: "2026-12-01T12:00:00Z"}}}
    gone = Decision("alpha/job-a", "alpha", "reclaim", DEACTIVATE, "over")
    assert patch_for(gone, NOW) == {"spec": {"active": False},
                                    "metadata": {"annotations": {ANNOTATION_RECLAIM_DEACTIVATED: "2026-12-01T12:00:00Z"}}}
    assert patch_for(Decision("k", "t", "busy", CLEAR, ""), NOW) == {
        "metadata": {"annotations": {ANNOTATION_RECLAIM_WARNED: None}}}


# -- the metric, from a Prometheus-like HTTP server --------------------------------------------------

class Metrics:
    """Per-pod values the fake Prometheus serves: (namespace, pod) -> percent, or None: no series."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], float] = {}
        self.stopped: dict[tuple[str, str], float] = {}  # (namespace, pod) -> epoch seconds its series ends at
        self.queries: list[str] = []
        self.broken = False


@pytest.fixture()
def prometheus() -> Iterator[tuple[str, Metrics]]:
    metrics = Metrics()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            params = {k: v[0] for k, v in parse_qs(url.query).items()}
            if metrics.broken or url.path != "/api/v1/query_range":
                self.send_response(503)
                self.end_headers()
                return
            metrics.queries.append(params["query"])
            start, end, step = float(params["start"]), float(params["end"]), int(params["step"])
            ratio = params["query"].startswith("100 *")  # GR_ENGINE_ACTIVE is served as a 0..1 ratio, scaled back
            result = []
            for (ns, pod), percent in sorted(metrics.values.items()):
                values, at = [], start
                while at <= min(end, metrics.stopped.get((ns, pod), end)):
                    values.append([at, str(percent / 100 if ratio else percent)])
                    at += step
                if ratio:  # the query's own scaling, as Prometheus would apply it
                    values = [[t, str(float(v) * 100)] for t, v in values]
                result.append({"metric": {"exported_namespace": ns, "exported_pod": pod, "namespace": "gpu-operator",
                                          "pod": "dcgm-exporter-x"}, "values": values})
            body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as url:
        yield url, metrics


def test_pod_series_reads_the_declared_metric_per_pod(prometheus: tuple[str, Metrics]) -> None:
    url, metrics = prometheus
    metrics.values = {("alpha", "job-a-0"): 2.0, ("beta", "serve-0"): 80.0}
    series = pod_series(url, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", NOW - timedelta(hours=2), NOW, 60)
    assert sorted(series) == [("alpha", "job-a-0"), ("beta", "serve-0")]  # the workload's pod, not the exporter's
    assert len(series[("alpha", "job-a-0")]) == 121 and {v for _, v in series[("alpha", "job-a-0")]} == {2.0}
    assert metrics.queries == ["100 * max by (exported_namespace, exported_pod, namespace, pod, pod_name) "
                               "(max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[60s]))"]
    metrics.broken = True
    with pytest.raises(PrometheusError):
        pod_series(url, "DCGM_FI_DEV_GPU_UTIL", NOW - timedelta(hours=2), NOW, 60)


# -- the command over a fake Kubernetes API and the Prometheus-like server ---------------------------

GUARDRAILS = """apiVersion: gpugov.io/v1alpha1
kind: Guardrails
metadata:
  name: default
spec:
  capacityRatio: 1.0
  platformTeam: ["@lab/platform"]
  reclaim:
    idle: {window: 1h, grace: 30m, action: deactivate}
"""


def workload(name: str, namespace: str, admitted: datetime, priority_class: str = "batch", queue: str = "main",
             annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": f"job-{name}", "namespace": namespace, "uid": f"wl-{name}",
                         "annotations": annotations or {},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                              "uid": f"job-{name}", "controller": True}]},
            "spec": {"queueName": queue, "priorityClassRef": {"kind": "WorkloadPriorityClass", "name": priority_class},
                     "podSets": [{"name": "main", "count": 1}]},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "True", "lastTransitionTime":
                                       f"{admitted:%Y-%m-%dT%H:%M:%SZ}"},
                                      {"type": "Admitted", "status": "True", "lastTransitionTime":
                                       f"{admitted:%Y-%m-%dT%H:%M:%SZ}"}]}}


def pod(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{name}-0", "namespace": namespace, "uid": f"pod-{name}",
                         "ownerReferences": [{"kind": "Job", "name": name, "uid": f"job-{name}", "controller": True}]},
            "status": {"phase": "Running"}}


@pytest.fixture()
def cluster(tmp_path: Path, prometheus: tuple[str, Metrics]) -> Iterator[tuple[list[str], Any, Metrics]]:
    url, metrics = prometheus
    repo = overlay_repo(tmp_path)
    write(repo, "policies/guardrails.yaml", GUARDRAILS)
    now = datetime.now(UTC)
    earlier = now - timedelta(hours=3)
    workloads = [
        workload("idle", "alpha", earlier),
        workload("warned", "alpha", earlier,
                 annotations={ANNOTATION_RECLAIM_WARNED: f"{now - timedelta(hours=1):%Y-%m-%dT%H:%M:%SZ}"}),
        workload("busy", "alpha", earlier),
        workload("serving", "beta", earlier, priority_class="serving", queue="serve"),
        workload("snoozed", "alpha", earlier,
                 annotations={ANNOTATION_RECLAIM_SNOOZE: f"{now + timedelta(hours=2):%Y-%m-%dT%H:%M:%SZ}"}),
        workload("dark", "alpha", earlier),  # no metrics at all
    ]
    pods = [pod(w["metadata"]["ownerReferences"][0]["name"], w["metadata"]["namespace"]) for w in workloads]
    metrics.values = {("alpha", "idle-0"): 0.0, ("alpha", "warned-0"): 1.0, ("alpha", "busy-0"): 70.0,
                      ("beta", "serving-0"): 0.0, ("alpha", "snoozed-0"): 0.0}
    with fake_kube() as kube:
        def answer(method: str, path: str) -> Reply | None:
            if method == "GET" and path == "/apis/kueue.x-k8s.io/v1beta2/workloads":
                return Reply.of(200, {"kind": "WorkloadList", "apiVersion": "kueue.x-k8s.io/v1beta2",
                                      "metadata": {}, "items": workloads})
            if method == "GET" and path == "/api/v1/pods":
                return Reply.of(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": pods})
            if method == "PATCH" and "/workloads/" in path:
                name = path.rsplit("/", 1)[1]
                return Reply.of(200, next(w for w in workloads if w["metadata"]["name"] == name))
            if method == "POST" and path.endswith("/events"):
                return Reply.of(201, {"kind": "Event", "apiVersion": "v1", "metadata": {"name": "e"}})
            return None

        kube.answer = answer
        args = [str(repo), "--cluster", "lab", "--kubeconfig", str(kube.kubeconfig(tmp_path)), "--prometheus", url]
        yield args, kube, metrics


def test_dry_run_prints_the_exact_list_and_changes_nothing(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    args, kube, _ = cluster
    assert main(["reclaim", *args, "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    states = {row["workload"]: (row["state"], row["action"]) for row in report["workloads"]}
    assert states == {
        "alpha/job-idle": ("idle", "warn"),
        "alpha/job-warned": ("reclaim", "deactivate"),
        "alpha/job-busy": ("busy", ""),
        "beta/job-serving": ("exempt", ""),  # serving is declared preemptible: false
        "alpha/job-snoozed": ("snoozed", ""),
        "alpha/job-dark": ("unknown", ""),
    }
    assert report["applied"] is False and kube.writes == []
    assert main(["reclaim", *args]) == 1
    text = capsys.readouterr().out
    assert "would warn" in text and "would deactivate" in text and "dry run, nothing changed" in text


def test_apply_patches_the_warned_and_the_idle_and_records_events(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    args, kube, _ = cluster
    assert main(["reclaim", *args, "--apply"]) == 0
    assert sorted(kube.writes) == [
        ("PATCH", "/apis/kueue.x-k8s.io/v1beta2/namespaces/alpha/workloads/job-idle"),
        ("PATCH", "/apis/kueue.x-k8s.io/v1beta2/namespaces/alpha/workloads/job-warned"),
        ("POST", "/api/v1/namespaces/alpha/events"),
        ("POST", "/api/v1/namespaces/alpha/events"),
    ]
    assert "applied" in capsys.readouterr().out


def test_a_series_that_stopped_part_way_is_unknown_never_warned(cluster: Any,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # The exporter lost the idle pod's series 3 minutes ago (the pod runs on): its window is not measured to
    # its end, so it is unknown and nothing is done, however idle its earlier samples were.
    args, kube, metrics = cluster
    metrics.stopped[("alpha", "idle-0")] = (datetime.now(UTC) - timedelta(minutes=3)).timestamp()
    assert main(["reclaim", *args, "--apply", "--format", "json"]) == 0
    rows = {row["workload"]: row for row in json.loads(capsys.readouterr().out)["workloads"]}
    assert (rows["alpha/job-idle"]["state"], rows["alpha/job-idle"]["action"]) == ("unknown", "")
    assert "stale (last sample" in rows["alpha/job-idle"]["why"]
    assert ("PATCH", "/apis/kueue.x-k8s.io/v1beta2/namespaces/alpha/workloads/job-idle") not in kube.writes


def test_a_prometheus_that_cannot_be_read_acts_on_nothing(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    args, kube, metrics = cluster
    metrics.broken = True
    assert main(["reclaim", *args, "--apply"]) == 3
    err = capsys.readouterr().err
    assert "nothing was done" in err and "Prometheus range query failed" in err
    assert kube.writes == []


def test_without_prometheus_every_workload_is_unknown(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    args, kube, _ = cluster
    assert main(["reclaim", *args[:-2], "--apply", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["workloads"]
    assert {r["state"] for r in rows if r["workload"] != "beta/job-serving"} == {"unknown"}
    assert kube.writes == []


def test_the_event_names_the_workload() -> None:
    from gpugov.reclaim.subjects import Candidate

    candidate = Candidate(subject(), None, "alpha", "job-a", "uid-1")  # type: ignore[arg-type]
    event = event_for(candidate, Decision("alpha/job-a", "alpha", "idle", WARN, "idle for 2h"), NOW)
    assert event["involvedObject"] == {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "name": "job-a",
                                       "namespace": "alpha", "uid": "uid-1"}
    assert (event["reason"], event["type"], event["message"]) == ("GpugovIdleWarning", "Warning", "idle for 2h")
