"""A fleet on the living sandbox (issue #43): three API servers, Kueue v0.17.0 on each, MultiKueue wired
from the declarations alone.

- ``hub``: the manager, an API server and Kueue only (it runs no pod);
- ``lab`` and ``lab2``: workers, each a full sandbox with one KWOK GPU server of 4 GPUs.

Tenant alpha holds 4 GPUs on each worker and a fleet quota of 6. The kubeconfig Secrets that reach the
workers are made here, by the test, from each worker's CA (client certificate of the user the Fleet
names), never in Git. Proven: alpha's jobs beyond one worker's room run on the other, within the fleet
quota; a job beyond the fleet quota waits on the manager with Kueue's own reason; alice (alpha's owner)
can neither submit on a worker around the manager's quota nor write what would choose a worker.

One fleet for the module.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpugov.app.pipeline import validate_repo
from gpugov.cli import main
from gpugov.cluster.apply import apply_objects
from gpugov.cluster.impersonate import impersonate
from gpugov.compile import compile
from gpugov.declarations.model import Model
from gpugov.sandbox import samples
from gpugov.sandbox.cluster import Sandbox
from gpugov.sandbox.kueue import NAMESPACE as KUEUE_NAMESPACE
from gpugov.sandbox.nodes import create_gpu_operator_footprint, create_nodes
from gpugov.sandbox.pki import identity_kubeconfig
from gpugov.sandbox.simulated import simulated_nodes
from tests.e2e.conftest import SMALL_ORG_POLICIES
from tests.helpers.local_http import serving
from tests.helpers.waiting import condition, eventually
from tests.unit.test_usage_prometheus import FakeRangePrometheus

pytestmark = pytest.mark.e2e

KUEUE = ("kueue.x-k8s.io", "v1beta2")
ALICE = ("alice@example.com", ["alpha-team"])
MANAGER_USER = "gpugov-multikueue"

ORG = {
    "policies/clusters.yaml": "\n---\n".join(
        f"apiVersion: gpugov.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\nspec: {{backend: kueue}}\n"
        for name in ("hub", "lab", "lab2")),
    "policies/policies.yaml": SMALL_ORG_POLICIES,
    "policies/fleets.yaml": f"""\
apiVersion: gpugov.io/v1alpha1
kind: Fleet
metadata: {{name: training}}
spec:
  manager: hub
  managerUser: {MANAGER_USER}
  workers:
    - {{cluster: lab, kubeconfigSecret: lab-kubeconfig}}
    - {{cluster: lab2, kubeconfigSecret: lab2-kubeconfig}}
  tenants:
    - tenant: alpha
      quota: {{accelerators: 6, cpu: 8, memory: 32Gi}}
""",
    "hardware/pools.yaml": "\n---\n".join(f"""\
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata: {{name: {pool}}}
spec:
  cluster: {cluster}
  accelerator: {{model: H100-80GB}}
  acceleratorsPerNode: 4
  nodeResources: {{cpu: 16, memory: 64Gi}}
  nodes:
    - name: {pool}-1
""" for pool, cluster in (("p1", "lab"), ("p2", "lab2"))),
    "tenants/alpha.yaml": """\
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata: {name: alpha}
spec:
  owners: {users: [alice@example.com], groups: [alpha-team]}
  costCenter: CC-1
  namespaces: [alpha]
  queues:
    - {name: main, namespace: alpha, priorityClasses: [batch]}
  quotas:
    - pool: p1
      resources: {accelerators: 4, cpu: 16, memory: 64Gi}
    - pool: p2
      resources: {accelerators: 4, cpu: 16, memory: 64Gi}
""",
}


@dataclass
class Fleet:
    root: Path
    model: Model
    hub: Sandbox
    workers: dict[str, Sandbox]

    def api(self, cluster: str) -> client.ApiClient:
        sandbox = self.hub if cluster == "hub" else self.workers[cluster]
        return sandbox.cp.api_client()


def _workloads(api: client.ApiClient) -> list[dict[str, Any]]:
    return client.CustomObjectsApi(api).list_namespaced_custom_object(*KUEUE, "alpha", "workloads")["items"]


def _admitted(workload: dict[str, Any]) -> bool:
    return condition(workload, "Admitted").get("status") == "True"


@pytest.fixture(scope="module")
def fleet(sandbox_binaries: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    root = tmp_path_factory.mktemp("fleet-org")
    for rel, text in ORG.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    result = validate_repo(root)
    assert result.model is not None and result.findings == [], result.findings
    model = result.model
    with contextlib.ExitStack() as stack:
        sandboxes = {"hub": Sandbox(with_nodes=False, kueue_config={"multiKueue": {"origin": "gpugov-fleet"}}),
                     "lab": Sandbox(), "lab2": Sandbox()}
        for sandbox in sandboxes.values():
            stack.callback(sandbox.stop)
        for sandbox in sandboxes.values():  # one after the other: each picks its free ports once the last bound
            sandbox.start()
        for name in ("lab", "lab2"):
            api = sandboxes[name].cp.api_client()
            create_nodes(api, simulated_nodes(model, name), kwok=True)
            create_gpu_operator_footprint(api)
            assert not apply_objects(api, compile(model, cluster=name)).missing
        hub_api = sandboxes["hub"].cp.api_client()
        # The Secrets the platform team makes by hand: never in Git, here from each worker's own CA.
        for worker in model.fleets["training"].workers:
            cp = sandboxes[worker.cluster].cp
            path = identity_kubeconfig(cp.kubeconfig, cp.pki.ca_cert.parent, cp.workdir / "multikueue.kubeconfig",
                                       MANAGER_USER, [])
            client.CoreV1Api(hub_api).create_namespaced_secret(KUEUE_NAMESPACE, {
                "metadata": {"name": worker.kubeconfig_secret},
                "data": {"kubeconfig": base64.b64encode(path.read_bytes()).decode()}})
        assert not apply_objects(hub_api, compile(model, cluster="hub")).missing
        yield Fleet(root, model, sandboxes["hub"], {"lab": sandboxes["lab"], "lab2": sandboxes["lab2"]})
        problems = [p for s in sandboxes.values() for p in s.problems()]
        with ThreadPoolExecutor(3) as pool:  # each stop waits on its own processes: together, not in turn
            list(pool.map(Sandbox.stop, sandboxes.values()))
        assert not problems, "\n".join(problems)


def _submit(fleet: Fleet, name: str, gpus: int) -> None:
    sample = samples.SampleJob("alpha", "alpha", name, "main", "alpha", "gpugov-fleet-training", "nvidia.com/gpu")
    job = samples.job_manifest(sample, run_for=None, pods=1, amount=gpus, priority_class="batch")
    client.BatchV1Api(impersonate(fleet.api("hub"), *ALICE)).create_namespaced_job("alpha", job)


def test_the_manager_reaches_both_workers_with_the_declared_secrets(fleet: Fleet) -> None:
    objects = client.CustomObjectsApi(fleet.api("hub"))

    def active() -> bool:
        check = objects.get_cluster_custom_object(*KUEUE, "admissionchecks", "gpugov-fleet-training")
        clusters = [objects.get_cluster_custom_object(*KUEUE, "multikueueclusters", name) for name in ("lab", "lab2")]
        return condition(check, "Active").get("status") == "True" and all(
            condition(c, "Active").get("status") == "True" for c in clusters)

    eventually(active, timeout=90, what="the AdmissionCheck and both MultiKueueClusters Active")


def test_jobs_beyond_one_workers_room_run_on_the_other_within_the_fleet_quota(fleet: Fleet) -> None:
    test_the_manager_reaches_both_workers_with_the_declared_secrets(fleet)
    for index in range(3):  # 6 GPUs: the fleet quota; each worker holds 4 for alpha
        _submit(fleet, f"train-{index}", 2)

    def placed() -> dict[str, str] | None:
        where = {w["metadata"]["name"]: (w.get("status") or {}).get("clusterName") for w in _workloads(fleet.api("hub"))
                 if _admitted(w)}
        return where if len(where) == 3 and all(where.values()) else None

    where = eventually(placed, timeout=120, what="three workloads admitted and dispatched")
    assert sorted(set(where.values())) == ["lab", "lab2"], where  # one worker's room is 4: the third went on

    # MultiKueue sends a copy of each Workload to every worker and, once one worker reserved it, keeps that
    # one and deletes the others (multikueue/workload.go: the deletes are issued as clusterName is set). A copy
    # another worker had admitted too stays listed, Admitted, until that worker's Kueue lets it go (its job
    # stopped, the resource-in-use finalizer lifted): count each worker's once the unchosen copies are gone.
    def settled() -> bool:
        return all(len([w for w in _workloads(fleet.api(worker)) if _admitted(w)]) == list(where.values()).count(worker)
                   for worker in ("lab", "lab2"))

    eventually(settled, timeout=60, what=f"each worker admitting only the workloads placed on it ({where})")
    for worker in ("lab", "lab2"):  # each worker admits under its own quota what the manager sent it
        running = [w for w in _workloads(fleet.api(worker)) if _admitted(w)]
        assert len(running) == list(where.values()).count(worker)
        assert sum(int(r["resourceUsage"]["nvidia.com/gpu"])
                   for w in running for r in w["status"]["admission"]["podSetAssignments"]) <= 4

    # Beyond the fleet quota (6 of 6 in use): waits on the manager, Kueue's own reason, no worker asked.
    _submit(fleet, "train-over", 2)

    def waiting() -> dict[str, Any] | None:
        over = [w for w in _workloads(fleet.api("hub")) if w["metadata"]["name"].startswith("job-train-over-")]
        reserved = condition(over[0], "QuotaReserved") if over else {}
        return over[0] if reserved.get("status") == "False" and reserved.get("message") else None

    over = waiting_workload = eventually(waiting, timeout=60, what="the job beyond the fleet quota waiting")
    message = condition(waiting_workload, "QuotaReserved")["message"]
    assert "insufficient unused quota for nvidia.com/gpu in flavor gpugov-fleet-training" in message, message
    assert not (over.get("status") or {}).get("clusterName")
    for worker in ("lab", "lab2"):
        assert not [w for w in _workloads(fleet.api(worker)) if "train-over" in w["metadata"]["name"]]


def _status(call: Any) -> int:
    try:
        call()
    except ApiException as exc:
        return int(exc.status)
    return 200


def test_a_tenant_cannot_reach_a_worker_around_the_managers_quota(fleet: Fleet) -> None:
    sample = samples.SampleJob("alpha", "alpha", "around", "main", "alpha", "p1", "nvidia.com/gpu")
    job = samples.job_manifest(sample, run_for=None, pods=1, amount=1, priority_class="batch")
    for worker in ("lab", "lab2"):
        alice = impersonate(fleet.api(worker), *ALICE)
        assert _status(lambda a=alice: client.BatchV1Api(a).create_namespaced_job("alpha", job)) == 403
        assert _status(lambda a=alice: client.CoreV1Api(a).create_namespaced_pod(
            "alpha", {"metadata": {"name": "around"}, "spec": job["spec"]["template"]["spec"]})) == 403
        # She still follows her work there (viewer).
        client.BatchV1Api(alice).list_namespaced_job("alpha")


def test_a_tenant_cannot_choose_a_worker(fleet: Fleet) -> None:
    alice = client.CustomObjectsApi(impersonate(fleet.api("hub"), *ALICE))
    workloads = _workloads(fleet.api("hub"))
    assert workloads, "the jobs of the test above"
    name = workloads[0]["metadata"]["name"]
    # A Workload's status is where a dispatcher nominates workers (nominatedClusterNames): not hers.
    assert _status(lambda: alice.patch_namespaced_custom_object_status(
        *KUEUE, "alpha", "workloads", name, {"status": {"nominatedClusterNames": ["lab"]}})) == 403
    # Nor the MultiKueue wiring that lists the workers.
    assert _status(lambda: alice.patch_cluster_custom_object(
        *KUEUE, "multikueueconfigs", "training", {"spec": {"clusters": ["lab"]}})) == 403
    assert _status(lambda: alice.create_cluster_custom_object(*KUEUE, "multikueueclusters", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster", "metadata": {"name": "mine"},
        "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "mine"}}}})) == 403


def _usage(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["usage", *argv, "--no-idle", "--format", "json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if code == 0 else {"stdout": out}


def _hours(report: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(r["tenant"], r["pool"]): r["admitted_hours"] for r in report["rows"]
            if r["resource"] == "nvidia.com/gpu" and r["admitted_hours"] != "0"}


def test_usage_of_the_fleet_counts_each_job_once_on_the_worker_that_ran_it(
        fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    """The three jobs of the test above run on the workers (2 GPUs each): the fleet's ledger reads every
    worker with its own kubeconfig and charges alpha on each worker's pool exactly what that worker's own
    ledger says, and nothing for the manager's copy of the same jobs (admitted in the fleet flavor)."""
    running = {worker: [w for w in _workloads(fleet.api(worker)) if _admitted(w)] for worker in ("lab", "lab2")}
    assert sum(len(r) for r in running.values()) == 3, running
    members = [f"--member={worker}={fleet.workers[worker].cp.kubeconfig}" for worker in ("lab", "lab2")]
    window = ["--since", "2h", "--until", datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")]
    code, report = _usage(capsys, str(fleet.root), "--fleet", "training", *members, *window)
    assert code == 0, report
    assert report["cluster"] == "training (lab, lab2)"
    alone = {}
    for worker, pool in (("lab", "p1"), ("lab2", "p2")):
        worker_code, own = _usage(capsys, str(fleet.root), "--cluster", worker, "--kubeconfig",
                                  str(fleet.workers[worker].cp.kubeconfig), *window)
        assert worker_code == 0, own
        alone.update(_hours(own))
        if running[worker]:  # a worker that runs alpha's jobs charges her hours there
            assert Decimal(alone[("alpha", pool)]) > 0, own
    assert _hours(report) == alone, (report, alone)  # each job once: the workers' sum, no manager row
    assert {r["pool"] for r in report["rows"]} <= {"p1", "p2"}, report
    # The manager's Workloads are copies of the same jobs: its own ledger leaves them out (a tenant outside
    # the fleet with quota on the manager would be counted there) and points at the fleet's.
    assert [w for w in _workloads(fleet.api("hub")) if _admitted(w)], "the manager's copies of the jobs"
    assert main(["usage", str(fleet.root), "--cluster", "hub", "--kubeconfig", str(fleet.hub.cp.kubeconfig),
                 "--no-idle", "--format", "json", *window]) == 0
    out, err = capsys.readouterr()
    assert _hours(json.loads(out)) == {}, out
    assert "fleet training: the jobs of alpha run on its workers" in err and "gpugov usage --fleet training" in err
    # A cluster outside the fleet is refused, not read.
    assert main(["usage", str(fleet.root), "--fleet", "training", "--member=east=/nowhere", "--no-idle",
                 "--since", "1h"]) == 2
    capsys.readouterr()


def _worker_prometheus(fleet: Fleet, worker: str, percent: str) -> type[FakeRangePrometheus]:
    """A Prometheus of one worker: DCGM utilisation at `percent` for every pod of alpha there."""
    pods = [p.metadata.name for p in client.CoreV1Api(fleet.api(worker)).list_namespaced_pod("alpha").items]
    series = {"DCGM_FI_DEV_GPU_UTIL": [{"metric": {"exported_namespace": "alpha", "exported_pod": pod,
                                                   "namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-0"},
                                        "value": percent} for pod in pods]}
    return type(f"Prometheus_{worker}", (FakeRangePrometheus,), {"series": series, "requests": [], "answer": None})


def test_usage_of_the_fleet_measures_idle_hours_in_each_workers_prometheus(
        fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    """Each worker's DCGM utilisation is read from its own Prometheus (its pods are named there; the same
    namespaces exist on every worker): alpha's pods idle on lab (0.4 %) and busy on lab2 (87 %) are idle
    for all of their admitted hours on lab's pool and for none on lab2's."""
    running = {worker: [w for w in _workloads(fleet.api(worker)) if _admitted(w)] for worker in ("lab", "lab2")}
    assert all(running.values()), running  # the jobs of the tests above, on both workers
    members = [f"--member={worker}={fleet.workers[worker].cp.kubeconfig}" for worker in ("lab", "lab2")]
    window = ["--since", "2h", "--until", datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "--step", "1"]
    idle_lab, busy_lab2 = _worker_prometheus(fleet, "lab", "0.4"), _worker_prometheus(fleet, "lab2", "87")
    with serving(idle_lab) as lab_url, serving(busy_lab2) as lab2_url:
        code = main(["usage", str(fleet.root), "--fleet", "training", *members, *window, "--format", "json",
                     "--prometheus", f"lab={lab_url}", "--prometheus", f"lab2={lab2_url}"])
        out, err = capsys.readouterr()
        assert code == 0, err
        rows = {r["pool"]: r for r in json.loads(out)["rows"]
                if r["tenant"] == "alpha" and r["resource"] == "nvidia.com/gpu"}
        assert rows["p1"]["idle_hours"] == rows["p1"]["admitted_hours"] != "0", rows
        assert rows["p2"]["idle_hours"] == "0" and rows["p2"]["admitted_hours"] != "0", rows
        assert idle_lab.requests and busy_lab2.requests  # each worker's own Prometheus was asked
        assert "idle hours not measured" not in err
        # Every worker needs its own: one missing, a bare URL, or a cluster outside the fleet is refused.
        for given in ([f"lab={lab_url}"], [lab_url, f"lab2={lab2_url}"], [f"lab={lab_url}", f"lab2={lab2_url}",
                                                                         f"east={lab_url}"]):
            flags = [arg for url in given for arg in ("--prometheus", url)]
            assert main(["usage", str(fleet.root), "--fleet", "training", *members, *window, *flags]) == 2, given
            refusal = capsys.readouterr().err
            assert "--prometheus" in refusal and "Traceback" not in refusal, refusal


@pytest.mark.parametrize("cluster", ["hub", "lab", "lab2"])
def test_drift_checks_every_member_and_finds_the_applied_fleet_whole(fleet: Fleet, cluster: str,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The manager's MultiKueue wiring and each worker's roles for it, read back as applied (with the jobs of
    the tests above running on the workers)."""
    sandbox = fleet.hub if cluster == "hub" else fleet.workers[cluster]
    code = main(["drift", str(fleet.root), "--cluster", cluster, "--kubeconfig", str(sandbox.cp.kubeconfig),
                 "--format", "json"])
    out = capsys.readouterr().out
    report = json.loads(out)
    assert (code, [f for f in report.get("findings", []) if f["level"] != "info"]) == (0, []), report
    # A MultiKueueCluster pointed elsewhere is drift on the manager.
    if cluster == "hub":
        client.CustomObjectsApi(fleet.api("hub")).patch_cluster_custom_object(
            *KUEUE, "multikueueclusters", "lab2", {"spec": {"clusterSource": {"kubeConfig": {"location": "other"}}}})
        code = main(["drift", str(fleet.root), "--cluster", "hub", "--kubeconfig", str(sandbox.cp.kubeconfig),
                     "--format", "json"])
        report = json.loads(capsys.readouterr().out)
        assert code != 0 and any("lab2" in json.dumps(f) for f in report["findings"]), report


def test_why_says_which_worker_runs_a_job_and_why_another_waits(fleet: Fleet,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = str(fleet.hub.cp.kubeconfig)
    placed = {w["metadata"]["ownerReferences"][0]["name"]: w["status"]["clusterName"]
              for w in _workloads(fleet.api("hub")) if _admitted(w)}
    assert placed, "the jobs of the test above"
    for job, worker in placed.items():
        main(["why", f"alpha/{job}", str(fleet.root), "--cluster", "hub", "--kubeconfig", kubeconfig])
        out = capsys.readouterr().out
        assert f"running on worker {worker}" in out, out
    main(["why", "alpha/train-over", str(fleet.root), "--cluster", "hub", "--kubeconfig", kubeconfig])
    out = capsys.readouterr().out
    assert "gpugov-fleet-training" in out and "worker" not in out, out
    # queue gives the same answer for every job of the tenant at once (one reason: gpugov.queueing.reasons)
    on_worker = {w["metadata"]["name"]: w["status"]["clusterName"] for w in _workloads(fleet.api("hub"))
                 if _admitted(w)}
    main(["queue", str(fleet.root), "--cluster", "hub", "--kubeconfig", kubeconfig, "--format", "json"])
    rows = [w for w in json.loads(capsys.readouterr().out)["workloads"] if w["tenant"] == "alpha"]
    by_workload = {w["workload"]: w for w in rows}
    for workload, worker in on_worker.items():
        assert f"running on worker {worker}" in by_workload[workload]["message"], by_workload[workload]
    (over,) = [w for w in rows if w["job"] == "train-over"]
    assert over["state"] == "pending" and "worker" not in over["message"], over


def _dr060(fleet: Fleet, capsys: pytest.CaptureFixture[str], cluster: str = "hub") -> dict[str, Any]:
    sandbox = fleet.hub if cluster == "hub" else fleet.workers[cluster]
    main(["doctor", str(fleet.root), "--cluster", cluster, "--kubeconfig", str(sandbox.cp.kubeconfig),
          "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    return next(c for c in report["checks"] if c["id"] == "DR060")


def test_doctor_checks_the_multikueue_wiring(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    """The drift test above pointed lab2's MultiKueueCluster at a Secret that does not exist: doctor says so;
    pointed back at the declared Secret, every worker is reached again."""
    objects = client.CustomObjectsApi(fleet.api("hub"))
    objects.patch_cluster_custom_object(*KUEUE, "multikueueclusters", "lab2", {
        "spec": {"clusterSource": {"kubeConfig": {"location": "other"}}}})

    def failing() -> dict[str, Any] | None:
        result = _dr060(fleet, capsys)
        return result if result["status"] == "fail" else None

    result = eventually(failing, timeout=60, what="DR060 failing for lab2")
    assert "MultiKueueCluster lab2 is not Active" in result["message"] and "lab " not in result["message"], result
    objects.patch_cluster_custom_object(*KUEUE, "multikueueclusters", "lab2", {
        "spec": {"clusterSource": {"kubeConfig": {"location": "lab2-kubeconfig"}}}})
    result = eventually(lambda: (r := _dr060(fleet, capsys))["status"] == "pass" and r, timeout=90,
                        what="DR060 passing once lab2's Secret is the declared one")
    assert "3 AdmissionCheck(s) and MultiKueueCluster(s) Active" in result["message"], result
    assert _dr060(fleet, capsys, "lab")["status"] == "skip"  # a worker manages no fleet


def test_apply_of_the_fleet_goes_workers_first_and_holds_the_guard_for_each(
        fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    """One apply for all members: the workers, then the manager, each recorded as itself, the admission
    policies in force on each (the manager's too: they hold the workers' accelerators); then lab's kubeconfig
    given as lab2's is refused by the wrong-cluster guard before any write, the manager not reached."""
    kubeconfigs = {"hub": fleet.hub.cp.kubeconfig, **{w: s.cp.kubeconfig for w, s in fleet.workers.items()}}
    members = [f"--member={cluster}={path}" for cluster, path in kubeconfigs.items()]
    code = main(["apply", str(fleet.root), "--fleet", "training", *members])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    said = [line for line in out.splitlines() if line.startswith("fleet training: cluster ")]
    assert said == ["fleet training: cluster lab (worker)", "fleet training: cluster lab2 (worker)",
                    "fleet training: cluster hub (manager)"], out
    swapped = [f"--member=hub={kubeconfigs['hub']}", f"--member=lab={kubeconfigs['lab']}",
               f"--member=lab2={kubeconfigs['lab']}"]
    assert out.count("admission: in force") == 3, out
    code = main(["apply", str(fleet.root), "--fleet", "training", *swapped])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert "is cluster lab, not lab2" in err and "nothing was changed" in err, err
    assert "stopped at lab2; done before it: lab; not reached: hub" in err, err
    assert "cluster hub (manager)" not in out, out
