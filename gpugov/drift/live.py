"""What the cluster holds: the snapshot the comparisons read (plain dicts, as the API returns)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpugov.kube.objects import Key


@dataclass
class LiveState:
    """Objects are keyed by gpugov.kube.objects.object_key, as the desired ones are."""

    objects: dict[Key, dict[str, Any]] = field(default_factory=dict)  # desired kinds: desired + managed-by gpugov
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: list[dict[str, Any]] = field(default_factory=list)  # pods not yet finished
    gpu_utilisation: dict[tuple[str, str], float] | None = None  # (namespace, pod) -> max over the window, 0..100
    agent_snapshots: dict[str, dict[str, Any]] = field(default_factory=dict)  # node -> `gpugov agent` snapshot
    # Kueue's admitted Workloads (Kueue clusters), each cut to (namespace, name, the uids of its owners);
    # None when not read: then no pod is judged by them
    admitted: list[tuple[str, str, tuple[str, ...]]] | None = None
