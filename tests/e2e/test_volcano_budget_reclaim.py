"""`gpugov budget` and `gpugov reclaim` (issue #37) on the real Volcano scheduler (v1.14.1): one Volcano sandbox for the module,
kube-apiserver, kube-controller-manager, KWOK, and Volcano's controller manager and scheduler on the
configuration gpugov compiles for cluster ``west`` of the example organisation, in a copy where tenant
``speech`` has a budget of 0.01 accelerator-hours a month with action hold and west runs gpugov's budget
CronJob (its schedule names February 31st: the sandbox never starts it). `gpugov budget` runs as that
CronJob's own ServiceAccount, with exactly the RBAC compile gives it.

A hold is Volcano's own: gpugov marks speech's Queue and sends a CloseQueue Command; Volcano's queue
controller closes the Queue (Closing while a PodGroup remains), its scheduler's enqueue action then
leaves a new job's PodGroup unschedulable, and the running job runs on. Raising the budget releases it: an
OpenQueue Command, and the waiting job is admitted. A hold whose CloseQueue Volcano's controller (stopped)
has not carried out is withdrawn by the release that follows, so the controller, back, never closes the
released Queue.

Then `gpugov reclaim` (issue #37) on the same sandbox, as the reclaim CronJob's own ServiceAccount: see
the section below.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpugov.app.pipeline import validate_repo
from gpugov.cluster.apply import apply_objects
from gpugov.compile import compile
from gpugov.compile.operations import BUDGET
from gpugov.kube.objects import ANNOTATION_BUDGET_HELD
from gpugov.sandbox import samples
from gpugov.sandbox.cluster import Sandbox
from gpugov.sandbox.nodes import create_nodes
from gpugov.sandbox.simulated import simulated_nodes
from tests.helpers.repos import REPO
from tests.helpers.service_account import service_account_kubeconfig
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.e2e

VOLCANO = ("scheduling.volcano.sh", "v1beta1")
ASCEND = "huawei.com/Ascend910"
BUDGET_LINE = "  budget: {acceleratorHours: 0.01, action: hold}\n"  # 36 accelerator-seconds: 4.5 s of 8 cards
WEST_OPERATIONS = """\
  operations:
    image: registry.example.com/gpugov:1
    agent: false
    prometheus: http://prometheus.monitoring:9090
    driftSchedule: "0 0 31 2 *"
    budgetSchedule: "0 0 31 2 *"
    reclaimSchedule: "0 0 31 2 *"
"""
WINDOW, GRACE = 10, 10  # seconds, as declared below
RECLAIM_POLICY = """\
  reclaim:
    idle:
      metric: DCGM_FI_DEV_GPU_UTIL
      belowPercent: 5
      window: 10s
      grace: 10s
      action: deactivate
"""


def _write_org(root: Path, budget: str) -> None:
    for folder in ("hardware", "policies", "tenants"):
        shutil.rmtree(root / folder, ignore_errors=True)
        shutil.copytree(REPO / folder, root / folder)
    speech = (root / "tenants/speech.yaml").read_text()
    (root / "tenants/speech.yaml").write_text(speech.replace("  costCenter: CC-1020\n",
                                                             "  costCenter: CC-1020\n" + budget))
    guardrails = (root / "policies/guardrails.yaml").read_text()
    (root / "policies/guardrails.yaml").write_text(guardrails.replace("  isolation:\n", RECLAIM_POLICY + "  isolation:\n", 1))
    clusters = (root / "policies/clusters.yaml").read_text()
    assert clusters.rstrip().endswith("backend: volcano")
    (root / "policies/clusters.yaml").write_text(clusters.rstrip() + "\n" + WEST_OPERATIONS)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("volcano-budget-org")
    _write_org(root, BUDGET_LINE)
    return root


@pytest.fixture(scope="module")
def west(sandbox_binaries: dict[str, Any], root: Path) -> Iterator[Sandbox]:
    from gpugov.compile.volcano_scheduler import CONFIG_KEY

    result = validate_repo(root)
    assert result.model is not None, result.findings
    objects = compile(result.model, cluster="west")
    conf = next(o["data"][CONFIG_KEY] for o in objects if CONFIG_KEY in o.get("data", {}))
    with Sandbox(backend="volcano", volcano_conf=conf) as sandbox:
        api = sandbox.cp.api_client()
        create_nodes(api, simulated_nodes(result.model, "west"), kwok=True)
        assert not apply_objects(api, objects).missing
        yield sandbox
        problems = sandbox.problems()
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def api(west: Sandbox) -> client.ApiClient:
    return west.cp.api_client()


def job(api: client.ApiClient, tenant: str, amount: int = 8) -> str:
    """A Job of one pod of `amount` Ascend in the tenant's Queue, as its guide says (runs until deleted)."""
    sample = samples.SampleJob(tenant, tenant, f"{tenant}-{uuid.uuid4().hex[:6]}", tenant, tenant, "ascend-910b",
                               ASCEND, backend="volcano")
    client.BatchV1Api(api).create_namespaced_job(tenant, samples.job_manifest(sample, None, amount=amount))
    return sample.name


def pods_of(api: client.ApiClient, namespace: str, name: str) -> list[client.V1Pod]:
    return client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=f"job-name={name}").items


def running(api: client.ApiClient, namespace: str, name: str) -> bool:
    return any(p.spec.node_name and p.status.phase == "Running" and p.metadata.deletion_timestamp is None
               for p in pods_of(api, namespace, name))


def queue(api: client.ApiClient, name: str) -> dict[str, Any]:
    return client.CustomObjectsApi(api).get_cluster_custom_object(*VOLCANO, "queues", name)


def state(api: client.ApiClient, name: str) -> str:
    return (queue(api, name).get("status") or {}).get("state") or ""


def podgroup_of(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    uid = client.BatchV1Api(api).read_namespaced_job(name, namespace).metadata.uid
    groups = client.CustomObjectsApi(api).list_namespaced_custom_object(*VOLCANO, namespace, "podgroups")["items"]
    return next((g for g in groups if any(o.get("uid") == uid for o in g["metadata"].get("ownerReferences", []))), {})


def budget(root: Path, kubeconfig: Path, wait: int = 60) -> subprocess.CompletedProcess[str]:
    """gpugov budget --apply; it waits up to `wait` s for Volcano's queue controller, which on a loaded
    machine can take longer than the CronJob's default 5 s to carry out a Command."""
    return subprocess.run([sys.executable, "-m", "gpugov", "budget", str(root), "--cluster", "west",
                           "--kubeconfig", str(kubeconfig), "--apply", "--format", "json", "--wait", str(wait)],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))


@pytest.fixture(scope="module")
def held(west: Sandbox, api: client.ApiClient, root: Path) -> dict[str, Any]:
    """speech runs a job past its budget; gpugov budget --apply (as its CronJob's ServiceAccount) holds it."""
    for name in ("research", "speech", "recsys"):
        eventually(lambda n=name: state(api, n) == "Open", 60, f"queue {name} Open")
    first = job(api, "speech")
    eventually(lambda: running(api, "speech", first), 90, "speech's first job running")
    time.sleep(8)  # 8 cards for 4.5 s spend the 36 accelerator-seconds
    kubeconfig = service_account_kubeconfig(west, "gpugov-system", BUDGET, root / "budget.kubeconfig")
    over = budget(root, kubeconfig)
    return {"first": first, "kubeconfig": kubeconfig, "run": over}


def test_a_spent_tenant_is_held_by_closing_its_queue_the_way_volcano_does(api: client.ApiClient,
                                                                           held: dict[str, Any]) -> None:
    over = held["run"]
    assert over.returncode == 1, over.stderr
    report = json.loads(over.stdout)
    speech = next(b for b in report["budgets"] if b["holder"] == "speech")
    assert speech["held"] is True and float(speech["spent_hours"]) >= 0.01, report
    # what budget saw Volcano do: Closing while the running job's PodGroup remains
    assert [c for c in report["changes"] if "(CloseQueue)" in c] in (
        ["Queue speech (tenant speech): Open -> Closing (CloseQueue)"],
        ["Queue speech (tenant speech): Open -> Closed (CloseQueue)"]), report["changes"]
    # Volcano's queue controller carried out the Command: Closing while the running job's PodGroup remains
    eventually(lambda: state(api, "speech") in ("Closing", "Closed"), 60, "speech's Queue closed by Volcano")
    assert ANNOTATION_BUDGET_HELD in queue(api, "speech")["metadata"]["annotations"]
    assert state(api, "recsys") == "Open"  # only the spent tenant
    commands = client.CustomObjectsApi(api).list_namespaced_custom_object("bus.volcano.sh", "v1alpha1",
                                                                          "gpugov-system", "commands")["items"]
    assert commands == []  # the controller deletes a Command it carried out


def test_a_held_tenants_new_job_waits_while_its_running_job_runs_on(api: client.ApiClient,
                                                                     held: dict[str, Any]) -> None:
    eventually(lambda: state(api, "speech") in ("Closing", "Closed"), 60, "speech's Queue closed")
    second = job(api, "speech")  # room in the pool (24 cards free) and in speech's share: only the hold
    held["second"] = second
    eventually(lambda: podgroup_of(api, "speech", second) != {}, 30, "the second job's PodGroup")
    time.sleep(6)  # several scheduling cycles (1 s each)
    # Volcano's own answer: a PodGroup without minResources passes the enqueue action, but the capacity
    # plugin's allocatable check refuses every task of a queue that is not Open, so the gang stays
    # unschedulable (its condition says so) and no pod is bound
    def unschedulable() -> dict[str, Any] | None:
        """The PodGroup once the scheduler has written why it is not scheduled (at the end of a session)."""
        group = podgroup_of(api, "speech", second)
        said = [c for c in group.get("status", {}).get("conditions") or [] if c.get("type") == "Unschedulable"]
        return group if said and said[0]["status"] == "True" else None

    group = eventually(unschedulable, 60, "Volcano's Unschedulable condition on the second job's PodGroup")
    assert group["status"].get("phase") in ("Pending", "Inqueue"), group["status"]
    assert not any(p.spec.node_name for p in pods_of(api, "speech", second))
    assert running(api, "speech", held["first"])  # running work is not evicted
    other = job(api, "recsys")  # another tenant's queue admits as before
    eventually(lambda: running(api, "recsys", other), 90, "recsys's job running")


def test_a_held_tenant_cannot_open_its_queue(west: Sandbox, api: client.ApiClient, held: dict[str, Any]) -> None:
    """As dave@example.com of speech-team (an owner of speech), with exactly the roles gpugov binds: opening
    the Queue (a Command, its status, its spec), dropping gpugov's mark and leaving for another queue are
    each refused; the waiting job still waits."""
    from gpugov.cluster.impersonate import impersonate

    tenant = impersonate(client.ApiClient(api.configuration), "dave@example.com", ["speech-team"])
    custom = client.CustomObjectsApi(tenant)
    uid = queue(api, "speech")["metadata"]["uid"]
    target = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "name": "speech", "uid": uid,
              "controller": True}
    open_command = {"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
                    "metadata": {"generateName": "speech-open-", "ownerReferences": [target]},
                    "target": target, "action": "OpenQueue"}
    attempts = {
        "open it with a Command in its namespace": lambda: custom.create_namespaced_custom_object(
            "bus.volcano.sh", "v1alpha1", "speech", "commands", open_command),
        "open it with a Command in default": lambda: custom.create_namespaced_custom_object(
            "bus.volcano.sh", "v1alpha1", "default", "commands", open_command),
        "set its status Open": lambda: custom.patch_cluster_custom_object_status(
            *VOLCANO, "queues", "speech", {"status": {"state": "Open"}}),
        "drop gpugov's mark": lambda: custom.patch_cluster_custom_object(
            *VOLCANO, "queues", "speech", {"metadata": {"annotations": {ANNOTATION_BUDGET_HELD: None}}}),
        "delete the Queue": lambda: custom.delete_cluster_custom_object(*VOLCANO, "queues", "speech"),
        "make a Queue of its own": lambda: custom.create_cluster_custom_object(
            *VOLCANO, "queues", {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                 "metadata": {"name": "mine"}, "spec": {"weight": 1}}),
        "move its PodGroup to another queue": lambda: custom.patch_namespaced_custom_object(
            *VOLCANO, "speech", "podgroups", podgroup_of(api, "speech", held["second"])["metadata"]["name"],
            {"spec": {"queue": "recsys"}}),
    }
    for what, attempt in attempts.items():
        with pytest.raises(ApiException) as refused:
            attempt()
        assert refused.value.status == 403, what
    # a pod of its own naming another tenant's open Queue (what a Job's pods would be): gpugov-volcano-queue-access
    elsewhere = samples.job_manifest(samples.SampleJob("speech", "speech", "sideways", "recsys", "recsys",
                                                       "ascend-910b", ASCEND, backend="volcano"), None, amount=8)
    template = elsewhere["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sideways", **template["metadata"]},
           "spec": template["spec"]}
    with pytest.raises(ApiException) as refused:
        client.CoreV1Api(tenant).create_namespaced_pod("speech", pod, dry_run="All")
    assert "gpugov-volcano-queue-access" in refused.value.body, refused.value.body
    assert state(api, "speech") in ("Closing", "Closed")
    assert not any(p.spec.node_name for p in pods_of(api, "speech", held["second"]))


def test_a_budget_no_longer_spent_opens_the_queue_and_admits_the_waiting_job(
        api: client.ApiClient, root: Path, held: dict[str, Any]) -> None:
    assert "second" in held, "the waiting job of the test above"
    _write_org(root, "  budget: {acceleratorHours: 1000, action: hold}\n")  # raised in Git
    released = budget(root, held["kubeconfig"])
    assert released.returncode == 0, released.stderr
    report = json.loads(released.stdout)
    assert report["changes"] in (["Queue speech (tenant speech): Closing -> Open (OpenQueue)"],
                                 ["Queue speech (tenant speech): Closed -> Open (OpenQueue)"]), report["changes"]
    eventually(lambda: state(api, "speech") == "Open", 60, "speech's Queue opened by Volcano")
    assert ANNOTATION_BUDGET_HELD not in (queue(api, "speech")["metadata"].get("annotations") or {})
    eventually(lambda: running(api, "speech", held["second"]), 90, "the waiting job admitted")
    assert running(api, "speech", held["first"])


def test_a_queue_closed_by_someone_else_is_left_closed(api: client.ApiClient, root: Path,
                                                       held: dict[str, Any]) -> None:
    """An operator closes recsys (vcctl's Command); gpugov budget, with nothing held, leaves it closed."""
    operator_command(api, "recsys", "CloseQueue")
    eventually(lambda: state(api, "recsys") in ("Closing", "Closed"), 60, "recsys closed by the operator")
    again = budget(root, held["kubeconfig"])
    assert again.returncode == 0 and json.loads(again.stdout)["changes"] == [], again.stdout + again.stderr
    time.sleep(3)
    assert state(api, "recsys") in ("Closing", "Closed")


def operator_command(api: client.ApiClient, name: str, action: str) -> None:
    """What `vcctl queue operate` creates: a Command for Volcano's queue controller, not gpugov's (no reason)."""
    uid = queue(api, name)["metadata"]["uid"]
    target = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "name": name, "uid": uid,
              "controller": True}
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "bus.volcano.sh", "v1alpha1", "default", "commands",
        {"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
         "metadata": {"generateName": f"{name}-{action.lower()}-", "ownerReferences": [target]},
         "target": target, "action": action})


def commands_for(api: client.ApiClient, name: str) -> list[dict[str, Any]]:
    items = client.CustomObjectsApi(api).list_namespaced_custom_object("bus.volcano.sh", "v1alpha1", "gpugov-system",
                                                                       "commands")["items"]
    return [c for c in items if c["target"]["name"] == name]


def test_a_release_while_volcanos_controller_is_down_withdraws_the_pending_close(
        west: Sandbox, api: client.ApiClient, root: Path, held: dict[str, Any]) -> None:
    """The race of a hold's CloseQueue still pending when the tenant is released, made certain by stopping
    Volcano's controller manager between the runs: the release deletes gpugov's pending CloseQueue (so
    the controller, back, never closes the released Queue, now without gpugov's mark) and drops the mark
    only on the Open Queue."""
    assert west.volcano is not None
    controllers = west.volcano.controllers
    raised = "  budget: {acceleratorHours: 1000, action: hold}\n"
    _write_org(root, raised)  # released (as the tests above leave it, or now, run alone)
    assert budget(root, held["kubeconfig"]).returncode == 0
    eventually(lambda: state(api, "speech") == "Open", 60, "speech's Queue open after the release")
    _write_org(root, BUDGET_LINE)  # spent again: speech has run 8 cards since the module began
    controllers.stop()
    try:
        over = budget(root, held["kubeconfig"], wait=5)
        assert over.returncode == 1, over.stderr
        assert json.loads(over.stdout)["changes"] == [
            "Queue speech (tenant speech): Open, CloseQueue sent; Volcano's queue controller has not carried it out "
            "within 5 s (the mark stays: a later run goes on)"], over.stdout
        assert [c["action"] for c in commands_for(api, "speech")] == ["CloseQueue"]
        assert state(api, "speech") == "Open"
        assert ANNOTATION_BUDGET_HELD in queue(api, "speech")["metadata"]["annotations"]

        _write_org(root, raised)  # released before Volcano acted
        released = budget(root, held["kubeconfig"])
        assert released.returncode == 0, released.stderr
        assert json.loads(released.stdout)["changes"] == [
            "Queue speech (tenant speech): Open, withdrew gpugov's pending CloseQueue before Volcano carried it "
            "out"], released.stdout
        assert commands_for(api, "speech") == []
        assert ANNOTATION_BUDGET_HELD not in (queue(api, "speech")["metadata"].get("annotations") or {})
    finally:
        controllers.start()
        controllers.wait_healthy(60)
    # The controller is back and acting on Commands (an operator's OpenQueue for recsys, closed by the test
    # above, is carried out): nothing of gpugov's is left for it to close speech with.
    operator_command(api, "recsys", "OpenQueue")
    eventually(lambda: state(api, "recsys") == "Open", 60, "recsys opened by the controller, back")
    time.sleep(3)
    assert state(api, "speech") == "Open"


# --- gpugov reclaim on Volcano --------------------------------------------------------------------------
#
# speech (reclaim idle: window 10 s, grace 10 s, deactivate) runs a job of 8 cards whose pod a Prometheus
# fixture on 127.0.0.1 reports idle (DCGM_FI_DEV_GPU_UTIL 0.5%; KWOK's pods have no GPU to measure, so the
# metric is the one fake here: the scheduler, the controllers, the apiserver and its admission policies are
# real). llm-pretrain fills the rest of the pool (24) and a fourth job of it waits. `gpugov reclaim --apply`
# runs as the reclaim CronJob's own ServiceAccount, the grace apart: it warns, then suspends speech's Job,
# whose pod ends, and the waiting job of the other tenant runs on the freed cards.


def _delete_all_jobs(api: client.ApiClient) -> None:
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    namespaces = ("llm-pretrain", "recsys", "speech")
    for namespace in namespaces:
        for item in batch.list_namespaced_job(namespace).items:
            batch.delete_namespaced_job(item.metadata.name, namespace, propagation_policy="Background",
                                        grace_period_seconds=0)

    def gone() -> bool:
        left = 0
        for namespace in namespaces:
            for pod in core.list_namespaced_pod(namespace).items:
                left += 1
                try:
                    core.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)
                except ApiException as exc:
                    if exc.status != 404:
                        raise
        return left == 0
    eventually(gone, 90, "the budget tests' pods gone")


def reclaim(root: Path, kubeconfig: Path, prometheus: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpugov", "reclaim", str(root), "--cluster", "west",
                           "--kubeconfig", str(kubeconfig), "--prometheus", prometheus, "--step", "1",
                           "--format", "json", *args],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"})


def row(result: subprocess.CompletedProcess[str], key: str) -> dict[str, Any]:
    return next(r for r in json.loads(result.stdout)["workloads"] if r["workload"] == key)


def annotations(api: client.ApiClient, name: str) -> dict[str, str]:
    return client.BatchV1Api(api).read_namespaced_job(name, "speech").metadata.annotations or {}


@pytest.fixture(scope="module")
def idle(west: Sandbox, api: client.ApiClient, root: Path, held: dict[str, Any]) -> dict[str, Any]:
    """After the budget tests (speech's Queue open again): speech's idle job and llm-pretrain filling the pool."""
    from gpugov.compile.operations import RECLAIM

    eventually(lambda: state(api, "speech") == "Open" and state(api, "recsys") in ("Open", "Closing", "Closed"),
               60, "speech's Queue open")
    if state(api, "recsys") != "Open":  # closed by the budget test's operator: open it again, as vcctl would
        operator_command(api, "recsys", "OpenQueue")
    _delete_all_jobs(api)
    name = job(api, "speech")
    eventually(lambda: running(api, "speech", name), 90, "speech's job running")
    fillers = [job(api, "llm-pretrain") for _ in range(3)]
    eventually(lambda: all(running(api, "llm-pretrain", f) for f in fillers), 90, "llm-pretrain holding 24")
    waiting = job(api, "llm-pretrain")
    time.sleep(6)  # several scheduling cycles: the pool is full
    assert not any(p.spec.node_name for p in pods_of(api, "llm-pretrain", waiting))
    pod = next(p for p in pods_of(api, "speech", name) if p.status.phase == "Running")
    scheduled = next(c.last_transition_time for c in pod.status.conditions if c.type == "PodScheduled")
    while time.time() < scheduled.timestamp() + WINDOW + 2:  # admitted for the whole window
        time.sleep(0.5)
    return {"job": name, "pod": pod.metadata.name, "waiting": waiting,
            "kubeconfig": service_account_kubeconfig(west, "gpugov-system", RECLAIM, root / "reclaim.kubeconfig")}


def series(idle: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {"DCGM_FI_DEV_GPU_UTIL": [{"metric": {"exported_namespace": "speech", "exported_pod": idle["pod"]},
                                      "value": "0.5"}]}


def test_an_idle_job_is_warned_and_the_tenant_cannot_strip_the_warning(api: client.ApiClient, root: Path,
                                                                        idle: dict[str, Any]) -> None:
    from gpugov.cluster.impersonate import impersonate
    from gpugov.kube.objects import ANNOTATION_RECLAIM_SNOOZE, ANNOTATION_RECLAIM_WARNED
    from tests.unit.test_usage_prometheus import fake_prometheus

    key = f"speech/{idle['job']}"
    with fake_prometheus(series(idle)) as prometheus:
        first = reclaim(root, idle["kubeconfig"], prometheus, "--apply")
    assert first.returncode == 0, first.stdout + first.stderr
    assert (row(first, key)["state"], row(first, key)["action"]) == ("idle", "warn"), first.stdout
    warned = annotations(api, idle["job"])[ANNOTATION_RECLAIM_WARNED]
    idle["warned"] = warned

    tenant = client.BatchV1Api(impersonate(client.ApiClient(api.configuration), "dave@example.com", ["speech-team"]))
    for what, patch in {
        "strip the warning (its grace would start again at every run)":
            {"metadata": {"annotations": {ANNOTATION_RECLAIM_WARNED: None}}},
        "move the warning later": {"metadata": {"annotations": {ANNOTATION_RECLAIM_WARNED: "2099-01-01T00:00:00Z"}}},
    }.items():
        with pytest.raises(ApiException) as refused:
            tenant.patch_namespaced_job(idle["job"], "speech", patch)
        assert refused.value.status == 403 and "gpugov-volcano-reclaim" in refused.value.body, what
    # what the policy leaves the tenant: its own snooze (the decision bounds it by the declared maximum)
    tenant.patch_namespaced_job(idle["job"], "speech", {"metadata": {"annotations": {
        ANNOTATION_RECLAIM_SNOOZE: "2000-01-01T00:00:00Z"}}}, dry_run="All")
    assert annotations(api, idle["job"])[ANNOTATION_RECLAIM_WARNED] == warned


def test_after_the_grace_the_job_is_suspended_and_its_cards_go_to_another_tenant(
        api: client.ApiClient, root: Path, idle: dict[str, Any]) -> None:
    from gpugov.kube.objects import ANNOTATION_RECLAIM_DEACTIVATED
    from gpugov.queueing.workload import parse_time
    from tests.unit.test_usage_prometheus import fake_prometheus

    assert "warned" in idle, "the warning of the test above"
    key = f"speech/{idle['job']}"
    with fake_prometheus(series(idle)) as prometheus:
        during = reclaim(root, idle["kubeconfig"], prometheus)
        assert row(during, key)["state"] == "grace", during.stdout
        while time.time() < parse_time(idle["warned"]).timestamp() + GRACE + 1:
            time.sleep(0.5)
        second = reclaim(root, idle["kubeconfig"], prometheus, "--apply")
    assert second.returncode == 0, second.stdout + second.stderr
    assert (row(second, key)["state"], row(second, key)["action"]) == ("reclaim", "deactivate"), second.stdout
    reclaimed = client.BatchV1Api(api).read_namespaced_job(idle["job"], "speech")
    assert reclaimed.spec.suspend is True and ANNOTATION_RECLAIM_DEACTIVATED in reclaimed.metadata.annotations
    eventually(lambda: not any(p.spec.node_name and p.metadata.deletion_timestamp is None
                               for p in pods_of(api, "speech", idle["job"])), 60, "the idle job's pod gone")
    eventually(lambda: running(api, "llm-pretrain", idle["waiting"]), 90,
               "the other tenant's waiting job running on the freed cards")
    events = [e.reason for e in sorted(client.CoreV1Api(api).list_namespaced_event("speech").items,
                                       key=lambda e: e.metadata.creation_timestamp)
              if e.involved_object.kind == "Job" and e.involved_object.name == idle["job"]
              and e.reason.startswith("GpugovIdle")]
    assert events == ["GpugovIdleWarning", "GpugovIdleDeactivated"], events


def test_a_tenant_cannot_undo_or_dodge_a_reclaim(api: client.ApiClient, idle: dict[str, Any]) -> None:
    """As dave@example.com of speech-team (an owner of speech), with exactly the roles gpugov binds: every
    route its roles give to take the reclaimed cards back is refused, and the Job stays suspended."""
    from gpugov.cluster.impersonate import impersonate
    from gpugov.kube.objects import ANNOTATION_RECLAIM_DEACTIVATED, ANNOTATION_RECLAIM_WARNED

    assert client.BatchV1Api(api).read_namespaced_job(idle["job"], "speech").spec.suspend is True
    tenant_api = impersonate(client.ApiClient(api.configuration), "dave@example.com", ["speech-team"])
    batch, custom = client.BatchV1Api(tenant_api), client.CustomObjectsApi(tenant_api)
    name = idle["job"]

    def replace_unsuspended() -> None:
        # Read, change, replace: the Job's controllers write it too, and a write between the read and the
        # replace answers 409 before admission is asked. Only a refusal (or success) ends the attempt.
        for _ in range(20):
            current = batch.read_namespaced_job(name, "speech")
            current.spec.suspend = False
            try:
                batch.replace_namespaced_job(name, "speech", current)
                return
            except ApiException as exc:
                if exc.status != 409:
                    raise
        raise AssertionError("the replace met a newer Job twenty times")

    groups = client.CustomObjectsApi(api).list_namespaced_custom_object(*VOLCANO, "speech", "podgroups")["items"]
    attempts = {
        "un-suspend it": lambda: batch.patch_namespaced_job(name, "speech", {"spec": {"suspend": False}}),
        "un-suspend it by replace": replace_unsuspended,
        "un-suspend it and drop the mark at once": lambda: batch.patch_namespaced_job(name, "speech", {
            "spec": {"suspend": False}, "metadata": {"annotations": {ANNOTATION_RECLAIM_DEACTIVATED: None}}}),
        "drop the mark": lambda: batch.patch_namespaced_job(name, "speech", {
            "metadata": {"annotations": {ANNOTATION_RECLAIM_DEACTIVATED: None}}}),
        "rewrite the mark": lambda: batch.patch_namespaced_job(name, "speech", {
            "metadata": {"annotations": {ANNOTATION_RECLAIM_DEACTIVATED: "2000-01-01T00:00:00Z"}}}),
        "drop the warning": lambda: batch.patch_namespaced_job(name, "speech", {
            "metadata": {"annotations": {ANNOTATION_RECLAIM_WARNED: None}}}),
        "change its status": lambda: batch.patch_namespaced_job_status(name, "speech", {"status": {"active": 1}}),
        "patch a PodGroup": lambda: custom.patch_namespaced_custom_object(
            *VOLCANO, "speech", "podgroups", groups[0]["metadata"]["name"] if groups else name,
            {"spec": {"minMember": 0}}),
        "create a Job carrying gpugov's marks": lambda: batch.create_namespaced_job("speech", {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "forged", "annotations": {ANNOTATION_RECLAIM_WARNED: "2099-01-01T00:00:00Z"}},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "schedulerName": "volcano",
                                           "containers": [{"name": "main", "image": "busybox"}]}}}},
            dry_run="All"),
    }
    for what, attempt in attempts.items():
        with pytest.raises(ApiException) as refused:
            attempt()
        assert refused.value.status == 403, (what, refused.value.body)
    time.sleep(3)
    assert client.BatchV1Api(api).read_namespaced_job(name, "speech").spec.suspend is True
    assert not any(p.spec.node_name and p.metadata.deletion_timestamp is None for p in pods_of(api, "speech", name))
    # the administrators (system:masters) may still undo it by hand: the policy does not bind them
    client.BatchV1Api(api).patch_namespaced_job(name, "speech", {"spec": {"suspend": False}}, dry_run="All")


# A Volcano Job (batch.volcano.sh) of speech, submitted by its own member: warned, then aborted by Volcano's
# own AbortJob Command; only a ResumeJob Command brings an aborted job back, and no tenant role creates one.

VCJOB = ("batch.volcano.sh", "v1alpha1")


def vcjob_pods(api: client.ApiClient, name: str) -> list[client.V1Pod]:
    return client.CoreV1Api(api).list_namespaced_pod("speech", label_selector=f"volcano.sh/job-name={name}").items


def vcjob_phase(api: client.ApiClient, name: str) -> str:
    job = client.CustomObjectsApi(api).get_namespaced_custom_object(*VCJOB, "speech", "jobs", name)
    return ((job.get("status") or {}).get("state") or {}).get("phase") or ""


@pytest.fixture(scope="module")
def vc_idle(west: Sandbox, api: client.ApiClient, idle: dict[str, Any]) -> dict[str, Any]:
    from gpugov.cluster.impersonate import impersonate

    _delete_all_jobs(api)
    name = f"vc-{uuid.uuid4().hex[:6]}"
    requests = {ASCEND: "8", "cpu": "1", "memory": "1Gi"}
    member = client.CustomObjectsApi(impersonate(client.ApiClient(api.configuration), "dave@example.com",
                                                 ["speech-team"]))
    member.create_namespaced_custom_object(*VCJOB, "speech", "jobs", {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name},
        "spec": {"schedulerName": "volcano", "queue": "speech", "minAvailable": 1, "tasks": [{
            "name": "main", "replicas": 1, "template": {"spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": samples.IMAGE, "resources": {"requests": requests, "limits": requests}}]}}}]}})
    eventually(lambda: any(p.status.phase == "Running" and p.spec.node_name for p in vcjob_pods(api, name)), 90,
               "speech's Volcano Job running")
    fillers = [job(api, "llm-pretrain") for _ in range(3)]
    eventually(lambda: all(running(api, "llm-pretrain", f) for f in fillers), 90, "llm-pretrain holding 24")
    waiting = job(api, "llm-pretrain")
    time.sleep(6)
    assert not any(p.spec.node_name for p in pods_of(api, "llm-pretrain", waiting))
    pod = next(p for p in vcjob_pods(api, name) if p.status.phase == "Running")
    scheduled = next(c.last_transition_time for c in pod.status.conditions if c.type == "PodScheduled")
    while time.time() < scheduled.timestamp() + WINDOW + 2:
        time.sleep(0.5)
    return {"job": name, "pod": pod.metadata.name, "waiting": waiting, "kubeconfig": idle["kubeconfig"]}


def test_an_idle_volcano_job_is_warned_then_aborted_and_stays_down(api: client.ApiClient, root: Path,
                                                                   vc_idle: dict[str, Any]) -> None:
    from gpugov.cluster.impersonate import impersonate
    from gpugov.kube.objects import ANNOTATION_RECLAIM_DEACTIVATED, ANNOTATION_RECLAIM_WARNED
    from gpugov.queueing.workload import parse_time
    from tests.unit.test_usage_prometheus import fake_prometheus

    name, key = vc_idle["job"], f"speech/vcjob/{vc_idle['job']}"
    admin = client.CustomObjectsApi(api)
    member_api = impersonate(client.ApiClient(api.configuration), "dave@example.com", ["speech-team"])
    member = client.CustomObjectsApi(member_api)
    with fake_prometheus(series(vc_idle)) as prometheus:
        first = reclaim(root, vc_idle["kubeconfig"], prometheus, "--apply")
        assert first.returncode == 0, first.stdout + first.stderr
        assert (row(first, key)["state"], row(first, key)["action"]) == ("idle", "warn"), first.stdout
        marks = admin.get_namespaced_custom_object(*VCJOB, "speech", "jobs", name)["metadata"]["annotations"]
        with pytest.raises(ApiException) as refused:  # stripping the warning would restart the grace
            member.patch_namespaced_custom_object(*VCJOB, "speech", "jobs", name, {
                "metadata": {"annotations": {ANNOTATION_RECLAIM_WARNED: None}}})
        assert refused.value.status == 403 and "gpugov-volcano-reclaim" in refused.value.body
        while time.time() < parse_time(marks[ANNOTATION_RECLAIM_WARNED]).timestamp() + GRACE + 1:
            time.sleep(0.5)
        second = reclaim(root, vc_idle["kubeconfig"], prometheus, "--apply")
    assert second.returncode == 0, second.stdout + second.stderr
    assert (row(second, key)["state"], row(second, key)["action"]) == ("reclaim", "deactivate"), second.stdout
    eventually(lambda: vcjob_phase(api, name) in ("Aborting", "Aborted"), 60, "the Volcano Job aborted")
    eventually(lambda: not any(p.spec.node_name and p.metadata.deletion_timestamp is None
                               for p in vcjob_pods(api, name)), 60, "its pod gone")
    eventually(lambda: running(api, "llm-pretrain", vc_idle["waiting"]), 90,
               "the other tenant's waiting job running on the freed cards")

    uid = admin.get_namespaced_custom_object(*VCJOB, "speech", "jobs", name)["metadata"]["uid"]
    target = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": name, "uid": uid, "controller": True}
    attempts = {
        "resume it with a Command": lambda: member.create_namespaced_custom_object(
            "bus.volcano.sh", "v1alpha1", "speech", "commands", {
                "apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
                "metadata": {"generateName": f"{name}-resumejob-", "ownerReferences": [target]},
                "target": target, "action": "ResumeJob"}),
        "drop the mark": lambda: member.patch_namespaced_custom_object(*VCJOB, "speech", "jobs", name, {
            "metadata": {"annotations": {ANNOTATION_RECLAIM_DEACTIVATED: None}}}),
        "change its status": lambda: member.patch_namespaced_custom_object_status(*VCJOB, "speech", "jobs", name, {
            "status": {"state": {"phase": "Running"}}}),
    }
    for what, attempt in attempts.items():
        with pytest.raises(ApiException) as refused:
            attempt()
        assert refused.value.status == 403, (what, refused.value.body)
    # an edit its roles allow (a label) is just another event to Volcano's controller: aborted stays aborted
    member.patch_namespaced_custom_object(*VCJOB, "speech", "jobs", name, {"metadata": {"labels": {"poke": "1"}}})
    time.sleep(5)
    assert vcjob_phase(api, name) in ("Aborting", "Aborted")
    assert not any(p.spec.node_name and p.metadata.deletion_timestamp is None for p in vcjob_pods(api, name))
