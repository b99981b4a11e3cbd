"""Per-pod utilisation series for gpugov reclaim: one declared metric (Guardrails/Tenant reclaim.idle.metric)
over a window, every `step` seconds the highest value of the step before, in percent.

DCGM_FI_PROF_GR_ENGINE_ACTIVE is a 0..1 ratio (scaled to percent), DCGM_FI_DEV_GPU_UTIL and the Ascend
npu-exporter's container_npu_utilization are percent. The pod is read from exported_pod / pod / pod_name
(the GPU Operator's ServiceMonitor, a scrape keeping the exporter's labels, the npu-exporter)."""

from __future__ import annotations

from datetime import datetime

import requests

from gpugov.sources.prometheus import per_pod

_BY = "exported_namespace, exported_pod, namespace, pod, pod_name"
QUERIES = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": f"100 * max by ({_BY}) (max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[{{step}}s]))",
    "DCGM_FI_DEV_GPU_UTIL": f"max by ({_BY}) (max_over_time(DCGM_FI_DEV_GPU_UTIL[{{step}}s]))",
    "container_npu_utilization": f"max by ({_BY}) (max_over_time(container_npu_utilization[{{step}}s]))",
}
Series = dict[tuple[str, str], list[tuple[datetime, float]]]


def pod_series(url: str, metric: str, start: datetime, end: datetime, step: int,
               session: requests.Session | None = None) -> Series:
    """(namespace, pod) -> [(time, percent)] sorted; the busiest device of a pod at each time."""
    return per_pod(url, (QUERIES[metric].format(step=step),), start, end, step, session)
