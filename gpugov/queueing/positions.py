"""Positions in the queues, from Kueue's visibility API (visibility.kueue.x-k8s.io/v1beta2).

`GET /apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/NAME/pendingworkloads` answers a
PendingWorkloadsSummary whose items carry positionInClusterQueue and positionInLocalQueue,
counted from 0 in the order Kueue will try them (pkg/visibility/storage). gpugov shows them
counted from 1, as people count.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Position:
    cluster_queue: str
    local_queue: str
    in_cluster_queue: int  # from 0, as Kueue counts
    in_local_queue: int
    priority: int


def positions(summaries: Iterable[tuple[str, list[dict[str, Any]]]]) -> dict[tuple[str, str], Position]:
    """(namespace, Workload name) -> its position, from each ClusterQueue's pending items."""
    result: dict[tuple[str, str], Position] = {}
    for cluster_queue, items in summaries:
        for item in items:
            meta = item.get("metadata") or {}
            key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            result[key] = Position(cluster_queue, str(item.get("localQueueName") or ""),
                                   int(item.get("positionInClusterQueue") or 0), int(item.get("positionInLocalQueue") or 0),
                                   int(item.get("priority") or 0))
    return result


def ahead_of(key: tuple[str, str], table: dict[tuple[str, str], Position]) -> list[tuple[str, str]]:
    """The workloads before `key` in its ClusterQueue, first first."""
    mine = table.get(key)
    if mine is None:
        return []
    before = [(p.in_cluster_queue, k) for k, p in table.items()
              if p.cluster_queue == mine.cluster_queue and p.in_cluster_queue < mine.in_cluster_queue]
    return [k for _, k in sorted(before)]
