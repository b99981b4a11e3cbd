"""The Pulumi program in a mocked runtime: one resource per compiled object, in components.

No CLI and no cluster: `pulumi.runtime.set_mocks` with a monitor that records each
RegisterResource request (type, name, parent, dependencies, provider, retainOnDelete and
the inputs), which is exactly what the engine would receive.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pulumi = pytest.importorskip("pulumi", reason="the deploy extra is not installed: pip install -e '.[deploy]'")
pytest.importorskip("pulumi_kubernetes", reason="the deploy extra is not installed: pip install -e '.[deploy]'")

from pulumi.runtime import rpc  # noqa: E402
from pulumi.runtime.mocks import MockMonitor  # noqa: E402
from pulumi.runtime.settings import ROOT  # noqa: E402

from gpugov.app.pipeline import validate_repo  # noqa: E402
from gpugov.compile import compile, object_key  # noqa: E402
from gpugov.deploy import load_objects, run  # noqa: E402
from gpugov.deploy.layout import owner, references, resource_name  # noqa: E402
from tests.helpers.fake_kube import FakeKube, Reply, fake_kube  # noqa: E402
from tests.helpers.repos import REPO  # noqa: E402
from tests.unit.test_cluster_identity_unit import CONFIG_MAPS, record_list  # noqa: E402

PROVIDER_TYPE = "pulumi:providers:kubernetes"
COMPONENTS = {
    "organisation": "gpugov:index:Organisation",
    "operations": "gpugov:index:Operations",
    "pool": "gpugov:index:GpuPool",
    "tenant": "gpugov:index:Tenant",
}
CASES = [("east", "kueue"), ("west", "volcano"), ("east", "volcano")]


@dataclass
class Registered:
    urn: str
    type: str
    name: str
    parent: str
    custom: bool
    provider: str
    dependencies: list[str]
    retain_on_delete: bool
    inputs: dict[str, Any]


@dataclass
class Recording:
    resources: dict[str, Registered] = field(default_factory=dict)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def of_type(self, prefix: str) -> list[Registered]:
        return [r for r in self.resources.values() if r.type.startswith(prefix)]

    @property
    def kubernetes(self) -> list[Registered]:
        return [r for r in self.resources.values() if r.custom and r.type != PROVIDER_TYPE]


class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        return f"{args.name}-id", args.inputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict:
        return {}


class RecordingMonitor(MockMonitor):
    def __init__(self, recording: Recording) -> None:
        super().__init__(Mocks())
        self.recording = recording

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.recording.resources[response.urn] = Registered(
                urn=response.urn,
                type=request.type,
                name=request.name,
                parent=request.parent,
                custom=request.custom,
                provider=request.provider,
                dependencies=list(request.dependencies),
                retain_on_delete=request.retainOnDelete,
                inputs=rpc.deserialize_properties(request.object),
            )
        return response

    def RegisterResourceOutputs(self, request):
        self.recording.outputs[request.urn] = rpc.deserialize_properties(request.outputs)
        return super().RegisterResourceOutputs(request)


# The cluster every stack's kubeconfig reaches: the fake API endpoint, which answers as an empty API
# server that already carries the deployed cluster's identity record (see `deploy`), so the
# program's wrong-cluster guard (gpugov.deploy.guard) passes without a write.
FAKE: FakeKube | None = None
KUBECONFIG = ""


@pytest.fixture(scope="module", autouse=True)
def fake_cluster(tmp_path_factory: pytest.TempPathFactory):
    global FAKE, KUBECONFIG
    with fake_kube() as fake:
        FAKE, KUBECONFIG = fake, str(fake.kubeconfig(tmp_path_factory.mktemp("kube")))
        yield fake
    FAKE, KUBECONFIG = None, ""


def recorded_as(cluster: str | None) -> None:
    """The fake cluster carries the identity record of `cluster` (None: no record)."""
    assert FAKE is not None
    FAKE.answer = lambda method, path: (record_list(cluster) if cluster and method == "GET"
                                        and path == CONFIG_MAPS.collection_path() else None)


def deploy(config: dict[str, str], root: Path = REPO, secret_keys: list[str] | None = None,
           recorded: str | None = "", preview: bool = False, recording: Recording | None = None) -> Recording:
    """Run the program (gpugov.deploy.run) under mocks; return what it registered (into `recording`,
    when given, so a test still sees it when the program raises). The fake cluster carries the
    record of `recorded` ("": the stack's own cluster, None: none)."""
    recorded_as(config.get("gpugov:cluster") if recorded == "" else recorded)
    recording = Recording() if recording is None else recording
    ROOT.set(None)  # a fresh stack resource for this run's monitor
    pulumi.runtime.set_mocks(
        Mocks(), project="gpugov-org", stack="test", preview=preview, monitor=RecordingMonitor(recording)
    )
    pulumi.runtime.set_all_config(config, secret_keys or [])

    @pulumi.runtime.test
    def program() -> None:
        run(root)

    program()
    return recording


def stack_config(cluster: str, backend: str) -> dict[str, str]:
    return {"gpugov:cluster": cluster, "gpugov:backend": backend, "gpugov:kubeconfig": KUBECONFIG}


@pytest.fixture(scope="module")
def model():
    result = validate_repo(REPO)
    assert result.model is not None and not result.errors
    return result.model


@pytest.fixture(scope="module", params=CASES, ids=[f"{c}-{b}" for c, b in CASES])
def case(request, model):
    cluster, backend = request.param
    return cluster, compile(model, backend=backend, cluster=cluster), deploy(stack_config(cluster, backend))


def _object_of(resource: Registered) -> dict[str, Any]:
    """The object a resource applies: its inputs, which the provider sends as the object."""
    return dict(resource.inputs)


def _key(resource: Registered) -> tuple[str, str, str, str]:
    return object_key(_object_of(resource))


def test_one_resource_per_compiled_object(case) -> None:
    _, objects, recording = case
    resources = recording.kubernetes
    assert len(resources) == len(objects)
    by_key = {_key(r): r for r in resources}
    assert len(by_key) == len(resources), "two resources for one object"
    for obj in objects:
        resource = by_key[object_key(obj)]
        assert _object_of(resource) == obj, f"{resource.type} {resource.name} differs from compile's object"
        assert resource.name == resource_name(obj)


def test_types_nodes_are_patches_and_custom_kinds_carry_top_level_fields(case) -> None:
    _, objects, recording = case
    types = {_key(r): r.type for r in recording.kubernetes}
    for obj in objects:
        api, kind = obj["apiVersion"], obj["kind"]
        expected = {
            ("v1", "Node"): "kubernetes:core/v1:NodePatch",
            ("v1", "Namespace"): "kubernetes:core/v1:Namespace",
            ("v1", "ConfigMap"): "kubernetes:core/v1:ConfigMap",
            ("v1", "ResourceQuota"): "kubernetes:core/v1:ResourceQuota",
            ("v1", "ServiceAccount"): "kubernetes:core/v1:ServiceAccount",
        }.get((api, kind), f"kubernetes:{api}:{kind}")
        assert types[object_key(obj)] == expected
    assert not recording.of_type("kubernetes:core/v1:Node:"), "gpugov must never own a Node"
    for resource in recording.kubernetes:
        if resource.type.endswith((":WorkloadPriorityClass", ":PriorityClass")):
            assert isinstance(resource.inputs["value"], int | float) and resource.inputs["description"]


def test_components_and_parents(case) -> None:
    cluster, objects, recording = case
    (organisation,) = recording.of_type(COMPONENTS["organisation"])
    assert organisation.name == cluster
    assert organisation.parent.endswith("::pulumi:pulumi:Stack::gpugov-org-test")
    components = {r.urn: r for r in recording.resources.values() if not r.custom}
    for component in components.values():
        if component is not organisation:
            assert component.parent == organisation.urn, component.urn
    for resource in recording.kubernetes:
        kind, name = owner(_object_of(resource))
        parent = components[resource.parent]
        assert parent.type == COMPONENTS[kind]
        if kind in ("pool", "tenant"):
            assert parent.name == name
        elif kind == "operations":
            assert parent.name == cluster
    tenants = {r.name for r in recording.of_type(COMPONENTS["tenant"])}
    labelled = {
        o["metadata"]["labels"]["gpugov.io/tenant"] for o in objects if "gpugov.io/tenant" in o["metadata"]["labels"]
    }
    assert tenants == labelled
    for component in components.values():
        assert component.urn in recording.outputs, f"{component.urn} never called register_outputs"
    assert {r.name for r in recording.of_type(COMPONENTS["pool"])} == {
        o["metadata"]["labels"]["gpugov.io/pool"] for o in objects if "gpugov.io/pool" in o["metadata"]["labels"]
    }


def test_namespaces_are_retained_on_delete(case) -> None:
    _, _, recording = case
    for resource in recording.kubernetes:
        assert resource.retain_on_delete == (resource.type == "kubernetes:core/v1:Namespace"), resource.urn


def test_explicit_provider_with_server_side_apply(case) -> None:
    _, _, recording = case
    (provider,) = recording.of_type(PROVIDER_TYPE)
    assert str(provider.inputs["enableServerSideApply"]).lower() == "true"
    assert provider.inputs["kubeconfig"] == KUBECONFIG
    for resource in recording.kubernetes:
        assert resource.provider.startswith(provider.urn + "::"), resource.urn


def test_depends_on_what_each_object_names(case) -> None:
    _, objects, recording = case
    by_key = {_key(r): r for r in recording.kubernetes}
    mig = next((object_key(o) for o in objects if o["metadata"]["labels"].get("gpugov.io/mig-config")), None)
    for obj in objects:
        resource = by_key[object_key(obj)]
        wanted = {by_key[k].urn for k in references(obj, mig) if k in by_key}
        assert wanted <= set(resource.dependencies), f"{resource.urn} misses {wanted - set(resource.dependencies)}"
        if obj["metadata"].get("namespace") and ("v1", "Namespace", "", obj["metadata"]["namespace"]) in by_key:
            assert by_key[("v1", "Namespace", "", obj["metadata"]["namespace"])].urn in resource.dependencies


def test_kueue_queues_wait_for_cohorts_flavors_and_cluster_queues(model) -> None:
    recording = deploy(stack_config("east", "kueue"))
    by_key = {_key(r): r for r in recording.kubernetes}
    api = "kueue.x-k8s.io/v1beta2"
    nlp = by_key[(api, "ClusterQueue", "", "nlp")]
    assert by_key[(api, "Cohort", "", "research")].urn in nlp.dependencies
    assert by_key[(api, "ResourceFlavor", "", "h100")].urn in nlp.dependencies
    assert by_key[(api, "Cohort", "", "research")].urn in by_key[(api, "Cohort", "", "research-vision")].dependencies
    training = by_key[(api, "LocalQueue", "nlp-train", "training")]
    assert {nlp.urn, by_key[("v1", "Namespace", "", "nlp-train")].urn} <= set(training.dependencies)
    assert by_key[(api, "Topology", "", "h100")].urn in by_key[(api, "ResourceFlavor", "", "h100")].dependencies
    mig = by_key[("v1", "ConfigMap", "gpu-operator", "gpugov-mig-parted-config")]
    assert mig.urn in by_key[("v1", "Node", "", "a100-01")].dependencies
    rbac = "rbac.authorization.k8s.io/v1"
    drift_sa = by_key[("v1", "ServiceAccount", "gpugov-system", "gpugov-drift")].urn
    binding = by_key[(rbac, "ClusterRoleBinding", "", "gpugov-drift-reader")]
    assert {by_key[(rbac, "ClusterRole", "", "gpugov-drift-reader")].urn, drift_sa} <= set(binding.dependencies)
    assert drift_sa in by_key[("batch/v1", "CronJob", "gpugov-system", "gpugov-drift")].dependencies
    agent_sa = by_key[("v1", "ServiceAccount", "gpugov-system", "gpugov-agent")].urn
    assert agent_sa in by_key[("apps/v1", "DaemonSet", "gpugov-system", "gpugov-agent")].dependencies


def test_volcano_tenant_queues_wait_for_their_parent(model) -> None:
    recording = deploy(stack_config("west", "volcano"))
    by_key = {_key(r): r for r in recording.kubernetes}
    api = "scheduling.volcano.sh/v1beta1"
    assert by_key[(api, "Queue", "", "research")].urn in by_key[(api, "Queue", "", "llm-pretrain")].dependencies


def test_secret_kubeconfig_and_context(model) -> None:
    text = Path(KUBECONFIG).read_text()
    config = {
        "gpugov:cluster": "east",
        "kubernetes:kubeconfig": text,
        "gpugov:context": "fake",
    }
    recording = deploy(config, secret_keys=["kubernetes:kubeconfig"])
    (provider,) = recording.of_type(PROVIDER_TYPE)
    assert provider.inputs["context"] == "fake"
    kubeconfig = provider.inputs["kubeconfig"]
    assert rpc.is_rpc_secret(kubeconfig), "the kubeconfig must stay a secret in the provider's inputs"
    assert rpc.unwrap_rpc_secret(kubeconfig) == text
    # No gpugov:backend: the cluster's declared backend (east: kueue).
    assert recording.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")


def test_no_credentials_is_a_clear_error(model) -> None:
    with pytest.raises(pulumi.RunError, match="no cluster credentials"):
        deploy({"gpugov:cluster": "east"})


def _broken_repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for folder in ("hardware", "policies", "tenants"):
        shutil.copytree(REPO / folder, root / folder)
    nlp = root / "tenants" / "nlp.yaml"
    nlp.write_text(nlp.read_text().replace("department: research\n", "department: no-such-department\n"))
    return root


def test_invalid_declarations_raise_run_error_with_findings(tmp_path: Path) -> None:
    root = _broken_repo(tmp_path)
    with pytest.raises(pulumi.RunError) as info:
        load_objects(root, "east")
    message = str(info.value)
    assert "nothing was deployed" in message
    assert "tenants/nlp.yaml" in message and "no-such-department" in message
    assert "Traceback" not in message
    assert info.value.__cause__ is None


def test_invalid_declarations_stop_the_program_before_any_resource(tmp_path: Path) -> None:
    recording = Recording()
    with pytest.raises(pulumi.RunError):
        recording = deploy(stack_config("east", "kueue"), root=_broken_repo(tmp_path))
    assert not recording.kubernetes


def test_unknown_cluster_and_missing_repo(tmp_path: Path) -> None:
    with pytest.raises(pulumi.RunError, match="unknown cluster 'north'"):
        load_objects(REPO, "north")
    with pytest.raises(pulumi.RunError, match="no such directory"):
        load_objects(tmp_path / "absent", "east")


# -- the wrong-cluster guard: before any resource is registered ----------------------------------

def test_a_stack_whose_kubeconfig_reaches_another_cluster_registers_nothing() -> None:
    assert FAKE is not None
    recording = Recording()
    with pytest.raises(pulumi.RunError) as info:
        deploy(stack_config("west", "volcano"), recorded="east", recording=recording)
    message = str(info.value)
    assert message.startswith(f"gpugov: refused: {FAKE.url} is cluster east, not west ")
    assert message.endswith("; nothing was deployed")
    assert not recording.resources and FAKE.writes == []  # not even the provider
    allowed = deploy(stack_config("west", "volcano"), recorded="west")  # the same program, the right cluster
    assert allowed.of_type(PROVIDER_TYPE) and allowed.kubernetes


def test_reidentify_lets_a_stack_rebuild_a_cluster_on_purpose_in_preview() -> None:
    assert FAKE is not None
    recording = deploy({**stack_config("west", "volcano"), "gpugov:reidentify": "true"}, recorded="east",
                       preview=True)
    assert recording.of_type("kubernetes:scheduling.volcano.sh/v1beta1:Queue")
    assert FAKE.writes == []  # preview only checks


def test_a_fresh_cluster_passes_preview_without_a_write() -> None:
    assert FAKE is not None
    recording = deploy(stack_config("east", "kueue"), recorded=None, preview=True)
    assert recording.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue") and FAKE.writes == []


def test_a_stack_takes_over_no_namespace_that_is_not_gpugovs() -> None:
    """As `gpugov apply` (tests/e2e/test_apply_ownership.py): a declared namespace that exists
    without gpugov's label (an operator's, another team's) stops the stack before any resource."""
    assert FAKE is not None
    recorded_as("east")
    identity_record = FAKE.answer

    def answer(method: str, path: str):
        if method == "GET" and path == "/api/v1/namespaces/nlp-train":
            return Reply.of(200, {"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": "nlp-train", "labels": {"team": "someone-else"}}})
        return identity_record(method, path)

    FAKE.answer = answer
    recording = Recording()
    try:
        with pytest.raises(pulumi.RunError) as info:
            ROOT.set(None)
            pulumi.runtime.set_mocks(Mocks(), project="gpugov-org", stack="test", preview=True,
                                     monitor=RecordingMonitor(recording))
            pulumi.runtime.set_all_config(stack_config("east", "kueue"), [])
            pulumi.runtime.test(lambda: run(REPO))()
    finally:
        recorded_as("east")
    assert "refused: refusing to take over 1 object(s)" in str(info.value) and "Namespace nlp-train" in str(info.value)
    assert not recording.resources and FAKE.writes == []


def test_an_unusable_kubeconfig_stops_the_stack(tmp_path: Path) -> None:
    with pytest.raises(pulumi.RunError, match="could not tell which cluster the stack's kubeconfig reaches: the "
                       "stack's kubeconfig cannot be used"):
        deploy({**stack_config("east", "kueue"), "gpugov:kubeconfig": "apiVersion: v1\nkind: Config\n"})
