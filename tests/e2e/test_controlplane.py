"""The sandbox control plane is a real apiserver that enforces Kueue's CRD rules."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from gpugov.sandbox import ControlPlane, create_nodes
from gpugov.sandbox.crds import CRDError, apply_crds, crd_dirs, kueue_crd_dir, wait_established
from gpugov.sandbox.tools import repo_root

FIELD_MANAGER = "gpugov"
KUEUE = "kueue.x-k8s.io"
KUEUE_V1BETA2 = f"{KUEUE}/v1beta2"


def _k8s_version_from_go_mod() -> str:
    """The Kubernetes release tools/k8s pins (what the binary must report)."""
    go_mod = (repo_root() / "tools" / "k8s" / "go.mod").read_text()
    match = re.search(r"^\s*(?:require\s+)?k8s\.io/kubernetes (v\S+)", go_mod, re.MULTILINE)
    assert match, "tools/k8s/go.mod does not require k8s.io/kubernetes"
    return match.group(1)


def _kueue_crd(plural: str) -> dict[str, Any]:
    return dict(yaml.safe_load((kueue_crd_dir() / f"{KUEUE}_{plural}.yaml").read_text()))


def _borrowing_limit_cel_message() -> str:
    """The CRD's own message for 'borrowingLimit without cohort' (v1beta2 spec rule)."""
    crd = _kueue_crd("clusterqueues")
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta2")
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    rules = [r for r in spec.get("x-kubernetes-validations", []) if "borrowingLimit" in r["rule"]]
    assert len(rules) == 1, rules
    return str(rules[0]["message"])


def _resource_flavor(name: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_V1BETA2,
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
    }


def _cluster_queue(name: str, flavor: str, cohort: str | None, borrowing_limit: str | None) -> dict[str, Any]:
    gpu: dict[str, Any] = {"name": "nvidia.com/gpu", "nominalQuota": "8"}
    if borrowing_limit is not None:
        gpu["borrowingLimit"] = borrowing_limit
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "nvidia.com/gpu"],
                "flavors": [{"name": flavor, "resources": [{"name": "cpu", "nominalQuota": "64"}, gpu]}],
            }
        ],
    }
    if cohort is not None:
        spec["cohortName"] = cohort
    return {"apiVersion": KUEUE_V1BETA2, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


@pytest.fixture
def cleanup(dynamic: DynamicClient) -> Iterator[list[dict[str, Any]]]:
    """Objects appended here are deleted after the test (cluster-scoped leftovers)."""
    objects: list[dict[str, Any]] = []
    yield objects
    for obj in reversed(objects):
        api = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        try:
            api.delete(name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"))
        except ApiException as exc:
            if exc.status != 404:
                raise


def _as_dict(api_client: client.ApiClient, obj: object) -> Any:
    """A typed client model as its JSON dict (camelCase keys, as in manifests)."""
    return api_client.sanitize_for_serialization(obj)


def _apply(dynamic: DynamicClient, obj: dict[str, Any]) -> Any:
    api = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    return api.server_side_apply(body=obj, field_manager=FIELD_MANAGER)


def test_server_ready_and_reports_stamped_version(controlplane: ControlPlane) -> None:
    assert controlplane.get("/readyz") == b"ok"
    version = controlplane.version()
    expected = _k8s_version_from_go_mod()
    assert version["gitVersion"] == expected
    assert (version["major"], version["minor"]) == tuple(expected.lstrip("v").split(".")[:2])


@pytest.mark.parametrize(
    ("group", "kind"),
    [
        (KUEUE, "ClusterQueue"),
        (KUEUE, "ResourceFlavor"),
        (KUEUE, "LocalQueue"),
        (KUEUE, "Cohort"),
        (KUEUE, "WorkloadPriorityClass"),
        (KUEUE, "Topology"),
        ("scheduling.volcano.sh", "Queue"),
    ],
)
def test_crd_established(api_client: client.ApiClient, group: str, kind: str) -> None:
    crds = _as_dict(api_client, client.ApiextensionsV1Api(api_client).list_custom_resource_definition())["items"]
    crd = next((c for c in crds if c["spec"]["group"] == group and c["spec"]["names"]["kind"] == kind), None)
    assert crd is not None, f"no CRD for {kind}.{group}"
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions.get("Established") == "True", conditions
    assert conditions.get("NamesAccepted") == "True", conditions
    if group == KUEUE:
        served = {v["name"] for v in crd["spec"]["versions"] if v["served"]}
        assert "v1beta2" in served


def test_server_side_apply_cluster_queue_and_flavor(
    dynamic: DynamicClient, cleanup: list[dict[str, Any]], unique: str
) -> None:
    flavor = _resource_flavor(f"h100-{unique}")
    queue = _cluster_queue(f"team-a-{unique}", flavor["metadata"]["name"], cohort="org", borrowing_limit="4")
    cleanup += [flavor, queue]

    _apply(dynamic, flavor)
    stored = _apply(dynamic, queue).to_dict()
    # Re-applying the same intent is a no-op (idempotent GitOps sync).
    again = _apply(dynamic, queue).to_dict()

    assert stored["spec"]["cohortName"] == "org"
    gpu = stored["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]
    assert gpu == {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "4"}
    assert again["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    managers = {m["manager"] for m in stored["metadata"]["managedFields"]}
    assert managers == {FIELD_MANAGER}


def test_rejects_borrowing_limit_without_cohort_with_crd_cel_message(
    dynamic: DynamicClient, cleanup: list[dict[str, Any]], unique: str
) -> None:
    message = _borrowing_limit_cel_message()
    queue = _cluster_queue(f"no-cohort-{unique}", f"h100-{unique}", cohort=None, borrowing_limit="4")
    cleanup.append(queue)  # in case the server wrongly accepts it

    with pytest.raises(ApiException) as info:
        _apply(dynamic, queue)

    assert info.value.status == 422, info.value.body
    status = json.loads(info.value.body or "{}")
    assert status["reason"] == "Invalid"
    assert message in status["message"]
    assert any(message in cause.get("message", "") for cause in status["details"]["causes"])


def test_local_queue_in_namespace(dynamic: DynamicClient, namespace: str) -> None:
    local_queue = {
        "apiVersion": KUEUE_V1BETA2,
        "kind": "LocalQueue",
        "metadata": {"name": "default", "namespace": namespace},
        "spec": {"clusterQueue": "team-a"},
    }
    stored = _apply(dynamic, local_queue)
    assert stored.metadata.namespace == namespace
    assert stored.spec.clusterQueue == "team-a"


def test_create_gpu_nodes(api_client: client.ApiClient, unique: str) -> None:
    h100: dict[str, Any] = {
        "metadata": {
            "name": f"gpu-h100-{unique}",
            "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"},
        },
        "status": {
            "capacity": {"cpu": "112", "memory": "2Ti", "pods": "110", "nvidia.com/gpu": "8"},
            "allocatable": {"cpu": "110", "memory": "1900Gi", "pods": "110", "nvidia.com/gpu": "8"},
        },
    }
    a100_mig: dict[str, Any] = {
        "metadata": {
            "name": f"gpu-a100-mig-{unique}",
            "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.count": "8"},
        },
        "status": {
            "capacity": {"cpu": "64", "memory": "1Ti", "nvidia.com/gpu": "4", "nvidia.com/mig-1g.10gb": "28"},
            "allocatable": {"cpu": "64", "memory": "1Ti", "nvidia.com/gpu": "4", "nvidia.com/mig-1g.10gb": "28"},
        },
    }
    core = client.CoreV1Api(api_client)
    try:
        create_nodes(api_client, [h100, a100_mig])
        # Second call updates in place (sandbox up twice, changed inventory).
        create_nodes(api_client, [h100])

        stored = _as_dict(api_client, core.read_node(a100_mig["metadata"]["name"]))
        assert stored["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
        assert stored["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] == "28"
        assert stored["status"]["capacity"]["nvidia.com/gpu"] == "4"
        ready = {c["type"]: c["status"] for c in stored["status"]["conditions"]}
        assert ready == {"Ready": "True"}

        selector = "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"
        gpu_nodes = _as_dict(api_client, core.list_node(label_selector=selector))["items"]
        assert f"gpu-h100-{unique}" in {n["metadata"]["name"] for n in gpu_nodes}
    finally:
        for node in (h100, a100_mig):
            core.delete_node(node["metadata"]["name"])


def test_a_crd_waited_for_is_in_discovery_in_every_version_it_serves(
    api_client: client.ApiClient, dynamic: DynamicClient, unique: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """wait_established returns only once discovery lists the kind, which the API server adds a moment
    after the CRD is Established: Kueue, started on its return, exits on a kind its RESTMapper cannot
    find (CI: 'no matches for kind "Workload" in version "kueue.x-k8s.io/v1beta2"'). That moment is too
    short to catch at will here, so discovery's first answers for the probe's group are the 404 a lagging
    server gives; every other answer is the real server's."""
    group = f"probe-{unique}.gpugov.io"
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema},
                              {"name": "v1beta1", "served": True, "storage": False, "schema": schema},
                              {"name": "v1alpha1", "served": False, "storage": False, "schema": schema}]},
    }
    real = client.CustomObjectsApi.get_api_resources
    lagging = {"answers": 3, "asked": 0}

    def discovery(self: client.CustomObjectsApi, asked_group: str, version: str, **kwargs: Any) -> Any:
        if asked_group == group:
            lagging["asked"] += 1
            if lagging["answers"] > 0:
                lagging["answers"] -= 1
                raise ApiException(status=404, reason="Not Found")
        return real(self, asked_group, version, **kwargs)

    extensions = client.ApiextensionsV1Api(api_client)
    try:
        names = apply_crds(dynamic, [crd])
        with monkeypatch.context() as patch:
            patch.setattr(client.CustomObjectsApi, "get_api_resources", discovery)
            lagging["answers"] = 10**6  # discovery never lists it: refused by name within the timeout
            with pytest.raises(CRDError, match=f"widgets.{group}"):
                wait_established(api_client, names, timeout=1.0)
            lagging.update(answers=3, asked=0)
            wait_established(api_client, names)
        assert lagging["answers"] == 0 and lagging["asked"] >= 5  # past the lag, then both served versions
        custom = client.CustomObjectsApi(api_client)
        for version in ("v1", "v1beta1"):  # the real server, read once: it must be there already
            assert "widgets" in {r.name for r in custom.get_api_resources(group, version).resources}
        with pytest.raises(ApiException) as refused:  # a version not served is not waited for
            custom.get_api_resources(group, "v1alpha1")
        assert refused.value.status == 404
    finally:
        extensions.delete_custom_resource_definition(crd["metadata"]["name"])


def test_the_crds_come_from_the_go_modules_not_the_repo() -> None:
    """Kueue's and Volcano's own CRDs, kept by tools/build beside the binaries the sandbox runs: never
    copies in the repository, nothing from a folder beside the checkout."""
    root = repo_root()
    directories = crd_dirs()
    assert len(directories) == 2
    for directory in directories:
        resolved = Path(directory).resolve()
        assert root not in resolved.parents and root.parent / "shared" not in resolved.parents
        assert sorted(resolved.glob("*.yaml")), directory


def test_the_queue_access_policies_of_1200_tenants_are_accepted_and_enforced(
    controlplane_binary_path: Path, tmp_path: Path
) -> None:
    """Past the API server's 100,000-code-point limit on one CEL expression, compile splits the
    queue-access maps over several policies: the server accepts every one, and a Job (sent by the
    cluster's admin, whom gpugov trusts no more than a tenant) is admitted on its own queue and
    refused on another's or in a namespace no tenant declares. On an API server of its own: the
    session's holds the example organisation's policies (its Volcano cluster's would refuse a Kueue job)."""
    with ControlPlane(binary=controlplane_binary_path) as cp:
        _queue_access_at_scale(cp.api_client(), cp.dynamic_client(), tmp_path)


def _queue_access_at_scale(api_client: client.ApiClient, dynamic: DynamicClient, tmp_path: Path) -> None:
    from bench.synthetic import generate
    from gpugov.app.pipeline import validate_repo
    from gpugov.cluster.impersonate import impersonate
    from gpugov.compile import compile

    model = validate_repo(generate(tmp_path / "org", tenants=1200, pools=4, nodes=40, departments=10)).model
    assert model is not None
    objects = [o for o in compile(model, backend="kueue")
               if o["apiVersion"].startswith("admissionregistration.k8s.io/")
               and o["metadata"]["name"].startswith("gpugov-queue-access")]
    shards = sorted(o["metadata"]["name"] for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding")
    assert len(shards) >= 3, shards  # gpugov-queue-access and at least two shards
    for obj in objects:
        _apply(dynamic, obj)  # the server would refuse an expression over its limit (422)
    last = next(o for o in objects if o["metadata"]["name"] == shards[-1]
                and o["kind"] == "ValidatingAdmissionPolicyBinding")
    own = last["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]["values"][-1]
    queue = next(q for t in model.tenants.values() for q in t.queues if q.namespace == own).name
    core, batch = client.CoreV1Api(api_client), client.BatchV1Api(api_client)
    for ns in (own, "nobody-declares-this"):
        core.create_namespace({"metadata": {"name": ns}})
    # the roles gpugov binds to the owner of the last shard's tenant, who then tries another shard's queue
    owner_tenant = next(t for t in model.tenants.values() if own in t.namespaces)
    roles = [o for o in compile(model, backend="kueue")
             if (o["kind"] == "ClusterRole" and o["metadata"]["name"].startswith("gpugov-tenant-"))
             or (o["kind"] == "RoleBinding" and o["metadata"].get("namespace") == own)]
    assert any(o["kind"] == "RoleBinding" for o in roles)
    for obj in roles:
        _apply(dynamic, obj)
    first_shard = next(o for o in objects if o["metadata"]["name"] == shards[1]
                       and o["kind"] == "ValidatingAdmissionPolicyBinding")
    other_ns = first_shard["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]["values"][0]
    others_queue = next(q for t in model.tenants.values() for q in t.queues if q.namespace == other_ns).name

    def dry_run(namespace: str, queue_name: str, as_tenant: bool = False) -> str:
        body = {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "j", "labels": {"kueue.x-k8s.io/queue-name": queue_name}},
                "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
                    {"name": "main", "image": "pause", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}
        sender = client.BatchV1Api(impersonate(client.ApiClient(api_client.configuration),
                                               owner_tenant.owners.users[0], owner_tenant.owners.groups)) \
            if as_tenant else batch
        try:
            sender.create_namespaced_job(namespace, body, dry_run="All")
        except ApiException as exc:
            return str(json.loads(exc.body).get("message", exc.body))
        return ""

    def in_force() -> bool:  # the first policy and the last shard: the server takes up each in its own time
        return ("gpugov-queue-access" in dry_run("nobody-declares-this", queue)
                and shards[-1] in dry_run(own, "someone-elses"))

    deadline = time.monotonic() + 90  # the server's policy informer picks the new policies up
    while not in_force() and time.monotonic() < deadline:
        time.sleep(0.5)
    refused = dry_run("nobody-declares-this", queue)
    assert "gpugov-queue-access" in refused and "no tenant declares a queue" in refused, refused
    assert dry_run(own, queue) == ""
    foreign = dry_run(own, "someone-elses")
    assert shards[-1] in foreign and f"queue {own}/someone-elses is not declared" in foreign, foreign
    # as the tenant's owner: its own queue, never another shard's tenant's queue, nor that tenant's namespace
    assert dry_run(own, queue, as_tenant=True) == ""
    crossed = dry_run(own, others_queue, as_tenant=True)
    assert shards[-1] in crossed and f"queue {own}/{others_queue} is not declared" in crossed, crossed
    assert "forbidden" in dry_run(other_ns, others_queue, as_tenant=True)
