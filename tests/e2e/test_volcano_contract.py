"""gpugov's governance contract on the real Volcano scheduler (v1.14.1), not only on its CRDs.

One Volcano sandbox for this module: kube-apiserver, kube-controller-manager, kube-scheduler, KWOK,
and Volcano's controller manager and scheduler running the configuration gpugov compiles for
cluster ``west`` of the example organisation, with west applied as ``gpugov apply`` applies it.
Jobs are submitted as the tenant guide tells a tenant to (a batch/v1 Job whose pods name their
Queue and ``schedulerName: volcano``); Volcano's podgroup controller makes their PodGroups and its
scheduler decides. West's pool ``ascend-910b`` has 4 nodes of 8 Ascend 910B (32).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpugov.app.pipeline import validate_repo
from gpugov.cluster.apply import apply_objects
from gpugov.compile import compile
from gpugov.compile.volcano_scheduler import CONFIG_KEY, scheduler_configuration
from gpugov.sandbox import samples
from gpugov.sandbox.cluster import Sandbox
from gpugov.sandbox.nodes import create_nodes
from gpugov.sandbox.simulated import simulated_nodes
from tests.helpers.repos import REPO
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.e2e

VOLCANO = ("scheduling.volcano.sh", "v1beta1")
ASCEND = "huawei.com/Ascend910"
POOL_NODES = {"ascend-01", "ascend-02", "ascend-03", "ascend-04"}




def west_objects() -> list[dict[str, Any]]:
    model = validate_repo(REPO).model
    assert model is not None
    return compile(model, cluster="west")


@pytest.fixture(scope="module")
def west(sandbox_binaries: dict[str, Any]) -> Iterator[Sandbox]:
    """A Volcano sandbox with cluster west applied, its scheduler on west's compiled configuration."""
    objects = west_objects()
    conf = next(o["data"][CONFIG_KEY] for o in objects if CONFIG_KEY in o.get("data", {}))
    model = validate_repo(REPO).model
    assert model is not None
    with Sandbox(backend="volcano", volcano_conf=conf) as sandbox:
        api = sandbox.cp.api_client()
        create_nodes(api, simulated_nodes(model, "west"), kwok=True)
        assert not apply_objects(api, objects).missing
        yield sandbox
        problems = sandbox.problems()
    assert not problems, "\n".join(problems)


@pytest.fixture
def api(west: Sandbox) -> Iterator[client.ApiClient]:
    api = west.cp.api_client()
    yield api
    _delete_jobs(api)


def _delete_jobs(api: client.ApiClient) -> None:
    """Remove every Job the test made in west's tenant namespaces and wait until their pods are gone."""
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    namespaces = ("llm-pretrain", "recsys", "speech")
    for namespace in namespaces:
        for job in batch.list_namespaced_job(namespace).items:
            batch.delete_namespaced_job(job.metadata.name, namespace, propagation_policy="Background",
                                        grace_period_seconds=0)

    def gone() -> bool:
        left = 0
        for namespace in namespaces:
            for pod in core.list_namespaced_pod(namespace).items:
                left += 1
                try:
                    core.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)
                except ApiException as exc:
                    if exc.status != 404:  # gone between the list and the delete
                        raise
        return left == 0
    eventually(gone, 60, "the test's pods gone")


def job(api: client.ApiClient, tenant: str, pods: int = 1, amount: int = 8, run_for: str | None = None,
        priority_class: str | None = None, name: str | None = None) -> str:
    """Submit a Job of ``pods`` pods of ``amount`` Ascend each to the tenant's Queue, as its guide says."""
    sample = samples.SampleJob(tenant, tenant, name or f"{tenant}-{uuid.uuid4().hex[:6]}", tenant, tenant,
                               "ascend-910b", ASCEND, backend="volcano")
    manifest = samples.job_manifest(sample, run_for, pods=pods, amount=amount, priority_class=priority_class)
    client.BatchV1Api(api).create_namespaced_job(tenant, manifest)
    return sample.name


def pods_of(api: client.ApiClient, namespace: str, job_name: str) -> list[client.V1Pod]:
    return client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=f"job-name={job_name}").items


def bound(pods: list[client.V1Pod]) -> list[client.V1Pod]:
    return [p for p in pods if p.spec.node_name and p.status.phase in ("Pending", "Running")
            and p.metadata.deletion_timestamp is None]


def running(api: client.ApiClient, namespace: str) -> int:
    """Ascend devices held by the namespace's bound, not terminating pods."""
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace).items
    return sum(int(c.resources.requests.get(ASCEND, 0)) for p in bound(pods) for c in p.spec.containers)


def queue(api: client.ApiClient, name: str) -> dict[str, Any]:
    return client.CustomObjectsApi(api).get_cluster_custom_object(*VOLCANO, "queues", name)


def podgroup_of(api: client.ApiClient, namespace: str, job_name: str) -> dict[str, Any]:
    uid = client.BatchV1Api(api).read_namespaced_job(job_name, namespace).metadata.uid
    groups = client.CustomObjectsApi(api).list_namespaced_custom_object(*VOLCANO, namespace, "podgroups")["items"]
    return next((g for g in groups if any(o.get("uid") == uid for o in g["metadata"].get("ownerReferences", []))), {})


def test_the_scheduler_runs_gpugovs_compiled_configuration(west: Sandbox) -> None:
    """What vc-scheduler reads is exactly what compile emits for west (the capacity plugin with hierarchy)."""
    assert west.volcano is not None
    running_conf = yaml.safe_load(west.volcano.conf_path.read_text())
    assert running_conf == scheduler_configuration("capacity")
    versions = {s.name: s.version for s in west.started}
    assert versions["vc-scheduler"] == versions["vc-controller-manager"] == "v1.14.1"


def test_every_queue_is_open_and_a_missing_parent_reads_root(api: client.ApiClient) -> None:
    """The queue controller opens every Queue and writes `parent: root` onto the departments, which gpugov
    applies without a parent; the tenants keep their departments."""
    for name in ("research", "product", "llm-pretrain", "recsys", "speech"):
        eventually(lambda n=name: queue(api, n).get("status", {}).get("state") == "Open", 60, f"queue {name} Open")
    assert queue(api, "research")["spec"].get("parent") == "root"
    assert queue(api, "llm-pretrain")["spec"]["parent"] == "research"


def test_every_west_tenant_sample_runs_on_its_own_pool(api: client.ApiClient) -> None:
    """`gpugov sandbox jobs . --cluster west`: a sample per tenant, admitted by Volcano onto the pool's nodes."""
    jobs = samples.volcano_sample_jobs(west_objects())
    assert {j.tenant for j in jobs} == {"llm-pretrain", "recsys", "speech"}
    samples.submit(api, jobs, "5s")
    seen = samples.wait(api, jobs, "finished", 120)
    assert all(o.finished for o in seen), samples.table(seen)
    assert {o.node for o in seen} <= POOL_NODES, samples.table(seen)


def test_a_queue_below_its_deserved_reclaims_what_a_sibling_borrowed(api: client.ApiClient) -> None:
    """llm-pretrain (deserved 16) borrows the whole pool (32); speech (deserved 8, same department) asks for 8:
    Volcano reclaims from llm-pretrain, which keeps at least its deserved share."""
    borrower = [job(api, "llm-pretrain") for _ in range(4)]
    eventually(lambda: running(api, "llm-pretrain") == 32, 90, "llm-pretrain holding the whole pool")
    claimant = job(api, "speech")
    eventually(lambda: len(bound(pods_of(api, "speech", claimant))) == 1, 120, "speech's job bound after reclaim")
    assert running(api, "llm-pretrain") >= 16
    assert sum(len(bound(pods_of(api, "llm-pretrain", j))) for j in borrower) <= 3


def test_capability_is_a_ceiling_even_on_an_idle_pool(api: client.ApiClient) -> None:
    """recsys may borrow up to 16 (capability): a third job of 8 waits though 16 more are free."""
    jobs = [job(api, "recsys") for _ in range(3)]
    eventually(lambda: running(api, "recsys") == 16, 90, "recsys at its capability")
    time.sleep(5)  # several scheduling cycles (1 s each)
    assert running(api, "recsys") == 16
    assert sum(len(bound(pods_of(api, "recsys", j))) for j in jobs) == 2


def test_a_gang_is_admitted_whole_or_not_at_all(api: client.ApiClient) -> None:
    """speech may hold 24 (research's 32 less the 8 guaranteed to llm-pretrain): a Job of 4 pods of 8 with
    minMember 4 (the gang annotation) gets none of its pods bound, where without the gang 3 would run and hold
    24 cards for a job that cannot start; a gang of 3 runs whole."""
    name = job(api, "speech", pods=4)
    eventually(lambda: podgroup_of(api, "speech", name).get("spec", {}).get("minMember") == 4, 30,
               "the PodGroup's minMember from the Job's annotation")
    eventually(lambda: len(pods_of(api, "speech", name)) == 4, 30, "the gang's 4 pods created")
    time.sleep(6)  # several scheduling cycles (1 s each)
    assert bound(pods_of(api, "speech", name)) == []
    _delete_jobs(api)
    fits = job(api, "speech", pods=3)
    eventually(lambda: len(bound(pods_of(api, "speech", fits))) == 3, 90, "a gang of 3 that fits, whole")


def test_a_tenant_cannot_leave_its_queue_for_the_default_queue(api: client.ApiClient) -> None:
    """As a member of speech-team (an owner of tenant speech), through impersonation: a pod scheduled by volcano
    without a queue annotation would land in Volcano's `default` queue, which holds none of gpugov's quota; a pod
    naming another tenant's queue would spend that tenant's. Both are refused; the honest pod runs."""
    from gpugov.cluster.impersonate import impersonate
    from gpugov.kube.names import VOLCANO_QUEUE_ANNOTATION

    tenant = client.CoreV1Api(impersonate(client.ApiClient(api.configuration), "dave@example.com", ["speech-team"]))

    def pod(notes: dict[str, str]) -> dict[str, Any]:
        manifest = samples.job_manifest(samples.SampleJob("speech", "speech", "x", "speech", "speech", "ascend-910b",
                                                          ASCEND, backend="volcano"), None, amount=8)
        spec = manifest["spec"]["template"]["spec"]
        return {"apiVersion": "v1", "kind": "Pod", "spec": spec,
                "metadata": {"name": f"p-{uuid.uuid4().hex[:6]}", "namespace": "speech", "annotations": notes}}

    for notes, queue in (({}, "default"), ({VOLCANO_QUEUE_ANNOTATION: "llm-pretrain"}, "llm-pretrain")):
        with pytest.raises(ApiException) as refused:
            tenant.create_namespaced_pod("speech", pod(notes))
        assert refused.value.status in (403, 422), refused.value.body
        assert f"may not use Volcano queue {queue}; namespace speech uses queue speech" in str(refused.value.body)
    honest = tenant.create_namespaced_pod("speech", pod({VOLCANO_QUEUE_ANNOTATION: "speech"}))
    eventually(lambda: client.CoreV1Api(api).read_namespaced_pod(honest.metadata.name, "speech").spec.node_name, 60,
               "the honest pod bound by Volcano")


def test_higher_priority_preempts_lower_priority_of_its_queue_on_a_full_pool(api: client.ApiClient) -> None:
    """The pool is full: llm-pretrain holds 24 (16 its own, 8 borrowed), recsys 8 of `batch-low`. recsys submits
    `training-high` (8, within its capability 16): no node has room and recsys is at its deserved share, so
    nothing is reclaimed from others; the `preempt` action evicts recsys's own `batch-low` job for it (the
    `priority` plugin, gpugov's PriorityClasses 10000 over 1000, gang's victim check off so a 1-pod job may be
    preempted). Nothing of llm-pretrain is touched."""
    borrower = [job(api, "llm-pretrain") for _ in range(3)]
    eventually(lambda: running(api, "llm-pretrain") == 24, 90, "llm-pretrain holding 24")
    low = job(api, "recsys", priority_class="batch-low")
    eventually(lambda: len(bound(pods_of(api, "recsys", low))) == 1, 90, "recsys's batch-low job bound")
    high = job(api, "recsys", priority_class="training-high")
    eventually(lambda: len(bound(pods_of(api, "recsys", high))) == 1, 90, "training-high bound by preempting batch-low")
    assert bound(pods_of(api, "recsys", low)) == []
    time.sleep(3)  # a few more cycles: the preempted job does not preempt back
    assert len(bound(pods_of(api, "recsys", high))) == 1 and bound(pods_of(api, "recsys", low)) == []
    assert sum(len(bound(pods_of(api, "llm-pretrain", j))) for j in borrower) == 3


def test_a_borrower_never_preempts_in_another_queue(api: client.ApiClient) -> None:
    """What GG064 says of borrowWithinCohort on Volcano (the example says it in `volcano.notKept`): the pool is
    full, llm-pretrain holds its deserved 16, recsys 16 of `batch-low` (8 borrowed). llm-pretrain's next
    `training-high` job would take it above its deserved: Kueue's `borrowWithinCohort: LowerPriority` would
    preempt recsys's borrowed `batch-low` for it; the capacity plugin lets no queue above its deserved reclaim,
    so the job waits and recsys keeps all 16."""
    lows = [job(api, "recsys", priority_class="batch-low") for _ in range(2)]
    eventually(lambda: running(api, "recsys") == 16, 90, "recsys holding 16, 8 of them borrowed")
    own = [job(api, "llm-pretrain") for _ in range(2)]
    eventually(lambda: running(api, "llm-pretrain") == 16, 90, "llm-pretrain at its deserved 16")
    beyond = job(api, "llm-pretrain")
    eventually(lambda: len(pods_of(api, "llm-pretrain", beyond)) == 1, 30, "the borrowing job's pod created")
    time.sleep(6)  # several scheduling cycles (1 s each)
    assert bound(pods_of(api, "llm-pretrain", beyond)) == []
    assert sum(len(bound(pods_of(api, "recsys", j))) for j in lows) == 2
    assert sum(len(bound(pods_of(api, "llm-pretrain", j))) for j in own) == 2


def _close_queue(api: client.ApiClient, name: str) -> None:
    """Close a Queue as Volcano's own tooling does (`vcctl queue operate -a close`): a bus.volcano.sh Command
    that the controller manager's queue controller carries out and deletes."""
    target = queue(api, name)
    command = {"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command", "action": "CloseQueue",
               "metadata": {"generateName": f"close-{name}-", "namespace": "default"},
               "target": {"apiVersion": "/".join(VOLCANO), "kind": "Queue", "name": name,
                                "uid": target["metadata"]["uid"], "controller": True}}
    client.CustomObjectsApi(api).create_namespaced_custom_object("bus.volcano.sh", "v1alpha1", "default", "commands",
                                                                 command)


def _open_queue(api: client.ApiClient, name: str) -> None:
    target = queue(api, name)
    command = {"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command", "action": "OpenQueue",
               "metadata": {"generateName": f"open-{name}-", "namespace": "default"},
               "target": {"apiVersion": "/".join(VOLCANO), "kind": "Queue", "name": name,
                                "uid": target["metadata"]["uid"], "controller": True}}
    client.CustomObjectsApi(api).create_namespaced_custom_object("bus.volcano.sh", "v1alpha1", "default", "commands",
                                                                 command)


def test_a_closed_queue_admits_nothing_new_and_keeps_what_runs(api: client.ApiClient) -> None:
    """speech runs a job; its Queue is closed (Volcano's CloseQueue command, what `gpugov drift` reports as a
    declared queue not Open): the running job keeps running, a new job in it is never bound though the pool has
    room, and it runs once the queue is open again."""
    first = job(api, "speech")
    eventually(lambda: len(bound(pods_of(api, "speech", first))) == 1, 90, "speech's first job bound")
    _close_queue(api, "speech")
    try:
        eventually(lambda: queue(api, "speech").get("status", {}).get("state") in ("Closing", "Closed"), 60,
                   "queue speech closing")
        later = job(api, "speech")
        eventually(lambda: len(pods_of(api, "speech", later)) == 1, 30, "the new job's pod created")
        time.sleep(6)  # several scheduling cycles (1 s each)
        assert bound(pods_of(api, "speech", later)) == []
        assert len(bound(pods_of(api, "speech", first))) == 1
    finally:
        _open_queue(api, "speech")
    eventually(lambda: queue(api, "speech").get("status", {}).get("state") == "Open", 60, "queue speech open again")
    eventually(lambda: len(bound(pods_of(api, "speech", later))) == 1, 90, "the new job bound once speech is open")


def test_a_tenant_cannot_exempt_its_work_from_preemption_and_reclaim(api: client.ApiClient) -> None:
    """Volcano's preempt and reclaim actions skip every pod annotated or labelled `volcano.sh/preemptable`
    with a value that is not true (measured before the fix: llm-pretrain's four such jobs kept the whole pool
    and speech, below its deserved 8, stayed unbound for 30 s). As a member of speech-team, through
    impersonation: a pod that sets it to "false" (annotation or label) or to an unparsable value is refused;
    "true" is accepted and runs; only a non-preemptible PriorityClass of its queue protects work."""
    from gpugov.cluster.impersonate import impersonate
    from gpugov.kube.names import VOLCANO_QUEUE_ANNOTATION

    tenant = client.CoreV1Api(impersonate(client.ApiClient(api.configuration), "dave@example.com", ["speech-team"]))

    def pod(notes: dict[str, str], labels: dict[str, str]) -> dict[str, Any]:
        manifest = samples.job_manifest(samples.SampleJob("speech", "speech", "x", "speech", "speech", "ascend-910b",
                                                          ASCEND, backend="volcano"), None, amount=8)
        return {"apiVersion": "v1", "kind": "Pod", "spec": manifest["spec"]["template"]["spec"],
                "metadata": {"name": f"p-{uuid.uuid4().hex[:6]}", "namespace": "speech", "labels": labels,
                             "annotations": {VOLCANO_QUEUE_ANNOTATION: "speech", **notes}}}

    key = "volcano.sh/preemptable"
    for notes, labels in (({key: "false"}, {}), ({}, {key: "false"}), ({key: "no"}, {})):
        with pytest.raises(ApiException) as refused:
            tenant.create_namespaced_pod("speech", pod(notes, labels))
        assert refused.value.status in (403, 422), refused.value.body
        assert f"may not set {key} to anything but true" in str(refused.value.body)
    honest = tenant.create_namespaced_pod("speech", pod({key: "true"}, {}))
    eventually(lambda: client.CoreV1Api(api).read_namespaced_pod(honest.metadata.name, "speech").spec.node_name, 60,
               "the pod that stays preemptable bound by Volcano")
