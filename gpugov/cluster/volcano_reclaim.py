"""gpugov reclaim's reads and writes on a Volcano cluster: every batch/v1 Job, Volcano Job and running Pod
(paginated, whole or CheckIncomplete), then per decision a merge patch of the Job (an annotation; for a
deactivation of a batch/v1 Job also spec.suspend=true, so the Job controller deletes its pods and Volcano
frees their accelerators; of a Volcano Job, Volcano's own AbortJob Command in its namespace) and an Event
on it. The in-cluster CronJob's role grants patch on both kinds of Job, create on Commands and Events in
the namespaces of the tenants whose idle policy it applies, no more."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kubernetes import client

from gpugov.cluster.reclaim import POD, _lean, _stamp, event_for
from gpugov.cluster.rest import MERGE_PATCH, PAGE_SIZE, Api, Rejected, list_all, write
from gpugov.kube.kinds import Kind
from gpugov.kube.objects import ANNOTATION_RECLAIM_DEACTIVATED, ANNOTATION_RECLAIM_WARNED
from gpugov.reclaim.decide import CLEAR, DEACTIVATE, WARN, Decision
from gpugov.reclaim.subjects import Candidate

JOB = Kind("batch/v1", "Job", "jobs", True)
VCJOB = Kind("batch.volcano.sh/v1alpha1", "Job", "jobs", True)
COMMAND_API = "bus.volcano.sh/v1alpha1"


def read_jobs(api_client: client.ApiClient, page_size: int = PAGE_SIZE) -> tuple[list[dict[str, Any]],
                                                                                   list[dict[str, Any]],
                                                                                   list[dict[str, Any]]]:
    """(every batch/v1 Job, every running Pod, every Volcano Job), without managedFields."""
    api = Api(api_client)
    jobs = [_lean(j) for j in list_all(api, JOB, page_size=page_size)]
    pods = [_lean(p) for p in list_all(api, POD, field_selector="status.phase=Running", page_size=page_size)]
    vcjobs = [_lean(j) for j in list_all(api, VCJOB, page_size=page_size)]
    return jobs, pods, vcjobs


def job_patch(decision: Decision, now: datetime) -> dict[str, Any]:
    """The merge patch of the Job for a decision's action."""
    if decision.action == WARN:
        return {"metadata": {"annotations": {ANNOTATION_RECLAIM_WARNED: _stamp(now)}}}
    if decision.action == DEACTIVATE:
        return {"spec": {"suspend": True}, "metadata": {"annotations": {ANNOTATION_RECLAIM_DEACTIVATED: _stamp(now)}}}
    if decision.action == CLEAR:
        return {"metadata": {"annotations": {ANNOTATION_RECLAIM_WARNED: None}}}
    raise ValueError(f"no patch for action {decision.action!r}")


def job_event(candidate: Candidate, decision: Decision, now: datetime) -> dict[str, Any]:
    return event_for(candidate, decision, now, VCJOB if candidate.kind == "VolcanoJob" else JOB)


def abort_command(candidate: Candidate, why: str) -> dict[str, Any]:
    """Volcano's AbortJob Command for a Volcano Job (what `vcctl job suspend` creates), in its namespace."""
    target = {"apiVersion": VCJOB.api_version, "kind": "Job", "name": candidate.name, "uid": candidate.uid,
              "controller": True}
    return {"apiVersion": COMMAND_API, "kind": "Command",
            "metadata": {"generateName": f"{candidate.name}-abortjob-", "namespace": candidate.namespace,
                         "ownerReferences": [target]},
            "target": target, "action": "AbortJob", "reason": "GpugovIdleDeactivated", "message": why[:1024]}


def act_on_job(api_client: client.ApiClient, candidate: Candidate, decision: Decision, now: datetime) -> str:
    """Patch the Job (a Volcano Job: its marks, then the AbortJob Command), then record an Event on it;
    '' when done, else why not (one line)."""
    api = Api(api_client)
    volcano_job = candidate.kind == "VolcanoJob"
    patch = job_patch(decision, now)
    if volcano_job:
        patch.pop("spec", None)  # a Volcano Job is stopped by its controller's command, not a field
    try:
        write(api, "PATCH", VCJOB if volcano_job else JOB, candidate.name, candidate.namespace, patch, MERGE_PATCH)
    except Rejected as exc:
        return f"patch refused: {exc}"
    if volcano_job and decision.action == DEACTIVATE:
        answer = api.call("POST", f"/apis/{COMMAND_API}/namespaces/{candidate.namespace}/commands", (),
                          abort_command(candidate, decision.why), "application/json")
        if not answer.ok:
            return f"command refused: {answer.status} {answer.message or answer.reason}"
    answer = api.call("POST", f"/api/v1/namespaces/{candidate.namespace}/events", (),
                      job_event(candidate, decision, now), "application/json")
    return "" if answer.ok else f"event refused: {answer.status} {answer.message or answer.reason}"
