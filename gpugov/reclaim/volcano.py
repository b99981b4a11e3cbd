"""`gpugov reclaim` on a Volcano cluster: its subjects are the tenants' batch/v1 Jobs whose pods Volcano
schedules (what the tenant guide tells a tenant to submit), from raw Jobs and Pods (pure).

Volcano keeps no admission record like Kueue's Workload: a Job is admitted while it has running pods
Volcano bound, since the earliest PodScheduled of those pods. Its queue is its pods' Queue annotation
(else its tenant's Queue), its priority class its pods'. gpugov's marks live on the Job itself: the
warning (gpugov.io/reclaim-warned-at), the deactivation (gpugov.io/reclaim-deactivated-at, with
spec.suspend=true: the Job controller deletes its pods and Volcano frees their accelerators) and the
owner's snooze (gpugov.io/reclaim-snooze-until). A tenant may edit its own Job, so the admission policy
gpugov-volcano-reclaim keeps gpugov's two marks and the suspension of a reclaimed Job out of its reach
(compile.admission.volcano).

Volcano Jobs (batch.volcano.sh) are not reclaimed yet: they are left alone (no subject).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from gpugov.declarations.model import Model
from gpugov.kube.names import VOLCANO_QUEUE_ANNOTATION
from gpugov.kube.objects import ANNOTATION_RECLAIM_SNOOZE, ANNOTATION_RECLAIM_WARNED
from gpugov.queueing.workload import parse_time
from gpugov.reclaim.decide import Subject
from gpugov.reclaim.subjects import Candidate, _controller_uid, _time_or_unreadable


def _scheduled_at(pod: dict[str, Any]) -> datetime | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "True":
            return parse_time(c.get("lastTransitionTime"))
    return None


def volcano_candidates(model: Model, jobs: Iterable[dict[str, Any]],
                       pods: Iterable[dict[str, Any]]) -> list[Candidate]:
    """The running, not suspended batch/v1 Jobs scheduled by volcano in namespaces of tenants that declare
    a reclaim policy."""
    tenant_of = model.tenant_of_namespace()
    running: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        spec = pod.get("spec") or {}
        if (pod.get("status") or {}).get("phase") != "Running" or spec.get("schedulerName") != "volcano" \
                or not spec.get("nodeName"):
            continue
        running.setdefault(_controller_uid(pod), []).append(pod)
    found = []
    for job in jobs:
        meta, spec = job.get("metadata") or {}, job.get("spec") or {}
        namespace, name, uid = str(meta.get("namespace", "")), str(meta.get("name", "")), str(meta.get("uid", ""))
        tenant_name = tenant_of.get(namespace)
        if tenant_name is None or spec.get("suspend") is True or not running.get(uid):
            continue
        policy = model.reclaim_policy(model.tenants[tenant_name])
        if policy is None:
            continue
        mine = running[uid]
        starts = [t for t in (_scheduled_at(p) for p in mine) if t is not None]
        if not starts:
            continue
        template = ((spec.get("template") or {}).get("metadata") or {}).get("annotations") or {}
        priority_class = str(((spec.get("template") or {}).get("spec") or {}).get("priorityClassName") or "")
        annotations = meta.get("annotations") or {}
        warned, _ = _time_or_unreadable(annotations.get(ANNOTATION_RECLAIM_WARNED))
        snooze, unreadable = _time_or_unreadable(annotations.get(ANNOTATION_RECLAIM_SNOOZE))
        declared = model.priority_classes.get(priority_class)
        found.append(Candidate(Subject(
            key=f"{namespace}/{name}",
            tenant=tenant_name,
            queue=str(template.get(VOLCANO_QUEUE_ANNOTATION) or tenant_name),
            priority_class=priority_class,
            non_preemptible=declared is not None and not declared.preemptible,
            admitted_at=min(starts),
            pods=tuple(sorted({str(p["metadata"]["name"]) for p in mine})),
            warned_at=warned,
            snooze_until=snooze,
            snooze_unreadable=unreadable,
        ), policy, namespace, name, uid))
    return sorted(found, key=lambda c: c.subject.key)
