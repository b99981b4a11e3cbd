"""A fleet (issue #43) compiles into Kueue's MultiKueue wiring on its manager and least-privilege roles on
its workers; the tenant's own people only view on a worker; clusters outside the fleet are untouched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.compile import compile
from gpugov.compile.fleet import DISPATCH_ROLE, MULTIKUEUE_CONTROLLER, WATCH_ROLE
from gpugov.declarations.model import Model
from gpugov.kube.kinds import APPLY_ORDER
from gpugov.kube.objects import object_key
from tests.helpers.repos import EXAMPLES, overlay_repo, write

FLEET = EXAMPLES / "positive" / "fleet"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Model:
    result = validate_repo(overlay_repo(tmp_path_factory.mktemp("fleet"), FLEET))
    assert result.findings == [] and result.model is not None
    return result.model


def of_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {(o["metadata"].get("namespace", "") + "/" + o["metadata"]["name"]).lstrip("/"): o
            for o in objects if o["kind"] == kind}


def test_the_manager_holds_the_multikueue_wiring_and_the_fleet_quota(model: Model) -> None:
    hub = compile(model, cluster="hub")
    clusters = of_kind(hub, "MultiKueueCluster")
    assert {name: o["spec"]["clusterSource"]["kubeConfig"] for name, o in clusters.items()} == {
        "lab": {"locationType": "Secret", "location": "lab-kubeconfig"},
        "lab2": {"locationType": "Secret", "location": "lab2-kubeconfig"},
    }
    assert of_kind(hub, "MultiKueueConfig")["training"]["spec"] == {"clusters": ["lab", "lab2"]}
    check = of_kind(hub, "AdmissionCheck")["gpugov-fleet-training"]["spec"]
    assert check == {"controllerName": MULTIKUEUE_CONTROLLER,
                     "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "training"}}
    queue = of_kind(hub, "ClusterQueue")["alpha"]["spec"]
    assert queue["admissionChecksStrategy"] == {"admissionChecks": [{"name": "gpugov-fleet-training"}]}
    assert "cohortName" not in queue  # nothing to borrow on a cluster that runs nothing
    [group] = queue["resourceGroups"]
    assert group["flavors"] == [{"name": "gpugov-fleet-training", "resources": [
        {"name": "nvidia.com/gpu", "nominalQuota": "16"}, {"name": "cpu", "nominalQuota": "64"},
        {"name": "memory", "nominalQuota": "512Gi"}]}]
    assert of_kind(hub, "ResourceFlavor")["gpugov-fleet-training"]["spec"] == {}  # no nodes on the manager
    # The tenant queues on the manager under the same LocalQueue names as on the workers.
    assert of_kind(hub, "LocalQueue")["alpha/main"]["spec"] == {"clusterQueue": "alpha"}
    assert "alpha" in of_kind(hub, "Namespace")
    # beta dispatches through no fleet: nothing of it on the manager.
    assert "beta" not in of_kind(hub, "ClusterQueue") and "beta" not in of_kind(hub, "Namespace")
    # No credentials: no Secret is compiled, only its name.
    assert not [o for o in hub if o["kind"] == "Secret"]


@pytest.mark.parametrize("worker", ["lab", "lab2"])
def test_a_worker_grants_the_manager_only_what_multikueue_does(model: Model, worker: str) -> None:
    objects = compile(model, cluster=worker)
    roles = of_kind(objects, "ClusterRole")
    for name in (WATCH_ROLE, DISPATCH_ROLE):
        for rule in roles[name]["rules"]:
            assert set(rule["apiGroups"]) <= {"kueue.x-k8s.io", "batch", ""}
            assert set(rule["resources"]) <= {"workloads", "workloads/status", "jobs", "pods"}
            assert "*" not in rule["verbs"] and not {"impersonate", "escalate", "bind"} & set(rule["verbs"])
    # Cluster-wide only reads (MultiKueue's watches have no namespace); writes only in the tenant's namespaces.
    assert {v for r in roles[WATCH_ROLE]["rules"] for v in r["verbs"]} == {"get", "list", "watch"}
    assert not [r for r in roles[DISPATCH_ROLE]["rules"] if "pods" in r["resources"] or "secrets" in r["resources"]]
    [watch] = of_kind(objects, "ClusterRoleBinding")[WATCH_ROLE]["subjects"]
    assert watch["kind"] == "User" and watch["name"] == "gpugov-multikueue"
    dispatch = [o for o in objects if o["kind"] == "RoleBinding" and o["roleRef"]["name"] == DISPATCH_ROLE]
    assert {o["metadata"]["namespace"] for o in dispatch} == {"alpha"}
    assert not [o for o in objects if o["kind"] == "ClusterRoleBinding" and o["roleRef"]["name"] == DISPATCH_ROLE]


def test_on_a_worker_the_tenants_people_only_view(model: Model) -> None:
    lab = compile(model, cluster="lab")
    alpha = {o["roleRef"]["name"] for o in lab if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == "alpha"}
    assert alpha == {"gpugov-tenant-viewer", DISPATCH_ROLE}
    # beta, outside the fleet, keeps its roles on lab.
    beta = {o["roleRef"]["name"] for o in lab if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == "beta"}
    assert "gpugov-tenant-member" in beta or "gpugov-tenant-owner" in beta


def test_the_worker_queues_have_the_managers_names(model: Model) -> None:
    for worker in ("lab", "lab2"):
        objects = compile(model, cluster=worker)
        assert of_kind(objects, "LocalQueue")["alpha/main"]["spec"] == {"clusterQueue": "alpha"}
        queue = of_kind(objects, "ClusterQueue")["alpha"]["spec"]
        assert "admissionChecksStrategy" not in queue  # a worker admits under its own quota
        assert not of_kind(objects, "AdmissionCheck") and not of_kind(objects, "MultiKueueCluster")


@pytest.mark.parametrize("cluster", ["hub", "lab", "lab2"])
def test_fleet_output_is_deterministic_and_ordered(model: Model, cluster: str) -> None:
    first, second = compile(model, cluster=cluster), compile(model, cluster=cluster)
    assert first == second
    ranks = [APPLY_ORDER.index(o["kind"]) for o in first]
    assert ranks == sorted(ranks)
    assert len({object_key(o) for o in first}) == len(first)


def test_a_repository_without_fleet_compiles_as_before(tmp_path: Path) -> None:
    """Removing the Fleet removes the wiring, and the workers give back the tenant's own roles."""
    root = overlay_repo(tmp_path, FLEET)
    (root / "policies" / "fleets.yaml").unlink()
    result = validate_repo(root)
    assert result.model is not None
    assert not of_kind(compile(result.model, cluster="hub"), "ClusterQueue")
    lab = compile(result.model, cluster="lab")
    assert not of_kind(lab, "ClusterRoleBinding").get(WATCH_ROLE)
    alpha = {o["roleRef"]["name"] for o in lab if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == "alpha"}
    assert "gpugov-tenant-owner" in alpha


def test_the_manager_user_is_whom_the_workers_bind(tmp_path: Path) -> None:
    root = overlay_repo(tmp_path, FLEET)
    text = (root / "policies" / "fleets.yaml").read_text()
    write(root, "policies/fleets.yaml", text.replace("  manager: hub\n",
                                                     "  manager: hub\n  managerUser: system:serviceaccount:kueue:mk\n"))
    result = validate_repo(root)
    assert result.findings == [] and result.model is not None
    lab = compile(result.model, cluster="lab2")
    subjects = [s["name"] for o in lab if o["kind"] in ("RoleBinding", "ClusterRoleBinding")
                and o["roleRef"]["name"] in (WATCH_ROLE, DISPATCH_ROLE) for s in o["subjects"]]
    assert subjects and set(subjects) == {"system:serviceaccount:kueue:mk"}


def test_the_fleet_objects_conform_to_kueues_crds(model: Model) -> None:
    """Kueue v0.17.0's own CRD schemas and CEL rules (the sandbox's), as test_crd_conformance does."""
    from tests.helpers.crd_conformance import CrdSet, Stats, crd_dirs, validate_object

    crds = CrdSet.load(crd_dirs())
    stats = Stats()
    checked: set[str] = set()
    errors: list[str] = []
    for cluster in ("hub", "lab", "lab2"):
        for obj in compile(model, cluster=cluster):
            if obj["kind"] in ("MultiKueueCluster", "MultiKueueConfig", "AdmissionCheck", "ClusterQueue",
                               "ResourceFlavor", "LocalQueue"):
                assert crds.covers(obj), obj["kind"]
                errors += validate_object(obj, crds, stats=stats)
                checked.add(obj["kind"])
    assert errors == [], "\n".join(errors)
    assert stats.unsupported == []
    assert {"MultiKueueCluster", "MultiKueueConfig", "AdmissionCheck", "ClusterQueue"} <= checked


def test_a_worker_trusts_the_managers_user_as_it_trusts_kueue(model: Model) -> None:
    """MultiKueue creates the Jobs with their prebuilt Workload's label on a worker, as Kueue does on one
    cluster: the worker's admission policies leave the manager's user alone; nowhere else."""
    def trusting(cluster: str) -> bool:
        return any("gpugov-multikueue" in c["expression"] for o in compile(model, cluster=cluster)
                   if o["kind"] == "ValidatingAdmissionPolicy" for c in o["spec"].get("matchConditions", []))

    assert trusting("lab") and trusting("lab2")
    assert not trusting("hub")


def test_why_names_the_worker_or_what_the_fleet_waits_for() -> None:
    from gpugov.queueing.reasons import Why, alike, explain
    from gpugov.queueing.workload import from_object

    def workload(status: dict[str, Any]) -> Any:
        return from_object({"metadata": {"namespace": "alpha", "name": "job-a", "uid": "u"},
                            "spec": {"queueName": "main", "podSets": [{"name": "main", "count": 1, "template": {
                                "spec": {"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "2"}}}]}}}]},
                            "status": status})

    now = "2026-01-01T00:00:00Z"
    admission = {"clusterQueue": "alpha", "podSetAssignments": [
        {"name": "main", "count": 1, "flavors": {"nvidia.com/gpu": "gpugov-fleet-training"},
         "resourceUsage": {"nvidia.com/gpu": "2"}}]}
    conditions = [{"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": now}
                  for t in ("QuotaReserved", "Admitted")]
    running = explain(workload({"admission": admission, "conditions": conditions, "clusterName": "lab2"}), None)
    assert running.why is Why.ADMITTED and "running on worker lab2" in str(running.text)
    pending = explain(workload({"admission": admission, "conditions": conditions[:1], "admissionChecks": [
        {"name": "gpugov-fleet-training", "state": "Pending", "message": "no worker has room", "lastTransitionTime": now}]}),
        None)
    assert pending.why is Why.RESERVED and "gpugov-fleet-training: no worker has room" in str(pending.text)
    # queue explains workloads alike once (reasons.alike): two on different workers are not alike
    on_lab = workload({"admission": admission, "conditions": conditions, "clusterName": "lab"})
    on_lab2 = workload({"admission": admission, "conditions": conditions, "clusterName": "lab2"})
    assert alike(on_lab) != alike(on_lab2) and alike(on_lab) == alike(workload({
        "admission": admission, "conditions": conditions, "clusterName": "lab"}))


def test_the_managers_admission_policies_hold_the_workers_accelerators(model: Model) -> None:
    """The manager has no pool: without its workers' accelerators its policies would let a job that asks
    for a GPU go around the fleet's queue there (seen on the fleet sandbox: apply's probes not refused)."""
    def accelerators(cluster: str) -> dict[str, str]:
        return {name: next(v["expression"] for v in policy["spec"]["variables"] if v["name"] == "accelerators")
                for name, policy in of_kind(compile(model, cluster=cluster), "ValidatingAdmissionPolicy").items()
                if any(v["name"] == "accelerators" for v in policy["spec"].get("variables", []))}

    hub, lab = accelerators("hub"), accelerators("lab")
    assert "gpugov-accelerators-need-a-queue" in hub, sorted(hub)
    assert all("nvidia.com/gpu" in expression for expression in hub.values()), hub
    assert hub == {name: lab[name] for name in hub}, (hub, lab)
