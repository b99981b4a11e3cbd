"""`gpugov queue` and `gpugov why` on the living sandbox: the example org's cluster east, the real
Kueue v0.17.0 controller and its visibility API, Jobs submitted as users submit them.

One scenario, set up once for the module: vision (h100 `{nominal: 8, borrowingLimit: 8}`) runs
16 GPUs with a known maximum execution time; one GPU more waits at the borrowing limit; 24 GPUs
can never fit vision's 16; speech, which borrows what the research tree lends (20 GPUs, 16 of
them held by vision), asks 16 and waits for 12 more. Each test reads the queues as a user does, with
the CLI, and checks it against the Workloads and the visibility API themselves.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from gpugov.sandbox import samples
from gpugov.sandbox.cluster import Sandbox
from tests.helpers.repos import REPO
from tests.helpers.waiting import condition, queues_count_their_workloads, wait_for

pytestmark = pytest.mark.e2e

KUEUE = ("kueue.x-k8s.io", "v1beta2")
MAX_SECONDS = 900
RUN = "qx"  # prefix of this module's jobs


def gpugov(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpugov", *args, ".", "--cluster", "east", "--kubeconfig",
                           str(kubeconfig)], capture_output=True, text=True, cwd=REPO, timeout=300)


def submit(api: client.ApiClient, name: str, tenant: str, namespace: str, queue: str, pods: int, gpus: int,
           priority: str, max_seconds: int | None = None) -> None:
    job = samples.SampleJob(tenant, namespace, f"{RUN}-{name}", queue, tenant, "", "nvidia.com/gpu")
    manifest = samples.job_manifest(job, run_for=None, pods=pods, amount=gpus, priority_class=priority)
    if max_seconds is not None:
        manifest["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = str(max_seconds)
    client.BatchV1Api(api).create_namespaced_job(namespace, manifest)


def workloads(api: client.ApiClient) -> dict[str, dict[str, Any]]:
    """This module's Workloads by their Job's name."""
    items = client.CustomObjectsApi(api).list_cluster_custom_object(*KUEUE, "workloads")["items"]
    found = {}
    for w in items:
        owner = next((o["name"] for o in w["metadata"].get("ownerReferences", []) if o["kind"] == "Job"), "")
        if owner.startswith(f"{RUN}-"):
            found[owner] = w
    return found


def evaluated(api: client.ApiClient, names: list[str]) -> bool:
    found = workloads(api)
    return all(n in found and condition(found[n], "QuotaReserved").get("message") for n in names)


@pytest.fixture(scope="module")
def scenario(living: Sandbox, living_org: list[dict[str, Any]]) -> Iterator[client.ApiClient]:
    api = living.cp.api_client()
    submit(api, "full", "vision", "vision", "training", 2, 8, "training-high", MAX_SECONDS)
    wait_for(lambda: condition(workloads(api).get(f"{RUN}-full", {}), "Admitted").get("status") == "True",
             "vision's 16 GPUs to be admitted")
    submit(api, "one-more", "vision", "vision", "training", 1, 1, "training-high")
    submit(api, "too-big", "vision", "vision", "training", 3, 8, "training-high")
    submit(api, "low", "vision", "vision", "training", 1, 1, "batch-low")
    submit(api, "borrower", "speech", "speech", "default", 2, 8, "batch-low")
    wait_for(lambda: evaluated(api, [f"{RUN}-{n}" for n in ("one-more", "too-big", "low", "borrower")]),
             "Kueue to evaluate every pending job")
    time.sleep(3)  # a scheduling cycle more, so that every message is the settled one
    wait_for(lambda: queues_count_their_workloads(api), "every ClusterQueue's status to count its Workloads")
    yield api
    batch = client.BatchV1Api(api)
    for name in workloads(api):
        batch.delete_namespaced_job(name, "speech" if "borrower" in name else "vision", propagation_policy="Foreground")
    wait_for(lambda: not workloads(api), "the module's Workloads to be gone", timeout=120)


def queue_json(living: Sandbox, *extra: str, kubeconfig: Path | None = None) -> tuple[int, dict[str, Any]]:
    result = gpugov(kubeconfig or living.cp.kubeconfig, "queue", "--format", "json", *extra)
    assert result.returncode in (0, 1), result.stderr
    return result.returncode, json.loads(result.stdout)


def mine(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {w["job"]: w for w in data["workloads"] if (w["job"] or "").startswith(f"{RUN}-")}


def test_reasons_and_deficits_are_kueues_own_in_plain_words(living: Sandbox, scenario: client.ApiClient) -> None:
    code, data = queue_json(living)
    shown = mine(data)
    live = workloads(scenario)
    assert code == 1  # too-big can never start as declared: a finding, not a wait
    assert shown[f"{RUN}-full"]["state"] == "admitted" and shown[f"{RUN}-full"]["pools"] == ["h100"]

    limited = shown[f"{RUN}-one-more"]
    assert (limited["reason"], limited["finding"]) == ("borrowing-limit", False)
    assert limited["deficits"] == [{"pool": "h100", "resource": "nvidia.com/gpu", "more": "1", "held": "16",
                                    "limit": "16"}]
    assert limited["kueue_message"] == condition(live[f"{RUN}-one-more"], "QuotaReserved")["message"]

    too_big = shown[f"{RUN}-too-big"]
    assert (too_big["reason"], too_big["finding"]) == ("never-fits", True)
    assert "it asks 24 nvidia.com/gpu, at most 16 in pool h100" in too_big["message"]
    kueue_max = re.findall(r"in flavor h100, previously considered podsets requests \(0\) \+ current podset request "
                           r"\((\d+)\) > maximum capacity \((\d+)\)", too_big["kueue_message"])
    assert kueue_max == [("24", "16")]

    # speech borrows what the research tree lends on h100: nlp's 8 beyond its lendingLimit, vision's 8 (no
    # lendingLimit: all of it) and the department's own 4 = 20. vision's 16 all come out of that shared 20:
    # 4 free, 16 asked, 12 more needed.
    waiting = shown[f"{RUN}-borrower"]
    assert waiting["reason"] == "waiting-for-quota"
    assert {"pool": "h100", "resource": "nvidia.com/gpu", "more": "12"} in waiting["deficits"]
    message = condition(live[f"{RUN}-borrower"], "QuotaReserved")["message"]
    assert re.search(r"insufficient unused quota for nvidia.com/gpu in flavor h100, 12 more needed", message), message


def test_every_live_message_is_parsed_whole(living: Sandbox, scenario: client.ApiClient) -> None:
    """The parser on what the controller wrote: each 'N more needed' and 'maximum capacity (N)' of
    every pending Workload is a fact the parser returns, with the same numbers."""
    from gpugov.queueing.reasons import parse_message

    for name, w in workloads(scenario).items():
        message = condition(w, "QuotaReserved").get("message", "")
        if condition(w, "QuotaReserved").get("status") != "False":
            continue
        facts = parse_message(message).facts
        unused = {(f.flavor, f.resource, f.amount) for f in facts if f.kind == "unused"}
        expected = {(fl, r, Decimal(n)) for r, fl, n in
                    re.findall(r"insufficient unused quota for (\S+) in flavor ([^\s,]+), (\d+) more needed", message)}
        assert unused == expected, (name, message)
        maximum = {(f.flavor, f.maximum) for f in facts if f.kind == "maximum"}
        assert maximum == {(fl, Decimal(n)) for fl, n in re.findall(r"in flavor ([^\s,]+), previously considered "
                                                                    r"[^>]*> maximum capacity \((\d+)\)", message)}
        assert facts, (name, message)


def test_positions_match_the_visibility_api(living: Sandbox, scenario: client.ApiClient) -> None:
    _, data = queue_json(living)
    summary = json.loads(living.cp.get("/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/vision/pendingworkloads"))
    expected = {item["metadata"]["name"]: (item["positionInClusterQueue"] + 1, item["positionInLocalQueue"] + 1)
                for item in summary["items"]}
    shown = {w["workload"]: (w["position"]["cluster_queue"], w["position"]["local_queue"])
             for w in data["workloads"] if w["cluster_queue"] == "vision" and w["state"] == "pending"}
    assert shown == expected and len(shown) >= 3
    # training-high before batch-low
    by_job = mine(data)
    assert by_job[f"{RUN}-one-more"]["position"]["cluster_queue"] < by_job[f"{RUN}-low"]["position"]["cluster_queue"]


def test_estimated_start_is_the_running_jobs_maximum_execution_end(living: Sandbox, scenario: client.ApiClient) -> None:
    _, data = queue_json(living)
    full = workloads(scenario)[f"{RUN}-full"]
    admitted = datetime.fromisoformat(condition(full, "Admitted")["lastTransitionTime"].replace("Z", "+00:00"))
    end = (admitted + timedelta(seconds=MAX_SECONDS)).strftime("%Y-%m-%dT%H:%M:%SZ")
    shown = mine(data)
    assert shown[f"{RUN}-full"]["expected_end"] == end
    assert shown[f"{RUN}-one-more"]["estimated_start"] == end  # vision's own 16 must drop
    assert shown[f"{RUN}-borrower"]["estimated_start"] == end  # the cohort's 4 come back when full ends
    assert shown[f"{RUN}-too-big"]["estimated_start"] is None

    why = gpugov(living.cp.kubeconfig, "why", f"vision/{RUN}-one-more")
    assert why.returncode == 0, why.stderr
    assert "why: borrowing limit reached: vision holds 16 nvidia.com/gpu in pool h100" in why.stdout
    assert f"estimated start: {end}" in why.stdout
    assert f"running where it waits: vision/{RUN}-full (16 nvidia.com/gpu on h100, ends by {end})" in why.stdout
    never = gpugov(living.cp.kubeconfig, "why", f"vision/{RUN}-too-big")
    assert never.returncode == 1 and "can never fit as declared" in never.stdout
    missing = gpugov(living.cp.kubeconfig, "why", "vision/no-such-job")
    assert missing.returncode == 2 and "no Workload for vision/no-such-job" in missing.stderr


def viewer_kubeconfig(api: client.ApiClient, path: Path) -> Path:
    """A user who may read the Workloads of namespace vision only, and the queues and positions."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account("vision", {"metadata": {"name": "queue-viewer"}})
    rbac.create_namespaced_role("vision", {"metadata": {"name": "queue-viewer"}, "rules": [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get", "list"]}]})
    subject = [{"kind": "ServiceAccount", "name": "queue-viewer", "namespace": "vision"}]
    rbac.create_namespaced_role_binding("vision", {"metadata": {"name": "queue-viewer"}, "subjects": subject,
                                                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                               "name": "queue-viewer"}})
    rbac.create_cluster_role({"metadata": {"name": "gpugov-e2e-queue-viewer"}, "rules": [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues", "localqueues"], "verbs": ["list"]},
        {"apiGroups": ["visibility.kueue.x-k8s.io"], "resources": ["clusterqueues/pendingworkloads"],
         "verbs": ["get"]}]})
    rbac.create_cluster_role_binding({"metadata": {"name": "gpugov-e2e-queue-viewer"}, "subjects": subject,
                                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                  "name": "gpugov-e2e-queue-viewer"}})
    token = core.create_namespaced_service_account_token("queue-viewer", "vision", {"spec": {"expirationSeconds": 3600}})
    config = api.configuration
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "viewer",
        "clusters": [{"name": "sandbox", "cluster": {"server": config.host, "certificate-authority": config.ssl_ca_cert}}],
        "users": [{"name": "viewer", "user": {"token": token.status.token}}],
        "contexts": [{"name": "viewer", "context": {"cluster": "sandbox", "user": "viewer"}}]}))
    return path


def test_other_tenants_job_names_are_hidden(living: Sandbox, scenario: client.ApiClient, tmp_path: Path) -> None:
    kubeconfig = viewer_kubeconfig(scenario, tmp_path / "viewer")
    try:
        result = gpugov(kubeconfig, "queue", "--format", "json")
        assert result.returncode in (0, 1), result.stderr
        data = json.loads(result.stdout)
        by_tenant = {}
        for w in data["workloads"]:
            by_tenant.setdefault(w["tenant"], []).append(w)
        assert f"{RUN}-one-more" in {w["job"] for w in by_tenant["vision"]}
        speech = [w for w in by_tenant["speech"] if w["state"] == "pending"]
        assert speech and all(w["hidden"] and w["job"] is None and w["namespace"] is None for w in speech)
        assert f"{RUN}-borrower" not in result.stdout  # not even from the visibility API's ownerReferences
        text = gpugov(kubeconfig, "queue")
        assert f"{RUN}-one-more" in text.stdout and f"{RUN}-borrower" not in text.stdout
        denied = gpugov(kubeconfig, "why", f"speech/{RUN}-borrower")
        assert denied.returncode == 3 and "may not read the Workloads of namespace speech" in denied.stderr
    finally:
        rbac = client.RbacAuthorizationV1Api(scenario)
        rbac.delete_cluster_role_binding("gpugov-e2e-queue-viewer")
        rbac.delete_cluster_role("gpugov-e2e-queue-viewer")
        rbac.delete_namespaced_role_binding("queue-viewer", "vision")
        rbac.delete_namespaced_role("queue-viewer", "vision")
        client.CoreV1Api(scenario).delete_namespaced_service_account("queue-viewer", "vision")


def test_an_unreachable_cluster_exits_3(tmp_path: Path, living: Sandbox) -> None:
    config = yaml.safe_load(living.cp.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:9"
    broken = tmp_path / "broken"
    broken.write_text(yaml.safe_dump(config))
    result = gpugov(broken, "queue")
    assert result.returncode == 3 and result.stdout == "" and "could not read the queues" in result.stderr
