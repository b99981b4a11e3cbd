"""Fidelity of `gpugov whatif` on Volcano: the replay against the real vc-scheduler v1.14.1.

One Volcano sandbox for this module (as test_volcano_contract's): cluster west applied, the scheduler
on west's compiled configuration (allocate, preempt, reclaim, backfill; the capacity plugin with
hierarchy), KWOK nodes of pool ascend-910b (4 nodes of 8 Ascend 910B). A seeded trace of gang jobs
across west's three tenants is replayed by gpugov.whatif.volcano; the test then does the trace's
events on the real scheduler in the replay's order (each submission a batch Job whose pods name the
tenant's Queue; each end the deletion of the Job whose run the replay ended) and, after each event,
waits for the real cluster to hold exactly the jobs the replay says run, then checks it stays so.
So which jobs run and which wait, which one a freed node goes to, and which runs another Queue
reclaims are the real scheduler's, compared with the replay's, event by event.

A reclaimed pod is deleted by vc-scheduler and recreated by the Job controller (backoffLimit high, as
a retried job), which is the replay's "waits again". Which of a Queue's pods a reclaim or a
preemption takes depends on vc-scheduler's node order, which is not deterministic: the trace is one
where every node's first victim is of one kind (the replay counts the others: `undetermined`), and
where an event evicts, running jobs of one tenant and size stand for one another (the replay's run
then ends the real job that took its place). Every job's pods fit its namespace's ResourceQuota when
submitted (the replay counts those that would wait for it: `quota_waits`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpugov.app.pipeline import validate_repo
from gpugov.cluster.apply import apply_objects
from gpugov.compile import compile
from gpugov.compile.volcano_scheduler import CONFIG_KEY
from gpugov.sandbox import samples
from gpugov.sandbox.cluster import Sandbox
from gpugov.sandbox.nodes import create_nodes
from gpugov.sandbox.simulated import simulated_nodes
from gpugov.whatif.trace import Job
from gpugov.whatif.volcano import VOutcome, replay_volcano
from gpugov.whatif.volcano_setup import volcano_setup
from tests.helpers.repos import REPO
from tests.helpers.volcano_fidelity import fidelity_trace, separated, steps

pytestmark = pytest.mark.e2e

SEED = 2940  # a trace with reclaims, preemptions, gangs, borrowing and freed nodes that several Queues wait for
ASCEND = "huawei.com/Ascend910"
NAMESPACES = ("llm-pretrain", "recsys", "speech")
SETTLE_S = 90  # the longest the real scheduler may take to reach the replay's state after an event
STAY_S = 3  # then three scheduling periods more, unchanged


@pytest.fixture(scope="module")
def west(sandbox_binaries: dict[str, Any]) -> Iterator[Sandbox]:
    model = validate_repo(REPO).model
    assert model is not None
    objects = compile(model, cluster="west")
    conf = next(o["data"][CONFIG_KEY] for o in objects if CONFIG_KEY in o.get("data", {}))
    with Sandbox(backend="volcano", volcano_conf=conf) as sandbox:
        api = sandbox.cp.api_client()
        create_nodes(api, simulated_nodes(model, "west"), kwok=True)
        assert not apply_objects(api, objects).missing
        yield sandbox
        problems = sandbox.problems()
    assert not problems, "\n".join(problems)


def replayed() -> tuple[list[Job], VOutcome]:
    model = validate_repo(REPO).model
    assert model is not None
    trace = fidelity_trace(SEED)
    return trace, replay_volcano(volcano_setup(model, "west"), trace)


def kube_name(job_id: str) -> str:
    return job_id.lower()


def submit(api: client.ApiClient, job: Job) -> None:
    sample = samples.SampleJob(job.tenant, job.tenant, kube_name(job.id), job.tenant, job.tenant, "ascend-910b",
                               ASCEND, backend="volcano")
    manifest = samples.job_manifest(sample, None, pods=job.pods, amount=job.accelerators)
    manifest["spec"]["backoffLimit"] = 100  # a reclaimed pod is recreated: the job waits again
    client.BatchV1Api(api).create_namespaced_job(job.tenant, manifest)


def finish(api: client.ApiClient, job: Job) -> None:
    """The run ends: the Job goes (its pods orphaned, so that the garbage collector does not give them a
    grace period), then its pods at once, as a replayed end frees the room at one instant."""
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    batch.delete_namespaced_job(kube_name(job.id), job.tenant, propagation_policy="Orphan")
    for pod in core.list_namespaced_pod(job.tenant, label_selector=f"job-name={kube_name(job.id)}").items:
        try:
            core.delete_namespaced_pod(pod.metadata.name, job.tenant, grace_period_seconds=0)
        except ApiException as exc:
            if exc.status != 404:
                raise


def live(pod: client.V1Pod) -> bool:
    return pod.metadata.deletion_timestamp is None and pod.status.phase in ("Pending", "Running")


def real_state(api: client.ApiClient, trace: list[Job], submitted: set[str]) -> tuple[set[str], bool]:
    """The trace's jobs whose every pod is bound (running), and whether every submitted job's pods exist."""
    core = client.CoreV1Api(api)
    pods: dict[str, list[client.V1Pod]] = {}
    for namespace in NAMESPACES:
        for pod in core.list_namespaced_pod(namespace).items:
            name = (pod.metadata.labels or {}).get("job-name")
            if name and live(pod):
                pods.setdefault(name, []).append(pod)
    running, complete = set(), True
    for job in trace:
        if job.id not in submitted:
            continue
        mine = pods.get(kube_name(job.id), [])
        if sum(1 for p in mine if p.spec.node_name) == job.pods:
            running.add(job.id)
        complete = complete and len(mine) == job.pods
    return running, complete


def realias(expected: frozenset[str], real: set[str], alias: dict[str, str], by_id: dict[str, Job]) -> None:
    """After a reclaim: jobs of one tenant and size that the replay and the real scheduler chose differently
    stand for one another (swap which real job each replayed job names)."""
    shape = {j: (by_id[j].tenant, by_id[j].pods, by_id[j].accelerators) for j in by_id}
    back = {real_id: replay_id for replay_id, real_id in alias.items()}
    only_replay = sorted(j for j in expected if alias[j] not in real)
    only_real = sorted(back[r] for r in real if back[r] not in expected)
    for one in only_replay:
        other = next((o for o in only_real if shape[o] == shape[one]), None)
        if other is not None:
            only_real.remove(other)
            alias[one], alias[other] = alias[other], alias[one]


def test_the_replay_is_a_real_trace() -> None:
    """The seeded trace is what the fidelity test needs: events far enough apart for vc-scheduler to
    settle between them, reclaims between Queues, preemption within one, gangs, and jobs of every Queue
    that wait for room."""
    trace, outcome = replayed()
    assert separated(trace, outcome) == []
    assert not outcome.never and outcome.quota_waits == 0  # every job's pods pass its namespace's ResourceQuota
    assert outcome.undetermined == 0  # no eviction whose victim vc-scheduler's node order would decide
    assert sum(1 for _, what, _ in outcome.log if what == "reclaim") >= 1
    assert sum(1 for _, what, _ in outcome.log if what == "preempt") >= 1
    assert any(j.pods > 1 for j in trace) and {j.tenant for j in trace} == set(NAMESPACES)
    waited = [j for j in outcome.jobs if j.admissions[0] > j.job.submit_ms]
    assert len({j.queue for j in waited}) == 3, "jobs of every Queue wait for room"


def test_the_real_scheduler_runs_what_the_replay_says_event_by_event(west: Sandbox) -> None:
    trace, outcome = replayed()
    by_id = {j.id: j for j in trace}
    api = west.cp.api_client()
    alias = {j.id: j.id for j in trace}  # replayed job -> the real job it is (see realias)
    submitted: set[str] = set()
    history: list[tuple[str, list[str], list[str]]] = []
    admitted_real: list[list[str]] = []
    admitted_replay: list[list[str]] = []
    before_real: set[str] = set()
    before_replay: frozenset[str] = frozenset()
    for step in steps(trace, outcome):
        job = by_id[step.job]
        if step.kind == "submit":
            submit(api, job)
            submitted.add(job.id)
        else:
            finish(api, by_id[alias[job.id]])
            submitted.discard(alias[job.id])
        seen: dict[str, Any] = {}

        def reached(step: Any = step, seen: dict[str, Any] = seen) -> bool:
            real, complete = real_state(api, trace, submitted)
            if step.reclaims:
                realias(step.running, real, alias, by_id)
            seen["real"] = real
            return complete and {alias[j] for j in step.running} == real

        deadline = time.monotonic() + SETTLE_S
        while not reached() and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(STAY_S)
        stayed = reached()
        history.append((f"{step.at_ms / 1000:.0f}s {step.kind} {job.id}", sorted(alias[j] for j in step.running),
                        sorted(seen["real"])))
        assert stayed, "the real scheduler differs from the replay:\n" + "\n".join(
            f"  {what}: replay {want} real {got}" for what, want, got in history)
        admitted_replay.append(sorted(alias[j] for j in step.running - before_replay))
        admitted_real.append(sorted(seen["real"] - before_real))
        before_real, before_replay = set(seen["real"]), step.running
    assert admitted_real == admitted_replay  # the order in which jobs got room, event by event
    assert set().union(*admitted_real) == set(by_id)  # every job ran (reclaimed ones twice or more)
