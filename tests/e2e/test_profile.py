"""Job profiles (issue #41) against a real Prometheus: `gpugov profile` reads the job's Workload (from a
fake Kubernetes API, tests/helpers/fake_kube.py) and its pods' DCGM series from the Prometheus server built
from its Go module, scraping the sandbox's DCGM-shaped exporter with declared activity profiles; the
compiled recording rules run in the same server and agree with the profile's numbers.

nlp's Job `train` asks for 2 H100s and idles at 1-2 % with 12,000 MiB on each: `profile` says it is idle
all its measured life and fits a 1g.20gb (12,000 MiB plus the declared 10 % headroom; 1g.10gb is too
small). vision's `etl` runs at 10 % with 3 GB/s from the host: data loading.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpugov.app.pipeline import validate_repo
from gpugov.cli import main
from gpugov.monitoring.rules import recording_rules
from gpugov.sandbox import ToolUnavailableError
from gpugov.sandbox.prometheus import (
    ACTIVITY_ANNOTATION,
    HOST_IO_ANNOTATION,
    MEMORY_ANNOTATION,
    monitoring,
    prometheus_binary,
)
from gpugov.sandbox.simulated import simulated_nodes
from gpugov.sources.prometheus import query
from tests.e2e.conftest import skip_or_fail
from tests.e2e.test_monitoring_rules import pod
from tests.helpers.fake_kube import Reply, fake_kube
from tests.helpers.repos import FIXTURES
from tests.unit.test_queueing_unit import raw_workload

ORG = FIXTURES / "ledger" / "org"


@dataclass
class Lab:
    args: list[str]
    prometheus: str


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    try:
        binary = prometheus_binary()
    except ToolUnavailableError as exc:
        skip_or_fail(f"e2e: no Prometheus binary: {exc}")
        raise
    model = validate_repo(ORG).model
    assert model is not None
    workdir: Path = tmp_path_factory.mktemp("profile")
    rules = workdir / "gpugov.rules.yaml"
    rules.write_text(yaml.safe_dump(recording_rules(model, "lab"), sort_keys=False))
    nodes = [n for n in simulated_nodes(model, "lab") if n["metadata"]["name"] == "n1"]
    pods: list[dict[str, Any]] = []
    with monitoring(workdir, binary, lambda: nodes, lambda: pods, interval="500ms", rule_files=[rules]) as url:
        deadline = time.monotonic() + 60
        while not query(url, "up == 1"):
            assert time.monotonic() < deadline, "Prometheus never scraped the exporter"
            time.sleep(0.5)
        started = datetime.now(UTC).replace(microsecond=0)
        idle = {ACTIVITY_ANNOTATION: "1", MEMORY_ANNOTATION: "12000"}
        pods += [pod("nlp", "train-0-x7k2p", "n1", "nvidia.com/gpu", 1, started, **idle),
                 pod("nlp", "train-1-q9w8e", "n1", "nvidia.com/gpu", 1, started, **{**idle, ACTIVITY_ANNOTATION: "2"}),
                 pod("vision", "etl-zx9cv", "n1", "nvidia.com/gpu", 1, started, **{
                     ACTIVITY_ANNOTATION: "10", MEMORY_ANNOTATION: "70000", HOST_IO_ANNOTATION: "3000000000"})]
        workloads = [raw_workload("train", "nlp", pods=2, admitted=started, cluster_queue="nlp", flavor="h100"),
                     raw_workload("etl", "vision", admitted=started, cluster_queue="vision", flavor="h100")]
        time.sleep(10)
        with fake_kube() as kube:
            def answer(method: str, path: str) -> Reply | None:
                if method == "GET" and path == "/apis/kueue.x-k8s.io/v1beta2/workloads":
                    return Reply.of(200, {"kind": "WorkloadList", "apiVersion": "kueue.x-k8s.io/v1beta2",
                                          "metadata": {}, "items": workloads})
                if method == "POST" and path.endswith("/selfsubjectaccessreviews"):  # may list Workloads everywhere
                    return Reply.of(201, {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                                          "status": {"allowed": True}})
                return None

            kube.answer = answer
            yield Lab([str(ORG), "--cluster", "lab", "--kubeconfig", str(kube.kubeconfig(workdir)),
                       "--prometheus", url, "--step", "1"], url)


def test_a_job_that_over_asks_and_idles_is_shown_as_such(lab: Lab, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "nlp/train", *lab.args, "--format", "json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["jobs"]
    assert (row["job"], row["tenant"], row["devices"], row["resource"]) == ("nlp/train", "nlp", 2, "nvidia.com/gpu")
    assert row["activity_mean_percent"] == pytest.approx(1.5, abs=0.2) and row["activity_peak_percent"] == 2
    assert row["idle_share"] == 1 and row["low_activity_share"] == 1
    assert (row["memory_peak_mib"], row["card_mib"], row["fits_mig"]) == (12000, 81920, "1g.20gb")
    assert row["hami_share"] == "nvidia.com/gpumem: 13200, nvidia.com/gpucores: 2"
    assert row["queue_wait_seconds"] == 5  # created 5 s before its admission
    assert row["advice"][0].startswith("idle 100% of its measured life")
    assert any(a.startswith("fits a 1g.20gb: its memory peak is 11.7 GiB of the card's 80.0 GiB") for a in row["advice"])
    # the recorded series say the same of the job
    [recorded] = query(lab.prometheus, 'gpugov:job_activity:avg{job_name="train"}')
    assert float(recorded["value"][1]) * 100 == pytest.approx(row["activity_mean_percent"], abs=0.2)


def test_low_activity_with_host_io_is_data_loading(lab: Lab, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "vision/etl", *lab.args, "--format", "json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["jobs"]
    assert row["fits_mig"] is None  # 70,000 MiB + 10 % holds in no MIG profile short of the whole card
    assert any(a.startswith("low activity with high host I/O (3.0 GB/s from the host): data loading")
               for a in row["advice"])


def test_a_tenant_table_and_usage_errors(lab: Lab, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "--tenant", "nlp", *lab.args]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["JOB", "DEVICES", "ACTIVITY", "PEAK", "IDLE", "MEMORY-PEAK", "FITS", "WAIT"]
    assert out.splitlines()[1].split()[:3] == ["nlp/train", "2", "gpu"] and "1g.20gb" in out
    assert main(["profile", "nlp/nothing", *lab.args]) == 2
    assert main(["profile", *lab.args]) == 2
