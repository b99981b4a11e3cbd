"""DCGM utilisation from Prometheus, for the idle-accelerator check.

Whole GPUs report DCGM_FI_DEV_GPU_UTIL (percent); MIG instances do not, so they use
DCGM_FI_PROF_GR_ENGINE_ACTIVE (a 0..1 ratio). With the GPU Operator's ServiceMonitor
(honorLabels false) the workload's pod is in exported_pod/exported_namespace; a scrape
that keeps the exporter's own labels has it in pod/namespace: both are read.
"""

from __future__ import annotations

from typing import Any

import requests

from gpugov.sources import CheckIncomplete

WHOLE_GPU = 'max by (exported_namespace, exported_pod, namespace, pod) (max_over_time(DCGM_FI_DEV_GPU_UTIL{{GPU_I_ID=""}}[{window}]))'
MIG = ('100 * max by (exported_namespace, exported_pod, namespace, pod) '
       '(max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{{GPU_I_PROFILE!=""}}[{window}]))')
TIMEOUT = (5, 30)


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
    if body.get("status") != "success":
        raise PrometheusError(f"Prometheus query failed: {body.get('error', 'unknown error')}")
    return body.get("data", {}).get("result", [])


def utilisation(url: str, window: str, session: requests.Session | None = None) -> dict[tuple[str, str], float]:
    """(namespace, pod) -> highest utilisation (percent) over the window, whole GPUs and MIG."""
    result: dict[tuple[str, str], float] = {}
    for promql in (WHOLE_GPU.format(window=window), MIG.format(window=window)):
        for sample in query(url, promql, session):
            labels = sample.get("metric", {})
            namespace = labels.get("exported_namespace") or labels.get("namespace", "")
            pod = labels.get("exported_pod") or labels.get("pod", "")
            if not pod:
                continue
            value = float(sample["value"][1])
            result[(namespace, pod)] = max(value, result.get((namespace, pod), 0.0))
    return result


