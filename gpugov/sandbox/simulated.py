"""Simulated accelerator servers for the sandbox and tests: Node objects as real hardware reports them.

What a real node carries comes from the hardware and its agents, not from gpugov:
- NVIDIA: GPU Feature Discovery labels (nvidia.com/gpu.product, gpu.count, gpu.memory,
  mig.capable, mig.strategy), mig-manager's nvidia.com/mig.config.state, and capacity from the
  device plugin (mixed strategy: nvidia.com/gpu counts only non-MIG GPUs; each MIG profile is
  its own resource).
- Other vendors: the product label of the catalog where one is known (Ascend's device plugin
  runs on accelerator=huawei-Ascend910 nodes), NFD's feature.node.kubernetes.io/pci-<vendor>.present,
  and the vendor plugin's resources: whole devices, or one resource per static vNPU template.
- HAMi pools: HAMi's device plugin runs on gpu=on nodes and advertises deviceSplitCount vGPUs per
  device. Its memory and compute resources are accounted by the HAMi scheduler extender, which the
  sandbox lacks, so the simulated node advertises them too for kube-scheduler to count.
These nodes stand in for servers set up as the pools declare, so the drift checker has hardware
to read. They carry none of gpugov's own labels: those arrive through `gpugov apply` of the
compiled node patches.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from gpugov.declarations.model import GPUPool, Model, PoolNode
from gpugov.kube.quantity import format_quantity

HAMI_NODE_LABEL = ("gpu", "on")  # HAMi's device-plugin DaemonSet nodeSelector (charts/hami values.yaml)


def _product_label(pool: GPUPool) -> str:
    return pool.product_label or (pool.model.gfd_products[0] if pool.model.gfd_products else pool.model.name)


def _vendor_labels(pool: GPUPool) -> dict[str, str]:
    accelerator = pool.model
    labels: dict[str, str] = {}
    if accelerator.pci_vendor_id:
        labels[f"feature.node.kubernetes.io/pci-{accelerator.pci_vendor_id[2:].lower()}.present"] = "true"
    if accelerator.vendor == "nvidia":
        labels.update(
            {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": _product_label(pool),
                "nvidia.com/gpu.count": str(pool.per_node),
                "nvidia.com/mig.capable": str(accelerator.mig_capable).lower(),
            }
        )
        if accelerator.memory is not None:
            labels["nvidia.com/gpu.memory"] = str(int(accelerator.memory / 2**20))
        if pool.uses_mig:
            labels["nvidia.com/mig.strategy"] = "mixed"
            labels["nvidia.com/mig.config.state"] = "success"
    elif accelerator.product_label is not None:
        labels[accelerator.product_label.key] = pool.product_label or accelerator.product_label.values[0]
    if pool.hami is not None:
        labels[HAMI_NODE_LABEL[0]] = HAMI_NODE_LABEL[1]
    return labels


def simulated_node(pool: GPUPool, node: PoolNode) -> dict[str, Any]:
    labels: dict[str, str] = {"kubernetes.io/hostname": node.name, "kubernetes.io/os": "linux"}
    labels.update(_vendor_labels(pool))
    resources: dict[str, str] = {"pods": "110"}
    if pool.node_cpu is not None:
        resources["cpu"] = format_quantity(pool.node_cpu)
    if pool.node_memory is not None:
        resources["memory"] = format_quantity(pool.node_memory)
    devices = pool.node_accelerators(node.mig_layout, node.vnpu_layout)
    if pool.model.vendor == "nvidia" and pool.mig_layouts.get(node.mig_layout or "") is not None:
        devices["nvidia.com/gpu"] = Decimal(0)  # every GPU of the node is split
        for resource, count in devices.items():
            if resource.startswith("nvidia.com/mig-"):  # GFD mixed strategy: nvidia.com/mig-1g.10gb.count
                labels[f"{resource}.count"] = format_quantity(count)
    elif pool.vnpu_layouts.get(node.vnpu_layout or "") is not None:
        devices[pool.model.resource] = Decimal(0)
    resources.update({resource: format_quantity(amount) for resource, amount in sorted(devices.items())})
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

