"""Quota over time (issue #27) on a living sandbox of its own: `gpugov apply --at` moves real Kueue
v0.17 ClusterQueues across a QuotaGrant and a QuotaWindow, and the real Kueue controller admits
(or does not) as the quota of that instant says.

The organisation: one 8-GPU server; tenants alpha and beta each hold 2 GPUs and may not borrow
(borrowingLimit 0), so alpha's job J of 4 GPUs waits on alpha's own quota. The grant gives alpha 4 more
from T1 until T2; the window moves 2 of beta's GPUs to alpha every night (20:00-08:00 UTC). The
instants are fixed in 2030, so the clock of the machine running the test never matters.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gpugov.app.pipeline import validate_repo
from gpugov.cli import main
from gpugov.kube.names import KUEUE_GROUP, KUEUE_VERSION
from gpugov.kube.objects import ANNOTATION_DESIRED_AT
from gpugov.sandbox import samples
from gpugov.sandbox.cluster import Sandbox
from gpugov.sandbox.nodes import create_gpu_operator_footprint, create_nodes
from gpugov.sandbox.simulated import simulated_nodes
from tests.e2e.conftest import SMALL_ORG_POLICIES
from tests.helpers.waiting import condition, wait_for

pytestmark = pytest.mark.e2e

T1, T2 = "2030-06-03T00:00:00Z", "2030-06-10T00:00:00Z"  # the grant: alpha +4 GPUs, T2 exclusive
BEFORE = "2030-06-01T12:00:00Z"  # noon: the window is closed too
DURING = "2030-06-05T12:00:00Z"
AFTER = "2030-06-12T12:00:00Z"
NIGHT = "2030-06-12T22:00:00Z"  # after the grant, inside the night window


def tenant(name: str) -> str:
    return f"""\
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata: {{name: {name}}}
spec:
  department: lab
  owners: {{users: [{name}@example.com]}}
  costCenter: CC-{name}
  namespaces: [{name}]
  queues: [{{name: main, namespace: {name}}}]
  quotas:
    - pool: shared
      resources: {{accelerators: {{nominal: 2, borrowingLimit: 0}}}}
"""


ORG = {
    "policies/org.yaml": SMALL_ORG_POLICIES,
    "hardware/shared.yaml": """\
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata: {name: shared}
spec:
  accelerator: {model: H100-80GB}
  acceleratorsPerNode: 8
  nodeResources: {cpu: 64, memory: 512Gi}
  nodes: [{name: shared-1}]
""",
    "tenants/lab.yaml": "apiVersion: gpugov.io/v1alpha1\nkind: Department\nmetadata: {name: lab}\nspec: {}\n",
    "tenants/alpha.yaml": tenant("alpha"),
    "tenants/beta.yaml": tenant("beta"),
    "tenants/timeline.yaml": f"""\
apiVersion: gpugov.io/v1alpha1
kind: QuotaGrant
metadata: {{name: alpha-release}}
spec:
  tenant: alpha
  pool: shared
  resources: {{accelerators: 4}}
  from: "{T1}"
  until: "{T2}"
  reason: release crunch
  approvedBy: [cto@example.com]
---
apiVersion: gpugov.io/v1alpha1
kind: QuotaWindow
metadata: {{name: beta-lends-at-night}}
spec:
  pool: shared
  donor: {{tenant: beta}}
  recipient: {{tenant: alpha}}
  resources: {{accelerators: 2}}
  weekdays: [Mon, Tue, Wed, Thu, Fri, Sat, Sun]
  start: "20:00"
  end: "08:00"
  timeZone: UTC
  reason: beta is quiet at night
  approvedBy: [ops@example.com]
""",
}


@dataclass
class Lab:
    root: Path
    kubeconfig: Path
    api: client.ApiClient


@pytest.fixture(scope="module")
def lab(sandbox_binaries: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """The organisation's nodes on a sandbox of its own; the quota objects come from the tests' applies."""
    root = tmp_path_factory.mktemp("quota-timeline")
    for rel, text in ORG.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    result = validate_repo(root, now=datetime(2030, 6, 1, tzinfo=UTC))
    assert result.model is not None and not result.errors, result.errors
    with Sandbox() as sandbox:
        api = sandbox.cp.api_client()
        create_nodes(api, simulated_nodes(result.model), kwok=True)
        create_gpu_operator_footprint(api)
        yield Lab(root, sandbox.cp.kubeconfig, api)
        problems = sandbox.problems()
    assert not problems, "\n".join(problems)


def gpugov(lab: Lab, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main([*args, str(lab.root), "--kubeconfig", str(lab.kubeconfig)])
    return int(code), capsys.readouterr().out


def apply_at(lab: Lab, capsys: pytest.CaptureFixture[str], instant: str) -> None:
    code, out = gpugov(lab, capsys, "apply", "--at", instant)
    assert code == 0, out


def cluster_queue(lab: Lab, name: str) -> dict[str, Any]:
    return client.CustomObjectsApi(lab.api).get_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION,
                                                                      "clusterqueues", name)


def gpu_quota(lab: Lab, name: str) -> str:
    """The ClusterQueue's nominalQuota of nvidia.com/gpu in flavor shared, as the apiserver holds it."""
    for group in cluster_queue(lab, name)["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for entry in flavor["resources"]:
                if flavor["name"] == "shared" and entry["name"] == "nvidia.com/gpu":
                    return str(entry["nominalQuota"])
    raise AssertionError(f"ClusterQueue {name} has no nvidia.com/gpu in flavor shared")


def workload(lab: Lab, job: str) -> dict[str, Any]:
    """The Workload of alpha's Job `job` ({} before Kueue made it)."""
    items = client.CustomObjectsApi(lab.api).list_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION, "alpha",
                                                                           "workloads")["items"]
    return next((w for w in items if any(o["kind"] == "Job" and o["name"] == job
                                         for o in w["metadata"].get("ownerReferences", []))), {})


def submit(lab: Lab, name: str, gpus: int) -> None:
    job = samples.SampleJob("alpha", "alpha", name, "main", "alpha", "", "nvidia.com/gpu")
    client.BatchV1Api(lab.api).create_namespaced_job("alpha", samples.job_manifest(job, run_for=None, amount=gpus))


def quota_reserved(lab: Lab, job: str) -> dict[str, Any]:
    return condition(workload(lab, job), "QuotaReserved")


def drift_clean_at(lab: Lab, capsys: pytest.CaptureFixture[str], instant: str) -> None:
    code, out = gpugov(lab, capsys, "drift", "--at", instant)
    assert code == 0, out


def test_a_grant_admits_the_job_that_needs_it_and_its_end_evicts_nothing(
        lab: Lab, capsys: pytest.CaptureFixture[str]) -> None:
    apply_at(lab, capsys, BEFORE)
    assert (gpu_quota(lab, "alpha"), gpu_quota(lab, "beta")) == ("2", "2")
    assert cluster_queue(lab, "alpha")["metadata"]["annotations"][ANNOTATION_DESIRED_AT] == (
        "2030-06-01T08:00:00Z/2030-06-01T20:00:00Z")
    drift_clean_at(lab, capsys, BEFORE)
    submit(lab, "j", 4)
    wait_for(lambda: quota_reserved(lab, "j").get("message"), "Kueue to evaluate J")
    time.sleep(2)  # a scheduling cycle more: J still waits
    assert quota_reserved(lab, "j")["status"] == "False", quota_reserved(lab, "j")

    # The grant's boundary passed and the CronJob has not yet run: drift reports the quota the cluster lacks.
    code, out = gpugov(lab, capsys, "drift", "--at", DURING)
    assert code == 1 and "alpha" in out, out

    apply_at(lab, capsys, DURING)
    assert (gpu_quota(lab, "alpha"), gpu_quota(lab, "beta")) == ("6", "2")
    drift_clean_at(lab, capsys, DURING)
    wait_for(lambda: condition(workload(lab, "j"), "Admitted").get("status") == "True", "the grant to admit J")

    # The grant ends: quota back to 2 under J's 4. Kueue v0.17 evicts nothing on a quota change (README,
    # "Quota over time"): J keeps running, and a new job of alpha waits while alpha's usage is over its quota.
    apply_at(lab, capsys, AFTER)
    assert (gpu_quota(lab, "alpha"), gpu_quota(lab, "beta")) == ("2", "2")
    submit(lab, "next", 1)
    wait_for(lambda: quota_reserved(lab, "next").get("message"), "Kueue to evaluate the next job")
    time.sleep(3)  # cycles enough for a preemption or eviction to show
    running = workload(lab, "j")
    assert condition(running, "Admitted").get("status") == "True", running["status"]
    assert condition(running, "Evicted").get("status") != "True", running["status"]
    assert quota_reserved(lab, "next")["status"] == "False", quota_reserved(lab, "next")
    usage = {r["name"]: r["total"] for f in cluster_queue(lab, "alpha")["status"]["flavorsUsage"]
             for r in f["resources"]}
    assert usage["nvidia.com/gpu"] == "4"  # over its nominal 2: Kueue counts it as borrowing
    # Drift at the same instant: every object is the one of AFTER (no GD001-GD003); J holds more than
    # alpha's quota of now, but started within the grant's: no breach (GD026, info, not GD020), and
    # Kueue reports it as borrowing (GD025) and the next job waiting (GD024). The replay's clock is the
    # declarations' (2030): J's pod started at DURING on it, not at the wall clock's instant, which the
    # night window would otherwise decide (a run by day read J as started over alpha's quota).
    # GD024 reads the ClusterQueue's status.pendingWorkloads, which Kueue writes a second or more after the job
    # came, later than the job's own message
    wait_for(lambda: cluster_queue(lab, "alpha")["status"].get("pendingWorkloads") == 1, "alpha's next job counted")
    core = client.CoreV1Api(lab.api)
    (pod,) = core.list_namespaced_pod("alpha", label_selector="job-name=j").items
    core.patch_namespaced_pod_status(pod.metadata.name, "alpha", {"status": {"startTime": DURING}})
    code, out = gpugov(lab, capsys, "drift", "--at", AFTER)
    assert (code, set(re.findall(r"\[(GD\d+)\]", out))) == (0, {"GD024", "GD025", "GD026"}), out
    assert "tenant alpha: running pods request 4 nvidia.com/gpu, its quota allows 2 now" in out
    for job in ("j", "next"):
        client.BatchV1Api(lab.api).delete_namespaced_job(job, "alpha", propagation_policy="Foreground")
    wait_for(lambda: not workload(lab, "j") and not workload(lab, "next"), "alpha's jobs to be gone")
    wait_for(lambda: not client.CoreV1Api(lab.api).list_namespaced_pod("alpha").items, "alpha's pods to be gone")
    drift_clean_at(lab, capsys, AFTER)


def test_a_night_window_moves_quota_from_donor_to_recipient_and_back(
        lab: Lab, capsys: pytest.CaptureFixture[str]) -> None:
    apply_at(lab, capsys, NIGHT)
    assert (gpu_quota(lab, "alpha"), gpu_quota(lab, "beta")) == ("4", "0")
    assert cluster_queue(lab, "beta")["metadata"]["annotations"][ANNOTATION_DESIRED_AT] == (
        "2030-06-12T20:00:00Z/2030-06-13T08:00:00Z")
    drift_clean_at(lab, capsys, NIGHT)
    code, _ = gpugov(lab, capsys, "apply", "--at", NIGHT, "--only-quotas", "--no-prune")
    assert code == 0  # what the CronJob runs every 5 minutes: applying again inside the window changes nothing
    assert (gpu_quota(lab, "alpha"), gpu_quota(lab, "beta")) == ("4", "0")

    apply_at(lab, capsys, AFTER)  # the next noon: closed again
    assert (gpu_quota(lab, "alpha"), gpu_quota(lab, "beta")) == ("2", "2")
    drift_clean_at(lab, capsys, AFTER)

