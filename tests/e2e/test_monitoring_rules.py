"""Compiled monitoring (issue #41) in a real Prometheus: the recording rules compiled from the ledger's
fixture org (tests/fixtures/ledger/org) are loaded by the Prometheus server built from its Go module (the
equivalent of `promtool check rules`: a rule that does not parse keeps the server from starting), evaluated
every second over what the sandbox's DCGM-shaped exporter serves for the org's simulated nodes, and give
the same attribution as the ledger: tenant, department, cost centre, pool, resource and job, the idle
device-seconds in step with the ledger's idle hours. Every dashboard query runs on the same server.

Pods: nlp's indexed Job `train` (2 GPUs at 1 % and 2 %, 30,000 MiB each), vision's `eval` (2 GPUs in one
pod at 80 %), solo's `sweep` (one 1g.10gb MIG instance at 3 %).
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
import requests
import yaml

from gpugov.app.pipeline import validate_repo
from gpugov.declarations.model import Model
from gpugov.monitoring.dashboards import dashboards
from gpugov.monitoring.rules import prometheus_rule, recording_rules
from gpugov.queueing.workload import from_object
from gpugov.sandbox import ToolUnavailableError
from gpugov.sandbox.prometheus import ACTIVITY_ANNOTATION, MEMORY_ANNOTATION, monitoring, prometheus_binary
from gpugov.sandbox.simulated import simulated_nodes
from gpugov.sources.prometheus import query, utilisation_series
from gpugov.usage.idle import idle
from gpugov.usage.segments import segments
from gpugov.usage.window import Window
from tests.e2e.conftest import skip_or_fail
from tests.helpers.repos import FIXTURES
from tests.helpers.waiting import wait_for
from tests.unit.test_queueing_unit import raw_workload

RUN = 10  # seconds the pods run before the checks


def pod(namespace: str, name: str, on: str, resource: str, count: int, started: datetime,
        **annotations: str) -> dict[str, Any]:
    stamp = f"{started:%Y-%m-%dT%H:%M:%SZ}"
    return {"metadata": {"name": name, "namespace": namespace, "creationTimestamp": stamp, "annotations": annotations},
            "spec": {"nodeName": on, "containers": [{"name": "main", "resources": {"limits": {resource: str(count)}}}]},
            "status": {"phase": "Running", "startTime": stamp}}


@dataclass
class Evaluated:
    url: str
    model: Model
    started: datetime


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Evaluated]:
    try:
        binary = prometheus_binary()
    except ToolUnavailableError as exc:
        skip_or_fail(f"e2e: no Prometheus binary: {exc}")
        raise
    model = validate_repo(FIXTURES / "ledger" / "org").model
    assert model is not None
    workdir: Path = tmp_path_factory.mktemp("monitoring")
    rules = workdir / "gpugov.rules.yaml"
    rules.write_text(yaml.safe_dump(recording_rules(model, "lab"), sort_keys=False))
    nodes = [n for n in simulated_nodes(model, "lab") if n["metadata"]["name"] in ("n1", "m1")]
    pods: list[dict[str, Any]] = []
    with monitoring(workdir, binary, lambda: nodes, lambda: pods, interval="1s", rule_files=[rules]) as url:
        deadline = time.monotonic() + 60
        while len(query(url, "up == 1")) < len(nodes):
            assert time.monotonic() < deadline, "Prometheus never scraped the exporter"
            time.sleep(0.5)
        started = datetime.now(UTC).replace(microsecond=0)
        memory = {MEMORY_ANNOTATION: "30000"}
        pods += [pod("nlp", "train-0-x7k2p", "n1", "nvidia.com/gpu", 1, started, **{ACTIVITY_ANNOTATION: "1"}, **memory),
                 pod("nlp", "train-1-q9w8e", "n1", "nvidia.com/gpu", 1, started, **{ACTIVITY_ANNOTATION: "2"}, **memory),
                 pod("vision", "eval-zx9cv", "n1", "nvidia.com/gpu", 2, started, **{ACTIVITY_ANNOTATION: "80"}),
                 pod("solo", "sweep-m1n2b", "m1", "nvidia.com/mig-1g.10gb", 1, started, **{ACTIVITY_ANNOTATION: "3"})]
        time.sleep(RUN)
        yield Evaluated(url, model, started)


def values(url: str, promql: str, *keys: str) -> dict[tuple[str, ...], float]:
    return {tuple(s["metric"].get(k, "") for k in keys): float(s["value"][1]) for s in query(url, promql)}


def test_the_rules_load_and_evaluate_without_error(evaluated: Evaluated) -> None:
    body = requests.get(f"{evaluated.url}/api/v1/rules", timeout=10).json()
    [group] = body["data"]["groups"]
    assert group["name"] == "gpugov-gpu-attribution"
    assert len(group["rules"]) == len(recording_rules(evaluated.model, "lab")["groups"][0]["rules"])
    assert {(r["health"], r.get("lastError", "")) for r in group["rules"]} == {("ok", "")}
    assert prometheus_rule(evaluated.model, "lab")["spec"] == recording_rules(evaluated.model, "lab")


def test_allocation_idle_activity_and_memory_per_tenant_pool_and_resource(evaluated: Evaluated) -> None:
    url, keys = evaluated.url, ("tenant", "department", "cost_center", "pool", "resource")
    assert values(url, "gpugov:tenant_devices:count", *keys) == {
        ("nlp", "research", "CC-110", "h100", "nvidia.com/gpu"): 2,
        ("vision", "research", "CC-120", "h100", "nvidia.com/gpu"): 2,
        ("solo", "", "CC-200", "a100", "nvidia.com/mig-1g.10gb"): 1}
    assert values(url, "gpugov:tenant_idle_devices:count", "tenant") == {("nlp",): 2, ("vision",): 0, ("solo",): 1}
    activity = values(url, "gpugov:tenant_activity:avg", "tenant")
    assert activity == {("nlp",): pytest.approx(0.015), ("vision",): pytest.approx(0.8), ("solo",): pytest.approx(0.03)}
    assert values(url, "gpugov:tenant_memory_used:bytes", "tenant")[("nlp",)] == 2 * 30000 * 1048576
    assert values(url, "gpugov:department_idle_devices:count", "department", "resource") == {
        ("research", "nvidia.com/gpu"): 2}
    assert values(url, "gpugov:cost_center_devices:count", "cost_center") == {
        ("CC-110",): 2, ("CC-120",): 2, ("CC-200",): 1}
    assert values(url, "gpugov:pool_idle_devices:count", "pool", "resource") == {
        ("h100", "nvidia.com/gpu"): 2, ("a100", "nvidia.com/mig-1g.10gb"): 1}


def test_jobs_are_attributed_by_their_pods(evaluated: Evaluated) -> None:
    url = evaluated.url
    assert values(url, "gpugov:job_devices:count", "tenant", "job_name") == {
        ("nlp", "train"): 2, ("vision", "eval"): 2, ("solo", "sweep"): 1}
    assert values(url, "gpugov:job_memory_used:max_bytes", "job_name")[("train",)] == 30000 * 1048576


def test_idle_device_seconds_are_in_step_with_the_ledger(evaluated: Evaluated) -> None:
    url, since = evaluated.url, evaluated.started
    until = datetime.now(UTC).replace(microsecond=0)
    seconds = int((until - since).total_seconds())
    # Both sides must read the window whole: a rule evaluation or a scrape of its last seconds not yet written
    # (each a second apart, later on a loaded machine) is missing from the sum and the ledger alike, which then
    # differ by it. Read once Prometheus has evaluated the rules two evaluations past the end and scraped past it.
    def written_past(promql: str) -> float:
        return max((float(s["value"][1]) for s in query(url, f"timestamp({promql})")), default=0.0)

    wait_for(lambda: written_past('gpugov:tenant_idle_devices:count{tenant="nlp"}') >= until.timestamp() + 2
             and written_past('DCGM_FI_DEV_GPU_UTIL{exported_namespace="nlp"}') >= until.timestamp() + 1,
             "Prometheus to evaluate its rules and scrape past the window's end", timeout=60)
    # the rules: devices idle at each one-second evaluation, summed over the window
    [recorded] = query(url, f'sum_over_time(gpugov:tenant_idle_devices:count{{tenant="nlp"}}[{seconds}s] @ {until.timestamp():.0f})')
    # the ledger: the same pods' busiest-device samples against the same threshold, per admitted second
    workload = from_object(raw_workload("train", "nlp", pods=2, admitted=since, cluster_queue="nlp", flavor="h100"))
    window = Window(since, until)
    found, _ = segments([workload], window, until, lambda w: "nlp", lambda w, r: ["h100"])
    series = utilisation_series(url, since, until, 1)
    ledger = idle([workload], found, series, timedelta(seconds=1), evaluated.model.limits.idle_below_percent, until)
    [(key, device_seconds)] = ledger.seconds.items()
    assert key == ("nlp", "h100", "nvidia.com/gpu")
    # both count 2 devices for every measured second; they may differ by the second around the first scrape
    assert abs(device_seconds - Decimal(recorded["value"][1])) <= 4, (device_seconds, recorded["value"][1])
    assert device_seconds >= 2 * (seconds - 3)


def test_every_dashboard_query_runs_on_the_real_prometheus(evaluated: Evaluated) -> None:
    boards = dashboards(evaluated.model, "lab")
    assert sorted(boards) == ["gpugov-platform-lab.json", "gpugov-tenant-archive.json", "gpugov-tenant-nlp.json",
                              "gpugov-tenant-solo.json", "gpugov-tenant-vision.json"]
    answered = {}
    for name, board in boards.items():
        assert len(board["uid"]) <= 40 and board["templating"]["list"][0]["type"] == "datasource"
        for panel in board["panels"]:
            for target in panel["targets"]:
                answered[(name, panel["title"], target["refId"])] = len(query(evaluated.url, target["expr"]))
    nlp = {k[1]: v for k, v in answered.items() if k[0] == "gpugov-tenant-nlp.json"}
    assert nlp["Allocated devices"] == 1 and nlp["Jobs: activity"] == 1
    platform = {k[1]: v for k, v in answered.items() if k[0] == "gpugov-platform-lab.json"}
    assert platform["Allocated devices per pool"] == 2 and platform["Activity per department"] == 1


def test_a_rule_that_does_not_parse_keeps_prometheus_from_starting(tmp_path: Path) -> None:
    # what `promtool check rules` would refuse, the server refuses too: the check above can fail
    from gpugov.sandbox.components import ComponentError

    broken = tmp_path / "broken.rules.yaml"
    broken.write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": [
        {"record": "gpugov:x", "expr": "sum by (tenant (gpugov:tenant_devices:count)"}]}]}))
    with pytest.raises(ComponentError, match="parse error"), \
            monitoring(tmp_path / "p", prometheus_binary(), lambda: [], lambda: [], rule_files=[broken]):
        pass
