"""The usage ledger, pure: window, admitted segments, in-quota vs borrowed, idle, rates of MIG
slices, cost centres, closure, the formats (the JSON read back by `gpugov capacity`) and the chart."""

from __future__ import annotations

import csv
import io
import json
import random
import xml.etree.ElementTree as ET
from argparse import Namespace
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from gpugov.app.desired import desired_state
from gpugov.app.pipeline import validate_repo
from gpugov.capacity.ledger import parse_ledger
from gpugov.cli import main
from gpugov.cli.common import CommandFailed
from gpugov.cli.usage import member_prometheus
from gpugov.declarations.model import Model
from gpugov.queueing.workload import Workload, from_object
from gpugov.usage import chart, formats
from gpugov.usage.attribution import attribution, offered_pools, workload_tenant
from gpugov.usage.idle import idle, idle_intervals, pods_of
from gpugov.usage.ledger import closure, in_quota_and_borrowed, ledger, to_hours
from gpugov.usage.segments import Segment, segments
from gpugov.usage.window import Window, WindowError, parse_window
from tests.helpers.repos import REPO
from tests.unit.test_queueing_unit import raw_workload

T0 = datetime(2026, 11, 1, tzinfo=UTC)

ORG = {
    "policies/org.yaml": """\
apiVersion: gpugov.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: default}
spec:
  preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority, borrowWithinCohort: {policy: Never}}
---
apiVersion: gpugov.io/v1alpha1
kind: Guardrails
metadata: {name: default}
spec:
  requireCostCenter: false
  idle: {utilizationBelowPercent: 5, window: 1h}
""",
    "hardware/pools.yaml": """\
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata: {name: whole}
spec:
  accelerator: {model: H100-80GB}
  acceleratorsPerNode: 8
  nodeResources: {cpu: 64, memory: 512Gi}
  pricePerAcceleratorHour: "2.00"
  nodes: [{name: whole-1}]
---
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata: {name: sliced}
spec:
  accelerator: {model: A100-80GB}
  acceleratorsPerNode: 1
  nodeResources: {cpu: 32, memory: 256Gi}
  pricePerAcceleratorHour: "1.40"
  migLayouts: {sevens: {1g.10gb: 7}}
  nodes: [{name: sliced-1, migLayout: sevens}]
""",
    "tenants/lab.yaml": """\
apiVersion: gpugov.io/v1alpha1
kind: Department
metadata: {name: lab}
spec: {costCenter: CC-LAB}
---
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata: {name: alpha}
spec:
  department: lab
  owners: {users: [alpha@example.com]}
  namespaces: [alpha]
  queues: [{name: main, namespace: alpha}]
  quotas: [{pool: whole, resources: {accelerators: 4}}]
---
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata: {name: beta}
spec:
  department: lab
  owners: {users: [beta@example.com]}
  costCenter: CC-BETA
  namespaces: [beta]
  queues: [{name: main, namespace: beta}]
  quotas:
    - {pool: whole, resources: {accelerators: 4}}
    - {pool: sliced, resources: {1g.10gb: 7}}
""",
}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Model:
    root = tmp_path_factory.mktemp("usage-org")
    for rel, text in ORG.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    result = validate_repo(root)
    assert result.model is not None and not result.errors, result.errors
    return result.model


def admitted(name: str, namespace: str, start: int, end: int | None, gpus: int, *, pods: int = 1,
             resource: str = "nvidia.com/gpu", flavor: str = "whole", past: int = 0) -> Workload:
    raw = raw_workload(name, namespace, pods=pods, gpus=gpus, resource=resource, flavor=flavor, cluster_queue=namespace,
                       admitted=T0 + timedelta(seconds=start),
                       finished=None if end is None else T0 + timedelta(seconds=end), past=past)
    return from_object(raw)


def tenant_of(w: Workload) -> str:
    return w.cluster_queue or w.namespace


def test_window_from_times_and_durations() -> None:
    now = datetime(2026, 11, 2, 12, 0, 0, 500000, tzinfo=UTC)
    assert parse_window("24h", None, now) == Window(datetime(2026, 11, 1, 12, tzinfo=UTC), datetime(2026, 11, 2, 12, tzinfo=UTC))
    assert parse_window("2026-11-01", "2026-11-01T06:00:00+02:00", now).seconds == 4 * 3600
    for since, until, words in (("soon", None, "neither an ISO 8601"), ("1h", "2026-11-03", "in the future"),
                                ("2026-11-02T12:00:00Z", "2026-11-02T11:00:00Z", "must be before")):
        with pytest.raises(WindowError, match=words):
            parse_window(since, until, now)


def test_segments_clip_to_the_window_and_place_earlier_admissions() -> None:
    window = Window(T0 + timedelta(seconds=100), T0 + timedelta(seconds=1000))
    now = T0 + timedelta(seconds=2000)
    workloads = [admitted("early", "alpha", 50, 150, 2), admitted("running", "alpha", 900, None, 1),
                 admitted("outside", "alpha", 1100, 1200, 8), admitted("again", "beta", 500, 600, 4, past=60)]
    found, unplaced = segments(workloads, window, now, tenant_of, lambda w, r: ["whole"])
    spans = sorted((s.workload.split("/")[1], s.seconds, s.amount) for s in found)
    assert spans == [("job-again-abcde", 60, 4), ("job-again-abcde", 100, 4), ("job-early-abcde", 50, 2),
                     ("job-running-abcde", 100, 1)]
    assert not unplaced
    # evicted and pending again: its earlier admission ends when Admitted turned False; the pool is
    # the only one its queue offers the resource in, else it cannot be placed
    raw = raw_workload("requeued", "beta", gpus=2, message="waiting")
    raw["status"]["accumulatedPastExecutionTimeSeconds"] = 30
    raw["status"]["conditions"].append({"type": "Admitted", "status": "False", "reason": "NoReservation", "message": "",
                                        "lastTransitionTime": "2026-11-01T00:05:00Z"})
    requeued = from_object(raw)
    found, unplaced = segments([requeued], window, now, tenant_of, lambda w, r: ["whole"])
    assert [(s.pool, s.start, s.end) for s in found] == [("whole", T0 + timedelta(seconds=270), T0 + timedelta(seconds=300))]
    found, unplaced = segments([requeued], window, now, tenant_of, lambda w, r: ["whole", "sliced"])
    assert not found and unplaced[0].seconds == 30 and "whole, sliced" in unplaced[0].why


def brute_force(spans: list[tuple[int, int, int]], quota: int) -> tuple[int, int]:
    """Second by second: what the sweep must equal."""
    total = borrowed = 0
    for t in range(0, max((e for _, e, _ in spans), default=0)):
        held = sum(a for s, e, a in spans if s <= t < e)
        total += held
        borrowed += max(0, held - quota)
    return total, borrowed


def test_borrowed_is_exactly_the_time_above_nominal() -> None:
    rng = random.Random(14)
    for _ in range(200):
        spans = []
        for _ in range(rng.randint(0, 6)):
            start = rng.randint(0, 100)
            spans.append((start, start + rng.randint(1, 60), rng.randint(1, 8)))
        found = [Segment(f"ns/w{i}", "t", "p", "r", Decimal(a), T0 + timedelta(seconds=s), T0 + timedelta(seconds=e))
                 for i, (s, e, a) in enumerate(spans)]
        quota = rng.randint(0, 10)
        assert in_quota_and_borrowed(found, Decimal(quota)) == tuple(map(Decimal, brute_force(spans, quota)))


def test_ledger_rows_rates_cost_centres_and_closure(model: Model) -> None:
    window = Window(T0, T0 + timedelta(hours=1))
    workloads = [admitted("a1", "alpha", 0, 1800, 6), admitted("a2", "alpha", 900, 2700, 2),
                 admitted("b1", "beta", 0, 3600, 3, resource="nvidia.com/mig-1g.10gb", flavor="sliced")]
    found, _ = segments(workloads, window, window.until, tenant_of, lambda w, r: [])
    book = ledger(model, "default", window, found)
    rows = {(r.tenant, r.pool, r.resource): r for r in book.rows}
    alpha = rows[("alpha", "whole", "nvidia.com/gpu")]
    # 6 GPUs for 30 min and 2 for 30 min (overlapping 15 min at 8): 4 h; above nominal 4: 2 GPUs x 15 min +
    # 4 x 15 min = 1.5 h
    assert (alpha.admitted_hours, alpha.borrowed_hours, alpha.in_quota_hours) == (Decimal(4), Decimal("1.5"), Decimal("2.5"))
    assert (alpha.rate, alpha.cost, alpha.cost_center, alpha.department, alpha.unit) == (
        Decimal("2.00"), Decimal("8.00"), "CC-LAB", "lab", "accelerator-hours")
    beta_mig = rows[("beta", "sliced", "nvidia.com/mig-1g.10gb")]
    assert (beta_mig.unit, beta_mig.rate, beta_mig.admitted_hours) == ("1g.10gb-slice-hours", Decimal("0.2"), Decimal(3))
    assert beta_mig.cost_center == "CC-BETA" and beta_mig.borrowed_hours == 0
    assert rows[("beta", "whole", "nvidia.com/gpu")].admitted_hours == 0  # its unused guarantee has a row
    capacity = {(c.pool, c.resource): c for c in book.capacity}
    assert capacity[("whole", "nvidia.com/gpu")].hours == 8 and capacity[("sliced", "nvidia.com/mig-1g.10gb")].hours == 7
    unallocated = {(u.pool, u.resource): u for u in book.unallocated}
    assert unallocated[("whole", "nvidia.com/gpu")].hours == 4 and unallocated[("whole", "nvidia.com/gpu")].cost == 8
    assert closure(book) == []


def test_hours_round_once_per_row_and_the_ledger_still_closes(model: Model) -> None:
    window = Window(T0, T0 + timedelta(seconds=3601))
    workloads = [admitted(f"w{i}", "alpha", i * 7, i * 7 + 1 + i, 1) for i in range(40)]
    found, _ = segments(workloads, window, window.until, tenant_of, lambda w, r: [])
    book = ledger(model, "default", window, found)
    row = next(r for r in book.rows if r.tenant == "alpha")
    assert row.admitted_hours == to_hours(Decimal(sum(1 + i for i in range(40))))
    assert closure(book) == []
    broken = type(book)(book.cluster, book.window, book.rows, tuple(
        type(u)(u.pool, u.resource, u.hours + Decimal("0.000001"), u.rate, u.cost) for u in book.unallocated),
        book.capacity)
    assert closure(broken)  # the check can fail


def test_idle_counts_only_admitted_time_below_the_threshold(model: Model) -> None:
    window = Window(T0, T0 + timedelta(seconds=600))
    workloads = [admitted("quiet", "beta", 100, 400, 1, pods=2, resource="nvidia.com/mig-1g.10gb", flavor="sliced"),
                 admitted("busy", "alpha", 0, 600, 2)]
    found, _ = segments(workloads, window, window.until, tenant_of, lambda w, r: [])
    step = timedelta(seconds=60)
    samples = {("beta", "quiet-x1"): [(T0 + timedelta(seconds=t), 0.0) for t in range(0, 601, 60)],
               ("beta", "quiet-x2"): [(T0 + timedelta(seconds=t), 1.0 if t <= 240 else 50.0) for t in range(0, 601, 60)],
               ("alpha", "busy-y"): [(T0 + timedelta(seconds=t), 90.0) for t in range(0, 601, 60)],
               ("alpha", "stranger"): [(T0, 0.0)]}
    assert pods_of(workloads, samples) == {("beta", "quiet-x1"): "beta/job-quiet-abcde",
                                           ("beta", "quiet-x2"): "beta/job-quiet-abcde",
                                           ("alpha", "busy-y"): "alpha/job-busy-abcde"}
    measured = idle(workloads, found, samples, step, Decimal(5), window.until)
    # pod 1 idle all of its 300 s, pod 2 for (100, 240]: 140 s; each holds 1 slice
    assert measured.seconds == {("beta", "sliced", "nvidia.com/mig-1g.10gb"): Decimal(440)}
    assert measured.pods_without_samples == 0
    assert idle_intervals([(T0, float("nan")), (T0 + step, 2.0)], step, Decimal(5), T0 + step) == [(T0, T0 + step)]
    book = ledger(model, "default", window, found, measured.seconds)
    row = next(r for r in book.rows if r.resource == "nvidia.com/mig-1g.10gb")
    assert row.idle_hours == to_hours(Decimal(440))


def test_a_series_that_stopped_part_way_is_idle_only_while_measured(model: Model) -> None:
    # The exporter lost quiet-x1's series at 300 s (the pod ran on to 400 s): its sample at 300 s is the
    # busiest of (240, 300] but says nothing past its last raw sample, so the pod is idle for (100, 240]
    # only; the second pod, measured up to the end of the read, is idle for all of its 300 s.
    window = Window(T0, T0 + timedelta(seconds=600))
    workloads = [admitted("quiet", "beta", 100, 400, 1, pods=2, resource="nvidia.com/mig-1g.10gb", flavor="sliced")]
    found, _ = segments(workloads, window, window.until, tenant_of, lambda w, r: [])
    step = timedelta(seconds=60)
    samples = {("beta", "quiet-x1"): [(T0 + timedelta(seconds=t), 0.0) for t in range(0, 301, 60)],
               ("beta", "quiet-x2"): [(T0 + timedelta(seconds=t), 0.0) for t in range(0, 601, 60)]}
    measured = idle(workloads, found, samples, step, Decimal(5), window.until)
    assert measured.seconds == {("beta", "sliced", "nvidia.com/mig-1g.10gb"): Decimal(140 + 300)}
    # a gap of more than two steps ends the measured time the same way (the sample before it stands for
    # nothing); the read's last step counts
    gap = [(T0, 0.0), (T0 + step, 0.0), (T0 + 4 * step, 0.0)]
    assert idle_intervals(gap, step, Decimal(5), T0 + 4 * step) == [(T0 - step, T0), (T0 + 3 * step, T0 + 4 * step)]


def test_formats_and_the_json_that_capacity_reads(model: Model, tmp_path: Path) -> None:
    window = Window(T0, T0 + timedelta(hours=1))
    found, _ = segments([admitted("a1", "alpha", 0, 1800, 6)], window, window.until, tenant_of, lambda w, r: [])
    book = ledger(model, "default", window, found)
    data = json.loads(formats.json_text(book))
    assert data["window"] == {"since": "2026-11-01T00:00:00Z", "until": "2026-11-01T01:00:00Z"}
    assert data["complete"] is True and data["cluster"] == "default"
    assert set(data["rows"][0]) == {"tenant", "department", "cost_center", "pool", "resource", "unit", "admitted_hours",
                                    "in_quota_hours", "borrowed_hours", "idle_hours", "rate", "cost"}
    assert all(isinstance(v, str) for r in data["rows"] for k, v in r.items() if k.endswith(("hours", "rate", "cost")))
    read = parse_ledger(data, "ledger.json")  # gpugov capacity --usage reads it back
    assert {(r.tenant, r.pool, r.admitted_hours) for r in read.rows} >= {("alpha", "whole", Decimal(3))}
    table = formats.table(book)
    assert "ledger closes: tenants' charges 6.00 + unallocated 11.40 = capacity x rate x window 17.40" in table
    rows = list(csv.DictReader(io.StringIO(formats.csv_text(book))))
    assert {r["section"] for r in rows} == {"tenant", "unallocated", "capacity"}
    assert next(r for r in rows if r["tenant"] == "alpha" and r["pool"] == "whole")["hours"] == "3"
    assert "| alpha | lab | CC-LAB | whole |" in formats.markdown(book)


def test_chart_is_valid_svg_and_deterministic(model: Model) -> None:
    window = Window(T0, T0 + timedelta(hours=1))
    workloads = [admitted("a1", "alpha", 0, 1800, 6),
                 admitted("b1", "beta", 600, 3600, 7, resource="nvidia.com/mig-1g.10gb", flavor="sliced")]
    found, _ = segments(workloads, window, window.until, tenant_of, lambda w, r: [])
    pools = {name: model.pools[name] for name in ("whole", "sliced")}
    tenants, series = chart.buckets(found, window, pools, count=4)
    assert tenants == ["alpha", "beta"]
    # 900 s buckets; beta's 7 slices of 1/7 GPU each from 600 s on
    assert [{t: round(v, 6) for t, v in b.items()} for b in series] == [
        {"alpha": 6, "beta": Decimal("0.333333")}, {"alpha": 6, "beta": 1}, {"beta": 1}, {"beta": 1}]
    text = chart.svg(found, window, pools, "default")
    root = ET.fromstring(text)
    assert root.tag.endswith("svg") and "alpha" in text and "beta" in text
    assert chart.svg(found, window, pools, "default") == text


def test_queueing_and_usage_are_pure() -> None:
    """gpugov.queueing and gpugov.usage judge what the readers read: no cluster, HTTP or Pulumi library."""
    import subprocess
    import sys

    root = REPO / "gpugov"
    modules = [".".join(p.relative_to(root.parent).with_suffix("").parts) for package in ("queueing", "usage")
               for p in sorted((root / package).glob("*.py"))]
    assert len(modules) >= 12
    code = (f"import importlib, sys\nfor name in {modules!r}: importlib.import_module(name)\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'kubernetes', 'requests', 'urllib3', 'pulumi'}))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"


def _admitted(namespace: str, cluster_queue: str) -> Workload:
    return from_object(raw_workload("w", namespace=namespace, cluster_queue=cluster_queue, admitted=T0))


def test_a_workload_is_charged_to_its_tenants_queue_else_its_namespaces_owner() -> None:
    tenants, owners = {"vision", "speech"}, {"vision": "vision", "shared": "speech"}
    assert workload_tenant(_admitted("shared", "vision"), tenants, owners) == "vision"  # the queue wins
    assert workload_tenant(_admitted("shared", "other-queue"), tenants, owners) == "speech"
    assert workload_tenant(_admitted("stray", "other-queue"), tenants, owners) == "other-queue"
    assert workload_tenant(replace(_admitted("stray", "x"), cluster_queue=""), tenants, owners) == "(namespace stray)"


def test_a_workload_may_have_run_in_the_pools_its_queue_offers_that_have_the_resource() -> None:
    state = desired_state(REPO, cluster="east")
    rules = attribution(state.model, state.cluster, state.objects)
    tenant = next(name for name, queue in rules.queues.items() if queue.offers("nvidia.com/gpu"))
    queue = rules.queues[tenant]
    offered = offered_pools(queue, "nvidia.com/gpu", rules.pools)
    assert offered and all("nvidia.com/gpu" in rules.pools[p].capacity for p in offered)
    assert set(offered) <= set(queue.offers("nvidia.com/gpu"))
    assert offered_pools(queue, "nvidia.com/gpu", {}) == []  # a pool the declarations lack is no pool
    assert offered_pools(None, "nvidia.com/gpu", rules.pools) == []
    namespace = next(iter(state.model.tenants[tenant].namespaces))
    assert rules.offers(_admitted(namespace, tenant), "nvidia.com/gpu") == offered
    assert rules.tenant_of(_admitted(namespace, "")) == tenant


def test_a_fleet_reads_each_workers_own_prometheus() -> None:
    workers = ["lab", "lab2"]
    given = Namespace(prometheus=["lab=http://p1:9090", "lab2=http://p2:9090/prom?x=1"])
    assert member_prometheus(given, workers) == {"lab": "http://p1:9090", "lab2": "http://p2:9090/prom?x=1"}
    assert member_prometheus(Namespace(prometheus=None), workers) == {}  # the caller then needs --no-idle
    refused = {
        "lab2=URL": ["lab=http://p1:9090"],  # every worker needs its own
        "CLUSTER=URL": ["http://p1:9090"],  # a bare URL cannot say whose pods it names
        "not a worker": ["lab=http://p1", "lab2=http://p2", "east=http://p3"],
        "twice": ["lab=http://p1", "lab=http://p3", "lab2=http://p2"],
    }
    for says, flags in refused.items():
        with pytest.raises(CommandFailed, match=says):
            member_prometheus(Namespace(prometheus=flags), workers)


def test_one_cluster_reads_one_prometheus(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["usage", ".", "--since", "1h", "--prometheus", "http://a", "--prometheus", "http://b"]) == 2
    assert "--prometheus given more than once" in capsys.readouterr().err
