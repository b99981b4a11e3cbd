"""Idle accelerators: running pods whose DCGM utilisation (read by gpugov.sources.prometheus)
stayed under the threshold for the whole window."""

from __future__ import annotations

from gpugov.drift.live import LiveState
from gpugov.drift.rules import IDLE
from gpugov.drift.usage import accelerator_requests
from gpugov.findings import Finding, make
from gpugov.i18n import Text


def idle_findings(live: LiveState, below_percent: float, window: str) -> list[Finding]:
    if live.gpu_utilisation is None:
        return []
    findings = []
    for pod in live.pods:
        if (pod.get("status") or {}).get("phase") != "Running" or not accelerator_requests(pod):
            continue
        key = (pod["metadata"].get("namespace", ""), pod["metadata"]["name"])
        if key in live.gpu_utilisation and live.gpu_utilisation[key] < below_percent:
            name, used, threshold = "/".join(key), f"{live.gpu_utilisation[key]:.1f}%", f"{below_percent:g}%"
            findings.append(make(IDLE, Text("pod {pod} holds accelerators but used at most {used} over {window} "
                                            "(threshold {threshold})", pod=name, used=used, window=window,
                                            threshold=threshold),
                                 None, object=f"Pod {name}", live=used))
    return findings
