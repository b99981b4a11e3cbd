"""The sandbox's DCGM-shaped exporter (gpugov/sandbox/prometheus.py), without Prometheus: which pod holds
which device, what its declared activity profile makes the device report, the labels and text format of
NVIDIA's dcgm-exporter, and a series the exporter loses while the pod runs on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests

from gpugov.sandbox.prometheus import (
    ACTIVITY_ANNOTATION,
    LOST_ANNOTATION,
    MEMORY_ANNOTATION,
    ActivityError,
    DcgmExporter,
    activity,
    devices,
    exposition,
    scrape_config,
)

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def node(name: str, gpus: int = 0, mig: dict[str, int] | None = None) -> dict[str, Any]:
    allocatable = {"nvidia.com/gpu": str(gpus), **{f"nvidia.com/mig-{p}": str(n) for p, n in (mig or {}).items()}}
    return {"metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                                                  "nvidia.com/gpu.memory": "81559"}},
            "status": {"allocatable": allocatable}}


def pod(name: str, on: str, resource: str = "nvidia.com/gpu", count: int = 1, created: int = 0,
        phase: str = "Running", **annotations: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "alpha", "annotations": annotations,
                         "creationTimestamp": f"{T0 + timedelta(seconds=created):%Y-%m-%dT%H:%M:%SZ}"},
            "spec": {"nodeName": on, "containers": [{"name": "main", "resources": {"limits": {resource: str(count)}}}]},
            "status": {"phase": phase, "startTime": f"{T0 + timedelta(seconds=created):%Y-%m-%dT%H:%M:%SZ}"}}


def test_activity_profiles_follow_the_pods_age() -> None:
    assert [activity("90@30s,2", t) for t in (0, 29.9, 30, 3600)] == [90, 90, 2, 2]
    assert activity(None, 10) == 0 and activity("50@1m,10@1m", 150) == 10  # the last phase lasts
    for bad in ("busy", "120", "50@soon"):
        with pytest.raises(ActivityError):
            activity(bad, 0)


def test_pods_get_devices_in_order_of_creation_and_report_their_profile() -> None:
    pods = [pod("second", "h1", count=2, created=5, **{ACTIVITY_ANNOTATION: "80", MEMORY_ANNOTATION: "50%"}),
            pod("first", "h1", created=1, **{ACTIVITY_ANNOTATION: "3", MEMORY_ANNOTATION: "20000"}),
            pod("done", "h1", phase="Succeeded"), pod("elsewhere", "h2"),
            pod("sliced", "m1", resource="nvidia.com/mig-1g.10gb", **{ACTIVITY_ANNOTATION: "40"})]
    found = devices(node("h1", gpus=4), pods, T0 + timedelta(seconds=60))
    assert [(d.gpu, d.pod, d.percent, d.used_mib) for d in found] == [
        (0, "first", 3, 20000), (1, "second", 80, 40779), (2, "second", 80, 40779), (3, "", 0, 0)]
    [mig, spare] = devices(node("m1", mig={"1g.10gb": 2}), pods, T0 + timedelta(seconds=60))
    assert (mig.pod, mig.profile, mig.instance, mig.card_mib, spare.pod) == ("sliced", "1g.10gb", 1, 10240, "")
    assert "DCGM_FI_DEV_GPU_UTIL" not in mig.values()  # not produced for MIG, as on real hardware
    assert mig.values()["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] == 0.4


def test_the_exposition_carries_dcgm_exporters_labels() -> None:
    text = exposition(devices(node("h1", gpus=1), [pod("train-0", "h1", **{ACTIVITY_ANNOTATION: "87"})], T0))
    assert "# TYPE DCGM_FI_DEV_GPU_UTIL gauge" in text
    [line] = [x for x in text.splitlines() if x.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    assert line.startswith('DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-') and line.endswith("} 87")
    for label in ('device="nvidia0"', 'modelName="NVIDIA H100 80GB HBM3"', 'Hostname="h1"', 'container="main"',
                  'namespace="alpha"', 'pod="train-0"', 'pci_bus_id="00000000:18:00.0"'):
        assert label in line


def test_a_lost_series_stops_while_the_pod_runs_on() -> None:
    lost = [pod("lost-0", "h1", **{LOST_ANNOTATION: "30s"})]
    assert [d.pod for d in devices(node("h1", gpus=2), lost, T0 + timedelta(seconds=29))] == ["lost-0", ""]
    assert [d.pod for d in devices(node("h1", gpus=2), lost, T0 + timedelta(seconds=30))] == [""]  # its card is gone


def test_the_exporter_serves_each_node_and_prometheus_scrapes_it_as_the_operator_does() -> None:
    exporter = DcgmExporter(lambda: [node("h1", gpus=1)], lambda: [pod("p", "h1")], clock=lambda: T0)
    url = exporter.start()
    try:
        assert 'pod="p"' in requests.get(f"{url}/nodes/h1/metrics", timeout=5).text
        assert requests.get(f"{url}/nodes/nope/metrics", timeout=5).status_code == 404
    finally:
        exporter.stop()
    config = scrape_config(url, ["h1"])
    assert "honor_labels: false" in config and "__metrics_path__: /nodes/h1/metrics" in config
    assert "pod: nvidia-dcgm-exporter-h1" in config  # so the workload's pod becomes exported_pod
