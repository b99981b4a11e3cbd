"""Sample Jobs for the living sandbox: one per tenant, as a user would submit it.

``sample_jobs`` derives from compile's objects one batch/v1 Job per tenant: in the
namespace of the tenant's first LocalQueue, labelled with that queue, asking for one
accelerator of the first pool the tenant holds nominal quota in (a MIG slice on a
MIG pool), suspended so that Kueue decides when it starts. KWOK completes its pod
after ``run_for``. ``observe`` reads back what Kueue and the scheduler made of them.

On a Volcano cluster ``volcano_sample_jobs`` does the same from the tenant's Queue: the Job's pods
name the Queue in their annotation and are scheduled by ``volcano`` (as the tenant guide says),
Volcano's podgroup controller makes the Job's PodGroup, and its scheduler binds the pod to a node
of the queue's node group; ``observe`` then reads the PodGroup's phase instead of a Workload.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from gpugov.kube.names import KUEUE_API, VOLCANO_API, VOLCANO_QUEUE_ANNOTATION
from gpugov.kube.names import KUEUE_PRIORITY_LABEL as PRIORITY_LABEL
from gpugov.kube.names import KUEUE_QUEUE_LABEL as QUEUE_LABEL
from gpugov.kube.objects import LABEL_TENANT, RESTRICTED_CONTAINER, RESTRICTED_POD
from gpugov.kube.resources import is_accelerator
from gpugov.sandbox.kwok import RUN_FOR_ANNOTATION

SAMPLE_LABEL = "sandbox.gpugov.io/sample"
# Volcano's gang annotation on a Job: its PodGroup's minMember (podgroup controller, inherited from the owner).
GANG_ANNOTATION = "scheduling.volcano.sh/group-min-member"
# Not pulled by anyone: KWOK runs no containers.
IMAGE = "registry.k8s.io/pause:3.10"


@dataclass(frozen=True)
class SampleJob:
    tenant: str
    namespace: str
    name: str
    queue: str
    cluster_queue: str
    flavor: str  # Kueue: the ResourceFlavor; Volcano: the node group of the pool
    resource: str
    backend: str = "kueue"


@dataclass(frozen=True)
class Observed:
    job: SampleJob
    admitted: bool
    flavor: str  # the flavor Kueue assigned, "" while not admitted
    node: str
    phase: str  # the pod's phase, "" before the pod exists
    finished: bool
    reason: str  # why it waits, from the Workload's conditions


def _index(objects: Iterable[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind and o["apiVersion"] == KUEUE_API}


def _first_accelerator(cluster_queue: dict[str, Any]) -> tuple[str, str] | None:
    """(flavor, resource) of the first accelerator the queue has nominal quota of."""
    for group in cluster_queue["spec"].get("resourceGroups", []):
        for flavor in group.get("flavors", []):
            for resource in flavor.get("resources", []):
                name = resource["name"]
                if is_accelerator(name) and Decimal(str(resource.get("nominalQuota", 0))) >= 1:
                    return flavor["name"], name
    return None


def sample_jobs(objects: list[dict[str, Any]]) -> list[SampleJob]:
    """One sample per tenant with a LocalQueue and an accelerator quota, in tenant order."""
    cluster_queues = _index(objects, "ClusterQueue")
    samples: dict[str, SampleJob] = {}
    for queue in (o for o in objects if o["kind"] == "LocalQueue" and o["apiVersion"] == KUEUE_API):
        tenant = queue["metadata"].get("labels", {}).get(LABEL_TENANT, "")
        cluster_queue = cluster_queues.get(queue["spec"]["clusterQueue"])
        if not tenant or tenant in samples or cluster_queue is None:
            continue
        found = _first_accelerator(cluster_queue)
        if found is None:
            continue
        flavor, resource = found
        namespace, name = queue["metadata"]["namespace"], queue["metadata"]["name"]
        samples[tenant] = SampleJob(tenant, namespace, f"sample-{tenant}", name, cluster_queue["metadata"]["name"], flavor, resource)
    return sorted(samples.values(), key=lambda s: s.tenant)


def job_manifest(
    sample: SampleJob, run_for: str | None, pods: int = 1, amount: int = 1, priority_class: str | None = None
) -> dict[str, Any]:
    """A suspended Job of ``pods`` pods, each asking ``amount`` of the sample's resource.

    ``run_for`` None: the pods run until deleted. ``priority_class``: a WorkloadPriorityClass.
    """
    requests = {sample.resource: str(amount), "cpu": "1", "memory": "1Gi"}
    if sample.backend == "volcano":
        return _volcano_job(sample, run_for, pods, requests, priority_class)
    labels = {QUEUE_LABEL: sample.queue, SAMPLE_LABEL: "true"}
    if priority_class:
        labels[PRIORITY_LABEL] = priority_class
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": sample.name, "namespace": sample.namespace, "labels": labels},
        "spec": {
            "suspend": True,
            "parallelism": pods,
            "completions": pods,
            "backoffLimit": 0,
            "template": {
                "metadata": {
                    "annotations": {RUN_FOR_ANNOTATION: run_for} if run_for else {},
                    "labels": {SAMPLE_LABEL: "true"},
                },
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": dict(RESTRICTED_POD),
                    "containers": [
                        {"name": "main", "image": IMAGE, "resources": {"requests": requests, "limits": requests},
                         "securityContext": dict(RESTRICTED_CONTAINER)}
                    ],
                },
            },
        },
    }


def _volcano_job(
    sample: SampleJob, run_for: str | None, pods: int, requests: dict[str, str], priority_class: str | None
) -> dict[str, Any]:
    """A Job whose pods Volcano schedules: the queue in the pod annotation, schedulerName volcano.

    ``priority_class``: a PriorityClass (Volcano orders and preempts by the pods' class). With more
    than one pod the Job asks for gang admission: its PodGroup's minMember is every pod.
    """
    annotations = {VOLCANO_QUEUE_ANNOTATION: sample.queue}
    if run_for:
        annotations[RUN_FOR_ANNOTATION] = run_for
    job_annotations = {GANG_ANNOTATION: str(pods)} if pods > 1 else {}
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": IMAGE, "resources": {"requests": requests, "limits": requests}}],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": sample.name, "namespace": sample.namespace, "labels": {SAMPLE_LABEL: "true"},
                     "annotations": job_annotations},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "backoffLimit": 0,
            "template": {"metadata": {"annotations": annotations, "labels": {SAMPLE_LABEL: "true"}}, "spec": spec},
        },
    }


def volcano_sample_jobs(objects: list[dict[str, Any]]) -> list[SampleJob]:
    """One sample per tenant Queue with a deserved accelerator quota, in tenant order."""
    namespaces = {}
    for obj in objects:
        tenant = obj["metadata"].get("labels", {}).get(LABEL_TENANT)
        if obj["kind"] == "Namespace" and tenant and tenant not in namespaces:
            namespaces[tenant] = obj["metadata"]["name"]
    samples = []
    for queue in (o for o in objects if o["kind"] == "Queue" and o["apiVersion"] == VOLCANO_API):
        tenant = queue["metadata"].get("labels", {}).get(LABEL_TENANT)
        spec = queue["spec"]
        resource = next((r for r, v in (spec.get("deserved") or {}).items()
                         if is_accelerator(r) and Decimal(str(v)) >= 1), None)
        if not tenant or tenant not in namespaces or resource is None:
            continue
        groups = (spec.get("affinity") or {}).get("nodeGroupAffinity", {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution") or [""]
        name = queue["metadata"]["name"]
        samples.append(SampleJob(tenant, namespaces[tenant], f"sample-{tenant}", name, name, groups[0], resource,
                                 backend="volcano"))
    return sorted(samples, key=lambda s: s.tenant)


def submit(api: client.ApiClient, samples: Iterable[SampleJob], run_for: str = "20s") -> None:
    """Create the sample Jobs, replacing earlier ones of the same name."""
    batch = client.BatchV1Api(api)
    for sample in samples:
        try:
            batch.delete_namespaced_job(sample.name, sample.namespace, propagation_policy="Background")
            _wait_gone(batch, sample)
        except ApiException as exc:
            if exc.status != 404:
                raise
        batch.create_namespaced_job(sample.namespace, job_manifest(sample, run_for))


def _podgroup_of(podgroups: list[dict[str, Any]], job_uid: str) -> dict[str, Any]:
    """The PodGroup Volcano's podgroup controller made for a Job's pods (owned by the Job)."""
    for group in podgroups:
        if any(o.get("uid") == job_uid for o in group["metadata"].get("ownerReferences", [])):
            return group
    return {}


def _volcano_waiting_reason(group: dict[str, Any]) -> str:
    if not group:
        return "no PodGroup yet"
    conditions = group.get("status", {}).get("conditions") or []
    message = next((c.get("message") for c in reversed(conditions) if c.get("message")), "")
    return f"PodGroup {group.get('status', {}).get('phase', 'Pending')}" + (f": {message}" if message else "")


def _wait_gone(batch: client.BatchV1Api, sample: SampleJob, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            batch.read_namespaced_job(sample.name, sample.namespace)
        except ApiException as exc:
            if exc.status == 404:
                return
            raise
        time.sleep(0.2)


def _workload_of(workloads: list[dict[str, Any]], sample: SampleJob) -> dict[str, Any] | None:
    for workload in workloads:
        owners = workload["metadata"].get("ownerReferences", [])
        if any(o.get("kind") == "Job" and o.get("name") == sample.name for o in owners):
            return workload
    return None


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c.get("type") == kind), {})


def _waiting_reason(workload: dict[str, Any]) -> str:
    if not workload:
        return "no Workload yet"
    return str(_condition(workload, "QuotaReserved").get("message", "not evaluated by Kueue yet"))


def observe(api: client.ApiClient, samples: list[SampleJob]) -> list[Observed]:
    """What Kueue, the scheduler and KWOK made of each sample Job, now."""
    if samples and samples[0].backend == "volcano":
        return _observe_volcano(api, samples)
    dynamic = DynamicClient(api)
    workload_api = dynamic.resources.get(api_version=KUEUE_API, kind="Workload")
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    result = []
    for sample in samples:
        workloads = workload_api.get(namespace=sample.namespace).to_dict().get("items", [])
        workload = _workload_of(workloads, sample) or {}
        admission = workload.get("status", {}).get("admission") or {}
        assignments = admission.get("podSetAssignments") or [{}]
        flavor = ", ".join(sorted(set((assignments[0].get("flavors") or {}).values())))
        pods = core.list_namespaced_pod(sample.namespace, label_selector=f"job-name={sample.name}").items
        pod = pods[0] if pods else None
        job = batch.read_namespaced_job(sample.name, sample.namespace)
        finished = bool(job.status and job.status.succeeded)
        admitted = _condition(workload, "Admitted").get("status") == "True" or finished
        result.append(
            Observed(
                job=sample,
                admitted=admitted,
                flavor=flavor,
                node=(pod.spec.node_name or "") if pod else "",
                phase=(pod.status.phase or "") if pod and pod.status else "",
                finished=finished,
                reason="" if admitted else _waiting_reason(workload),
            )
        )
    return result


def _observe_volcano(api: client.ApiClient, samples: list[SampleJob]) -> list[Observed]:
    """What Volcano and KWOK made of each sample Job: admitted once its PodGroup left Pending and
    its pod is bound to a node of the queue's node group."""
    custom = client.CustomObjectsApi(api)
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    result = []
    for sample in samples:
        job = batch.read_namespaced_job(sample.name, sample.namespace)
        groups = custom.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", sample.namespace,
                                                      "podgroups")["items"]
        group = _podgroup_of(groups, job.metadata.uid)
        pods = core.list_namespaced_pod(sample.namespace, label_selector=f"job-name={sample.name}").items
        pod = pods[0] if pods else None
        node = (pod.spec.node_name or "") if pod else ""
        finished = bool(job.status and job.status.succeeded)
        phase = group.get("status", {}).get("phase", "")
        admitted = finished or (phase in ("Running", "Completed") and bool(node))
        result.append(
            Observed(
                job=sample,
                admitted=admitted,
                flavor=f"{group.get('spec', {}).get('queue', '')} / {sample.flavor}" if admitted else "",
                node=node,
                phase=(pod.status.phase or "") if pod and pod.status else "",
                finished=finished,
                reason="" if admitted else _volcano_waiting_reason(group),
            )
        )
    return result


def wait(
    api: client.ApiClient, samples: list[SampleJob], until: str = "finished", timeout: float = 120.0
) -> list[Observed]:
    """Poll ``observe`` until every sample is admitted (or finished); return the last view."""
    deadline = time.monotonic() + timeout
    while True:
        seen = observe(api, samples)
        if all(o.finished if until == "finished" else o.admitted for o in seen) or time.monotonic() > deadline:
            return seen
        time.sleep(1.0)


def table(seen: list[Observed]) -> str:
    """The samples as a plain-text table, one row per Job."""
    rows = [("TENANT", "JOB", "QUEUE", "ASKS", "ADMITTED TO", "NODE", "STATE")]
    for o in seen:
        state = "Succeeded" if o.finished else (o.phase or ("admitted" if o.admitted else "waiting: " + o.reason))
        rows.append(
            (o.job.tenant, f"{o.job.namespace}/{o.job.name}", o.job.queue, f"1 {o.job.resource}", o.flavor or "-",
             o.node or "-", state)
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1] for row in rows)
