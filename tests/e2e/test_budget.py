"""GPU-hour budgets (issue #27) on a living sandbox of its own: the real kube-apiserver, Kueue v0.17 and
KWOK pods, and a webhook receiver on 127.0.0.1.

Tenant alpha's budget is 0.01 accelerator-hours (36 accelerator-seconds) a month, alerts at 50% and
100%, action hold. A 4-GPU job runs past it; `gpugov budget --apply --notify webhook` sends both alerts
and sets alpha's ClusterQueue to stopPolicy Hold. A new job then stays pending though the quota has
room, while the running job runs on and finishes; a second run sends nothing again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gpugov.app.pipeline import validate_repo
from gpugov.cluster.apply import apply_objects
from gpugov.compile import compile
from gpugov.compile.operations import BUDGET
from gpugov.kube.names import KUEUE_GROUP, KUEUE_VERSION
from gpugov.sandbox import samples
from gpugov.sandbox.cluster import Sandbox
from gpugov.sandbox.nodes import create_gpu_operator_footprint, create_nodes
from gpugov.sandbox.simulated import simulated_nodes
from tests.e2e.conftest import SMALL_ORG_POLICIES
from tests.helpers.local_http import receiving_json
from tests.helpers.service_account import service_account_kubeconfig
from tests.helpers.waiting import condition, wait_for

pytestmark = pytest.mark.e2e

ORG = {
    "policies/org.yaml": SMALL_ORG_POLICIES,
    # gpugov in the cluster: the budget CronJob's ServiceAccount and RBAC are what the runs below use
    # (the schedule names February 31st: the sandbox's CronJob controller never starts it)
    "policies/clusters.yaml": """\
apiVersion: gpugov.io/v1alpha1
kind: Cluster
metadata: {name: lab}
spec:
  backend: kueue
  operations:
    image: registry.example.com/gpugov:1
    agent: false
    driftSchedule: "0 0 31 2 *"
    budgetSchedule: "0 0 31 2 *"
""",
    "hardware/pools.yaml": """\
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata: {name: whole}
spec:
  cluster: lab
  accelerator: {model: H100-80GB}
  acceleratorsPerNode: 8
  nodeResources: {cpu: 64, memory: 512Gi}
  nodes: [{name: whole-1}]
""",
    "tenants/alpha.yaml": """\
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata: {name: alpha}
spec:
  owners: {users: [alpha@example.com]}
  costCenter: CC-ALPHA
  namespaces: [alpha]
  queues: [{name: main, namespace: alpha}]
  quotas: [{pool: whole, resources: {accelerators: 8}}]
  budget: {acceleratorHours: 0.01, alerts: [50, 100], action: hold}
""",
}
BUDGET_SECONDS = 36  # 0.01 accelerator-hours
GPUS = 4
RUN_FOR = "40s"  # the running job's length, from its pod's start


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("budget-org")


@pytest.fixture(scope="module")
def sandbox(sandbox_binaries: dict[str, Path], root: Path) -> Iterator[Sandbox]:
    for rel, text in ORG.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    result = validate_repo(root)
    assert result.model is not None and not result.errors, result.errors
    with Sandbox() as running:
        api = running.cp.api_client()
        create_nodes(api, simulated_nodes(result.model), kwok=True)
        create_gpu_operator_footprint(api)
        assert not apply_objects(api, compile(result.model, backend="kueue")).missing
        yield running
        problems = running.problems()
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def api(sandbox: Sandbox) -> client.ApiClient:
    return sandbox.cp.api_client()


@pytest.fixture(scope="module")
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    with receiving_json() as (url, seen):
        yield f"{url}/hook", seen


def workloads(api: client.ApiClient) -> dict[str, dict[str, Any]]:
    items = client.CustomObjectsApi(api).list_namespaced_custom_object(
        KUEUE_GROUP, KUEUE_VERSION, "alpha", "workloads")["items"]
    return {o["name"]: w for w in items for o in w["metadata"].get("ownerReferences", []) if o["kind"] == "Job"}


def status(api: client.ApiClient, job: str, kind: str) -> bool:
    return condition(workloads(api).get(job, {}), kind).get("status") == "True"


def create(api: client.ApiClient, name: str, amount: int, run_for: str | None) -> None:
    sample = samples.SampleJob("alpha", "alpha", name, "main", "alpha", "", "nvidia.com/gpu")
    client.BatchV1Api(api).create_namespaced_job("alpha", samples.job_manifest(sample, run_for, amount=amount,
                                                                               priority_class="batch"))


def budget(root: Path, kubeconfig: Path, hook: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUGOV_WEBHOOK_URL": hook, "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    return subprocess.run([sys.executable, "-m", "gpugov", "budget", str(root), "--kubeconfig", str(kubeconfig),
                           "--apply", "--format", "json", "--notify", "webhook",
                           "--notify-state", str(root / "notify-state.json")],
                          capture_output=True, text=True, timeout=120, env=env)


def stop_policy(api: client.ApiClient) -> str:
    cq = client.CustomObjectsApi(api).get_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", "alpha")
    return cq["spec"].get("stopPolicy", "None")


def test_over_budget_alerts_once_and_holds_new_admissions_while_running_work_finishes(
        sandbox: Sandbox, api: client.ApiClient, root: Path, webhook: tuple[str, list[dict[str, Any]]]) -> None:
    hook, sent = webhook
    create(api, "first", GPUS, RUN_FOR)
    wait_for(lambda: status(api, "first", "Admitted"), "the first job admitted")
    admitted_at = datetime.fromisoformat(condition(workloads(api)["first"], "Admitted")["lastTransitionTime"]
                                         .replace("Z", "+00:00"))
    while datetime.now(UTC) < admitted_at + timedelta(seconds=BUDGET_SECONDS / GPUS + 3):
        time.sleep(0.5)  # past 100% of the budget

    # as the budget CronJob runs: its own ServiceAccount, with the RBAC compile gives it and no more
    kubeconfig = service_account_kubeconfig(sandbox, "gpugov-system", BUDGET, root / "budget.kubeconfig")
    over = budget(root, kubeconfig, hook)
    assert over.returncode == 1, over.stderr
    (alpha,) = json.loads(over.stdout)["budgets"]
    assert alpha["crossed"] == [50, 100] and alpha["held"] is True, over.stdout
    assert sorted(f["rule"] for body in sent for f in body["findings"]) == ["GD050", "GD051"]
    assert stop_policy(api) == "Hold"
    assert not status(api, "first", "Finished")  # the hold came while it ran

    create(api, "second", 1, None)  # room in the quota: only the hold keeps it out
    wait_for(lambda: status(api, "first", "Finished"), "the running job to finish under the hold", timeout=90)
    assert status(api, "first", "Admitted") or status(api, "first", "Finished")
    assert "second" in workloads(api) and not status(api, "second", "QuotaReserved")
    time.sleep(3)
    assert not status(api, "second", "Admitted"), workloads(api)["second"]["status"]

    again = budget(root, kubeconfig, hook)
    assert again.returncode == 1, again.stderr
    assert len(sent) == 2  # each threshold was told once
    assert stop_policy(api) == "Hold"


def test_a_held_tenant_cannot_lift_its_hold_or_run_around_it(sandbox: Sandbox, api: client.ApiClient) -> None:
    """Sent as alpha@example.com (alpha's owner) through impersonation, with exactly the roles gpugov
    binds, after the hold above: the ClusterQueue, a LocalQueue of its own, its Workloads and a job
    without a queue are each refused, and the waiting job still waits."""
    from kubernetes.client.exceptions import ApiException

    from gpugov.cluster.impersonate import impersonate

    assert stop_policy(api) == "Hold"
    tenant = impersonate(sandbox.cp.api_client(), "alpha@example.com")
    custom, batch = client.CustomObjectsApi(tenant), client.BatchV1Api(tenant)
    second = workloads(api)["second"]["metadata"]["name"]
    attempts = {
        "lift the hold": lambda: custom.patch_cluster_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", "alpha", {"spec": {"stopPolicy": "None"}}),
        "raise its own quota": lambda: custom.patch_cluster_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", "alpha", {"spec": {"resourceGroups": []}}),
        "make a ClusterQueue of its own": lambda: custom.create_cluster_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", {"apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
                                                          "kind": "ClusterQueue", "metadata": {"name": "mine"},
                                                          "spec": {}}),
        "point a LocalQueue elsewhere": lambda: custom.create_namespaced_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, "alpha", "localqueues", {"apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
                                                                 "kind": "LocalQueue", "metadata": {"name": "side"},
                                                                 "spec": {"clusterQueue": "alpha"}}),
        "admit its own Workload": lambda: custom.patch_namespaced_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, "alpha", "workloads", second, {"spec": {"active": True, "priority": 1000000}}),
        "delete its Workload for a fresh one": lambda: custom.delete_namespaced_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, "alpha", "workloads", second),
    }
    for what, attempt in attempts.items():
        with pytest.raises(ApiException) as refused:
            attempt()
        assert refused.value.status == 403, what
    unqueued = samples.job_manifest(samples.SampleJob("alpha", "alpha", "sideways", "main", "alpha", "", "nvidia.com/gpu"),
                                    None, amount=1, priority_class="batch")
    del unqueued["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    with pytest.raises(ApiException) as refused:
        batch.create_namespaced_job("alpha", unqueued, dry_run="All")
    assert "gpugov-accelerators-need-a-queue" in json.loads(refused.value.body)["message"]
    assert stop_policy(api) == "Hold" and not status(api, "second", "QuotaReserved")
