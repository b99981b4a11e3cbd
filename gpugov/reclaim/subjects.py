"""From raw Workloads and Pods to the decision's Subjects, and the actions' Findings (pure)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gpugov.declarations.model import Model, ReclaimPolicy
from gpugov.findings import Finding, make
from gpugov.i18n import Text
from gpugov.kube.objects import ANNOTATION_RECLAIM_SNOOZE, ANNOTATION_RECLAIM_WARNED
from gpugov.queueing.workload import WorkloadError, from_object, parse_time
from gpugov.reclaim.decide import DEACTIVATE, WARN, Decision, Subject
from gpugov.reclaim.rules import RECLAIM_DEACTIVATED, RECLAIM_WARNED


@dataclass(frozen=True)
class Candidate:
    """An admitted Workload of a tenant with a reclaim policy: its facts and its policy."""

    subject: Subject
    policy: ReclaimPolicy
    namespace: str
    name: str
    uid: str
    kind: str = "Workload"  # on Volcano: "Job" (batch/v1) or "VolcanoJob" (batch.volcano.sh)


def _controller_uid(obj: dict[str, Any]) -> str:
    for owner in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(owner, dict) and owner.get("controller"):
            return str(owner.get("uid", ""))
    return ""


def running_pods_by_owner(pods: Iterable[dict[str, Any]]) -> dict[str, list[str]]:
    """owner uid (and each pod's own uid, for Kueue's pod integration) -> names of running pods."""
    found: dict[str, list[str]] = defaultdict(list)
    for pod in pods:
        if (pod.get("status") or {}).get("phase") != "Running":
            continue
        meta = pod.get("metadata") or {}
        for uid in {_controller_uid(pod), str(meta.get("uid", ""))} - {""}:
            found[uid].append(str(meta.get("name", "")))
    return found


def _time_or_unreadable(value: Any) -> tuple[datetime | None, bool]:
    try:
        return parse_time(value), False
    except WorkloadError:
        return None, True


def candidates(model: Model, workloads: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]]) -> list[Candidate]:
    """The admitted, active Workloads in namespaces of tenants that declare a reclaim policy."""
    tenant_of = model.tenant_of_namespace()
    by_owner = running_pods_by_owner(pods)
    found = []
    for raw in workloads:
        workload = from_object(raw)
        tenant_name = tenant_of.get(workload.namespace)
        if tenant_name is None or workload.state != "admitted" or not workload.active or workload.admitted_at is None:
            continue
        policy = model.reclaim_policy(model.tenants[tenant_name])
        if policy is None:
            continue
        annotations = (raw.get("metadata") or {}).get("annotations") or {}
        warned, _ = _time_or_unreadable(annotations.get(ANNOTATION_RECLAIM_WARNED))
        snooze, unreadable = _time_or_unreadable(annotations.get(ANNOTATION_RECLAIM_SNOOZE))
        declared = model.priority_classes.get(workload.priority_class)
        found.append(Candidate(Subject(
            key=workload.key,
            tenant=tenant_name,
            queue=workload.queue,
            priority_class=workload.priority_class,
            non_preemptible=declared is not None and not declared.preemptible,
            admitted_at=workload.admitted_at,
            pods=tuple(sorted(set(by_owner.get(_controller_uid(raw), ())))),
            warned_at=warned,
            snooze_until=snooze,
            snooze_unreadable=unreadable,
        ), policy, workload.namespace, workload.name, workload.uid))
    return sorted(found, key=lambda c: c.subject.key)


def findings(decisions: Iterable[Decision]) -> list[Finding]:
    """The warnings and deactivations, as findings for the notification sinks."""
    out = []
    for d in decisions:
        if d.action in (WARN, DEACTIVATE):
            rule = RECLAIM_WARNED if d.action == WARN else RECLAIM_DEACTIVATED
            out.append(make(rule, Text("Workload {workload} (tenant {tenant}): {why}", workload=d.key, tenant=d.tenant,
                                       why=d.why), None, object=f"Workload {d.key}"))
    return out
