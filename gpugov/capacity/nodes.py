"""Which live Nodes belong to a declared pool, and what they report (GFD labels, allocatable).

A pool's nodes are the ones it lists by name, any node labelled with the pool (what
`gpugov apply` writes), or, for a selector-only pool, the nodes its nodeSelector matches; a
pool whose nodeSelector is empty selects every node, of which those that advertise its devices
are its nodes (its nodeCount counts those, not the control plane's or CPU-only nodes).
Shared by the capacity report and the doctor, so both count the same nodes.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from gpugov.compile.common import LABEL_POOL
from gpugov.declarations.model import GPUPool
from gpugov.kube.quantity import QuantityError, parse_quantity

GPU_PRODUCT = "nvidia.com/gpu.product"
GPU_COUNT = "nvidia.com/gpu.count"
MIG_CONFIG = "nvidia.com/mig.config"
MIG_STATE = "nvidia.com/mig.config.state"
MIG_STRATEGY = "nvidia.com/mig.strategy"

Node = dict[str, Any]


def labels(node: Node) -> dict[str, str]:
    return dict((node.get("metadata") or {}).get("labels") or {})


def name(node: Node) -> str:
    return str((node.get("metadata") or {}).get("name", ""))


def pool_nodes(pool: GPUPool, nodes: list[Node]) -> list[Node]:
    """The live nodes of `pool`, sorted by name."""
    listed = {n.name for n in pool.nodes}
    selector = dict(pool.node_selector)
    found = []
    for node in nodes:
        node_labels = labels(node)
        if name(node) in listed or node_labels.get(LABEL_POOL) == pool.name:
            found.append(node)
        elif not pool.nodes and selector and all(node_labels.get(k) == v for k, v in selector.items()):
            found.append(node)
        elif pool.every_node and allocatable(node, pool.model.resource) > 0:
            found.append(node)
    return sorted(found, key=name)


def allocatable(node: Node, resource: str) -> Decimal:
    """The node's allocatable amount of `resource` (0 when absent or unreadable)."""
    value = ((node.get("status") or {}).get("allocatable") or {}).get(resource)
    if value is None:
        return Decimal(0)
    try:
        return parse_quantity(value)
    except QuantityError:
        return Decimal(0)


def gfd_gpu_count(node: Node) -> int | None:
    """GPUs GPU Feature Discovery counts on the node (MIG-enabled ones included); None unlabelled."""
    value = labels(node).get(GPU_COUNT)
    return int(value) if value is not None and value.isdigit() else None
