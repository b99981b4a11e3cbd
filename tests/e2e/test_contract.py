"""The governance contract: what the example organisation's declarations promise, held by the
real Kueue controller v0.17.0 in the living sandbox, with Jobs submitted as users submit them.

Each test states the declaration it proves. The example org's cluster ``east`` is applied once
(``living_org``); every test removes its Jobs and waits until their quota is free again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from gpugov.sandbox import samples
from gpugov.sandbox.cluster import Sandbox
from gpugov.sandbox.kwok import RUN_FOR_ANNOTATION
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.e2e

MIG = "nvidia.com/mig-1g.10gb"
KUEUE = "kueue.x-k8s.io/v1beta2"


class Submitter:
    """Submits Jobs for one test and removes them afterwards."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.jobs: list[samples.SampleJob] = []
        self.workloads = DynamicClient(api).resources.get(api_version=KUEUE, kind="Workload")

    def submit(self, tenant: str, namespace: str, queue: str, pods: int, amount: int, priority: str) -> samples.SampleJob:
        job = samples.SampleJob(tenant, namespace, f"c-{tenant}-{uuid.uuid4().hex[:6]}", queue, tenant, "", MIG)
        manifest = samples.job_manifest(job, run_for=None, pods=pods, amount=amount, priority_class=priority)
        client.BatchV1Api(self.api).create_namespaced_job(namespace, manifest)
        self.jobs.append(job)
        return job

    def workload(self, job: samples.SampleJob) -> dict[str, Any]:
        items = self.workloads.get(namespace=job.namespace).to_dict().get("items", [])
        for item in items:
            if any(o.get("name") == job.name for o in item["metadata"].get("ownerReferences", [])):
                return dict(item)
        return {}

    def conditions(self, job: samples.SampleJob) -> dict[str, str]:
        return {c["type"]: c["status"] for c in self.workload(job).get("status", {}).get("conditions", [])}

    def admitted(self, job: samples.SampleJob) -> bool:
        return self.conditions(job).get("Admitted") == "True"

    def wait_admitted(self, job: samples.SampleJob, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.admitted(job):
            if time.monotonic() > deadline:
                raise AssertionError(f"{job.namespace}/{job.name} not admitted: {self.workload(job).get('status')}")
            time.sleep(0.5)

    def evictions(self, job: samples.SampleJob) -> list[dict[str, Any]]:
        return [
            c
            for c in self.workload(job).get("status", {}).get("conditions", [])
            if c["type"] in ("Evicted", "Preempted") and c["status"] == "True"
        ]

    def cleanup(self) -> None:
        batch = client.BatchV1Api(self.api)
        for job in self.jobs:
            batch.delete_namespaced_job(job.name, job.namespace, propagation_policy="Foreground")
        deadline = time.monotonic() + 60
        while any(self.workload(job) for job in self.jobs) and time.monotonic() < deadline:
            time.sleep(0.5)


@pytest.fixture
def jobs(living: Sandbox, living_org: list[dict[str, Any]]) -> Iterator[Submitter]:
    submitter = Submitter(living.cp.api_client())
    yield submitter
    submitter.cleanup()


def test_non_preemptible_inference_is_never_reclaimed(jobs: Submitter) -> None:
    """tenants/inference.yaml: queue `serving` runs only `inference-critical`, a priority class with
    `preemptible: false` ("Its pods never preempted"), in department `product`, whose
    SchedulingPolicy says `reclaimWithinCohort: Any`. Kueue reclaims from any workload of a
    borrowing ClusterQueue, whatever its priority; so a tenant that admits non-preemptible work
    must never borrow. inference fills its nominal 64 MIG slices, asks for 10 more (it must wait,
    not borrow data-platform's idle slices), then data-platform takes its own nominal 24: no
    inference workload is ever evicted."""
    serving = jobs.submit("inference", "inference", "serving", pods=2, amount=32, priority="inference-critical")
    jobs.wait_admitted(serving)
    beyond = jobs.submit("inference", "inference", "serving", pods=1, amount=10, priority="inference-critical")
    time.sleep(5)  # Kueue decides within a scheduling cycle or two
    assert not jobs.admitted(beyond), "inference borrowed beyond its nominal quota"

    lender = jobs.submit("data-platform", "data-batch", "batch", pods=1, amount=24, priority="batch-low")
    jobs.wait_admitted(lender)
    time.sleep(5)
    assert jobs.evictions(serving) == [] and jobs.evictions(beyond) == []
    assert jobs.admitted(serving)


def _refusal(create: Any) -> str:
    """The apiserver's message when ``create()`` is refused; fails if it is accepted."""
    from kubernetes.client.exceptions import ApiException

    try:
        create()
    except ApiException as exc:
        assert exc.status in (403, 422), exc
        return str(exc.body)
    raise AssertionError("the apiserver accepted it")


def test_disallowed_priority_class_is_refused_at_creation(jobs: Submitter) -> None:
    """tenants/nlp.yaml: queue `training` allows `training-high` and `batch-low` only. A Job that
    asks for `inference-critical` there, by label or by its pods' priorityClassName, is refused
    when it is created, with a message naming the queue and the allowed classes."""
    batch = client.BatchV1Api(jobs.api)
    job = samples.SampleJob("nlp", "nlp-train", f"c-nlp-{uuid.uuid4().hex[:6]}", "training", "nlp", "", "nvidia.com/gpu")
    by_label = samples.job_manifest(job, run_for="1s", priority_class="inference-critical")
    message = _refusal(lambda: batch.create_namespaced_job(job.namespace, by_label))
    assert "priority class inference-critical is not allowed on queue nlp-train/training" in message
    assert "allowed: batch-low, training-high" in message

    by_pod = samples.job_manifest(job, run_for="1s")
    by_pod["spec"]["template"]["spec"]["priorityClassName"] = "system-cluster-critical"
    message = _refusal(lambda: batch.create_namespaced_job(job.namespace, by_pod))
    assert "priorityClassName system-cluster-critical is not allowed on queue nlp-train/training" in message

    allowed = jobs.submit("nlp", "nlp-train", "training", pods=1, amount=1, priority="training-high")
    jobs.wait_admitted(allowed)


def test_queue_of_another_namespace_is_refused(jobs: Submitter) -> None:
    """tenants/vision.yaml declares queue `training` in namespace `vision` only: a Job in
    `nlp-dev` (tenant nlp) cannot name a queue that is not declared for its namespace."""
    job = samples.SampleJob("nlp", "nlp-dev", f"c-nlp-{uuid.uuid4().hex[:6]}", "training", "nlp", "", "nvidia.com/gpu")
    manifest = samples.job_manifest(job, run_for="1s")
    message = _refusal(lambda: client.BatchV1Api(jobs.api).create_namespaced_job(job.namespace, manifest))
    assert "queue nlp-dev/training is not declared for namespace nlp-dev" in message


def test_accelerator_work_without_a_queue_is_refused(jobs: Submitter) -> None:
    """Every accelerator goes through a queue: a GPU Pod or Job without a queue label is refused
    in a tenant namespace and in any other non-system namespace; CPU-only pods are not."""
    core, batch = client.CoreV1Api(jobs.api), client.BatchV1Api(jobs.api)
    for namespace in ("vision", "default"):
        pod = {
            "metadata": {"name": f"sneaky-{uuid.uuid4().hex[:6]}"},
            "spec": {"containers": [{"name": "main", "image": samples.IMAGE,
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
        }
        message = _refusal(lambda pod=pod, namespace=namespace: core.create_namespaced_pod(namespace, pod))
        assert f"Pod {namespace}/{pod['metadata']['name']} requests accelerators without a queue" in message
    job = samples.SampleJob("vision", "vision", f"c-vis-{uuid.uuid4().hex[:6]}", "training", "vision", "", MIG)
    manifest = samples.job_manifest(job, run_for="1s")
    del manifest["metadata"]["labels"][samples.QUEUE_LABEL]
    message = _refusal(lambda: batch.create_namespaced_job("vision", manifest))
    assert "requests accelerators without a queue" in message
    cpu_only = {"metadata": {"name": f"cpu-{uuid.uuid4().hex[:6]}"},
                "spec": {"containers": [{"name": "main", "image": samples.IMAGE}]}}
    created = core.create_namespaced_pod("vision", cpu_only)
    core.delete_namespaced_pod(created.metadata.name, "vision")


def test_cpu_beyond_the_tenants_share_is_borrowed_not_owned(jobs: Submitter) -> None:
    """tenants/data-platform.yaml declares MIG slices on a100-mig and no cpu: its cpu quota is its
    share of the pool's CPU in proportion to its accelerators in GPU equivalents (24 x 1/7 +
    4 x 2/7 of the pool's 32 GPUs, of 4 x 128 cores = 73.142), not the whole pool's 512. A job
    of 3 pods x 30 cores is admitted only by borrowing the 16.858 cores beyond that share from
    its cohort, and Kueue accounts them as borrowed."""
    job = samples.SampleJob("data-platform", "data-batch", f"c-dp-{uuid.uuid4().hex[:6]}", "batch", "data-platform",
                            "", MIG)
    manifest = samples.job_manifest(job, run_for=None, pods=3, amount=1, priority_class="batch-low")
    for container in manifest["spec"]["template"]["spec"]["containers"]:
        container["resources"]["requests"]["cpu"] = container["resources"]["limits"]["cpu"] = "30"
    client.BatchV1Api(jobs.api).create_namespaced_job(job.namespace, manifest)
    jobs.jobs.append(job)
    jobs.wait_admitted(job)
    custom = client.CustomObjectsApi(jobs.api)
    deadline = time.monotonic() + 30
    borrowed: dict[str, str] = {}
    while time.monotonic() < deadline and borrowed.get("cpu") != "16858m":
        status = custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "data-platform")["status"]
        usage = next(f for f in status.get("flavorsUsage", []) if f["name"] == "a100-mig")
        borrowed = {r["name"]: str(r.get("borrowed", "0")) for r in usage["resources"]}
        time.sleep(0.5)
    assert borrowed["cpu"] == "16858m", borrowed


GPU = "nvidia.com/gpu"


def _gpu_job(jobs: Submitter, tenant: str, namespace: str, queue: str, pods: int, gpus: int,
             priority: str, run_for: str | None = None) -> samples.SampleJob:
    job = samples.SampleJob(tenant, namespace, f"c-{tenant}-{uuid.uuid4().hex[:6]}", queue, tenant, "", GPU)
    manifest = samples.job_manifest(job, run_for=run_for, pods=pods, amount=gpus, priority_class=priority)
    client.BatchV1Api(jobs.api).create_namespaced_job(namespace, manifest)
    jobs.jobs.append(job)
    return job


def _reason(jobs: Submitter, job: samples.SampleJob) -> str:
    conditions = jobs.workload(job).get("status", {}).get("conditions", [])
    return next((c["message"] for c in conditions if c["type"] == "QuotaReserved"), "")


def test_borrowing_stops_at_the_borrowing_limit(jobs: Submitter) -> None:
    """tenants/vision.yaml: h100 `{nominal: 8, borrowingLimit: 8}` in department research-vision
    under research. With the research tree idle, vision runs 16 GPUs (8 of them borrowed), and
    one GPU more waits although the cohort still has unused GPUs."""
    full = _gpu_job(jobs, "vision", "vision", "training", pods=2, gpus=8, priority="training-high")
    jobs.wait_admitted(full)
    one_more = _gpu_job(jobs, "vision", "vision", "training", pods=1, gpus=1, priority="training-high")
    time.sleep(5)
    reason = eventually(lambda: _reason(jobs, one_more), what="Kueue's reason for the waiting job")  # on a busy machine
    assert not jobs.admitted(one_more), "vision borrowed past its borrowingLimit"
    assert "h100" in reason, reason


def test_lending_limit_keeps_the_lenders_share_and_reclaim_requeues_the_borrower(jobs: Submitter) -> None:
    """tenants/nlp.yaml: h100 `{nominal: 16, lendingLimit: 8}`; tenants/speech.yaml has no h100
    quota and borrows there through department research. speech can borrow what the research
    tree lends (nlp's 8, vision's 8, the department's own 4): 20 GPUs, not 24. nlp then gets its
    unlent 8 at once, without preemption; when it wants its whole 16, reclaim (reclaimWithinCohort:
    Any) evicts the borrower, which is requeued and admitted again once nlp's reclaiming job ends."""
    too_much = _gpu_job(jobs, "speech", "speech", "default", pods=3, gpus=8, priority="batch-low")
    time.sleep(5)
    assert not jobs.admitted(too_much), "speech borrowed more than the research tree lends"
    client.BatchV1Api(jobs.api).delete_namespaced_job(too_much.name, too_much.namespace, propagation_policy="Foreground")
    jobs.jobs.remove(too_much)

    # Long enough to be running when nlp reclaims.
    borrower = _gpu_job(jobs, "speech", "speech", "default", pods=5, gpus=4, priority="batch-low", run_for="20s")
    jobs.wait_admitted(borrower)
    guaranteed = _gpu_job(jobs, "nlp", "nlp-train", "training", pods=1, gpus=8, priority="batch-low", run_for="30s")
    jobs.wait_admitted(guaranteed)
    assert jobs.evictions(borrower) == [], "nlp's unlent share needed no preemption"

    reclaim = _gpu_job(jobs, "nlp", "nlp-train", "training", pods=1, gpus=8, priority="batch-low", run_for="3s")
    jobs.wait_admitted(reclaim, timeout=60)
    evicted = jobs.evictions(borrower)
    assert evicted and "reclamation within the cohort" in evicted[0]["message"], jobs.workload(borrower).get("status")

    # Requeued, not dropped: Kueue admits the same Workload again once nlp's reclaiming job has ended and
    # the tree lends again (an Admitted transition after the eviction's).
    since = evicted[0]["lastTransitionTime"]

    def readmitted() -> bool:
        admitted = {c["type"]: c for c in jobs.workload(borrower).get("status", {}).get("conditions", [])}.get(
            "Admitted", {})
        return admitted.get("status") == "True" and admitted.get("lastTransitionTime", "") >= since

    deadline = time.monotonic() + 240
    while not readmitted():
        assert time.monotonic() < deadline, ("the preempted job was never admitted again after it was requeued",
                                             jobs.workload(borrower).get("status"))
        time.sleep(1)


RACK = "topology.gpugov.io/rack"


def test_topology_aware_job_lands_within_one_rack(jobs: Submitter) -> None:
    """hardware/h100.yaml: topology levels block > rack > hostname, three nodes per rack. nlp asks
    for 3 pods x 8 GPUs within one rack: every pod lands on a node of the same rack. 4 pods x 6
    GPUs (within its quota) cannot fit any rack, one pod per node, and wait with a topology
    reason, though the pool as a whole has room for them."""
    core = client.CoreV1Api(jobs.api)

    def rack_job(pods: int, gpus: int = 8) -> samples.SampleJob:
        job = samples.SampleJob("nlp", "nlp-train", f"c-tas-{uuid.uuid4().hex[:6]}", "training", "nlp", "", GPU)
        manifest = samples.job_manifest(job, run_for=None, pods=pods, amount=gpus, priority_class="training-high")
        manifest["spec"]["template"]["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] = RACK
        client.BatchV1Api(jobs.api).create_namespaced_job(job.namespace, manifest)
        jobs.jobs.append(job)
        return job

    fits = rack_job(3)
    jobs.wait_admitted(fits)
    deadline = time.monotonic() + 60
    nodes: set[str] = set()
    while time.monotonic() < deadline and len(nodes) < 3:
        pods = core.list_namespaced_pod("nlp-train", label_selector=f"job-name={fits.name}").items
        nodes = {p.spec.node_name for p in pods if p.spec.node_name}
        time.sleep(0.5)
    racks = {core.read_node(n).metadata.labels[RACK] for n in nodes}
    assert len(nodes) == 3 and len(racks) == 1, (nodes, racks)

    client.BatchV1Api(jobs.api).delete_namespaced_job(fits.name, fits.namespace, propagation_policy="Foreground")
    deadline = time.monotonic() + 60
    while jobs.workload(fits) and time.monotonic() < deadline:  # its quota must be free again
        time.sleep(0.5)
    jobs.jobs.remove(fits)
    too_wide = rack_job(4, gpus=6)
    time.sleep(8)
    reason = eventually(lambda: _reason(jobs, too_wide), what="Kueue's reason for the waiting job")  # on a busy machine
    assert not jobs.admitted(too_wide)
    assert "topology" in reason, reason


def test_a_job_whose_pod_ended_first_keeps_its_tainted_topology_aware_nodes(jobs: Submitter) -> None:
    """hardware/h100.yaml: the pool is tainted and topology-aware; its flavor's tolerations, not the
    Job's, let the pods onto the nodes. Kueue v0.17's TASReplaceNodeOnNodeTaints (on by default)
    judges a node's taints against the Workload's own pod sets only (tas node_controller
    getWorkloadStatus, classifyTaints): once no pod of a running workload is left on such a node,
    the node counts as failed for it, and where no replacement fits (here: the rack is full) the
    scheduler evicts it (NodeFailures). The sandbox runs Kueue with the gate off, as DR022 asks.
    nlp runs 3 pods x 8 GPUs within one rack; one pod ends while the others run: the Workload
    stays admitted on its nodes, with no unhealthy node and no eviction."""
    core = client.CoreV1Api(jobs.api)
    job = samples.SampleJob("nlp", "nlp-train", f"c-tas-{uuid.uuid4().hex[:6]}", "training", "nlp", "", GPU)
    manifest = samples.job_manifest(job, run_for=None, pods=3, amount=8, priority_class="training-high")
    manifest["spec"]["template"]["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] = RACK
    client.BatchV1Api(jobs.api).create_namespaced_job(job.namespace, manifest)
    jobs.jobs.append(job)
    jobs.wait_admitted(job)

    deadline = time.monotonic() + 60
    running: list[Any] = []
    while len(running) < 3:
        assert time.monotonic() < deadline, ("the pods never ran", [(p.metadata.name, p.status.phase) for p in running])
        pods = core.list_namespaced_pod(job.namespace, label_selector=f"job-name={job.name}").items
        running = [p for p in pods if p.spec.node_name and p.status.phase == "Running"]
        time.sleep(0.5)
    first = running[0]
    assert any(t.key == "gpugov.io/pool" for t in first.spec.tolerations or []), "the flavor's toleration"
    assert not any(t.key == "gpugov.io/pool" for ps in jobs.workload(job)["spec"]["podSets"]
                   for t in ps["template"]["spec"].get("tolerations") or []), "the Workload's pod sets have none"

    # The pod ends as a kubelet would report it (KWOK's run-for stage): Succeeded, the others still running.
    core.patch_namespaced_pod(first.metadata.name, job.namespace,
                              {"metadata": {"annotations": {RUN_FOR_ANNOTATION: "1s"}}})
    deadline = time.monotonic() + 30
    while core.read_namespaced_pod(first.metadata.name, job.namespace).status.phase != "Succeeded":
        assert time.monotonic() < deadline, "the pod never ended"
        time.sleep(0.2)

    unhealthy: set[str] = set()
    evictions: list[dict[str, Any]] = []
    deadline = time.monotonic() + 15  # Kueue's node controller reacts within 100 ms, its scheduler within a cycle
    while time.monotonic() < deadline and not evictions:
        status = jobs.workload(job).get("status", {})
        unhealthy |= {n["name"] for n in status.get("unhealthyNodes") or []}
        evictions = jobs.evictions(job)
        time.sleep(0.2)
    assert not unhealthy and not evictions, (
        f"Kueue judged node {first.spec.node_name} failed for the Workload once its pod there ended", unhealthy,
        [(e["reason"], e["message"]) for e in evictions])
    assert jobs.admitted(job), jobs.workload(job).get("status")
