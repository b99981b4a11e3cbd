"""drift: compile's desired state against the live cluster (and NVML/DCGM readings).

`check(model, objects, live, backend, cluster)` is pure: it compares a `LiveState` (live.py)
with the declarations, in objects.py (objects and fields), hardware.py (node labels, MIG),
agent.py (the node agents' NVML snapshots), usage.py (accelerators used outside a queue) and
idle.py (DCGM utilisation); the rules are in rules.py. Reading the cluster, Prometheus and the
agents into a LiveState is the edge: gpugov.cluster.observe.
"""

from __future__ import annotations

from gpugov.compile import Object
from gpugov.declarations.model import Model
from gpugov.drift.agent import agent_findings
from gpugov.drift.hardware import hardware_findings
from gpugov.drift.idle import idle_findings
from gpugov.drift.live import LiveState
from gpugov.drift.objects import object_findings
from gpugov.drift.usage import usage_findings
from gpugov.drift.volcano import queue_findings
from gpugov.findings import Finding


def check(model: Model, objects: list[Object], live: LiveState, backend: str, cluster: str) -> list[Finding]:
    target = model.cluster(cluster)
    ignore = frozenset({target.mig_config_namespace, target.operations_namespace})
    limits = model.limits
    findings = [
        *object_findings(objects, live, model),
        *hardware_findings(model, objects, live),
        *agent_findings(model, objects, live.agent_snapshots),
        *usage_findings(model, objects, live, backend, cluster, ignore),
        *idle_findings(live, float(limits.idle_below_percent), limits.idle_window),
        *queue_findings(objects, live),
    ]
    return sorted(findings, key=lambda f: (f.rule, f.message))


__all__ = ["LiveState", "check"]
