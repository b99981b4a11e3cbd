"""Simulated GPU servers for the sandbox and tests: Node objects as real hardware reports them.

What a real node carries comes from the hardware and its agents, not from gpugov: GPU
Feature Discovery labels (nvidia.com/gpu.product, gpu.count, mig.capable, mig.strategy),
mig-manager's nvidia.com/mig.config.state, and capacity/allocatable from the device plugin
(mixed strategy: nvidia.com/gpu counts only non-MIG GPUs; each MIG profile is its own
resource). These nodes stand in for servers that were set up as the pools declare, so the
drift checker has hardware to read. They carry none of gpugov's own labels: those arrive
through `gpugov apply` of the compiled node patches.
"""

from __future__ import annotations

from typing import Any

from gpugov.catalog import mig_resource_name
from gpugov.declarations.model import GPUPool, Model, PoolNode
from gpugov.kube.quantity import format_quantity


def _product_label(pool: GPUPool) -> str:
    return pool.product_label or (pool.model.gfd_products[0] if pool.model.gfd_products else pool.model.name)


def simulated_node(pool: GPUPool, node: PoolNode) -> dict[str, Any]:
    accelerator = pool.model
    labels: dict[str, str] = {"kubernetes.io/hostname": node.name, "kubernetes.io/os": "linux"}
    resources: dict[str, str] = {"pods": "110"}
    if pool.node_cpu is not None:
        resources["cpu"] = format_quantity(pool.node_cpu)
    if pool.node_memory is not None:
        resources["memory"] = format_quantity(pool.node_memory)
    layout = pool.mig_layouts.get(node.mig_layout or "")
    if accelerator.vendor == "nvidia":
        labels.update(
            {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": _product_label(pool),
                "nvidia.com/gpu.count": str(pool.per_node),
                "nvidia.com/gpu.memory": str(accelerator.memory_gb * 1024),
                "nvidia.com/mig.capable": str(accelerator.mig_capable).lower(),
            }
        )
        if pool.uses_mig:
            labels["nvidia.com/mig.strategy"] = "mixed"
            labels["nvidia.com/mig.config.state"] = "success"
        resources["nvidia.com/gpu"] = "0" if layout else str(pool.per_node)
        for profile, count in sorted((layout or {}).items()):
            resources[mig_resource_name(profile)] = str(count * pool.per_node)
            labels[f"nvidia.com/{mig_resource_name(profile).split('/')[1]}.count"] = str(count * pool.per_node)
    else:
        resources[accelerator.resource] = str(pool.per_node)
        labels["accelerator"] = f"{accelerator.vendor}-{accelerator.name}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "labels": dict(sorted(labels.items()))},
        "status": {"capacity": resources, "allocatable": dict(resources)},
    }


def simulated_nodes(model: Model, cluster: str | None = None) -> list[dict[str, Any]]:
    nodes = []
    for pool in model.pools.values():
        if cluster is not None and model.pool_cluster(pool) != cluster:
            continue
        nodes.extend(simulated_node(pool, node) for node in pool.nodes)
    return nodes
