"""A live cluster's finished Kueue Workloads as a what-if trace.

Each Workload with condition Finished=True becomes one job, named after the Job (or other
object) that owns it: submitted at its creationTimestamp, running from its last QuotaReserved (or Admitted) transition to its
Finished one, in its LocalQueue (namespace/spec.queueName), asking per pod what its first
podset's containers request (the accelerator, cpu, memory), pinned to a pool only when the
pod template selects one. Times in the API have second resolution, so the trace does too.
Reads go through gpugov.cluster.rest (raw, checked, paginated lists).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from kubernetes import client

from gpugov.cluster.rest import Api, list_all
from gpugov.kube.kinds import WORKLOAD
from gpugov.kube.objects import LABEL_POOL
from gpugov.kube.resources import is_accelerator
from gpugov.whatif.setup import resource_value
from gpugov.whatif.trace import Job


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _condition(workload: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for condition in (workload.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == kind:
            return condition
    return None


def _requests(pod_set: dict[str, Any]) -> dict[str, int]:
    """Per-pod requests of a podset (containers summed), as Kueue counts them."""
    spec = ((pod_set.get("template") or {}).get("spec")) or {}
    total: dict[str, int] = {}
    for container in spec.get("containers") or []:
        requests = ((container.get("resources") or {}).get("requests")) or {}
        for name, quantity in requests.items():
            total[name] = total.get(name, 0) + resource_value(name, quantity)
    return total


def job_of(workload: dict[str, Any], origin: datetime) -> Job | None:
    """The trace job of one finished Workload, None when it cannot be one."""
    meta, spec = workload.get("metadata") or {}, workload.get("spec") or {}
    finished = _condition(workload, "Finished")
    started = _condition(workload, "QuotaReserved") or _condition(workload, "Admitted")
    created = _time(meta.get("creationTimestamp"))
    if not finished or finished.get("status") != "True" or not started or created is None:
        return None
    start, end = _time(started.get("lastTransitionTime")), _time(finished.get("lastTransitionTime"))
    pod_sets = spec.get("podSets") or []
    if start is None or end is None or len(pod_sets) != 1 or not spec.get("queueName"):
        return None
    try:
        requests = _requests(pod_sets[0])
    except ValueError:  # a quantity that is none
        return None
    accelerators = sorted((r, v) for r, v in requests.items() if is_accelerator(r) and v > 0)
    resource, per_pod = accelerators[0] if accelerators else ("", 0)
    selector = (((pod_sets[0].get("template") or {}).get("spec")) or {}).get("nodeSelector") or {}
    priority = spec.get("priorityClassRef") or {}
    namespace = meta.get("namespace", "default")
    owner = next((o.get("name") for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
    return Job(
        id=f"{namespace}/{owner or meta.get('name')}",
        submit_ms=int((created - origin).total_seconds() * 1000),
        duration_ms=max(1000, int((end - start).total_seconds() * 1000)),
        queue=f"{namespace}/{spec['queueName']}",
        pods=max(1, int(pod_sets[0].get("count") or 1)),
        accelerators=per_pod,
        resource=resource,
        pool=str(selector.get(LABEL_POOL, "")),
        priority_class=str(priority.get("name", "")) if priority.get("kind") == "WorkloadPriorityClass" else "",
        cpu_milli=requests.get("cpu", 0),
        memory_bytes=requests.get("memory", 0),
    )


def finished_jobs(api_client: client.ApiClient) -> tuple[list[Job], int]:
    """(the finished Workloads as jobs, sorted by submission; how many Workloads were left out).
    One pass, page by page: a Workload is dropped once it is a job (a cluster may hold 100,000)."""
    origin: datetime | None = None  # the first creation of any Workload, finished or not
    found: list[tuple[datetime, Job]] = []
    total = 0
    for workload in list_all(Api(api_client), WORKLOAD):
        total += 1
        created = _time((workload.get("metadata") or {}).get("creationTimestamp"))
        if created is None:
            continue
        origin = created if origin is None else min(origin, created)
        job = job_of(workload, created)  # submitted at 0 for now: the origin is known at the end
        if job is not None:
            found.append((created, job))
    if origin is None:
        return [], total
    jobs = [replace(job, submit_ms=int((created - origin).total_seconds() * 1000)) for created, job in found]
    if jobs:
        origin_ms = min(j.submit_ms for j in jobs)
        jobs = [replace(j, submit_ms=j.submit_ms - origin_ms) for j in jobs]
    jobs.sort(key=lambda j: (j.submit_ms, j.id))
    return jobs, total - len(jobs)
