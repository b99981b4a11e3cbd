"""A Volcano pool declared by node selector, on a real apiserver with the real Volcano Queue CRD.

Volcano's nodegroup plugin lets a Queue's jobs run only on nodes whose
volcano.sh/nodegroup-name is in the Queue's required node group affinity. No Volcano
scheduler runs here, so this proves the relation it would act on: the nodes the apiserver
returns for that label selector are exactly the nodes the pool's own selector returns.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpugov.app.pipeline import validate_repo
from gpugov.cluster.apply import apply_objects
from gpugov.compile import compile
from gpugov.sandbox.nodes import create_nodes
from gpugov.sandbox.simulated import simulated_nodes
from tests.helpers.repos import write

pytestmark = pytest.mark.e2e

NODEGROUP = "volcano.sh/nodegroup-name"
PRODUCT = "nvidia.com/gpu.product"


def org(unique: str) -> dict[str, str]:
    """Names carry `unique`: the session's apiserver is shared, and Nodes and Queues are cluster-wide."""
    return {
        "policies/clusters.yaml": "apiVersion: gpugov.io/v1alpha1\nkind: Cluster\n"
        "metadata: {name: edge}\nspec: {backend: volcano}\n",
        "hardware/edge.yaml": f"""\
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata: {{name: h100-{unique}}}
spec:
  cluster: edge
  accelerator: {{model: H100-80GB}}
  acceleratorsPerNode: 8
  nodeResources: {{cpu: 64, memory: 512Gi}}
  nodeSelector:
    matchLabels: {{{PRODUCT}: NVIDIA-H100-80GB-HBM3, {NODEGROUP}: rack-{unique}}}
  nodeCount: 2
---
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata: {{name: a100-{unique}}}
spec:
  cluster: edge
  accelerator: {{model: A100-80GB}}
  acceleratorsPerNode: 4
  nodeResources: {{cpu: 64, memory: 512Gi}}
  nodes: [{{name: a100-{unique}-1}}, {{name: a100-{unique}-2}}]
""",
        "tenants/teams.yaml": f"""\
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata: {{name: selected-{unique}}}
spec:
  owners: {{users: [s@example.com]}}
  costCenter: CC-1
  namespaces: [selected-{unique}]
  quotas: [{{pool: h100-{unique}, resources: {{accelerators: 8}}}}]
---
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata: {{name: named-{unique}}}
spec:
  owners: {{users: [n@example.com]}}
  costCenter: CC-2
  namespaces: [named-{unique}]
  quotas: [{{pool: a100-{unique}, resources: {{accelerators: 4}}}}]
""",
    }


def node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    resources = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}
    return {"metadata": {"name": name, "labels": labels}, "status": {"capacity": resources, "allocatable": resources}}


def node_names(core: client.CoreV1Api, selector: str) -> set[str]:
    return {n.metadata.name for n in core.list_node(label_selector=selector).items}


@pytest.fixture
def applied(api_client: client.ApiClient, tmp_path: Path, unique: str) -> Iterator[tuple[Any, list[str]]]:
    """The org's pools' nodes created as the hardware and the admin left them, then its Queues
    and Node patches applied; everything created is deleted afterwards."""
    for rel, text in org(unique).items():
        write(tmp_path, rel, text)
    result = validate_repo(tmp_path)
    assert result.model is not None and result.findings == [], result.findings
    model = result.model
    selector = dict(model.pools[f"h100-{unique}"].node_selector)
    nodes = [
        node(f"h100-{unique}-1", selector),  # labelled by the admin as the pool's selector says
        node(f"h100-{unique}-2", selector),
        node(f"h100-{unique}-spare", {PRODUCT: selector[PRODUCT]}),  # same hardware, not in the pool
        *simulated_nodes(model, "edge"),  # the named nodes, before gpugov's patches
    ]
    created = [n["metadata"]["name"] for n in nodes]
    objects = [o for o in compile(model, backend="volcano", cluster="edge") if o["kind"] in ("Queue", "Node")]
    queues = [o["metadata"]["name"] for o in objects if o["kind"] == "Queue"]
    custom, core = client.CustomObjectsApi(api_client), client.CoreV1Api(api_client)
    try:
        create_nodes(api_client, nodes)
        assert not apply_objects(api_client, objects).missing
        yield model, queues
    finally:
        for name in queues:
            _ignore_missing(lambda n=name: custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1",
                                                                                "queues", n))
        for name in created:
            _ignore_missing(lambda n=name: core.delete_node(n))


def _ignore_missing(delete: Any) -> None:
    try:
        delete()
    except ApiException as exc:
        if exc.status != 404:
            raise


def test_selector_pool_queue_runs_exactly_on_the_selected_nodes(
    api_client: client.ApiClient, applied: tuple[Any, list[str]], unique: str
) -> None:
    model, queues = applied
    assert sorted(queues) == sorted([f"named-{unique}", f"selected-{unique}"])
    custom, core = client.CustomObjectsApi(api_client), client.CoreV1Api(api_client)

    def usable_by(queue: str) -> set[str]:
        stored = custom.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", queue)
        groups = stored["spec"]["affinity"]["nodeGroupAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        return node_names(core, f"{NODEGROUP} in ({','.join(groups)})")

    pool_selector = ",".join(f"{k}={v}" for k, v in model.pools[f"h100-{unique}"].node_selector)
    selected = node_names(core, pool_selector)
    assert selected == {f"h100-{unique}-1", f"h100-{unique}-2"}
    assert usable_by(f"selected-{unique}") == selected
    assert usable_by(f"named-{unique}") == {f"a100-{unique}-1", f"a100-{unique}-2"}
