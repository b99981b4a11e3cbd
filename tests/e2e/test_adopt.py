"""`gpugov import --kubeconfig` on the living sandbox: the round trip the issue (#25) asks for, for
every hand-written shape of tests/helpers/adopt_shapes.py (a flat list of queues without cohorts, a
two-level cohort tree with borrowing and lending limits, several flavors per queue, CPU-only queues,
v1beta1 objects, names outside gpugov's scheme, a cohort's lending queue whose capacity the running Job
borrows, Kueue's own flavor fungibility, a flavor without nodeLabels that matches every node; the last three
from issue #40).

One living sandbox for the module holds one shape at a time: its objects applied as platform teams
write them (field manager `kubectl`, in the apiVersion they are written in, never labelled by
gpugov), on KWOK nodes with GPU Feature Discovery labels, and a Job admitted and running in one of
its queues (a CPU Job in the CPU-only shape). Then: import from the cluster, validate, drift (no
semantic drift of any ClusterQueue, Cohort or LocalQueue: only what gpugov adds), the take-over
declared in spec.adopt (refused without its entry), apply --dry-run (nothing written), apply (gpugov
owns the fields), drift clean, and the Job's Workload still admitted with the same UID, never
evicted, its pod still running. Between shapes everything is removed again.

Beside the running Job each shape holds a Job waiting for quota (issue #40: "every pending one would be
admitted, preempted or kept waiting exactly as before"): one pod more than is free to its queue, its own
and what it may borrow (WAITS), and where the queue has a second flavor a running Job that fills it first.
Kueue's own view of every Workload is recorded before import (admitted: UID and flavor per resource;
pending: QuotaReserved False with Kueue's message and the position in the visibility API) and must be
the same after apply, for a while; then the running Job is deleted, and the waiting one is admitted,
to the flavor the hand-written queue gives it. The CPU-only shape's waiting Job fits its queue's quota but
not its node: Kueue's topology-aware scheduling would refuse it, so import keeps the cluster's flavors as they
were (topologyAwareScheduling false: none had a topologyName). Where apply is known to change a decision
(Wait.known: none now), the test says so as an expected failure, with Kueue's message checked, and fails once
the decision no longer changes.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from gpugov.cli import main
from gpugov.cluster.queues import pending_workloads
from gpugov.cluster.rest import Api
from gpugov.kube.kinds import KINDS
from gpugov.kube.names import KUEUE_API, KUEUE_GROUP, KUEUE_QUEUE_LABEL
from gpugov.kube.objects import LABEL_TENANT, MANAGED_BY, MANAGER
from gpugov.sandbox.cluster import Sandbox
from gpugov.sandbox.nodes import create_nodes
from tests.e2e.conftest import _wait_for_the_policy_cache
from tests.helpers.adopt_shapes import RUNS, SHAPES, Run, documents, kwok_nodes, namespaces
from tests.helpers.waiting import condition, eventually, wait_for

pytestmark = pytest.mark.e2e

CLUSTER = "lab"
SCHEDULER_KINDS = ("ClusterQueue", "Cohort", "LocalQueue")
HAND_WRITTEN_KINDS = ("ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass")
KUEUE_V1BETA1 = f"{KUEUE_GROUP}/v1beta1"
# What gpugov adds to a cluster it takes over, beyond the objects it adopts.
ADDED_KINDS = {"Topology", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ClusterRole",
               "ClusterRoleBinding", "Role", "RoleBinding"}


@dataclass(frozen=True)
class Wait:
    """The Job of a shape that waits for quota: `pods` pods of the running Job's size (`cpu` each), one
    more than the queue has free while the running Job holds its share; `filler` pods of a second Job
    that runs on the queue's other flavor first (so that the waiting one has nowhere else to go);
    `flavor`: where Kueue admits it once the running Job is gone, by the hand-written queue's rules."""

    pods: int
    flavor: str
    filler: int = 0
    cpu: str = "1"
    known: str = ""  # a decision apply is known to change: the test says so (xfail) as long as it does


WAITS = {
    "flat": Wait(4, "default-flavor"),  # team-a-cq: 4 GPUs, no cohort
    "cohort-tree": Wait(12, "a100"),  # nlp: 8 nominal + borrowingLimit 4 (vision lends 4, org-root holds 2)
    "several-flavors": Wait(8, "h100-spot", filler=8),  # the filler takes a100-ondemand's 8
    # etl: 200 cpu on one node of 64; the running Job holds 1, so the waiting one cannot fit that node.
    # Before issue #40 apply made its flavor topology-aware and Kueue's TAS then refused the waiting Job
    # ('topology "cpu-nodes" allows to fit only 1 out of 4 pod(s)'); import now keeps TAS off (no flavor had it).
    "cpu-only": Wait(4, "cpu-nodes", cpu="50"),
    "v1beta1": Wait(4, "gpu"),  # ml-cq: 4 GPUs, alone in its cohort
    "foreign-names": Wait(16, "rf-gpu-pool-01"),
    "lending": Wait(8, "gpu-nodes"),  # borrows all 8 of the slack queue's GPUs
    "stop-search": Wait(8, "h100-spot", filler=8),  # Kueue's default fungibility, no cohort: no borrowing
    "every-node": Wait(8, "default-flavor"),
}
WAITING, FILLER = "waiting", "filler"


def job(run: Run, name: str, pods: int = 1, cpu: str = "1") -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": "1Gi", **({"nvidia.com/gpu": "1"} if run.gpu else {})}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": run.namespace, "labels": {KUEUE_QUEUE_LABEL: run.queue}},
            "spec": {"suspend": True, "parallelism": pods, "completions": pods, "backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                                          "resources": {"requests": requests, "limits": requests}}]}}}}


@pytest.fixture(scope="module")
def lab(sandbox_binaries: dict[str, Path]) -> Iterator[Sandbox]:
    """A living sandbox of its own, holding one shape at a time."""
    with Sandbox() as sandbox:
        yield sandbox
        problems = sandbox.problems()
    assert not problems, "\n".join(problems)


@pytest.fixture(params=sorted(SHAPES))
def shape(lab: Sandbox, request: pytest.FixtureRequest) -> Iterator[str]:
    """The shape's hand-written objects applied as a platform team does (field manager kubectl, in the
    apiVersion they are written in, never labelled by gpugov), on its KWOK nodes, with its Job admitted
    and running; afterwards everything of the shape and of gpugov's apply is removed for the next one."""
    name, api = request.param, lab.cp.api_client()
    run = RUNS[name]
    create_nodes(api, kwok_nodes(name), kwok=True)
    core = client.CoreV1Api(api)
    for namespace in namespaces(name):
        # The sandbox's Kueue manages Jobs only in namespaces with a gpugov.io/tenant label
        # (gpugov.sandbox.kueue: managedJobsNamespaceSelector); a cluster's own Kueue would have its own.
        core.create_namespace({"metadata": {"name": namespace, "labels": {LABEL_TENANT: namespace}}})
    dynamic = DynamicClient(api)
    try:
        for obj in (d for d in documents(name) if d["kind"] != "Node"):
            resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            dynamic.server_side_apply(resource, body=obj, namespace=obj["metadata"].get("namespace"),
                                      field_manager="kubectl")
        wait = WAITS[name]
        for job_name, pods in (("train", 1), (FILLER, wait.filler)):
            if not pods:
                continue
            client.BatchV1Api(api).create_namespaced_job(run.namespace, job(run, job_name, pods))
            try:
                wait_for(lambda j=job_name: running(api, run.namespace, j) is not None,
                         f"the Job {job_name} in {run.namespace} to run", timeout=120)
            except AssertionError as exc:  # say why: the Workload's conditions and the pods' phases
                pods_now = [(p.metadata.name, p.status.phase, p.spec.node_name)
                            for p in core.list_namespaced_pod(run.namespace).items]
                raise AssertionError(f"{exc}: {(workload(api, run.namespace, job_name) or {}).get('status')}, "
                                     f"pods {pods_now}") from None
        client.BatchV1Api(api).create_namespaced_job(run.namespace, job(run, WAITING, wait.pods, wait.cpu))
        eventually(lambda: waiting(api, run), timeout=60, what=f"the Job {WAITING} in {run.namespace} to wait for quota")
        yield name
    finally:
        clear(api, namespaces(name))


def owned(dynamic: DynamicClient) -> list[tuple[Any, str, str | None]]:
    """(resource, name, namespace) of every object gpugov labelled and of every hand-written Kueue kind
    (Namespaces and Nodes aside)."""
    found = []
    for kind in KINDS.values():
        if kind.kind in ("Namespace", "Node"):
            continue
        try:
            resource = dynamic.resources.get(api_version=kind.api_version, kind=kind.kind)
        except ResourceNotFoundError:  # a kind the sandbox does not serve (Volcano without its CRDs)
            continue
        every = kind.group == KUEUE_GROUP and kind.kind in (*HAND_WRITTEN_KINDS, "Topology")
        listed = resource.get(**({} if every else {"label_selector": f"{MANAGED_BY}={MANAGER}"}))
        found += [(resource, obj.metadata.name, obj.metadata.namespace) for obj in listed.items]
    return found


def clear(api: client.ApiClient, shape_namespaces: list[str]) -> None:
    """Remove the shape's Jobs (their Workloads and pods with them), nodes, Kueue objects and whatever
    gpugov's apply created, and release its namespaces (deleting them takes the namespace controller
    most of a minute): the next shape starts on a cluster without queues, nodes or gpugov objects."""
    core, dynamic = client.CoreV1Api(api), DynamicClient(api)
    batch, workloads = client.BatchV1Api(api), dynamic.resources.get(api_version=KUEUE_API, kind="Workload")
    for namespace in shape_namespaces:
        batch.delete_collection_namespaced_job(namespace, propagation_policy="Background")
    wait_for(lambda: not any(workloads.get(namespace=n).items or core.list_namespaced_pod(n).items
                             for n in shape_namespaces), "the shape's Workloads and pods to be gone", timeout=60)
    for resource, name, namespace in owned(dynamic):
        with contextlib.suppress(NotFoundError):
            resource.delete(name=name, namespace=namespace)
    for node in core.list_node().items:
        core.delete_node(node.metadata.name)
    for namespace in core.list_namespace(label_selector=f"{MANAGED_BY}={MANAGER}").items:
        core.patch_namespace(namespace.metadata.name, {"metadata": {"labels": {MANAGED_BY: None}}})
    wait_for(lambda: not owned(dynamic) and not core.list_node().items, "the shape's objects to be gone", timeout=60)
    # The API server enforces a deleted admission policy a moment longer: the next shape's Job would be refused
    # by this shape's gpugov-queue-access (seen under load: "no tenant declares a queue in namespace team-a").
    _wait_for_the_policy_cache(client.AdmissionregistrationV1Api(api))


def workloads(api: client.ApiClient, namespace: str) -> dict[str, dict[str, Any]]:
    """The namespace's Workloads by the name of the Job that owns them."""
    items = DynamicClient(api).resources.get(api_version=KUEUE_API, kind="Workload").get(namespace=namespace).to_dict()
    return {next((o["name"] for o in w["metadata"].get("ownerReferences") or [] if o["kind"] == "Job"),
                 w["metadata"]["name"]): w for w in items["items"]}


def workload(api: client.ApiClient, namespace: str, job_name: str = "train") -> dict[str, Any] | None:
    return workloads(api, namespace).get(job_name)


def running(api: client.ApiClient, namespace: str, job_name: str = "train") -> tuple[str, tuple[str, ...]] | None:
    """(Workload UID, its pods' UIDs) while the Job is admitted and all its pods run."""
    found = workload(api, namespace, job_name)
    if found is None or condition(found, "Admitted").get("status") != "True":
        return None
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=f"job-name={job_name}").items
    if len(pods) != found["spec"]["podSets"][0]["count"] or any(p.status.phase != "Running" for p in pods):
        return None
    return found["metadata"]["uid"], tuple(sorted(p.metadata.uid for p in pods))


def flavors(w: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The flavor Kueue assigned to each resource of each pod set ({} while not admitted)."""
    admission = (w.get("status") or {}).get("admission") or {}
    return {a["name"]: dict(a.get("flavors") or {}) for a in admission.get("podSetAssignments") or []}


def positions(api: client.ApiClient, run: Run) -> dict[str, tuple[int, int]]:
    """The visibility API's position of each pending Workload of the shape's LocalQueue (in it, in its ClusterQueue)."""
    queue = DynamicClient(api).resources.get(api_version=KUEUE_API, kind="LocalQueue").get(
        name=run.queue, namespace=run.namespace).to_dict()["spec"]["clusterQueue"]
    return {p["metadata"]["name"]: (p["positionInLocalQueue"], p["positionInClusterQueue"])
            for p in pending_workloads(Api(api), queue, local_queue=(run.namespace, run.queue))}


def view(api: client.ApiClient, run: Run) -> dict[str, dict[str, Any]]:
    """Kueue's own view of every Workload of the shape's namespace, by Job: UID, admitted or not, the
    flavors assigned, QuotaReserved (status, reason and Kueue's message), evicted, preempted, and a
    pending one's position from the visibility API."""
    found, queued = {}, positions(api, run)
    for job_name, w in workloads(api, run.namespace).items():
        reserved = condition(w, "QuotaReserved")
        found[job_name] = {
            "uid": w["metadata"]["uid"], "admitted": condition(w, "Admitted").get("status") == "True",
            "flavors": flavors(w), "quotaReserved": (reserved.get("status"), reserved.get("reason"), reserved.get("message")),
            "evicted": condition(w, "Evicted").get("status") == "True",
            "preempted": condition(w, "Preempted").get("status") == "True",
            "position": queued.get(w["metadata"]["name"])}
    return found


def waiting(api: client.ApiClient, run: Run) -> dict[str, Any] | None:
    """The waiting Job's entry in Kueue's view once Kueue has tried it: no quota reserved, its message
    saying why, its place in the visibility API."""
    entry = view(api, run).get(WAITING)
    if entry is None or entry["admitted"] or entry["position"] is None:
        return None
    status, _, message = entry["quotaReserved"]
    return entry if status == "False" and message else None


def holds(probe: Any, seconds: float, what: str) -> None:
    """`probe()` returns None (all is as it was) on every poll for `seconds`; else its answer fails the test."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        problem = probe()
        assert problem is None, f"{what}: {problem}"
        time.sleep(0.5)


def gpugov(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def drift(capsys: pytest.CaptureFixture[str], sandbox: Sandbox, repo: Path) -> tuple[int, list[dict[str, Any]]]:
    code, out, err = gpugov(capsys, "drift", str(repo), "--cluster", CLUSTER, "--kubeconfig", str(sandbox.cp.kubeconfig),
                            "--format", "json")
    assert out.strip(), err
    return code, [f for f in json.loads(out)["findings"] if f["level"] != "info"]


def resource_versions(api: client.ApiClient) -> dict[str, Any]:
    """What a write by apply would change of each scheduler object: its spec (generation), labels,
    annotations and field managers. Not resourceVersion: Kueue keeps writing the status of the
    queues a running workload uses."""
    dynamic, found = DynamicClient(api), {}
    for kind in (*SCHEDULER_KINDS, "ResourceFlavor"):
        for obj in dynamic.resources.get(api_version=KUEUE_API, kind=kind).get().to_dict()["items"]:
            meta = obj["metadata"]
            managers = sorted({(m.get("manager"), m.get("operation")) for m in meta.get("managedFields") or []
                               if m.get("subresource") != "status"})
            found[f"{kind} {meta.get('namespace', '')}/{meta['name']}"] = (
                meta.get("generation"), meta.get("labels"), meta.get("annotations"), managers)
    return found


def hand_written(shape: str) -> set[tuple[str, str, str]]:
    """(kind, namespace, name) of the shape's Kueue objects."""
    return {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])
            for d in documents(shape) if d["kind"] in HAND_WRITTEN_KINDS}


def label(kind: str, namespace: str, name: str) -> str:
    return f"{kind} {namespace + '/' if namespace else ''}{name}"


def test_import_drift_and_take_over_keep_the_running_workload(shape: str, lab: Sandbox, tmp_path: Path, capsys) -> None:
    api, kubeconfig, run, wait = lab.cp.api_client(), str(lab.cp.kubeconfig), RUNS[shape], WAITS[shape]
    before = running(api, run.namespace)
    assert before is not None
    decided = view(api, run)  # Kueue's own view before import: who is admitted where, who waits and why
    assert {j for j, e in decided.items() if e["admitted"]} == {"train", *([FILLER] if wait.filler else [])}, decided
    assert not decided[WAITING]["admitted"] and decided[WAITING]["quotaReserved"][0] == "False", decided
    objects = hand_written(shape)
    repo = tmp_path / "repo"

    code, out, err = gpugov(capsys, "import", "--kubeconfig", kubeconfig, "--cluster", CLUSTER, "--out", str(repo),
                            "--format", "json")
    assert code == 0, out + err
    report = json.loads(out)
    assert report["complete"] and report["notExpressed"] == [], report
    clusters = yaml.safe_load((repo / "policies" / "clusters.yaml").read_text())
    kube_system = client.CoreV1Api(api).read_namespace("kube-system").metadata.uid
    assert clusters["spec"]["identity"] == {"kubeSystemUID": kube_system}  # pinned to the cluster it read
    assert (gpugov(capsys, "validate", str(repo))[0]) == 0

    # Drift straight after import. What it may report is only what gpugov adds to the cluster:
    # - objects missing: a Topology per pool where a flavor was topology-aware (none in these shapes: import
    #   then writes topologyAwareScheduling false), the tenant
    #   admission policies and their bindings, the tenant roles, and a Cohort a queue names that
    #   nobody created (Kueue runs such a cohort implicitly; gpugov declares it as a department);
    # - on Namespaces, ClusterQueues, Cohorts, LocalQueues and ResourceFlavors: gpugov's own labels
    #   (managed-by, tenant, department, pool; metadata.*), and on a ResourceFlavor its topologyName.
    # Nothing of what decides admission: every spec field of every ClusterQueue, Cohort and LocalQueue
    # matches (matchLabels against matchExpressions, "4" against 4, left-out defaults, v1beta1's cohort).
    code, findings = drift(capsys, lab, repo)
    changed = {f["object"] for f in findings if f["rule"] == "GD002"}
    assert {label(*o) for o in objects if o[0] in SCHEDULER_KINDS} <= changed  # each one found, labels differ
    for finding in findings:
        kind = finding["object"].split()[0]
        if finding["rule"] == "GD001":
            assert kind in ADDED_KINDS or (kind == "Cohort" and ("Cohort", "", finding["object"].split()[1]) not in objects), finding
            continue
        assert finding["rule"] == "GD002", finding
        allowed = ("metadata.", "spec.topologyName") if kind == "ResourceFlavor" else ("metadata.",)
        assert all(field.startswith(allowed) for field in finding["fields"].split(",")), finding
    assert code == 1

    # The take-over is declared, not a manual step: the Cluster adopts (spec.adopt) exactly the objects
    # the cluster holds and the declarations compile to again - here every hand-written one of the shape -
    # and apply takes over those and nothing else that lacks gpugov's mark (gpugov.cluster.ownership).
    take_over = {(t["kind"], t["namespace"], t["name"]) for t in report["takeOver"]}
    assert take_over == objects and report["adoptedIn"].startswith("policies/clusters.yaml")
    assert {(e["kind"], e.get("namespace", ""), e["name"]) for e in clusters["spec"]["adopt"]} == take_over
    assert "kubectl" not in json.dumps(report)  # no manual labelling step
    versions = resource_versions(api)

    # Without its entry, the same hand-made ClusterQueue is refused: nothing written.
    queue_name = min(name for kind, _, name in objects if kind == "ClusterQueue")
    unadopted = tmp_path / "unadopted"
    shutil.copytree(repo, unadopted)
    clusters_file = unadopted / "policies" / "clusters.yaml"
    doc = yaml.safe_load(clusters_file.read_text())
    doc["spec"]["adopt"] = [e for e in doc["spec"]["adopt"] if (e["kind"], e["name"]) != ("ClusterQueue", queue_name)]
    clusters_file.write_text(yaml.safe_dump(doc))
    code, out, err = gpugov(capsys, "apply", str(unadopted), "--cluster", CLUSTER, "--kubeconfig", kubeconfig)
    assert code == 2 and "refusing to take over 1 object(s)" in err and f"ClusterQueue {queue_name} " in err, out + err
    assert resource_versions(api) == versions

    code, out, err = gpugov(capsys, "apply", str(repo), "--cluster", CLUSTER, "--kubeconfig", kubeconfig, "--dry-run")
    assert code == 0, out + err
    assert "nothing was changed" in out
    for kind, namespace, name in take_over:
        assert f"adopting {label(kind, namespace, name)} (Cluster spec.adopt)" in out, out
    assert resource_versions(api) == versions  # a dry run writes nothing
    dynamic = DynamicClient(api)

    code, out, err = gpugov(capsys, "apply", str(repo), "--cluster", CLUSTER, "--kubeconfig", kubeconfig)
    assert code == 0, out + err
    for kind, namespace, name in sorted(objects):
        obj = dynamic.resources.get(api_version=KUEUE_API, kind=kind).get(name=name, namespace=namespace or None).to_dict()
        assert "gpugov" in {m["manager"] for m in obj["metadata"]["managedFields"]}, (kind, name)
        assert obj["metadata"]["labels"][MANAGED_BY] == MANAGER  # gpugov's now: prune owns it from here on
    code, findings = drift(capsys, lab, repo)
    assert (code, findings) == (0, [])

    # The admitted workload went through all of it untouched: same Workload, never evicted, pod running.
    assert running(api, run.namespace) == before
    found = workload(api, run.namespace)
    assert found is not None and condition(found, "Evicted").get("status") != "True"
    assert condition(found, "Preempted").get("status") != "True"

    # Kueue decides as before, for as long as it takes it to see the new queues (it requeues pending
    # Workloads on every ClusterQueue or Cohort update): every admitted Workload the same, with the same
    # flavors; the waiting one waits with the same message (the same missing quantity) at the same position.
    def changed() -> dict[str, Any] | None:
        now = view(api, run)
        return None if now == decided else {j: (decided.get(j), now.get(j)) for j in decided.keys() | now.keys()
                                            if decided.get(j) != now.get(j)}

    holds(changed, 10, "Kueue decides otherwise after apply (before, after)")

    # Once the capacity it waits for is freed, it is admitted where the hand-written queue put it.
    client.BatchV1Api(api).delete_namespaced_job("train", run.namespace, propagation_policy="Background")

    def decided_again() -> dict[str, Any] | None:
        """The waiting Workload once Kueue admitted it, or refused it for the reason `known` names (TAS)."""
        found = workload(api, run.namespace, WAITING)
        if found is None:
            return None
        refused = bool(wait.known) and "topology" in condition(found, "QuotaReserved").get("message", "")
        return found if condition(found, "Admitted").get("status") == "True" or refused else None

    try:
        admitted = eventually(decided_again, timeout=60, what=f"the Job {WAITING} admitted once train is gone")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {(workload(api, run.namespace, WAITING) or {}).get('status')}") from None
    if condition(admitted, "Admitted").get("status") != "True":
        pytest.xfail(f"{wait.known}; now: {condition(admitted, 'QuotaReserved').get('message')}")
    assert not wait.known, f"no longer so, drop `known` from WAITS[{shape!r}]: {wait.known}"
    assert admitted["metadata"]["uid"] == decided[WAITING]["uid"]
    assert set(flavors(admitted)["main"].values()) == {wait.flavor}, flavors(admitted)
    if wait.filler:  # the other flavor's Job untouched
        assert view(api, run)[FILLER] == decided[FILLER]


def test_v1beta1_objects_are_served_and_read_back_as_v1beta2(lab: Sandbox) -> None:
    """The v1beta1 shape is written as v1beta1: the sandbox's Kueue serves that version and converts it
    (its conversion webhook: spec.cohort <-> spec.cohortName), which is what import reads back."""
    api = lab.cp.api_client()
    dynamic = DynamicClient(api)
    queue = next(d for d in documents("v1beta1") if d["kind"] == "ClusterQueue")
    assert queue["apiVersion"] == KUEUE_V1BETA1 and queue["spec"]["cohort"] == "ml"
    old = dynamic.resources.get(api_version=KUEUE_V1BETA1, kind="ClusterQueue")
    try:
        dynamic.server_side_apply(old, body={**queue, "metadata": {"name": "v1beta1-probe"}}, field_manager="kubectl")
        assert old.get(name="v1beta1-probe").to_dict()["spec"]["cohort"] == "ml"
        new = dynamic.resources.get(api_version=KUEUE_API, kind="ClusterQueue").get(name="v1beta1-probe").to_dict()
        assert new["spec"]["cohortName"] == "ml" and "cohort" not in new["spec"]
    finally:
        old.delete(name="v1beta1-probe")
