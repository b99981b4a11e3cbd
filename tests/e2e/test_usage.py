"""`gpugov usage` on a living sandbox of its own: a small organisation (tests/unit/test_usage_unit.py ORG:
pool `whole`, 8 H100 at 2.00 an hour; pool `sliced`, one A100-80GB as 7 x 1g.10gb at 1.40; tenants
alpha and beta with 4 GPUs each in department lab, beta also the 7 slices), KWOK Jobs of known
durations on the real Kueue controller, and DCGM utilisation from a Prometheus fixture on
127.0.0.1. The ledger is checked against the Workloads themselves, to the second.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gpugov.app.pipeline import validate_repo
from gpugov.cluster.apply import apply_objects
from gpugov.compile import compile
from gpugov.sandbox import samples
from gpugov.sandbox.cluster import Sandbox
from gpugov.sandbox.nodes import create_gpu_operator_footprint, create_nodes
from gpugov.sandbox.simulated import simulated_nodes
from tests.helpers.waiting import condition
from tests.unit.test_usage_prometheus import fake_prometheus, load_fixture
from tests.unit.test_usage_unit import ORG

pytestmark = pytest.mark.e2e

MIG = "nvidia.com/mig-1g.10gb"
GPU = "nvidia.com/gpu"
# name, tenant, pods x amount of resource, KWOK run-for, seconds to wait before the next one
JOBS = (("a1", "alpha", 6, GPU, "20s", 3), ("a2", "alpha", 2, GPU, "8s", 0), ("b1", "beta", 2, MIG, "12s", 0))


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module")
def lab(sandbox_binaries: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Sandbox]]:
    root = tmp_path_factory.mktemp("usage-org")
    for rel, text in ORG.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    model = validate_repo(root).model
    assert model is not None
    with Sandbox() as sandbox:
        api = sandbox.cp.api_client()
        create_nodes(api, simulated_nodes(model), kwok=True)
        create_gpu_operator_footprint(api)
        assert not apply_objects(api, compile(model, backend="kueue")).missing
        yield root, sandbox
        problems = sandbox.problems()
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def finished(lab: tuple[Path, Sandbox]) -> list[dict[str, Any]]:
    """Run the module's Jobs to completion; their finished Workloads."""
    api = lab[1].cp.api_client()
    for name, tenant, amount, resource, run_for, pause in JOBS:
        job = samples.SampleJob(tenant, tenant, name, "main", tenant, "", resource)
        client.BatchV1Api(api).create_namespaced_job(tenant, samples.job_manifest(job, run_for=run_for, amount=amount))
        time.sleep(pause)
    custom = client.CustomObjectsApi(api)
    deadline = time.monotonic() + 180
    while True:
        items = custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "workloads")["items"]
        if len(items) == len(JOBS) and all(condition(w, "Finished").get("status") == "True" for w in items):
            return items
        assert time.monotonic() < deadline, [w.get("status") for w in items]
        time.sleep(1)


def usage(lab: tuple[Path, Sandbox], *args: str) -> subprocess.CompletedProcess[str]:
    root, sandbox = lab
    return subprocess.run([sys.executable, "-m", "gpugov", "usage", str(root), "--kubeconfig", str(sandbox.cp.kubeconfig),
                           *args], capture_output=True, text=True, timeout=300)


def window_of(workloads: list[dict[str, Any]]) -> tuple[datetime, datetime]:
    since = min(at(w["metadata"]["creationTimestamp"]) for w in workloads) - timedelta(seconds=10)
    until = max(at(condition(w, "Finished")["lastTransitionTime"]) for w in workloads) + timedelta(seconds=5)
    while datetime.now(UTC) < until + timedelta(seconds=1):
        time.sleep(0.5)
    return since, until


def held(w: dict[str, Any]) -> tuple[str, str, Decimal, int, int]:
    """(pool, resource, amount, admitted, finished) as the Workload records them (epoch seconds)."""
    [assignment] = w["status"]["admission"]["podSetAssignments"]
    resource = next(r for r in assignment["resourceUsage"] if r.startswith("nvidia.com/"))
    start = int(at(condition(w, "Admitted")["lastTransitionTime"]).timestamp())
    end = int(at(condition(w, "Finished")["lastTransitionTime"]).timestamp())
    return assignment["flavors"][resource], resource, Decimal(assignment["resourceUsage"][resource]), start, end


def hours(accelerator_seconds: int | Decimal) -> str:
    value = (Decimal(accelerator_seconds) / 3600).quantize(Decimal("0.000001"), rounding=ROUND_HALF_EVEN)
    text = f"{value:f}".rstrip("0").rstrip(".")
    return text or "0"


def tenant_of(w: dict[str, Any]) -> str:
    return str(w["metadata"]["namespace"])


def test_ledger_from_known_durations(lab: tuple[Path, Sandbox], finished: list[dict[str, Any]], tmp_path: Path) -> None:
    since, until = window_of(finished)
    api = lab[1].cp.api_client()
    pods = {(p.metadata.namespace, p.metadata.labels.get("job-name")): p.metadata.name
            for ns in ("alpha", "beta") for p in client.CoreV1Api(api).list_namespaced_pod(ns).items}
    series = load_fixture("idle-and-busy.json", busy_namespace="alpha", busy_pod=pods[("alpha", "a1")],
                          idle_namespace="beta", idle_pod=pods[("beta", "b1")])
    chart = tmp_path / "usage.svg"
    with fake_prometheus(series) as url:
        result = usage(lab, "--since", stamp(since), "--until", stamp(until), "--prometheus", url, "--step", "1",
                       "--format", "json", "--chart", str(chart))
    assert result.returncode == 0, result.stderr
    ledger = json.loads(result.stdout)
    assert ledger["window"] == {"since": stamp(since), "until": stamp(until)} and ledger["complete"] is True
    rows = {(r["tenant"], r["pool"], r["resource"]): r for r in ledger["rows"]}

    # GPU-hours per tenant: the sum of request x admitted time, to the second
    spans: dict[tuple[str, str, str], list[tuple[Decimal, int, int]]] = {}
    for w in finished:
        pool, resource, amount, start, end = held(w)
        spans.setdefault((tenant_of(w), pool, resource), []).append((amount, start, end))
    for key, found in spans.items():
        assert rows[key]["admitted_hours"] == hours(sum(a * (e - s) for a, s, e in found)), key

    # borrowed exactly while alpha holds more than its nominal 4, second by second
    alpha = spans[("alpha", "whole", GPU)]
    first, last = min(s for _, s, _ in alpha), max(e for _, _, e in alpha)
    above = sum(max(Decimal(0), sum(a for a, s, e in alpha if s <= t < e) - 4) for t in range(first, last))
    assert above > 0 and rows[("alpha", "whole", GPU)]["borrowed_hours"] == hours(above)
    assert rows[("beta", "sliced", MIG)]["borrowed_hours"] == "0"  # within beta's 7 slices
    row = rows[("alpha", "whole", GPU)]
    assert Decimal(row["in_quota_hours"]) + Decimal(row["borrowed_hours"]) == Decimal(row["admitted_hours"])

    # the DCGM fixture's idle pod (b1, 0.4 % < 5 %) is idle for all it was admitted; a1 at 87 % is not
    assert rows[("beta", "sliced", MIG)]["idle_hours"] == rows[("beta", "sliced", MIG)]["admitted_hours"] != "0"
    assert rows[("alpha", "whole", GPU)]["idle_hours"] == "0"

    # MIG slices counted in their unit, at their share of the GPU's price; cost centres as declared
    mig = rows[("beta", "sliced", MIG)]
    assert (mig["unit"], mig["rate"], mig["cost_center"]) == ("1g.10gb-slice-hours", "0.2", "CC-BETA")
    assert (row["unit"], row["rate"], row["cost_center"], row["department"]) == ("accelerator-hours", "2", "CC-LAB", "lab")

    # the ledger closes: tenants' charges + unallocated = capacity x rate x window
    window = Decimal(int((until - since).total_seconds()))
    capacity = {(c["pool"], c["resource"]): c for c in ledger["capacity"]}
    assert capacity[("whole", GPU)]["hours"] == hours(8 * window)
    assert capacity[("sliced", MIG)]["hours"] == hours(7 * window)
    for entry in ledger["unallocated"]:
        key = (entry["pool"], entry["resource"])
        charged = [r for r in ledger["rows"] if (r["pool"], r["resource"]) == key]
        assert sum(Decimal(r["admitted_hours"]) for r in charged) + Decimal(entry["hours"]) == Decimal(capacity[key]["hours"])
        assert sum(Decimal(r["cost"]) for r in charged) + Decimal(entry["cost"]) == Decimal(capacity[key]["cost"])
        assert Decimal(capacity[key]["cost"]) == Decimal(capacity[key]["hours"]) * Decimal(capacity[key]["rate"])

    svg = ET.parse(chart).getroot()
    assert svg.tag.endswith("svg") and "alpha" in chart.read_text() and "beta" in chart.read_text()

    table = usage(lab, "--since", stamp(since), "--until", stamp(until), "--no-idle")
    assert table.returncode == 0 and "ledger closes:" in table.stdout
    assert "idle hours not measured" in table.stderr


def test_an_incomplete_read_is_never_a_ledger(lab: tuple[Path, Sandbox], finished: list[dict[str, Any]]) -> None:
    since, until = window_of(finished)
    result = usage(lab, "--since", stamp(since), "--until", stamp(until), "--prometheus", "http://127.0.0.1:9",
                   "--format", "json")
    assert result.returncode == 3 and result.stdout == ""
    assert "could not read the usage" in result.stderr
    future = usage(lab, "--since", "1h", "--until", stamp(datetime.now(UTC) + timedelta(hours=1)), "--no-idle")
    assert future.returncode == 2 and "in the future" in future.stderr
