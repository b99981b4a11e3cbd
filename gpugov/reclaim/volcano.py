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

A Volcano Job (batch.volcano.sh) is a subject too while Running: the same marks on it, and a deactivation
is Volcano's own AbortJob Command (its pods end; only a ResumeJob Command, which no tenant role may
create, brings it back: an Aborted job stays down whatever else changes on it).
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


def _running_by_owner(pods: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """controller uid -> its running pods that volcano bound."""
    running: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        spec = pod.get("spec") or {}
        if (pod.get("status") or {}).get("phase") != "Running" or spec.get("schedulerName") != "volcano" \
                or not spec.get("nodeName"):
            continue
        running.setdefault(_controller_uid(pod), []).append(pod)
    return running


def volcano_candidates(model: Model, jobs: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]],
                       vcjobs: Iterable[dict[str, Any]] = ()) -> list[Candidate]:
    """The running, not suspended batch/v1 Jobs scheduled by volcano and the Running Volcano Jobs in
    namespaces of tenants that declare a reclaim policy."""
    tenant_of = model.tenant_of_namespace()
    running = _running_by_owner(pods)
    found = []
    for job in jobs:
        meta, spec = job.get("metadata") or {}, job.get("spec") or {}
        template = spec.get("template") or {}
        found.append(_candidate(model, tenant_of, job, running, spec.get("suspend") is True, "Job",
                                str(((template.get("metadata") or {}).get("annotations") or {})
                                    .get(VOLCANO_QUEUE_ANNOTATION) or ""),
                                str((template.get("spec") or {}).get("priorityClassName") or ""),
                                f"{meta.get('namespace', '')}/{meta.get('name', '')}"))
    for job in vcjobs:
        meta, spec = job.get("metadata") or {}, job.get("spec") or {}
        phase = (((job.get("status") or {}).get("state") or {}).get("phase") or "")
        found.append(_candidate(model, tenant_of, job, running, phase != "Running", "VolcanoJob",
                                str(spec.get("queue") or "default"), str(spec.get("priorityClassName") or ""),
                                f"{meta.get('namespace', '')}/vcjob/{meta.get('name', '')}"))
    return sorted((c for c in found if c is not None), key=lambda c: c.subject.key)


def _candidate(model: Model, tenant_of: dict[str, str], job: dict[str, Any], running: dict[str, list[dict[str, Any]]],
               stopped: bool, kind: str, queue: str, priority_class: str, key: str) -> Candidate | None:
    meta = job.get("metadata") or {}
    namespace, name, uid = str(meta.get("namespace", "")), str(meta.get("name", "")), str(meta.get("uid", ""))
    tenant_name = tenant_of.get(namespace)
    if tenant_name is None or stopped or not running.get(uid):
        return None
    policy = model.reclaim_policy(model.tenants[tenant_name])
    starts = [t for t in (_scheduled_at(p) for p in running[uid]) if t is not None]
    if policy is None or not starts:
        return None
    annotations = meta.get("annotations") or {}
    warned, _ = _time_or_unreadable(annotations.get(ANNOTATION_RECLAIM_WARNED))
    snooze, unreadable = _time_or_unreadable(annotations.get(ANNOTATION_RECLAIM_SNOOZE))
    declared = model.priority_classes.get(priority_class)
    return Candidate(Subject(
        key=key,
        tenant=tenant_name,
        queue=queue or tenant_name,
        priority_class=priority_class,
        non_preemptible=declared is not None and not declared.preemptible,
        admitted_at=min(starts),
        pods=tuple(sorted({str(p["metadata"]["name"]) for p in running[uid]})),
        warned_at=warned,
        snooze_until=snooze,
        snooze_unreadable=unreadable,
    ), policy, namespace, name, uid, kind)
