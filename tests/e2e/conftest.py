"""End-to-end fixtures: a real kube-apiserver (+ etcd), and the living sandbox.

``controlplane`` is one bare kube-apiserver per test session (schemas, CEL rules,
server-side apply, RBAC). ``living`` is one living sandbox per session: the same
apiserver plus kube-controller-manager, kube-scheduler, KWOK and the real Kueue
controller, for the tests where something must schedule, admit or reconcile.

The binaries come from ``tools/build`` (cached; the first cold builds take
minutes). Without Go and without prebuilt binaries the e2e tests are skipped —
unless ``GPUGOV_REQUIRE_E2E=1`` (CI), where that is a failure.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from gpugov.app.pipeline import validate_repo
from gpugov.cluster.apply import apply_objects
from gpugov.cluster.enforcement import probes_for, wait_until_enforced
from gpugov.cluster.rest import Api
from gpugov.compile import compile
from gpugov.sandbox import ControlPlane, ToolUnavailableError
from gpugov.sandbox.cluster import Sandbox
from gpugov.sandbox.nodes import create_gpu_operator_footprint, create_nodes
from gpugov.sandbox.simulated import simulated_nodes
from gpugov.sandbox.tools import TOOL_OF, controlplane_binary, tool_binary
from tests.helpers.repos import REPO

REQUIRE_ENV = "GPUGOV_REQUIRE_E2E"
E2E_DIR = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: needs the real control plane (tools/build k8s)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Lets `pytest -m "not e2e"` run just the fast unit tests.
    for item in items:
        if E2E_DIR in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.e2e)


def skip_or_fail(reason: str) -> None:
    """Skip with ``reason``, or fail where GPUGOV_REQUIRE_E2E=1 forbids skipping."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1 forbids skipping)", pytrace=False)
    pytest.skip(reason)


def _binary_or_skip() -> Path:
    try:
        return controlplane_binary()
    except ToolUnavailableError as exc:
        skip_or_fail(f"e2e: no control plane binary: {exc}")
        raise


@pytest.fixture(scope="session")
def sandbox_binaries(controlplane_binary_path: Path) -> dict[str, Path]:
    """Every binary of the living sandbox, built or reused once per session."""
    try:
        return {name: tool_binary(name) for name in TOOL_OF}
    except ToolUnavailableError as exc:
        skip_or_fail(f"e2e: the living sandbox's binaries are missing: {exc}")
        raise


@pytest.fixture(scope="session")
def living(sandbox_binaries: dict[str, Path]) -> Iterator[Sandbox]:
    """One living sandbox (apiserver, controllers, scheduler, KWOK, Kueue) for the session.

    At teardown every component must still run: a component that died during the
    tests fails the session instead of passing unnoticed.
    """
    with Sandbox() as sandbox:
        yield sandbox
        problems = sandbox.problems()
    assert not problems, "\n".join(problems)


# The scheduling policy and priority class of the small organisations some tests build.
SMALL_ORG_POLICIES = """\
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
"""


@contextlib.contextmanager
def own_org_sandbox(root: Path, files: dict[str, str]) -> Iterator[client.ApiClient]:
    """A living sandbox of its own with the organisation ``files`` (path -> YAML) written to
    ``root``, validated, its GPU servers as KWOK nodes and its single cluster applied."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    result = validate_repo(root)
    assert result.model is not None and not result.errors, result.errors
    with Sandbox() as sandbox:
        api = sandbox.cp.api_client()
        create_nodes(api, simulated_nodes(result.model), kwok=True)
        create_gpu_operator_footprint(api)
        assert not apply_objects(api, compile(result.model, backend="kueue")).missing
        yield api


@pytest.fixture(scope="session")
def living_org(living: Sandbox) -> list[dict[str, Any]]:
    """Cluster east of the example org applied to the living sandbox, on its KWOK nodes."""
    model = validate_repo(REPO).model
    assert model is not None
    api = living.cp.api_client()
    create_nodes(api, simulated_nodes(model, "east"), kwok=True)
    create_gpu_operator_footprint(api)
    objects = compile(model, backend="kueue", cluster="east")
    assert not apply_objects(api, objects).missing
    # As `gpugov apply` does: the API server enforces new policies a moment after they are written,
    # and a test that tries an escape at once was let in one run in four before this wait.
    enforced = wait_until_enforced(Api(api), probes_for(objects))
    assert enforced.in_force and not enforced.not_yet and not enforced.not_probed, enforced
    return objects


@pytest.fixture(scope="session")
def controlplane_binary_path() -> Path:
    """The gpugov-controlplane executable (built or reused once per session)."""
    return _binary_or_skip()


@pytest.fixture(scope="session")
def controlplane(controlplane_binary_path: Path) -> Iterator[ControlPlane]:
    """One kube-apiserver with the Kueue and Volcano CRDs for the whole session."""
    with ControlPlane(binary=controlplane_binary_path) as cp:
        yield cp


@pytest.fixture(scope="session")
def api_client(controlplane: ControlPlane) -> client.ApiClient:
    return controlplane.api_client()


_SHARED_SERVER_FIXTURES = frozenset({"controlplane", "api_client", "dynamic"})


def _admission_names(api: client.ApiClient) -> dict[str, set[str]]:
    registration = client.AdmissionregistrationV1Api(api)
    return {
        "validatingadmissionpolicies": {p.metadata.name for p in registration.list_validating_admission_policy().items},
        "validatingadmissionpolicybindings": {
            b.metadata.name for b in registration.list_validating_admission_policy_binding().items
        },
    }


def _wait_for_the_policy_cache(registration: client.AdmissionregistrationV1Api) -> None:
    """Return once the API server's admission plugin judges by what is stored now.

    It recompiles its policies from its informers (at most once a second), so a deleted policy refuses
    for a moment after it is gone. A marker policy, refusing only one ConfigMap name, is written after the
    deletions: once it refuses that ConfigMap (a dry run), the plugin holds a snapshot taken after them."""
    name = f"gpugov-e2e-barrier-{uuid.uuid4().hex[:8]}"
    registration.create_validating_admission_policy({
        "metadata": {"name": name},
        "spec": {"failurePolicy": "Fail",
                 "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                         "operations": ["CREATE"], "resources": ["configmaps"]}]},
                 "matchConditions": [{"name": "marker", "expression": f"object.metadata.name == '{name}'"}],
                 "validations": [{"expression": "false", "message": name}]}})
    registration.create_validating_admission_policy_binding({
        "metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"]}})
    core = client.CoreV1Api(registration.api_client)
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            try:
                core.create_namespaced_config_map("default", {"metadata": {"name": name}}, dry_run="All")
            except ApiException as exc:
                if name in str(exc.body):
                    return
                raise
            time.sleep(0.1)
        raise AssertionError("the API server's admission policies did not catch up within 30 s")
    finally:
        registration.delete_validating_admission_policy_binding(name)
        registration.delete_validating_admission_policy(name)


@pytest.fixture(scope="module", autouse=True)
def _admission_policies_stay_in_their_module(request: pytest.FixtureRequest) -> Iterator[None]:
    """Admission policies bind cluster-wide: one a module applies to the session's shared server would judge
    every later module's pods. Whatever policy or binding a module added is deleted when the module ends,
    and the next module starts once the server no longer enforces it."""
    items = [item for item in request.session.items if item.getparent(pytest.Module) is request.node]
    if not any(_SHARED_SERVER_FIXTURES & set(getattr(item, "fixturenames", ())) for item in items):
        yield
        return
    api: client.ApiClient = request.getfixturevalue("api_client")
    before = _admission_names(api)
    yield
    registration = client.AdmissionregistrationV1Api(api)
    delete = {
        "validatingadmissionpolicybindings": registration.delete_validating_admission_policy_binding,
        "validatingadmissionpolicies": registration.delete_validating_admission_policy,
    }
    after = _admission_names(api)
    added = {kind: sorted(after[kind] - before[kind]) for kind in delete}
    for kind in ("validatingadmissionpolicybindings", "validatingadmissionpolicies"):
        for name in added[kind]:
            with contextlib.suppress(ApiException):
                delete[kind](name)
    if any(added.values()):
        _wait_for_the_policy_cache(registration)


@pytest.fixture(scope="session")
def dynamic(controlplane: ControlPlane) -> DynamicClient:
    return controlplane.dynamic_client()


@pytest.fixture
def namespace(api_client: client.ApiClient, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards.

    (No namespace controller runs, so a deleted namespace stays Terminating;
    names are unique, so that never collides.)
    """
    slug = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"e2e-{slug}-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api_client)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels={"gpugov.io/e2e": "true"})))
    yield name
    try:
        core.delete_namespace(name)
    except ApiException as exc:
        if exc.status != 404:
            raise


@pytest.fixture
def unique() -> str:
    """A short random suffix for cluster-scoped object names."""
    return uuid.uuid4().hex[:8]
