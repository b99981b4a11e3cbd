"""`pulumi up` of the example organisation with the real CLI and Kubernetes provider.

The CLI and provider come from tools/bin (`tools/build pulumi pulumi-k8s`), driven through
the Automation API with an inline program (gpugov.deploy.run), local file state and a
passphrase secrets provider, against a living sandbox of this module's own (real garbage
collector, ResourceQuota and DaemonSet controllers, scheduler, KWOK nodes and Kueue: Pulumi's
awaits finish because the real controllers reconcile, with no stand-in anywhere); its own,
because objects another test applied with field manager gpugov would make Pulumi's
server-side apply conflict.

The tests build on each other, in file order: up, a no-op up, a quota raise in preview, a
removed tenant, destroy. Then the committed project files (Pulumi.yaml, __main__.py,
Pulumi.east.yaml) are previewed as a user would run them.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

from gpugov.app.pipeline import validate_repo
from gpugov.compile import compile, object_key
from gpugov.plan import object_changes
from gpugov.sandbox import ControlPlane
from gpugov.sandbox.cluster import Sandbox as LivingSandbox
from gpugov.sandbox.nodes import create_gpu_operator_footprint, create_nodes
from gpugov.sandbox.simulated import simulated_nodes
from tests.e2e.conftest import REQUIRE_ENV
from tests.helpers.repos import REPO

pytestmark = pytest.mark.e2e

TOOLS = REPO / "tools"
BINARIES = ("pulumi", "pulumi-resource-kubernetes")
PROJECT, STACK, CLUSTER, BACKEND = "gpugov-org", "east", "east", "kueue"
PASSPHRASE = "gpugov-e2e-not-a-secret"
DECLARATIONS = ("hardware", "policies", "tenants")
LANGUAGE_HOST = "pulumi-language-python"
PULUMI_MANAGER = "pulumi-kubernetes-"  # the provider's per-resource SSA field manager prefix


def _missing_tools() -> list[str]:
    missing = [f"tools/bin/{name}" for name in BINARIES if not os.access(TOOLS / "bin" / name, os.X_OK)]
    for module in ("pulumi", "pulumi_kubernetes"):
        try:
            __import__(module)
        except ImportError:
            missing.append(f"Python package {module.replace('_', '-')}")
    return missing


@pytest.fixture(scope="module")
def pulumi_tools() -> None:
    missing = _missing_tools()
    if missing:
        reason = (
            f"pulumi e2e: missing {', '.join(missing)} "
            "(run `tools/build pulumi pulumi-k8s` and `pip install -e '.[deploy]'`)"
        )
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{reason} ({REQUIRE_ENV}=1 forbids skipping)", pytrace=False)
        pytest.skip(reason)


def copy_declarations(target: Path) -> Path:
    for folder in DECLARATIONS:
        shutil.copytree(REPO / folder, target / folder)
    return target


@dataclass
class Sandbox:
    cp: ControlPlane
    api: client.ApiClient
    dynamic: DynamicClient


@pytest.fixture(scope="module")
def sandbox(pulumi_tools, sandbox_binaries: dict[str, Path]) -> Iterator[Sandbox]:
    with LivingSandbox() as living:
        api = living.cp.api_client()
        model = validate_repo(REPO).model
        assert model is not None
        create_nodes(api, simulated_nodes(model), kwok=True)  # NodePatch needs the nodes to exist
        create_gpu_operator_footprint(api)  # the MIG ConfigMap's namespace, the agent's RuntimeClass
        yield Sandbox(living.cp, api, living.cp.dynamic_client())
        problems = living.problems()
    assert not problems, "\n".join(problems)


def workspace_env(tmp: Path) -> dict[str, str]:
    (tmp / "state").mkdir(parents=True, exist_ok=True)
    return {
        "PULUMI_HOME": str(tmp / ".pulumi"),
        "PULUMI_BACKEND_URL": f"file://{tmp / 'state'}",
        "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PATH": f"{TOOLS / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",  # the provider plugin too
    }


def workspace_options(tmp: Path, env: dict[str, str], **kwargs: Any) -> Any:
    from pulumi import automation as auto

    return auto.LocalWorkspaceOptions(
        work_dir=str(kwargs.pop("work_dir", tmp)),
        pulumi_home=env["PULUMI_HOME"],
        env_vars=env,
        pulumi_command=auto.PulumiCommand(root=str(TOOLS)),  # tools/bin/pulumi
        **kwargs,
    )


def configure(stack: Any, sandbox: Sandbox) -> None:
    from pulumi import automation as auto

    stack.set_config("gpugov:cluster", auto.ConfigValue(CLUSTER))
    stack.set_config("gpugov:backend", auto.ConfigValue(BACKEND))
    stack.set_config("kubernetes:kubeconfig", auto.ConfigValue(sandbox.cp.kubeconfig.read_text(), secret=True))


@dataclass
class Org:
    stack: Any
    roots: dict[str, Path]  # "current": the declarations the inline program deploys
    tmp: Path

    def use(self, root: Path) -> list[dict[str, Any]]:
        self.roots["current"] = root
        return objects_of(root)


def objects_of(root: Path) -> list[dict[str, Any]]:
    result = validate_repo(root)
    assert result.model is not None and not result.errors, result.errors
    return compile(result.model, backend=BACKEND, cluster=CLUSTER)


@pytest.fixture(scope="module")
def org(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Org]:
    from pulumi import automation as auto

    from gpugov.deploy import run

    tmp = tmp_path_factory.mktemp("pulumi")
    roots = {"base": copy_declarations(tmp / "base")}
    roots["current"] = roots["base"]
    env = workspace_env(tmp)
    stack = auto.create_or_select_stack(
        stack_name=STACK,
        project_name=PROJECT,
        program=lambda: run(roots["current"]),
        opts=workspace_options(tmp, env, project_settings=auto.ProjectSettings(name=PROJECT, runtime="python")),
    )
    configure(stack, sandbox)
    yield Org(stack, roots, tmp)
    stack.workspace.remove_stack(STACK, force=True)


def live(sandbox: Sandbox, obj: dict[str, Any]) -> dict[str, Any] | None:
    resource = sandbox.dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    try:
        return resource.get(name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace")).to_dict()
    except NotFoundError:
        return None


def contains(actual: Any, wanted: Any) -> bool:
    """Every field compile wrote is on the server with that value (the server may add defaults)."""
    if isinstance(wanted, dict):
        return isinstance(actual, dict) and all(k in actual and contains(actual[k], v) for k, v in wanted.items())
    if isinstance(wanted, list):
        return isinstance(actual, list) and len(actual) == len(wanted) and all(map(contains, actual, wanted))
    return bool(actual == wanted)


def changed(result: Any) -> dict[str, int]:
    return {op: n for op, n in result.summary.resource_changes.items() if op != "same"}


def preview_steps(stack: Any) -> tuple[dict[str, int], set[tuple[str, str, str, str]]]:
    """(change summary, {(op, kind, namespace, name)}) of a preview, from its engine events."""
    steps: set[tuple[str, str, str, str]] = set()

    def on_event(event: Any) -> None:
        pre = event.resource_pre_event
        if pre is None or pre.metadata.op in ("same", "read"):
            return
        kind = pre.metadata.type.rsplit(":", 1)[-1].removesuffix("Patch")
        name = pre.metadata.urn.rsplit("::", 1)[-1]
        namespace, _, name = name.rpartition("/")
        steps.add((str(getattr(pre.metadata.op, "value", pre.metadata.op)), kind, namespace, name))

    result = stack.preview(on_event=on_event)
    return {str(k): v for k, v in result.change_summary.items()}, steps


def test_up_applies_every_compiled_object(org: Org, sandbox: Sandbox) -> None:
    objects = org.use(org.roots["base"])
    result = org.stack.up()
    assert result.summary.result == "succeeded"
    tenants = {
        o["metadata"]["labels"]["gpugov.io/tenant"] for o in objects if "gpugov.io/tenant" in o["metadata"]["labels"]
    }
    pools = {o["metadata"]["labels"]["gpugov.io/pool"] for o in objects if "gpugov.io/pool" in o["metadata"]["labels"]}
    # stack + provider + organisation + operations + a component per pool and tenant + one per object
    assert changed(result) == {"create": 4 + len(pools) + len(tenants) + len(objects)}
    assert result.outputs["objects"].value == len(objects)
    for obj in objects:
        found = live(sandbox, obj)
        assert found is not None, f"{obj['kind']} {obj['metadata']['name']} is not on the server"
        fields = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        assert contains(found, fields), f"{obj['kind']} {obj['metadata']['name']}: server differs from compile"
        managers = {m["manager"] for m in found["metadata"].get("managedFields") or []}
        assert any(m.startswith(PULUMI_MANAGER) for m in managers), (obj["kind"], managers)
    node = client.CoreV1Api(sandbox.api).read_node("h100-01")
    assert node.metadata.labels["gpugov.io/pool"] == "h100"
    assert [(t.key, t.effect) for t in node.spec.taints] == [("gpugov.io/pool", "NoSchedule")]
    assert node.metadata.labels["nvidia.com/gpu.product"]  # the hardware's own labels stay


def test_second_up_changes_nothing(org: Org) -> None:
    org.use(org.roots["base"])
    result = org.stack.up()
    assert result.summary.result == "succeeded"
    assert set(result.summary.resource_changes) == {"same"}, result.summary.resource_changes


def test_a_stack_of_the_other_cluster_is_refused_and_touches_nothing(org: Org, sandbox: Sandbox) -> None:
    """Issue #23 item 1: stack `west` whose kubeconfig reaches the server `east` was deployed to (and
    recorded by the up above): preview and up stop in the program, before any resource, and every
    object on the server keeps its resourceVersion."""
    from pulumi import automation as auto

    from gpugov.deploy import run

    def versions() -> dict[tuple[str, str, str], Any]:
        core = client.CoreV1Api(sandbox.api)
        found: dict[tuple[str, str, str], Any] = {}
        for kind, items in (("namespaces", core.list_namespace().items),
                            ("configmaps", core.list_config_map_for_all_namespaces().items)):
            for item in items:
                found[(kind, item.metadata.namespace or "", item.metadata.name)] = item.metadata.resource_version
        for node in core.list_node().items:  # KWOK refreshes node status: compare what gpugov writes on them
            found[("nodes", "", node.metadata.name)] = (node.metadata.labels, [t.to_dict() for t in node.spec.taints or []])
        for plural in ("clusterqueues", "resourceflavors", "cohorts"):
            for item in client.CustomObjectsApi(sandbox.api).list_cluster_custom_object(
                    "kueue.x-k8s.io", "v1beta2", plural)["items"]:
                found[(plural, "", item["metadata"]["name"])] = item["metadata"]["resourceVersion"]
        return found

    record = client.CoreV1Api(sandbox.api).read_namespaced_config_map("gpugov-cluster-identity", "kube-system")
    assert record.data["cluster"] == CLUSTER  # the first up recorded it
    before = versions()
    tmp = org.tmp / "west"
    env = workspace_env(tmp)
    west = auto.create_or_select_stack(
        stack_name="west", project_name=PROJECT, program=lambda: run(org.roots["base"]),
        opts=workspace_options(tmp, env, project_settings=auto.ProjectSettings(name=PROJECT, runtime="python")))
    try:
        west.set_config("gpugov:cluster", auto.ConfigValue("west"))
        west.set_config("gpugov:backend", auto.ConfigValue("volcano"))
        west.set_config("kubernetes:kubeconfig", auto.ConfigValue(sandbox.cp.kubeconfig.read_text(), secret=True))
        for attempt in (west.preview, west.up):
            with pytest.raises(auto.CommandError) as info:
                attempt()
            assert "gpugov: refused: " in str(info.value) and "is cluster east, not west" in str(info.value)
        assert versions() == before
    finally:
        west.workspace.remove_stack("west", force=True)


def test_quota_raise_previews_exactly_what_compile_changes(org: Org) -> None:
    base = org.use(org.roots["base"])
    raised = copy_declarations(org.tmp / "raised")
    nlp = raised / "tenants" / "nlp.yaml"
    text = nlp.read_text()
    assert "accelerators: {nominal: 16," in text
    nlp.write_text(text.replace("accelerators: {nominal: 16,", "accelerators: {nominal: 20,"))
    head = org.use(raised)
    expected = object_changes(CLUSTER, base, head)
    assert {c.action for c in expected} == {"update"}
    assert ("ClusterQueue", "", "nlp") in {(c.kind, c.namespace, c.name) for c in expected}
    try:
        summary, steps = preview_steps(org.stack)
    finally:
        org.use(org.roots["base"])
    assert steps == {("update", c.kind, c.namespace, c.name) for c in expected}
    assert {k: v for k, v in summary.items() if k != "same"} == {"update": len(expected)}


def test_removing_a_tenant_deletes_its_queues_and_keeps_its_namespace(org: Org, sandbox: Sandbox) -> None:
    base = org.use(org.roots["base"])
    smaller = copy_declarations(org.tmp / "without-vision")
    (smaller / "tenants" / "vision.yaml").unlink()
    head = org.use(smaller)
    expected = object_changes(CLUSTER, base, head)
    deleted = [c for c in expected if c.action == "delete"]
    retained = [c for c in expected if c.action == "retain"]
    assert {(c.kind, c.name) for c in deleted} >= {("ClusterQueue", "vision"), ("LocalQueue", "training")}
    assert [(c.kind, c.name) for c in retained] == [("Namespace", "vision")]
    result = org.stack.up()
    assert result.summary.result == "succeeded"
    # the Tenant component goes too; the retained Namespace leaves the stack, not the cluster
    assert changed(result) == {
        "delete": len(deleted) + len(retained) + 1,
        "update": sum(c.action == "update" for c in expected),
    }
    by_key = {object_key(o): o for o in base}
    for change in deleted:
        gone = next(o for k, o in by_key.items() if k[1:] == (change.kind, change.namespace, change.name))
        assert live(sandbox, gone) is None, f"{change.kind} {change.name} is still on the server"
    assert client.CoreV1Api(sandbox.api).read_namespace("vision").status.phase == "Active"
    for obj in head:
        found = live(sandbox, obj)
        assert found is not None and contains(found["spec"] if "spec" in obj else found, obj.get("spec", {}))


def test_destroy_keeps_namespaces_and_nodes(org: Org, sandbox: Sandbox) -> None:
    base = objects_of(org.roots["base"])
    result = org.stack.destroy()
    assert result.summary.result == "succeeded"
    core = client.CoreV1Api(sandbox.api)
    namespaces = {ns.metadata.name for ns in core.list_namespace().items}
    assert {o["metadata"]["name"] for o in base if o["kind"] == "Namespace"} <= namespaces
    for obj in base:
        if obj["kind"] not in ("Namespace", "Node"):
            assert live(sandbox, obj) is None, f"{obj['kind']} {obj['metadata']['name']} survived destroy"
    node = core.read_node("h100-01")  # still there: gpugov only ever patched it
    assert "gpugov.io/pool" not in node.metadata.labels  # its patch was withdrawn
    assert node.metadata.labels["nvidia.com/gpu.product"]


@pytest.fixture
def project_stack(tmp_path: Path, sandbox: Sandbox) -> Any:
    """Stack east of the committed project files (copied with the declarations), configured as
    the stack file's comment says; its state in a backend of its own."""
    from pulumi import automation as auto

    for name in ("Pulumi.yaml", "Pulumi.east.yaml", "__main__.py"):
        shutil.copyfile(REPO / name, tmp_path / name)
    copy_declarations(tmp_path)
    env = workspace_env(tmp_path / ".work")
    stack = auto.create_or_select_stack(
        stack_name=STACK, work_dir=str(tmp_path), opts=workspace_options(tmp_path, env, work_dir=tmp_path)
    )
    stack.set_config("kubernetes:kubeconfig", auto.ConfigValue(sandbox.cp.kubeconfig.read_text(), secret=True))
    return stack


def test_project_files_configure_the_stack(project_stack: Any) -> None:
    config = project_stack.get_all_config()
    assert config["gpugov:cluster"].value == CLUSTER and config["gpugov:backend"].value == BACKEND
    assert json.loads(config["pulumi:disable-default-providers"].value) == ["kubernetes"]  # from Pulumi.yaml
    assert config["kubernetes:kubeconfig"].secret
    stack_file = (Path(project_stack.workspace.work_dir) / "Pulumi.east.yaml").read_text()
    assert "secure:" in stack_file and "BEGIN" not in stack_file  # stored encrypted, never in clear


def test_project_files_preview_and_refuse_invalid_declarations(project_stack: Any) -> None:
    from pulumi import automation as auto

    project_dir = Path(project_stack.workspace.work_dir)
    if not os.access(TOOLS / "bin" / LANGUAGE_HOST, os.X_OK):
        # Inline programs (above) need no language host; a project's __main__.py does.
        pytest.skip(f"tools/bin/{LANGUAGE_HOST} is not built: the project's __main__.py cannot run")
    if sys.prefix == sys.base_prefix:
        pytest.skip("the project's runtime is a virtualenv (.venv) and this test does not run in one")
    (project_dir / ".venv").symlink_to(sys.prefix)
    summary = project_stack.preview().change_summary
    assert summary.get("create", 0) >= len(objects_of(project_dir))
    nlp = project_dir / "tenants" / "nlp.yaml"
    nlp.write_text(nlp.read_text().replace("department: research\n", "department: no-such-department\n"))
    with pytest.raises(auto.CommandError) as info:
        project_stack.preview()
    message = str(info.value)
    assert "no-such-department" in message and "nothing was deployed" in message
    assert "Traceback" not in message
