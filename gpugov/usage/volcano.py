"""The ledger's segments on a Volcano cluster: the pods Volcano bound, each holding its accelerators
from the moment it was scheduled (its PodScheduled condition) until its containers ended (their
``finishedAt``) or, while it runs, until the read.

Volcano keeps no record like Kueue's Workload once a pod is gone: the ledger counts the pods that
still exist (a Job keeps its finished pods until it is deleted or its ttlSecondsAfterFinished ends),
and says so. A pod's pool is its node's ``gpugov.io/pool`` label; its tenant is its namespace's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from gpugov.kube.objects import LABEL_POOL
from gpugov.kube.quantity import QuantityError, parse_quantity
from gpugov.kube.resources import is_accelerator
from gpugov.queueing.workload import parse_time
from gpugov.usage.segments import Segment
from gpugov.usage.window import Window

NOTE = ("Volcano keeps no record of a pod once it is deleted: the ledger counts the pods that still exist "
        "(finished ones until their Job is deleted)")


def _scheduled_at(pod: dict[str, Any]) -> datetime | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "True":
            return parse_time(c.get("lastTransitionTime"))
    return None


def _finished_at(pod: dict[str, Any]) -> datetime | None:
    status = pod.get("status") or {}
    if status.get("phase") not in ("Succeeded", "Failed"):
        return None
    ends = [parse_time(((s.get("state") or {}).get("terminated") or {}).get("finishedAt"))
            for s in status.get("containerStatuses") or []]
    known = [e for e in ends if e is not None]
    return max(known) if known else None


def _accelerators(pod: dict[str, Any]) -> dict[str, Decimal]:
    held: dict[str, Decimal] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        for resource, value in ((container.get("resources") or {}).get("requests") or {}).items():
            if not is_accelerator(resource):
                continue
            try:
                held[resource] = held.get(resource, Decimal(0)) + parse_quantity(value)
            except QuantityError:
                continue
    return held


def pod_segments(pods: Iterable[dict[str, Any]], nodes: Iterable[dict[str, Any]], window: Window, now: datetime,
                 tenant_of_namespace: Mapping[str, str]) -> list[Segment]:
    """Every interval a pod scheduled by volcano held accelerators within `window`."""
    pool_of = {n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(LABEL_POOL, "") for n in nodes}
    found: list[Segment] = []
    for pod in pods:
        spec, meta = pod.get("spec") or {}, pod["metadata"]
        node = spec.get("nodeName")
        if spec.get("schedulerName") != "volcano" or not node:
            continue
        start = _scheduled_at(pod)
        if start is None:
            continue
        end = _finished_at(pod) or min(now, window.until)
        clipped = window.clip(start, end)
        if clipped is None:
            continue
        namespace = meta.get("namespace", "")
        tenant = tenant_of_namespace.get(namespace) or f"(namespace {namespace})"
        pool = pool_of.get(node) or f"(node {node})"
        found.extend(Segment(f"{namespace}/{meta['name']}", tenant, pool, resource, amount, *clipped)
                     for resource, amount in sorted(_accelerators(pod).items()))
    return found
