"""Every reader of DCGM utilisation against a real Prometheus (issue #41): the Prometheus server built from
its Go module (tools/prometheus) evaluates gpugov's own PromQL over what it scraped every 500 ms from the
sandbox's DCGM-shaped exporter (gpugov/sandbox/prometheus.py), labelled as the GPU Operator's
ServiceMonitor labels it (exported_pod, exported_namespace).

Four pods on simulated nodes, with declared activity: idle-0 at 1 %, busy-0 at 85 %, lost-0 at 0 % whose
series the exporter loses part-way through the window (the pod runs on), and mig-0 at 2 % on a MIG
instance (which, as on real MIG, has no DCGM_FI_DEV_GPU_UTIL). Drift's idle check, the ledger's idle hours
and reclaim's decisions each call idle-0 and mig-0 idle, busy-0 busy, and never lost-0.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from gpugov.declarations.model import IdlePolicy
from gpugov.drift.idle import idle_findings
from gpugov.drift.live import LiveState
from gpugov.queueing.workload import from_object
from gpugov.reclaim.decide import NONE, WARN, Subject, decide
from gpugov.sandbox import ToolUnavailableError
from gpugov.sandbox.prometheus import (
    ACTIVITY_ANNOTATION,
    LOST_ANNOTATION,
    monitoring,
    prometheus_binary,
)
from gpugov.sources.pod_metrics import pod_series
from gpugov.sources.prometheus import query, utilisation, utilisation_series
from gpugov.usage.idle import idle
from gpugov.usage.segments import segments
from gpugov.usage.window import Window
from tests.e2e.conftest import skip_or_fail
from tests.unit.test_queueing_unit import raw_workload

WINDOW = 12  # seconds: the idle window every reader judges
LOST_AFTER = 8  # seconds after its start the exporter loses lost-0's series
SCRAPE = "500ms"  # twice per reader step (1 s), as a scrape interval of 30 s serves a step of 60 s


def node(name: str, allocatable: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                                                  "nvidia.com/gpu.memory": "81559"}},
            "status": {"allocatable": allocatable}}


def pod(name: str, on: str, resource: str, started: datetime, **annotations: str) -> dict[str, Any]:
    stamp = f"{started:%Y-%m-%dT%H:%M:%SZ}"
    return {"metadata": {"name": name, "namespace": "alpha", "creationTimestamp": stamp, "annotations": annotations},
            "spec": {"nodeName": on, "containers": [{"name": "train", "resources": {"limits": {resource: "1"}}}]},
            "status": {"phase": "Running", "startTime": stamp}}


@dataclass
class Scraped:
    url: str
    started: datetime  # when the pods started (the exporter's clock)
    pods: list[dict[str, Any]]


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scraped]:
    try:
        binary = prometheus_binary()
    except ToolUnavailableError as exc:
        skip_or_fail(f"e2e: no Prometheus binary: {exc}")
        raise
    nodes = [node("h100-01", {"nvidia.com/gpu": "4"}), node("a100-mig-01", {"nvidia.com/mig-1g.10gb": "7"})]
    pods: list[dict[str, Any]] = []
    workdir: Path = tmp_path_factory.mktemp("prometheus")
    with monitoring(workdir, binary, lambda: nodes, lambda: pods, interval=SCRAPE) as url:
        # Prometheus hands its targets to the scrapers a few seconds after it is ready: the pods start once
        # both nodes have been scraped, so that every reader's window begins after the first sample.
        deadline = time.monotonic() + 60
        while len(query(url, "up == 1")) < len(nodes):
            assert time.monotonic() < deadline, "Prometheus never scraped the exporter"
            time.sleep(0.5)
        started = datetime.now(UTC).replace(microsecond=0)
        pods += [pod("idle-0", "h100-01", "nvidia.com/gpu", started, **{ACTIVITY_ANNOTATION: "1"}),
                 pod("busy-0", "h100-01", "nvidia.com/gpu", started, **{ACTIVITY_ANNOTATION: "85"}),
                 pod("lost-0", "h100-01", "nvidia.com/gpu", started, **{ACTIVITY_ANNOTATION: "0",
                                                                        LOST_ANNOTATION: f"{LOST_AFTER}s"}),
                 pod("mig-0", "a100-mig-01", "nvidia.com/mig-1g.10gb", started, **{ACTIVITY_ANNOTATION: "2"})]
        # scraped every second for longer than the window, lost-0 lost part-way through it
        time.sleep(WINDOW + 3)
        yield Scraped(url, started, pods)


def test_the_operator_labels_arrive_as_on_a_real_cluster(scraped: Scraped) -> None:
    [sample] = query(scraped.url, 'DCGM_FI_DEV_GPU_UTIL{exported_pod="busy-0"}')
    labels = sample["metric"]
    assert (labels["exported_namespace"], labels["namespace"], labels["pod"]) == (
        "alpha", "gpu-operator", "nvidia-dcgm-exporter-h100-01")
    assert labels["Hostname"] == "h100-01" and labels["UUID"].startswith("GPU-") and sample["value"][1] == "85"
    assert query(scraped.url, 'DCGM_FI_DEV_GPU_UTIL{exported_pod="mig-0"}') == []  # none on MIG


def test_drift_calls_the_measured_idle_pods_idle_and_never_the_lost_one(scraped: Scraped) -> None:
    used = utilisation(scraped.url, f"{WINDOW}s")
    # (a device no pod holds carries only the exporter pod's own labels: gpu-operator/nvidia-dcgm-exporter-*)
    assert {k: v for k, v in used.items() if k[0] == "alpha"} == {
        ("alpha", "busy-0"): 85.0, ("alpha", "idle-0"): 1.0, ("alpha", "mig-0"): 2.0}
    live = LiveState(pods=scraped.pods, gpu_utilisation=used)
    found = {dict(f.details)["object"] for f in idle_findings(live, Decimal(5), f"{WINDOW}s")}
    assert found == {"Pod alpha/idle-0", "Pod alpha/mig-0"}


def test_reclaim_warns_the_idle_and_leaves_the_lost_one_unknown(scraped: Scraped) -> None:
    now, step = datetime.now(UTC), timedelta(seconds=1)
    policy = IdlePolicy(metric="DCGM_FI_PROF_GR_ENGINE_ACTIVE", below_percent=Decimal(5), window=WINDOW, grace=60,
                        action="deactivate")
    series = pod_series(scraped.url, policy.metric, now - timedelta(seconds=WINDOW + 1), now, 1)
    states = {}
    for name in ("idle-0", "busy-0", "lost-0", "mig-0"):
        subject = Subject(key=f"alpha/{name}", tenant="alpha", queue="main", priority_class="", non_preemptible=False,
                          admitted_at=scraped.started, pods=(name,))
        decision = decide(subject, policy, {name: series.get(("alpha", name), [])}, now, step, 3600)
        states[name] = (decision.state, decision.action)
    assert states == {"idle-0": ("idle", WARN), "busy-0": ("busy", NONE), "lost-0": ("unknown", NONE),
                      "mig-0": ("idle", WARN)}
    # DCGM_FI_DEV_GPU_UTIL declared for a MIG pod: no series at all, so unknown, not idle
    util = pod_series(scraped.url, "DCGM_FI_DEV_GPU_UTIL", now - timedelta(seconds=WINDOW + 1), now, 1)
    assert ("alpha", "mig-0") not in util and util[("alpha", "idle-0")][-1][1] == 1.0


def test_the_ledger_counts_idle_only_while_measured(scraped: Scraped) -> None:
    until = datetime.now(UTC).replace(microsecond=0)
    since = scraped.started
    window = Window(since, until)
    workloads = [from_object(raw_workload(name.removesuffix("-0"), "alpha", admitted=since, cluster_queue="alpha"))
                 for name in ("idle-0", "busy-0", "lost-0")]
    found, _ = segments(workloads, window, until, lambda w: "alpha", lambda w, r: [])
    series = utilisation_series(scraped.url, since, until, 1)
    step = timedelta(seconds=1)
    by_job = {}
    for w in workloads:
        measured = idle([w], [s for s in found if s.workload == w.key], series, step, Decimal(5), until)
        by_job[w.job] = sum(measured.seconds.values(), Decimal(0))
    first = min(t for t, _ in series[("alpha", "idle-0")])
    # idle-0: idle from its first sample to the read's end (its first sample stands for the step before it)
    assert (until - first).total_seconds() - 1 <= by_job["idle"] <= (until - since).total_seconds(), by_job
    assert by_job["busy"] == 0
    # lost-0: idle only while measured, not a moment past the last sample the exporter sent
    [raw] = query(scraped.url, 'DCGM_FI_DEV_GPU_UTIL{exported_pod="lost-0"}[1m]')
    last = datetime.fromtimestamp(max(float(t) for t, _ in raw["values"]), UTC)
    assert LOST_AFTER - 3 <= (last - since).total_seconds() <= LOST_AFTER + 1
    assert 0 < by_job["lost"] <= Decimal(str((last - since).total_seconds())), (by_job, last)
