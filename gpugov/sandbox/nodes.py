"""Simulated GPU Nodes for the sandbox.

Node objects are created directly. A Node's ``status`` (capacity, allocatable,
conditions) is ignored on create — the apiserver resets it — and must be
written through the ``nodes/status`` subresource afterwards, as a kubelet would.
In the living sandbox KWOK is the kubelet: the Nodes carry its annotation and
KWOK makes them Ready; on a bare control plane a Ready condition is written here.
"""

from __future__ import annotations

import copy
import datetime
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpugov.sandbox.kwok import NODE_ANNOTATION, NODE_ANNOTATION_VALUE

_CONFLICT = 409


def _ready_condition() -> dict[str, Any]:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "gpugov sandbox node (no kubelet)",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }


def _split(node: dict[str, Any], kwok: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """(object without status, status); a Ready condition unless given or KWOK reports it."""
    body = copy.deepcopy(node)
    status = body.pop("status", None) or {}
    body.setdefault("apiVersion", "v1")
    body.setdefault("kind", "Node")
    if not body.get("metadata", {}).get("name"):
        raise ValueError(f"node dict without metadata.name: {node!r}")
    if kwok:
        body["metadata"].setdefault("annotations", {})[NODE_ANNOTATION] = NODE_ANNOTATION_VALUE
    else:
        status.setdefault("conditions", [_ready_condition()])
    return body, status


def _create_or_update(core: client.CoreV1Api, body: dict[str, Any]) -> None:
    try:
        core.create_node(cast(client.V1Node, body))  # the client sends dicts as they are
    except ApiException as exc:
        if exc.status != _CONFLICT:
            raise
        # Already there (e.g. a second `sandbox up` run): refresh labels/taints/spec.
        core.patch_node(body["metadata"]["name"], {k: v for k, v in body.items() if k in ("metadata", "spec")})


def create_nodes(api_client: client.ApiClient, nodes: list[dict[str, Any]], kwok: bool = False) -> list[client.V1Node]:
    """Create (or update) Nodes from manifest-shaped dicts and set their status.

    Each dict looks like a Node manifest, e.g.::

        {"metadata": {"name": "gpu-a1", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                                                   "nvidia.com/gpu.count": "8"}},
         "status": {"capacity": {"cpu": "64", "memory": "1Ti", "nvidia.com/gpu": "8"},
                    "allocatable": {"cpu": "64", "memory": "1Ti", "nvidia.com/gpu": "8"}}}

    ``apiVersion``/``kind`` may be omitted. With ``kwok`` the Nodes are handed to
    KWOK (its annotation), which reports them Ready; otherwise a Ready=True
    condition is added when ``status.conditions`` is absent. Returns the Nodes as stored.
    """
    core = client.CoreV1Api(api_client)
    result = []
    for node in nodes:
        body, status = _split(node, kwok)
        name = body["metadata"]["name"]
        _create_or_update(core, body)
        result.append(core.patch_node_status(name, {"status": status}))
    return result


GPU_OPERATOR_NAMESPACE = "gpu-operator"
NVIDIA_RUNTIME_CLASS = "nvidia"


def create_gpu_operator_footprint(api_client: client.ApiClient) -> None:
    """What the NVIDIA GPU Operator leaves in a cluster that gpugov's objects use: its
    namespace (where the mig-parted ConfigMap goes) and the ``nvidia`` RuntimeClass (which
    the node agent DaemonSet runs with). The simulated GPU servers stand for servers
    where the operator runs."""
    core, node = client.CoreV1Api(api_client), client.NodeV1Api(api_client)
    for create, body in (
        (core.create_namespace, {"metadata": {"name": GPU_OPERATOR_NAMESPACE}}),
        (node.create_runtime_class, {"metadata": {"name": NVIDIA_RUNTIME_CLASS}, "handler": NVIDIA_RUNTIME_CLASS}),
    ):
        try:
            create(body)
        except ApiException as exc:
            if exc.status != _CONFLICT:
                raise
