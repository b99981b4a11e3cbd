"""gpugov reclaim's reads and writes on the cluster: every Workload and running Pod (paginated,
whole or CheckIncomplete), then per decision a merge patch of the Workload (an annotation; for a
deactivation also spec.active=false) and an Event on it. Nothing else is written: the in-cluster
CronJob's role grants patch on Workloads and create on Events, no more."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kubernetes import client

from gpugov.cluster.rest import MERGE_PATCH, PAGE_SIZE, Api, Rejected, list_all, write
from gpugov.kube.kinds import KINDS, WORKLOAD, Kind
from gpugov.kube.objects import ANNOTATION_RECLAIM_DEACTIVATED, ANNOTATION_RECLAIM_WARNED
from gpugov.reclaim.decide import CLEAR, DEACTIVATE, WARN, Decision
from gpugov.reclaim.subjects import Candidate

POD = KINDS[("v1", "Pod")]
COMPONENT = "gpugov-reclaim"
REASONS = {WARN: "GpugovIdleWarning", DEACTIVATE: "GpugovIdleDeactivated", CLEAR: "GpugovIdleCleared"}


def read(api_client: client.ApiClient, page_size: int = PAGE_SIZE) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(every Workload, every running Pod), without managedFields."""
    api = Api(api_client)
    workloads = [_lean(w) for w in list_all(api, WORKLOAD, page_size=page_size)]
    pods = [_lean(p) for p in list_all(api, POD, field_selector="status.phase=Running", page_size=page_size)]
    return workloads, pods


def _lean(obj: dict[str, Any]) -> dict[str, Any]:
    (obj.get("metadata") or {}).pop("managedFields", None)
    return obj


def _stamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def patch_for(decision: Decision, now: datetime) -> dict[str, Any]:
    """The merge patch of the Workload for a decision's action."""
    if decision.action == WARN:
        return {"metadata": {"annotations": {ANNOTATION_RECLAIM_WARNED: _stamp(now)}}}
    if decision.action == DEACTIVATE:
        return {"spec": {"active": False}, "metadata": {"annotations": {ANNOTATION_RECLAIM_DEACTIVATED: _stamp(now)}}}
    if decision.action == CLEAR:
        return {"metadata": {"annotations": {ANNOTATION_RECLAIM_WARNED: None}}}
    raise ValueError(f"no patch for action {decision.action!r}")


def event_for(candidate: Candidate, decision: Decision, now: datetime, kind: Kind = WORKLOAD) -> dict[str, Any]:
    """The Event recorded on the reclaimed object (a Workload; on Volcano a batch or Volcano Job)."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{candidate.name}.", "namespace": candidate.namespace},
        "involvedObject": {"apiVersion": kind.api_version, "kind": kind.kind, "name": candidate.name,
                           "namespace": candidate.namespace, "uid": candidate.uid},
        "reason": REASONS[decision.action],
        "message": decision.why[:1024],
        "type": "Normal" if decision.action == CLEAR else "Warning",
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": COMPONENT,
        "firstTimestamp": _stamp(now),
        "lastTimestamp": _stamp(now),
        "count": 1,
    }


def act(api_client: client.ApiClient, candidate: Candidate, decision: Decision, now: datetime) -> str:
    """Patch the Workload, then record an Event on it; '' when done, else why not (one line)."""
    api = Api(api_client)
    try:
        write(api, "PATCH", WORKLOAD, candidate.name, candidate.namespace, patch_for(decision, now), MERGE_PATCH)
    except Rejected as exc:
        return f"patch refused: {exc}"
    answer = api.call("POST", f"/api/v1/namespaces/{candidate.namespace}/events", (),
                      event_for(candidate, decision, now), "application/json")
    return "" if answer.ok else f"event refused: {answer.status} {answer.message or answer.reason}"
