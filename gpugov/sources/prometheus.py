"""DCGM utilisation from Prometheus, for the idle-accelerator check.

Whole GPUs report DCGM_FI_DEV_GPU_UTIL (percent); MIG instances do not, so they use
DCGM_FI_PROF_GR_ENGINE_ACTIVE (a 0..1 ratio). With the GPU Operator's ServiceMonitor
(honorLabels false) the workload's pod is in exported_pod/exported_namespace; a scrape
that keeps the exporter's own labels has it in pod/namespace: both are read.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import requests

from gpugov.sources import CheckIncomplete

WHOLE_GPU = 'max by (exported_namespace, exported_pod, namespace, pod) (max_over_time(DCGM_FI_DEV_GPU_UTIL{{GPU_I_ID=""}}[{window}]))'
MIG = ('100 * max by (exported_namespace, exported_pod, namespace, pod) '
       '(max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{{GPU_I_PROFILE!=""}}[{window}]))')
# Framebuffer used (MiB) and PCIe bytes per second from the host, per pod's busiest device, for job profiles.
MEMORY = "max by (exported_namespace, exported_pod, namespace, pod) (max_over_time(DCGM_FI_DEV_FB_USED[{window}]))"
HOST_IO = ("max by (exported_namespace, exported_pod, namespace, pod) "
           "(max_over_time(DCGM_FI_PROF_PCIE_RX_BYTES[{window}]))")
TIMEOUT = (5, 30)
MAX_POINTS = 10_000  # per series and request; Prometheus refuses more than 11,000


class PrometheusError(CheckIncomplete):
    """Prometheus could not answer; drift cannot judge idleness and exits 3."""


def query(url: str, promql: str, session: requests.Session | None = None) -> list[dict[str, Any]]:
    http = session or requests.Session()
    try:
        response = http.get(f"{url.rstrip('/')}/api/v1/query", params={"query": promql}, timeout=TIMEOUT)
        response.raise_for_status()
        body = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise PrometheusError(f"Prometheus query failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(body, dict) or body.get("status") != "success":
        error = body.get("error", "unknown error") if isinstance(body, dict) else "not a Prometheus API answer"
        raise PrometheusError(f"Prometheus query failed: {error}")
    result = (body.get("data") or {}).get("result")
    if not isinstance(result, list):
        raise PrometheusError("Prometheus query failed: the answer has no data.result list")
    return result


def utilisation(url: str, window: str, session: requests.Session | None = None,
                now: datetime | None = None) -> dict[tuple[str, str], float]:
    """(namespace, pod) -> highest utilisation (percent) over the window, whole GPUs and MIG, for the pods
    whose samples cover the whole window up to its end (gpugov.sources.coverage): a pod whose series
    started late, has a gap or stopped before the end is left out, never judged idle."""
    from gpugov.declarations.model import duration_seconds
    from gpugov.sources import coverage

    end = now or datetime.now(UTC)
    length = timedelta(seconds=duration_seconds(window))
    step = drift_step(length)
    start = end - length
    result = {}
    for pod, points in utilisation_series(url, start, end, int(step.total_seconds()), session).items():
        if not coverage.missing(points, start, end, step):
            result[pod] = max(v for _, v in points)
    return result


def drift_step(window: timedelta) -> timedelta:
    """The step drift reads a window at: a minute, or a twentieth of a shorter window (at least a second)."""
    return timedelta(seconds=max(1, min(60, int(window.total_seconds()) // 20)))


def query_range(url: str, promql: str, start: datetime, end: datetime, step: int,
                session: requests.Session | None = None,
                on_progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """`/api/v1/query_range` from start to end every `step` seconds, in requests of at most
    MAX_POINTS steps; the series of all requests merged by their labels. Whole or PrometheusError."""
    http = session or requests.Session()
    merged: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
    chunk = timedelta(seconds=step * (MAX_POINTS - 1))
    low = start
    while low <= end:
        high = min(low + chunk, end)
        if on_progress:
            on_progress(f"query_range {low:%Y-%m-%dT%H:%M:%SZ}..{high:%Y-%m-%dT%H:%M:%SZ}")
        params = {"query": promql, "start": f"{low.timestamp():.3f}", "end": f"{high.timestamp():.3f}", "step": str(step)}
        try:
            response = http.get(f"{url.rstrip('/')}/api/v1/query_range", params=params, timeout=TIMEOUT)
            response.raise_for_status()
            body = response.json()
        except (requests.RequestException, ValueError) as exc:
            raise PrometheusError(f"Prometheus range query failed: {type(exc).__name__}: {exc}") from exc
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(body, dict) or body.get("status") != "success" or not isinstance(data, dict):
            error = body.get("error", "unknown error") if isinstance(body, dict) else "not a Prometheus API answer"
            raise PrometheusError(f"Prometheus range query failed: {error}")
        if data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
            raise PrometheusError("Prometheus range query failed: the answer is not a matrix")
        for series in data["result"]:
            labels = series.get("metric") if isinstance(series, dict) else None
            values = series.get("values") if isinstance(series, dict) else None
            if not isinstance(labels, dict) or not isinstance(values, list):
                raise PrometheusError("Prometheus range query failed: a series without metric and values")
            key = tuple(sorted((str(k), str(v)) for k, v in labels.items()))
            merged.setdefault(key, {"metric": labels, "values": []})["values"].extend(values)
        low = high + timedelta(seconds=step)
    return list(merged.values())


def utilisation_series(url: str, start: datetime, end: datetime, step: int,
                       session: requests.Session | None = None,
                       on_progress: Callable[[str], None] | None = None) -> dict[tuple[str, str], list[tuple[datetime, float]]]:
    """(namespace, pod) -> (t, busiest device's utilisation in percent over (t - step, t]),
    whole GPUs and MIG, for drift's idle check and the usage ledger's idle hours."""
    return per_pod(url, (WHOLE_GPU.format(window=f"{step}s"), MIG.format(window=f"{step}s")), start, end, step,
                   session, on_progress)


def per_pod(url: str, queries: tuple[str, ...], start: datetime, end: datetime, step: int,
            session: requests.Session | None = None,
            on_progress: Callable[[str], None] | None = None) -> dict[tuple[str, str], list[tuple[datetime, float]]]:
    """(namespace, pod) -> [(time, percent)] sorted: the highest value of every query's series of that pod at
    each step. The pod is read from exported_pod / pod_name / pod (the GPU Operator's ServiceMonitor, the
    npu-exporter, a scrape keeping the exporter's labels), its namespace from exported_namespace / namespace."""
    points: dict[tuple[str, str], dict[float, float]] = {}
    for promql in queries:
        for series in query_range(url, promql, start, end, step, session, on_progress):
            labels = series["metric"]
            namespace = labels.get("exported_namespace") or labels.get("namespace", "")
            pod = labels.get("exported_pod") or labels.get("pod_name") or labels.get("pod", "")
            if not pod:
                continue
            into = points.setdefault((str(namespace), str(pod)), {})
            for value in series["values"]:
                try:
                    at, percent = float(value[0]), float(value[1])
                except (IndexError, TypeError, ValueError) as exc:
                    raise PrometheusError(f"Prometheus range query failed: a malformed sample ({type(exc).__name__})") from exc
                into[at] = max(percent, into.get(at, percent))
    return {pod: [(datetime.fromtimestamp(at, UTC), v) for at, v in sorted(samples.items())]
            for pod, samples in sorted(points.items())}
