"""Per-node labels and taints as partial Node objects, for a server-side apply patch.

gpugov never creates or deletes Nodes: these objects carry only the labels and taints it
owns (pool label, topology labels, the MIG config selector, Volcano's node group), and
are applied as patches with field manager gpugov.
"""

from __future__ import annotations

from typing import Any

from gpugov.compile.common import LABEL_POOL, Object, Scope, metadata
from gpugov.compile.mig import ALL_DISABLED, mig_config_name
from gpugov.compile.volcano import node_group
from gpugov.declarations.model import GPUPool, PoolNode
from gpugov.kube.names import VOLCANO_NODEGROUP_LABEL

MIG_CONFIG_LABEL = "nvidia.com/mig.config"


def node_labels(scope: Scope, pool: GPUPool, node: PoolNode) -> dict[str, str]:
    labels: dict[str, str] = {LABEL_POOL: pool.name, **dict(node.labels)}
    if pool.uses_mig:
        labels[MIG_CONFIG_LABEL] = mig_config_name(pool, node.mig_layout) if node.mig_layout else ALL_DISABLED
    if scope.backend == "volcano":
        labels[VOLCANO_NODEGROUP_LABEL] = node_group(pool)
    return dict(sorted(labels.items()))


def node_patch(scope: Scope, pool: GPUPool, node: PoolNode) -> Object:
    meta = metadata(node.name, pool, {})
    meta["labels"].update(node_labels(scope, pool, node))
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": meta}
    if pool.taints:
        obj["spec"] = {"taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in pool.taints]}
    return obj


def compile_nodes(scope: Scope) -> list[Object]:
    return [node_patch(scope, pool, node) for pool in scope.pools.values() for node in pool.nodes]
