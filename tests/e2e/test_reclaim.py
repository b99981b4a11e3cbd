"""Reclaiming idle accelerators (issue #26) on a living sandbox of its own: the real kube-apiserver with
gpugov's admission policies, the real Kueue v0.17 controller, KWOK pods, and a Prometheus fixture on
127.0.0.1 serving DCGM_FI_DEV_GPU_UTIL per pod.

Tenant alpha holds 6 H100s, filled by six 1-GPU jobs: one idle, one busy, one of the exempt class
`serving`, one in the exempt queue `notebooks`, one its owner snoozed and one without metrics; a seventh
waits for quota. `gpugov reclaim --apply` run twice, the grace apart, warns and then deactivates the
idle one only, and the waiting job is admitted at once. Tenant beta shows the maximum runtime: a job
asking more than its class allows is refused by the API server naming the limit, and a job within it is
deactivated by Kueue once it has run that long.

The window and grace are 10 s each (the schema takes seconds), so the module takes about a minute and a
half, most of it the sandbox starting and the window and grace passing.
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
from kubernetes.client.exceptions import ApiException

from gpugov.app.pipeline import validate_repo
from gpugov.cluster.apply import apply_objects
from gpugov.compile import compile
from gpugov.compile.operations import RECLAIM
from gpugov.kube.names import KUEUE_GROUP, KUEUE_MAX_EXEC_TIME_LABEL, KUEUE_VERSION
from gpugov.kube.objects import ANNOTATION_RECLAIM_DEACTIVATED, ANNOTATION_RECLAIM_SNOOZE, ANNOTATION_RECLAIM_WARNED
from gpugov.sandbox import samples
from gpugov.sandbox.cluster import Sandbox
from gpugov.sandbox.nodes import create_gpu_operator_footprint, create_nodes
from gpugov.sandbox.simulated import simulated_nodes
from tests.e2e.conftest import _wait_for_the_policy_cache
from tests.helpers.local_http import receiving_json
from tests.helpers.service_account import service_account_kubeconfig
from tests.helpers.waiting import condition, wait_for
from tests.unit.test_usage_prometheus import fake_prometheus

pytestmark = pytest.mark.e2e

WINDOW, GRACE = 10, 10  # seconds, as declared below
ORG = {
    "policies/org.yaml": """\
apiVersion: gpugov.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: default}
spec:
  preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority, borrowWithinCohort: {policy: Never}}
---
apiVersion: gpugov.io/v1alpha1
kind: PriorityClass
metadata: {name: batch}
spec: {value: 100}
---
apiVersion: gpugov.io/v1alpha1
kind: PriorityClass
metadata: {name: serving}
spec: {value: 1000}
---
apiVersion: gpugov.io/v1alpha1
kind: Guardrails
metadata: {name: default}
spec:
  requireCostCenter: false
  reclaim:
    maxRuntime: {default: 1h, priorityClasses: {batch: 30m}}
    idle:
      metric: DCGM_FI_DEV_GPU_UTIL
      belowPercent: 5
      window: 10s
      grace: 10s
      action: deactivate
      exempt: {priorityClasses: [serving], queues: [notebooks]}
    snooze: {maximum: 1h}
""",
    # gpugov in the cluster: its reclaim CronJob's ServiceAccount and RBAC are what the runs below use
    # (the schedules name February 31st: the sandbox's CronJob controller never starts them)
    "policies/clusters.yaml": """\
apiVersion: gpugov.io/v1alpha1
kind: Cluster
metadata: {name: lab}
spec:
  backend: kueue
  operations:
    image: registry.example.com/gpugov:1
    agent: false
    prometheus: http://prometheus.monitoring:9090
    driftSchedule: "0 0 31 2 *"
    reclaimSchedule: "0 0 31 2 *"
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
    "tenants/teams.yaml": """\
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata: {name: alpha}
spec:
  owners: {users: [alpha@example.com]}
  namespaces: [alpha]
  queues: [{name: main, namespace: alpha}, {name: notebooks, namespace: alpha}]
  quotas: [{pool: whole, resources: {accelerators: 6}}]
---
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata: {name: beta}
spec:
  owners: {users: [beta@example.com]}
  namespaces: [beta]
  queues: [{name: main, namespace: beta}]
  quotas: [{pool: whole, resources: {accelerators: 2}}]
""",
}
# alpha's jobs: name -> (queue, priority class, DCGM_FI_DEV_GPU_UTIL of its pod; None: no series)
ALPHA = {
    "idle": ("main", "batch", "0.5"),
    "busy": ("main", "batch", "80"),
    "serving": ("main", "serving", "0"),
    "notebook": ("notebooks", "batch", "0"),
    "snoozed": ("main", "batch", "0"),
    "nometrics": ("main", "batch", None),
}
EXPECTED = {"busy": "busy", "serving": "exempt", "notebook": "exempt", "snoozed": "snoozed", "nometrics": "unknown"}
RUNTIME_SECONDS = 5  # beta's job that Kueue ends


def job(namespace: str, name: str, queue: str, priority: str, max_seconds: int | None) -> dict[str, Any]:
    sample = samples.SampleJob(namespace, namespace, name, queue, namespace, "", "nvidia.com/gpu")
    manifest = samples.job_manifest(sample, run_for=None, priority_class=priority)
    if max_seconds is not None:
        manifest["metadata"]["labels"][KUEUE_MAX_EXEC_TIME_LABEL] = str(max_seconds)
    return manifest


def workloads(api: client.ApiClient, namespace: str) -> dict[str, dict[str, Any]]:
    """The namespace's Workloads by their Job's name."""
    items = client.CustomObjectsApi(api).list_namespaced_custom_object(
        KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads")["items"]
    return {o["name"]: w for w in items for o in w["metadata"].get("ownerReferences", []) if o["kind"] == "Job"}


def admitted(w: dict[str, Any] | None) -> bool:
    return w is not None and condition(w, "Admitted").get("status") == "True"


def running_pod(api: client.ApiClient, namespace: str, job_name: str) -> str:
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=f"job-name={job_name}").items
    running = [p.metadata.name for p in pods if p.status.phase == "Running"]
    return running[0] if len(running) == 1 else ""


def gpugov_events(api: client.ApiClient, namespace: str) -> dict[str, list[str]]:
    """Workload name -> the reasons of gpugov's Events on it, oldest first."""
    found: dict[str, list[str]] = {}
    events = client.CoreV1Api(api).list_namespaced_event(namespace).items
    for e in sorted(events, key=lambda e: e.metadata.creation_timestamp):
        if e.involved_object.kind == "Workload" and e.reason.startswith("GpugovIdle"):
            found.setdefault(e.involved_object.name, []).append(e.reason)
    return found


class Lab:
    def __init__(self, root: Path, sandbox: Sandbox) -> None:
        self.root, self.sandbox, self.api = root, sandbox, sandbox.cp.api_client()
        # gpugov reclaim runs as the CronJob's ServiceAccount, with the RBAC compile gives it and no more
        self.kubeconfig = service_account_kubeconfig(sandbox, "gpugov-system", RECLAIM, root / "reclaim.kubeconfig")
        self.pods: dict[str, str] = {}  # alpha's job -> its running pod
        self.wl: dict[str, str] = {}  # alpha's job -> its Workload's name

    def reclaim(self, prometheus: str, hook: str, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "GPUGOV_WEBHOOK_URL": hook}
        return subprocess.run(
            [sys.executable, "-m", "gpugov", "reclaim", str(self.root), "--kubeconfig", str(self.kubeconfig),
             "--prometheus", prometheus, "--step", "1", "--format", "json", "--notify", "webhook",
             "--notify-state", str(self.root / "notify-state.json"), "--notify-window", "1s", *args],
            capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture(scope="module")
def lab(sandbox_binaries: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    root = tmp_path_factory.mktemp("reclaim-org")
    for rel, text in ORG.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    result = validate_repo(root)
    assert result.model is not None and not result.errors, result.errors
    with Sandbox() as sandbox:
        api = sandbox.cp.api_client()
        create_nodes(api, simulated_nodes(result.model), kwok=True)
        create_gpu_operator_footprint(api)
        assert not apply_objects(api, compile(result.model, backend="kueue")).missing
        # the refusal tests ask at once: the API server enforces the policies a moment after they are written
        _wait_for_the_policy_cache(client.AdmissionregistrationV1Api(api))
        yield Lab(root, sandbox)
        problems = sandbox.problems()
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    with receiving_json() as (url, seen):
        yield f"{url}/hook", seen


@pytest.fixture(scope="module")
def runtime_job(lab: Lab) -> float:
    """beta's job within its limit, created first so Kueue's clock runs while alpha's jobs start."""
    client.BatchV1Api(lab.api).create_namespaced_job("beta", job("beta", "short", "main", "batch", RUNTIME_SECONDS))
    return time.monotonic()


@pytest.fixture(scope="module")
def filled(lab: Lab, runtime_job: float) -> Lab:
    """alpha's six jobs admitted and running, its seventh waiting for quota, the snooze set."""
    batch = client.BatchV1Api(lab.api)
    for name, (queue, priority, _) in ALPHA.items():
        batch.create_namespaced_job("alpha", job("alpha", name, queue, priority, 1800))
    wait_for(lambda: all(admitted(workloads(lab.api, "alpha").get(n)) for n in ALPHA), "alpha's six jobs admitted")
    batch.create_namespaced_job("alpha", job("alpha", "next", "main", "batch", 1800))
    wait_for(lambda: condition(workloads(lab.api, "alpha").get("next", {}), "QuotaReserved").get("status") == "False",
             "the seventh job to wait for quota")
    wait_for(lambda: all(running_pod(lab.api, "alpha", n) for n in ALPHA), "alpha's pods running")
    lab.pods = {n: running_pod(lab.api, "alpha", n) for n in ALPHA}
    found = workloads(lab.api, "alpha")
    lab.wl = {n: found[n]["metadata"]["name"] for n in ALPHA}
    until = stamp(datetime.now(UTC) + timedelta(minutes=30))  # within the declared maximum of 1h
    client.CustomObjectsApi(lab.api).patch_namespaced_custom_object(
        KUEUE_GROUP, KUEUE_VERSION, "alpha", "workloads", lab.wl["snoozed"],
        {"metadata": {"annotations": {ANNOTATION_RECLAIM_SNOOZE: until}}})
    return lab


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def series(lab: Lab) -> dict[str, list[dict[str, Any]]]:
    return {"DCGM_FI_DEV_GPU_UTIL": [
        {"metric": {"exported_namespace": "alpha", "exported_pod": lab.pods[name]}, "value": value}
        for name, (_, _, value) in ALPHA.items() if value is not None]}


def rows_of(result: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    """alpha's rows of a JSON report, by job name (the Workload's name starts job-<name>-)."""
    report = json.loads(result.stdout)
    return {row["workload"].split("/", 1)[1].removeprefix("job-").rsplit("-", 1)[0]: row
            for row in report["workloads"] if row["workload"].startswith("alpha/")}


def test_an_idle_job_is_warned_then_deactivated_and_its_quota_admits_the_next(
        filled: Lab, webhook: tuple[str, list[dict[str, Any]]]) -> None:
    lab, (hook, sent) = filled, webhook
    custom = client.CustomObjectsApi(lab.api)
    latest = max(at(condition(w, "Admitted")["lastTransitionTime"])
                 for n, w in workloads(lab.api, "alpha").items() if n in ALPHA)
    while datetime.now(UTC) < latest + timedelta(seconds=WINDOW + 2):  # every job admitted for the whole window
        time.sleep(0.5)

    with fake_prometheus(series(lab)) as prometheus:
        dry = lab.reclaim(prometheus, hook)
        assert dry.returncode == 1, dry.stderr
        rows = rows_of(dry)
        assert {n: r["state"] for n, r in rows.items() if n != "idle"} == EXPECTED
        assert (rows["idle"]["state"], rows["idle"]["action"]) == ("idle", "warn")
        assert ANNOTATION_RECLAIM_WARNED not in (workloads(lab.api, "alpha")["idle"]["metadata"].get("annotations") or {})
        assert sent == [] and gpugov_events(lab.api, "alpha") == {}  # a dry run changes nothing

        first = lab.reclaim(prometheus, hook, "--apply")
        assert first.returncode == 0, first.stderr
        assert {n: (r["state"], r["action"]) for n, r in rows_of(first).items()} == {
            "idle": ("idle", "warn"), **{n: (s, "") for n, s in EXPECTED.items()}}
        warned_at = at(workloads(lab.api, "alpha")["idle"]["metadata"]["annotations"][ANNOTATION_RECLAIM_WARNED])
        assert gpugov_events(lab.api, "alpha") == {lab.wl["idle"]: ["GpugovIdleWarning"]}
        assert [f["rule"] for f in sent[-1]["findings"]] == ["GD040"]
        assert lab.wl["idle"] in sent[-1]["findings"][0]["message"]

        during = lab.reclaim(prometheus, hook)  # within the grace: nothing to do
        assert during.returncode == 0 and rows_of(during)["idle"]["state"] == "grace", during.stdout

        while datetime.now(UTC) < warned_at + timedelta(seconds=GRACE + 1):
            time.sleep(0.5)
        second = lab.reclaim(prometheus, hook, "--apply")
    assert second.returncode == 0, second.stderr
    done = time.monotonic()
    assert {n: (r["state"], r["action"]) for n, r in rows_of(second).items()} == {
        "idle": ("reclaim", "deactivate"), **{n: (s, "") for n, s in EXPECTED.items()}}

    idle = custom.get_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION, "alpha", "workloads", lab.wl["idle"])
    assert idle["spec"]["active"] is False
    assert at(idle["metadata"]["annotations"][ANNOTATION_RECLAIM_DEACTIVATED]) >= warned_at + timedelta(seconds=GRACE)
    assert gpugov_events(lab.api, "alpha") == {lab.wl["idle"]: ["GpugovIdleWarning", "GpugovIdleDeactivated"]}
    assert [f["rule"] for f in sent[-1]["findings"]] == ["GD041"]

    # Kueue frees the quota: the waiting job reserves it at once
    wait_for(lambda: condition(workloads(lab.api, "alpha")["next"], "QuotaReserved").get("status") == "True",
             "the waiting job to reserve the freed quota", timeout=30)
    assert time.monotonic() - done < 15
    evicted = condition(workloads(lab.api, "alpha")["idle"], "Evicted")
    assert (evicted.get("status"), evicted.get("reason")) == ("True", "Deactivated")

    # the others are untouched: active, admitted, never warned
    now = workloads(lab.api, "alpha")
    for name in EXPECTED:
        assert now[name]["spec"].get("active", True) is True and admitted(now[name]), name
        assert not {ANNOTATION_RECLAIM_WARNED, ANNOTATION_RECLAIM_DEACTIVATED} & set(
            now[name]["metadata"].get("annotations") or {}), name


def test_missing_metrics_are_never_idleness(filled: Lab, webhook: tuple[str, list[dict[str, Any]]]) -> None:
    """A Prometheus that cannot be read ends the run with exit 3 and nothing done."""
    before = {n: w["metadata"].get("annotations") for n, w in workloads(filled.api, "alpha").items()}
    result = filled.reclaim("http://127.0.0.1:9", webhook[0], "--apply")
    assert result.returncode == 3 and result.stdout == "", result.stdout
    assert "nothing was done" in result.stderr
    assert {n: w["metadata"].get("annotations") for n, w in workloads(filled.api, "alpha").items()} == before


def test_a_job_asking_more_than_its_queue_allows_is_refused(lab: Lab) -> None:
    batch = client.BatchV1Api(lab.api)
    with pytest.raises(ApiException) as refused:
        batch.create_namespaced_job("beta", job("beta", "greedy", "main", "batch", 1801))
    assert refused.value.status in (403, 422)
    message = json.loads(refused.value.body)["message"]
    assert "gpugov-max-runtime" in message
    assert ("Job beta/greedy asks kueue.x-k8s.io/max-exec-time-seconds=1801: queue beta/main (priority class "
            "batch) allows at most 1800 seconds (30m, reclaim.maxRuntime)") in message
    with pytest.raises(ApiException) as unlabelled:
        batch.create_namespaced_job("beta", job("beta", "open-ended", "main", "batch", None))
    assert "has no kueue.x-k8s.io/max-exec-time-seconds label" in json.loads(unlabelled.value.body)["message"]
    assert "set the label to at most 1800" in json.loads(unlabelled.value.body)["message"]
    # the class without its own limit gets the default
    batch.create_namespaced_job("beta", job("beta", "served", "main", "serving", 3600))
    with pytest.raises(ApiException) as over:
        batch.create_namespaced_job("beta", job("beta", "served-long", "main", "serving", 3601))
    assert "allows at most 3600 seconds (1h, reclaim.maxRuntime)" in json.loads(over.value.body)["message"]


def test_a_tenant_cannot_carry_work_past_its_maximum_runtime(lab: Lab) -> None:
    """Sent as beta@example.com (beta's owner) through impersonation, with exactly the roles gpugov binds.
    A CronJob's Jobs and a Deployment's Pods are created by trusted controllers and so not checked
    themselves: before the policy read their templates, a CronJob or Deployment without the label ran
    unbounded. After creation, the label may neither rise nor go."""
    from gpugov.cluster.impersonate import impersonate
    from gpugov.kube.names import KUEUE_PRIORITY_LABEL, KUEUE_QUEUE_LABEL

    tenant = impersonate(lab.sandbox.cp.api_client(), "beta@example.com")
    batch, apps = client.BatchV1Api(tenant), client.AppsV1Api(tenant)
    labels = {KUEUE_QUEUE_LABEL: "main", KUEUE_PRIORITY_LABEL: "batch"}
    template = job("beta", "t", "main", "batch", None)["spec"]["template"]

    def refusal(create: Any) -> str:
        with pytest.raises(ApiException) as refused:
            create()
        assert refused.value.status in (403, 422), refused.value
        return str(json.loads(refused.value.body)["message"])

    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly"},
            "spec": {"schedule": "0 0 31 2 *", "jobTemplate": {"metadata": {"labels": dict(labels)},
                                                               "spec": {"template": template}}}}
    assert "CronJob beta/nightly has no kueue.x-k8s.io/max-exec-time-seconds label" in refusal(
        lambda: batch.create_namespaced_cron_job("beta", cron, dry_run="All"))
    pod_template = {"metadata": {"labels": {**labels, "app": "serve"}},
                    "spec": {**template["spec"], "restartPolicy": "Always"}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "forever"},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "serve"}}, "template": pod_template}}
    assert "Deployment beta/forever has no kueue.x-k8s.io/max-exec-time-seconds label" in refusal(
        lambda: apps.create_namespaced_deployment("beta", deployment, dry_run="All"))
    pod_template["metadata"]["labels"][KUEUE_MAX_EXEC_TIME_LABEL] = "99999"
    assert "allows at most 1800 seconds" in refusal(
        lambda: apps.create_namespaced_deployment("beta", deployment, dry_run="All"))

    # within the limit it is accepted; then neither raised nor removed
    cron["spec"]["jobTemplate"]["metadata"]["labels"][KUEUE_MAX_EXEC_TIME_LABEL] = "1800"
    batch.create_namespaced_cron_job("beta", cron)
    try:
        raised = {"spec": {"jobTemplate": {"metadata": {"labels": {KUEUE_MAX_EXEC_TIME_LABEL: "99999"}}}}}
        assert "allows at most 1800 seconds" in refusal(lambda: batch.patch_namespaced_cron_job("nightly", "beta", raised))
        removed = {"spec": {"jobTemplate": {"metadata": {"labels": {KUEUE_MAX_EXEC_TIME_LABEL: None}}}}}
        assert "has no kueue.x-k8s.io/max-exec-time-seconds label" in refusal(
            lambda: batch.patch_namespaced_cron_job("nightly", "beta", removed))
    finally:
        client.BatchV1Api(lab.api).delete_namespaced_cron_job("nightly", "beta")
    batch.create_namespaced_job("beta", job("beta", "bounded", "main", "batch", 600), dry_run="All")


def test_a_job_past_its_maximum_runtime_is_deactivated_by_kueue(lab: Lab, runtime_job: float) -> None:
    def ended() -> bool:
        """Kueue sets spec.active=false first; it evicts the Workload when it next reconciles it, and the quota
        goes once the Job's pods have stopped."""
        w = workloads(lab.api, "beta").get("short")
        return (w is not None and w["spec"].get("active") is False and bool(condition(w, "Evicted"))
                and condition(w, "Admitted").get("status") == "False")

    wait_for(ended, "Kueue to end beta's short job", timeout=60)
    w = workloads(lab.api, "beta")["short"]
    assert w["spec"]["maximumExecutionTimeSeconds"] == RUNTIME_SECONDS
    evicted = condition(w, "Evicted")
    # pkg/controller/core/workload_controller.go reconcileMaxExecutionTime: DeactivationTarget, then
    # spec.active=false and an eviction "Deactivated" with the cause MaximumExecutionTimeExceeded
    assert (evicted["status"], evicted["reason"]) == ("True", "DeactivatedDueToMaximumExecutionTimeExceeded")
    assert evicted["message"] == "The workload is deactivated due to exceeding the maximum execution time"
    # it ran its 5 s first (the Admitted condition now dates the eviction; the Workload's creation bounds the start)
    assert at(evicted["lastTransitionTime"]) >= at(w["metadata"]["creationTimestamp"]) + timedelta(seconds=RUNTIME_SECONDS)
    assert condition(w, "Admitted")["status"] == "False"
    assert client.BatchV1Api(lab.api).read_namespaced_job("short", "beta").spec.suspend is True  # its pods stopped
    reasons = {e.reason for e in client.CoreV1Api(lab.api).list_namespaced_event("beta").items
               if e.involved_object.name == w["metadata"]["name"]}
    assert "MaximumExecutionTimeExceeded" in reasons


def test_the_reclaim_service_account_may_do_nothing_else(filled: Lab) -> None:
    """compile's RBAC for the CronJob: read Workloads and Pods, patch Workloads and create Events in the
    tenants' namespaces; every other write is refused by the API server."""
    from kubernetes import config as kube_config

    api = kube_config.new_client_from_config(config_file=str(filled.kubeconfig))
    custom, core, batch = client.CustomObjectsApi(api), client.CoreV1Api(api), client.BatchV1Api(api)
    name = filled.wl["busy"]
    attempts = {
        "delete a Workload": lambda: custom.delete_namespaced_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, "alpha", "workloads", name),
        "patch a Workload's status": lambda: custom.patch_namespaced_custom_object_status(
            KUEUE_GROUP, KUEUE_VERSION, "alpha", "workloads", name, {"metadata": {"labels": {"x": "y"}}}),
        "patch a Workload outside the tenants": lambda: custom.patch_namespaced_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, "gpugov-system", "workloads", "any", {"spec": {"active": False}}),
        "delete a Pod": lambda: core.delete_namespaced_pod(filled.pods["busy"], "alpha"),
        "patch a Job": lambda: batch.patch_namespaced_job("busy", "alpha", {"spec": {"suspend": True}}),
        "read a Secret": lambda: core.list_namespaced_secret("alpha"),
        "read a ConfigMap": lambda: core.list_namespaced_config_map("gpugov-system"),
        "create an Event outside the tenants": lambda: core.create_namespaced_event("gpugov-system", {
            "metadata": {"generateName": "x."}, "involvedObject": {"kind": "Pod", "name": "x"}, "reason": "X"}),
        "list ClusterQueues": lambda: custom.list_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues"),
    }
    for what, attempt in attempts.items():
        with pytest.raises(ApiException) as refused:
            attempt()
        assert refused.value.status == 403, what
    assert len(custom.list_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, "workloads")["items"]) >= len(ALPHA)
    assert core.list_pod_for_all_namespaces(field_selector="status.phase=Running").items
