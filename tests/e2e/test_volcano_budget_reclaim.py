"""`gpugov budget` (issue #37) on the real Volcano scheduler (v1.14.1): one Volcano sandbox for the module,
kube-apiserver, kube-controller-manager, KWOK, and Volcano's controller manager and scheduler on the
configuration gpugov compiles for cluster ``west`` of the example organisation, in a copy where tenant
``speech`` has a budget of 0.01 accelerator-hours a month with action hold and west runs gpugov's budget
CronJob (its schedule names February 31st: the sandbox never starts it). `gpugov budget` runs as that
CronJob's own ServiceAccount, with exactly the RBAC compile gives it.

A hold is Volcano's own: gpugov marks speech's Queue and sends a CloseQueue Command; Volcano's queue
controller closes the Queue (Closing while a PodGroup remains), its scheduler's enqueue action then
leaves a new job's PodGroup Pending, and the running job runs on. Raising the budget releases it: an
OpenQueue Command, and the waiting job is admitted.
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
    driftSchedule: "0 0 31 2 *"
    budgetSchedule: "0 0 31 2 *"
"""


def _write_org(root: Path, budget: str) -> None:
    for folder in ("hardware", "policies", "tenants"):
        shutil.rmtree(root / folder, ignore_errors=True)
        shutil.copytree(REPO / folder, root / folder)
    speech = (root / "tenants/speech.yaml").read_text()
    (root / "tenants/speech.yaml").write_text(speech.replace("  costCenter: CC-1020\n",
                                                             "  costCenter: CC-1020\n" + budget))
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


def budget(root: Path, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpugov", "budget", str(root), "--cluster", "west",
                           "--kubeconfig", str(kubeconfig), "--apply", "--format", "json"],
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
    assert [c for c in report["changes"] if "(CloseQueue)" in c] == [
        "Queue speech (tenant speech): Open -> Closed (CloseQueue)"], report["changes"]
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
    group = podgroup_of(api, "speech", second)
    assert group["status"].get("phase") in ("Pending", "Inqueue"), group["status"]
    unschedulable = [c for c in group["status"].get("conditions") or [] if c.get("type") == "Unschedulable"]
    assert unschedulable and unschedulable[0]["status"] == "True", group["status"]
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
    uid = queue(api, "recsys")["metadata"]["uid"]
    target = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "name": "recsys", "uid": uid,
              "controller": True}
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "bus.volcano.sh", "v1alpha1", "default", "commands",
        {"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
         "metadata": {"generateName": "recsys-closequeue-", "ownerReferences": [target]},
         "target": target, "action": "CloseQueue"})
    eventually(lambda: state(api, "recsys") in ("Closing", "Closed"), 60, "recsys closed by the operator")
    again = budget(root, held["kubeconfig"])
    assert again.returncode == 0 and json.loads(again.stdout)["changes"] == [], again.stdout + again.stderr
    time.sleep(3)
    assert state(api, "recsys") in ("Closing", "Closed")
