"""History charts (issue #41) from a real Prometheus: the recording rules compiled from the ledger's fixture
org (tests/fixtures/ledger/org) evaluated every second over the sandbox's DCGM-shaped exporter, read back by
`gpugov history`'s reader with range queries. The chart's figures equal what PromQL itself sums over the same
instants (devices held, idle, activity, unmeasured time), its idle device-seconds are the ledger's, and
every instant a pool was not measured (before the first scrape; while the exporter of one of its nodes, n2,
could not be scraped) is a gap, never 0 or idle, though the tenant's own node n1 reported all along.

Pods: nlp's indexed Job `train` (2 GPUs at 1 % and 2 %: idle), vision's `eval` (2 GPUs at 80 %), on h100 node n1.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpugov.app.pipeline import validate_repo
from gpugov.capacity import charts
from gpugov.declarations.model import Model
from gpugov.monitoring.history import ACTIVITY, ALLOCATED, IDLE, History, read, span
from gpugov.monitoring.rules import recording_rules
from gpugov.queueing.workload import from_object
from gpugov.sandbox import ToolUnavailableError
from gpugov.sandbox.prometheus import ACTIVITY_ANNOTATION, monitoring, prometheus_binary
from gpugov.sandbox.simulated import simulated_nodes
from gpugov.sources.prometheus import query, query_range, utilisation_series
from gpugov.usage.idle import idle
from gpugov.usage.segments import segments
from gpugov.usage.window import Window
from tests.e2e.conftest import skip_or_fail
from tests.e2e.test_monitoring_rules import pod
from tests.helpers.repos import FIXTURES
from tests.unit.test_queueing_unit import raw_workload

RUN = 6  # seconds the pods run before n2's exporter goes, and after it is back
SILENT = 5  # seconds n2's exporter cannot be scraped
WINDOW = 40  # seconds drawn: reaches back before Prometheus' first evaluation
# the instants h100 is measured, in PromQL: every one of its 4 declared nodes (n1..n4) reports devices
H100_MEASURED = ('count(count by (node) (gpugov:device_activity:ratio * on (node) group_left (pool) '
                 'gpugov:node_pool:info{pool="h100"})) == 4')


@dataclass
class Drawn:
    url: str
    model: Model
    started: datetime
    histories: list[History]
    silent: datetime  # when n2's exporter went


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Drawn]:
    try:
        binary = prometheus_binary()
    except ToolUnavailableError as exc:
        skip_or_fail(f"e2e: no Prometheus binary: {exc}")
        raise
    model = validate_repo(FIXTURES / "ledger" / "org").model
    assert model is not None
    workdir: Path = tmp_path_factory.mktemp("history")
    rules = workdir / "gpugov.rules.yaml"
    rules.write_text(yaml.safe_dump(recording_rules(model, "lab"), sort_keys=False))
    nodes = simulated_nodes(model, "lab")  # every declared node: a pool is measured where all of them report
    pods: list[dict[str, Any]] = []
    with monitoring(workdir, binary, lambda: nodes, lambda: pods, interval="1s", rule_files=[rules]) as url:
        deadline = time.monotonic() + 60
        while len(query(url, "up == 1")) < len(nodes):
            assert time.monotonic() < deadline, "Prometheus never scraped the exporter"
            time.sleep(0.5)
        started = datetime.now(UTC).replace(microsecond=0)
        pods += [pod("nlp", "train-0-x7k2p", "n1", "nvidia.com/gpu", 1, started, **{ACTIVITY_ANNOTATION: "1"}),
                 pod("nlp", "train-1-q9w8e", "n1", "nvidia.com/gpu", 1, started, **{ACTIVITY_ANNOTATION: "2"}),
                 pod("vision", "eval-zx9cv", "n1", "nvidia.com/gpu", 2, started, **{ACTIVITY_ANNOTATION: "80"})]
        time.sleep(RUN)
        n2 = next(n for n in nodes if n["metadata"]["name"] == "n2")
        nodes.remove(n2)  # the exporter answers 404 for it: the scrape fails, its series go stale
        silent = datetime.now(UTC)
        time.sleep(SILENT)
        nodes.append(n2)
        time.sleep(RUN)
        window = span(f"{WINDOW}s", datetime.now(UTC), 1)
        # The chart and the sums below must read the same samples: Prometheus records the window's last
        # instants only once its rule group has been evaluated past them (a second apart, later on a loaded
        # machine); two evaluations past the end, every rule of the group has been written for it.
        end = window.until.timestamp()
        deadline = time.monotonic() + 60
        while max((float(s["value"][1]) for s in query(url, "timestamp(gpugov:device_activity:ratio)")),
                  default=0.0) < end + 2:
            assert time.monotonic() < deadline, "Prometheus never evaluated its rules past the window's end"
            time.sleep(0.25)

        def ask(promql: str, start: datetime, end: datetime, step: int) -> list[dict[str, Any]]:
            return query_range(url, promql, start, end, step)

        yield Drawn(url, model, started, read(model, "lab", window, ask), silent)


def of(found: Drawn, kind: str, name: str) -> History:
    return next(h for h in found.histories if h.kind == kind and h.name == name)


def promql_sum(url: str, expr: str, label: str, name: str, h: History, over: str = "sum_over_time") -> Decimal:
    """What PromQL sums over the chart's instants where h100 is measured: a subquery of one-second steps over
    (since, until]."""
    answer = query(url, f"{over}((({expr}) and on () ({H100_MEASURED}))[{h.span.seconds}s:{h.span.step}s] @ "
                        f"{h.span.until.timestamp():.0f})")
    return sum((Decimal(s["value"][1]) for s in answer if s["metric"].get(label, name) == name), Decimal(0))


@pytest.mark.parametrize(("kind", "name"), [("tenant", "nlp"), ("tenant", "vision"), ("pool", "h100")])
def test_the_charts_numbers_are_what_promql_sums_over_the_same_instants(drawn: Drawn, kind: str, name: str) -> None:
    h = of(drawn, kind, name)
    held = promql_sum(drawn.url, ALLOCATED.format(by=kind), kind, name, h)
    quiet = promql_sum(drawn.url, IDLE.format(by=kind), kind, name, h)
    busy = promql_sum(drawn.url, ACTIVITY.format(by=kind), kind, name, h)
    measured = promql_sum(drawn.url, H100_MEASURED, "pool", "h100", h, "count_over_time")
    assert held > 0 and measured > 0
    assert h.device_seconds == held
    assert h.idle_device_seconds == quiet
    assert h.activity is not None and abs(h.activity - busy / held) < Decimal("1e-12")
    assert h.unknown_seconds == h.span.seconds - measured
    text = charts.svg(h)
    assert Decimal(re.search(r'data-device-seconds="([0-9.]+)"', text)[1]) == held.quantize(Decimal("0.000001"))
    assert Decimal(re.search(r'data-idle-device-seconds="([0-9.]+)"', text)[1]) == quiet.quantize(Decimal("0.000001"))
    assert text == charts.svg(h)


def test_what_was_not_measured_is_a_gap_and_what_was_is_drawn(drawn: Drawn) -> None:
    h = of(drawn, "tenant", "nlp")
    reported = {round(float(at)) for series in query_range(drawn.url, H100_MEASURED,
                                                           h.span.since + timedelta(seconds=1), h.span.until, 1)
                for at, _ in series["values"]}
    assert h.unknown_hours > 0, "the window should reach back before Prometheus' first evaluation"
    for bucket in h.buckets:  # one-second buckets: each is its instant
        if round(bucket.end.timestamp()) in reported:
            assert bucket.devices is not None
        else:
            assert bucket.devices is None and bucket.idle is None
    text = charts.svg(h)
    assert text.count('class="unknown"') == sum(b.devices is None for b in h.buckets) > 0
    # nlp's two GPUs, idle, once the pods run: drawn as held and idle, or as a gap while n2 was silent
    running = [b for b in h.buckets if b.start >= drawn.started + timedelta(seconds=3)]
    assert {(b.devices, b.idle) for b in running if b.devices is not None} == {(Decimal(2), Decimal(2))}
    middle = [b for b in running if b.devices is None]
    assert len(middle) >= SILENT - 2, "n2's silence is a gap in nlp's chart, though n1 reported all along"
    assert all(drawn.silent - timedelta(seconds=2) <= b.start <= drawn.silent + timedelta(seconds=SILENT + 3)
               for b in middle)
    assert running[-1].devices == 2  # measured again once n2 is back
    assert of(drawn, "tenant", "vision").idle_device_hours == 0


def test_the_idle_device_seconds_are_the_ledgers(drawn: Drawn) -> None:
    h = of(drawn, "tenant", "nlp")
    since, until = drawn.started, h.span.until
    workload = from_object(raw_workload("train", "nlp", pods=2, admitted=since, cluster_queue="nlp", flavor="h100"))
    found, _ = segments([workload], Window(since, until), until, lambda w: "nlp", lambda w, r: ["h100"])
    series = utilisation_series(drawn.url, since, until, 1)
    ledger = idle([workload], found, series, timedelta(seconds=1), drawn.model.limits.idle_below_percent, until)
    [(key, device_seconds)] = ledger.seconds.items()
    assert key == ("nlp", "h100", "nvidia.com/gpu")
    chart = h.idle_device_seconds
    # both count 2 devices for every measured second; the ledger also counts n2's silence (nlp's own series
    # on n1 went on), the chart calls it unknown: the two differ by that and the seconds around the first scrape
    silence = 2 * sum(1 for b in h.buckets if b.devices is None and b.start >= since)
    assert abs(chart + silence - device_seconds) <= 4, (chart, silence, device_seconds)
