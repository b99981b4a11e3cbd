"""Issue #39's case on the living sandbox: nlp (h100 `{nominal: 16, borrowingLimit: 16, lendingLimit: 8}`)
holds 25 GPUs and asks 8 more. Kueue says 5 more are needed (the research tree lends nlp at most 28: its 8
kept local + the tree's 20, and 25 are held); `gpugov why` and `gpugov queue` say the same 5, as a wait for the
tree's quota, not a borrowing limit 1 over 32; `gpugov capacity` says nlp's ceiling is 28 and it may borrow 12,
and `gpugov guide nlp` that it may borrow up to 12. Freeing one GPU leaves 4 more needed, in Kueue's words and
in gpugov's."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from gpugov.sandbox import samples
from gpugov.sandbox.cluster import Sandbox
from tests.helpers.repos import REPO
from tests.helpers.waiting import condition, wait_for

pytestmark = pytest.mark.e2e

KUEUE = ("kueue.x-k8s.io", "v1beta2")
RUN = "oa"
NAMESPACE = "nlp-train"


def gpugov(living: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpugov", *args, ".", "--cluster", "east", "--kubeconfig",
                           str(living.cp.kubeconfig)], capture_output=True, text=True, cwd=REPO, timeout=300)


def submit(api: client.ApiClient, name: str, gpus: int) -> None:
    job = samples.SampleJob("nlp", NAMESPACE, f"{RUN}-{name}", "training", "nlp", "", "nvidia.com/gpu")
    manifest = samples.job_manifest(job, run_for=None, pods=1, amount=gpus, priority_class="training-high")
    client.BatchV1Api(api).create_namespaced_job(NAMESPACE, manifest)


def workloads(api: client.ApiClient) -> dict[str, dict[str, Any]]:
    items = client.CustomObjectsApi(api).list_namespaced_custom_object(*KUEUE, NAMESPACE, "workloads")["items"]
    found = {}
    for w in items:
        owner = next((o["name"] for o in w["metadata"].get("ownerReferences", []) if o["kind"] == "Job"), "")
        if owner.startswith(f"{RUN}-"):
            found[owner] = w
    return found


def admitted(api: client.ApiClient, names: list[str]) -> bool:
    found = workloads(api)
    return all(condition(found.get(f"{RUN}-{n}", {}), "Admitted").get("status") == "True" for n in names)


def kueue_says(api: client.ApiClient) -> int | None:
    message = condition(workloads(api).get(f"{RUN}-eight-4", {}), "QuotaReserved").get("message", "")
    found = re.search(r"insufficient unused quota for nvidia.com/gpu in flavor h100, (\d+) more needed", message)
    return int(found.group(1)) if found else None


def nlp_holds(api: client.ApiClient) -> int:
    """The GPUs nlp's ClusterQueue status says it holds in h100: what gpugov's arithmetic reads. Kueue writes
    it a second or more after a workload changes, later than a pending workload's message."""
    status = client.CustomObjectsApi(api).get_cluster_custom_object(*KUEUE, "clusterqueues", "nlp").get("status", {})
    return sum(int(r.get("total") or 0) for f in status.get("flavorsReservation") or [] if f["name"] == "h100"
               for r in f["resources"] if r["name"] == "nvidia.com/gpu")


@pytest.fixture(scope="module")
def nlp_at_25(living: Sandbox, living_org: list[dict[str, Any]]) -> Iterator[client.ApiClient]:
    api = living.cp.api_client()
    for name, gpus in (("eight-1", 8), ("eight-2", 8), ("eight-3", 8), ("one", 1)):
        submit(api, name, gpus)
        wait_for(lambda name=name: admitted(api, [name]), f"nlp's {name} to be admitted")
    submit(api, "eight-4", 8)
    wait_for(lambda: kueue_says(api) is not None, "Kueue to evaluate eight-4")
    wait_for(lambda: nlp_holds(api) == 25, "nlp's ClusterQueue status to count its 25 GPUs")
    time.sleep(3)  # a scheduling cycle more
    yield api
    batch = client.BatchV1Api(api)
    for name in workloads(api):
        batch.delete_namespaced_job(name, NAMESPACE, propagation_policy="Foreground")
    wait_for(lambda: not workloads(api), "the module's Workloads to be gone", timeout=120)


def test_every_report_gives_kueues_answer(living: Sandbox, nlp_at_25: client.ApiClient) -> None:
    assert kueue_says(nlp_at_25) == 5
    queue = gpugov(living, "queue", "--format", "json", "--tenant", "nlp")
    assert queue.returncode == 0, queue.stderr
    (waiting,) = [w for w in json.loads(queue.stdout)["workloads"] if w["job"] == f"{RUN}-eight-4"]
    assert waiting["reason"] == "waiting-for-quota"
    assert waiting["deficits"] == [{"pool": "h100", "resource": "nvidia.com/gpu", "more": "5"}]
    why = gpugov(living, "why", f"{NAMESPACE}/{RUN}-eight-4")
    assert why.returncode == 0, why.stderr
    assert "why: waiting for quota: 5 more nvidia.com/gpu needed in pool h100" in why.stdout
    assert "borrowing limit" not in why.stdout.split("Kueue:")[0]

    capacity = subprocess.run([sys.executable, "-m", "gpugov", "capacity", ".", "--cluster", "east", "--format",
                               "json"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert capacity.returncode == 0, capacity.stderr
    (nlp,) = [t for t in json.loads(capacity.stdout)["clusters"][0]["tenants"]
              if t["tenant"] == "nlp" and t["resource"] == "nvidia.com/gpu"]
    assert (nlp["nominal"], nlp["ceiling"], nlp["borrowable"]) == ("16", "28", "12")
    guide = subprocess.run([sys.executable, "-m", "gpugov", "guide", "nlp", "."], capture_output=True, text=True,
                           cwd=REPO, timeout=300)
    assert "| east | `h100` | H100-80GB | `nvidia.com/gpu` | 16 | 12 |" in guide.stdout


def test_freeing_one_gpu_leaves_what_both_say(living: Sandbox, nlp_at_25: client.ApiClient) -> None:
    client.BatchV1Api(nlp_at_25).delete_namespaced_job(f"{RUN}-one", NAMESPACE, propagation_policy="Foreground")
    wait_for(lambda: kueue_says(nlp_at_25) == 4, "Kueue to count the freed GPU", timeout=120)
    wait_for(lambda: nlp_holds(nlp_at_25) == 24, "nlp's ClusterQueue status to count the freed GPU")
    queue = gpugov(living, "queue", "--format", "json", "--tenant", "nlp")
    (waiting,) = [w for w in json.loads(queue.stdout)["workloads"] if w["job"] == f"{RUN}-eight-4"]
    assert waiting["deficits"] == [{"pool": "h100", "resource": "nvidia.com/gpu", "more": "4"}]
