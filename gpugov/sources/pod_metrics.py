"""Per-pod utilisation series for gpugov reclaim: one declared metric (Guardrails/Tenant reclaim.idle.metric)
over a window, every `step` seconds the highest value of the step before, in percent.

DCGM_FI_PROF_GR_ENGINE_ACTIVE is a 0..1 ratio (scaled to percent), DCGM_FI_DEV_GPU_UTIL and the Ascend
npu-exporter's container_npu_utilization are percent. The pod is read from exported_pod / pod / pod_name
(the GPU Operator's ServiceMonitor, a scrape keeping the exporter's labels, the npu-exporter)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import requests

from gpugov.sources.prometheus import PrometheusError, query_range

_BY = "exported_namespace, exported_pod, namespace, pod, pod_name"
QUERIES = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": f"100 * max by ({_BY}) (max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[{{step}}s]))",
    "DCGM_FI_DEV_GPU_UTIL": f"max by ({_BY}) (max_over_time(DCGM_FI_DEV_GPU_UTIL[{{step}}s]))",
    "container_npu_utilization": f"max by ({_BY}) (max_over_time(container_npu_utilization[{{step}}s]))",
}
Series = dict[tuple[str, str], list[tuple[datetime, float]]]


def _pod_of(labels: dict[str, Any]) -> tuple[str, str]:
    namespace = labels.get("exported_namespace") or labels.get("namespace", "")
    pod = labels.get("exported_pod") or labels.get("pod_name") or labels.get("pod", "")
    return str(namespace), str(pod)


def pod_series(url: str, metric: str, start: datetime, end: datetime, step: int,
               session: requests.Session | None = None) -> Series:
    """(namespace, pod) -> [(time, percent)] sorted; the busiest device of a pod at each time."""
    points: dict[tuple[str, str], dict[float, float]] = {}
    for series in query_range(url, QUERIES[metric].format(step=step), start, end, step, session):
        key = _pod_of(series["metric"])
        if not key[1]:
            continue
        into = points.setdefault(key, {})
        for value in series["values"]:
            try:
                at, percent = float(value[0]), float(value[1])
            except (IndexError, TypeError, ValueError) as exc:
                raise PrometheusError(f"Prometheus range query failed: a malformed sample ({type(exc).__name__})") \
                    from exc
            into[at] = max(percent, into.get(at, percent))
    return {key: [(datetime.fromtimestamp(at, UTC), v) for at, v in sorted(samples.items())]
            for key, samples in sorted(points.items())}
