"""apply takes over nothing it does not own (issue #22), on a real API server.

A tenant claims `argocd`, a namespace an operator made (no gpugov label), and someone made a
ClusterQueue by hand under the name a tenant's would get. `gpugov apply` refuses with one line that
names both, and writes nothing: every object of every kind gpugov knows keeps its resourceVersion.
With the ClusterQueue gone and `adoptNamespaces: [argocd]` declared, apply takes the namespace over
(gpugov's labels added, the operator's kept, its objects untouched). A namespace prune released is
taken back by the tenant it was released from, and refused to any other. One apiserver for the module.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from gpugov.cluster.rest import Api, list_all, served_versions
from gpugov.kube.kinds import KINDS
from tests.helpers.repos import BASE

pytestmark = pytest.mark.e2e

OPERATOR_LABELS = {"app.kubernetes.io/part-of": "argocd"}


@pytest.fixture(scope="module")
def server(controlplane_binary_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, object]]:
    from gpugov.app.pipeline import validate_repo
    from gpugov.sandbox import ControlPlane
    from gpugov.sandbox.nodes import create_gpu_operator_footprint, create_nodes
    from gpugov.sandbox.simulated import simulated_nodes

    root = tmp_path_factory.mktemp("org")
    shutil.copytree(BASE, root, dirs_exist_ok=True)
    path = root / "tenants" / "alpha.yaml"
    path.write_text(path.read_text().replace("namespaces: [alpha]", "namespaces: [alpha, argocd]"))
    with ControlPlane(binary=controlplane_binary_path) as cp:  # the binary fixture skips (or fails) without it
        api = cp.api_client()
        model = validate_repo(root).model
        assert model is not None
        create_nodes(api, simulated_nodes(model))
        create_gpu_operator_footprint(api)
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": "argocd", "labels": OPERATOR_LABELS}})
        core.create_namespaced_config_map("argocd", {"metadata": {"name": "argocd-cm"}, "data": {"url": "x"}})
        queues = DynamicClient(api).resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="ClusterQueue")
        queues.create(body={"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                            "metadata": {"name": "beta"}, "spec": {"namespaceSelector": {}}})
        yield root, cp


def versions(cp) -> dict[tuple[str, str, str, str], str]:
    api = Api(cp.api_client())
    served = served_versions(api)
    found = {}
    for kind in KINDS.values():
        if kind.api_version in served:
            for obj in list_all(api, kind):
                meta = obj["metadata"]
                found[(kind.api_version, kind.kind, meta.get("namespace", ""), meta["name"])] = meta["resourceVersion"]
    return found


def apply(cp, root: Path, capsys, *extra: str) -> tuple[int, str, str]:
    from gpugov.cli import main

    code = main(["apply", str(root), "--kubeconfig", str(cp.kubeconfig), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_foreign_namespace_and_object_are_refused_before_any_write(server, capsys) -> None:
    root, cp = server
    before = versions(cp)
    code, out, err = apply(cp, root, capsys)
    assert code == 2, out + err
    (line,) = err.splitlines()
    assert line.startswith("gpugov: refused: refusing to take over 2 object(s) that exist on the cluster without "
                           "being gpugov's (no app.kubernetes.io/managed-by: gpugov label): ")
    assert "Namespace argocd" in line and "ClusterQueue beta" in line and line.endswith("; nothing was changed")
    assert "spec.adoptNamespaces" in line
    assert versions(cp) == before, "the check runs before the first write"
    core = client.CoreV1Api(cp.api_client())
    assert "alpha" not in {ns.metadata.name for ns in core.list_namespace().items}
    code, out, err = apply(cp, root, capsys, "--dry-run")
    assert code == 2 and "Namespace argocd" in err and versions(cp) == before


def test_an_adopted_namespace_is_taken_over_and_its_contents_kept(server, capsys) -> None:
    root, cp = server
    api = cp.api_client()
    DynamicClient(api).resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="ClusterQueue").delete(name="beta")
    path = root / "tenants" / "alpha.yaml"
    path.write_text(path.read_text().replace("namespaces: [alpha, argocd]",
                                             "namespaces: [alpha, argocd]\n  adoptNamespaces: [argocd]"))
    code, out, err = apply(cp, root, capsys)
    assert code == 0, out + err
    assert "adopting Namespace argocd (spec.adoptNamespaces)" in out
    core = client.CoreV1Api(api)
    labels = core.read_namespace("argocd").metadata.labels
    assert labels["app.kubernetes.io/managed-by"] == "gpugov" and labels["gpugov.io/tenant"] == "alpha"
    assert labels["app.kubernetes.io/part-of"] == "argocd"  # the operator's label stays
    assert core.read_namespaced_config_map("argocd-cm", "argocd").data == {"url": "x"}
    bindings = client.RbacAuthorizationV1Api(api).list_namespaced_role_binding("argocd").items
    assert any(b.metadata.labels.get("gpugov.io/tenant") == "alpha" for b in bindings)
    # gpugov's now: without the adoption it applies as any namespace it owns
    path.write_text(path.read_text().replace("\n  adoptNamespaces: [argocd]", ""))
    code, out, err = apply(cp, root, capsys)
    assert code == 0 and "adopting" not in out, out + err


def test_a_released_namespace_goes_back_to_its_tenant_only(server, capsys) -> None:
    root, cp = server
    core = client.CoreV1Api(cp.api_client())
    beta = root / "tenants" / "beta.yaml"
    text = beta.read_text()
    beta.unlink()
    code, out, err = apply(cp, root, capsys)
    assert code == 0 and "released Namespace" in out and "beta-dev" in out, out + err
    released = core.read_namespace("beta-dev").metadata
    assert "app.kubernetes.io/managed-by" not in (released.labels or {})
    assert released.annotations["gpugov.io/released-from"] == "beta"
    # another tenant claiming it is refused, as for any namespace that is not gpugov's
    alpha = root / "tenants" / "alpha.yaml"
    alpha.write_text(alpha.read_text().replace("namespaces: [alpha, argocd]", "namespaces: [alpha, argocd, beta-dev]"))
    before = versions(cp)
    code, out, err = apply(cp, root, capsys)
    assert code == 2 and "Namespace beta-dev" in err and versions(cp) == before, out + err
    # its own tenant takes it back without adopting it
    alpha.write_text(alpha.read_text().replace("namespaces: [alpha, argocd, beta-dev]", "namespaces: [alpha, argocd]"))
    beta.write_text(text)
    code, out, err = apply(cp, root, capsys)
    assert code == 0, out + err
    assert "taking back Namespace beta-dev (gpugov released it from the same owner)" in out
    back = core.read_namespace("beta-dev").metadata
    assert back.labels["gpugov.io/tenant"] == "beta" and "gpugov.io/released-from" not in (back.annotations or {})
