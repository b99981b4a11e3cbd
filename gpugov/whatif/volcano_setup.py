"""What a Volcano replay reads: compile's Queues and PriorityClasses, the cluster's nodes and their groups.

The queues come only from `compile(model, backend="volcano", cluster=cluster)`: each Queue's deserved,
guarantee, capability, parent, reclaimable and node-group affinity, as vc-scheduler reads them. The
nodes are the pools' declared nodes and their devices (what the sandbox registers), each in its pool's node group
(volcano.sh/nodegroup-name). Only accelerator resources are replayed: gpugov's Queues bound only
accelerators, and the capacity plugin compares only the dimensions a Queue's deserved names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from gpugov.compile import compile
from gpugov.compile.volcano import ROOT_QUEUE, node_group
from gpugov.declarations.model import Model
from gpugov.kube.names import VOLCANO_API
from gpugov.kube.objects import LABEL_TENANT
from gpugov.kube.quantity import QuantityError, parse_quantity
from gpugov.kube.resources import is_accelerator
from gpugov.whatif.setup import SetupError

Amounts = dict[str, int]


def amounts(spec: dict[str, Any] | None) -> Amounts:
    """The accelerator quantities of a Queue field, as whole units."""
    out: Amounts = {}
    for resource, value in (spec or {}).items():
        if not is_accelerator(resource):
            continue
        try:
            out[resource] = int(parse_quantity(str(value)))
        except (QuantityError, ValueError) as exc:
            raise SetupError(f"Queue quantity {resource}={value!r}: {exc}") from None
    return out


@dataclass(frozen=True)
class VQueue:
    name: str
    parent: str | None  # None for the root
    deserved: Amounts
    guarantee: Amounts
    capability: Amounts | None  # None: not set (inherited from the parent)
    reclaimable: bool = True
    tenant: str = ""
    node_groups: tuple[str, ...] = ()  # nodeGroupAffinity (required); empty: every node


@dataclass(frozen=True)
class VNode:
    name: str
    group: str
    pool: str
    allocatable: Amounts


@dataclass(frozen=True)
class VolcanoSetup:
    queues: dict[str, VQueue]
    nodes: tuple[VNode, ...]
    priorities: dict[str, int]  # PriorityClass name -> value
    quotas: dict[str, Amounts] = field(default_factory=dict)  # tenant -> its namespace's ResourceQuota (requests)
    resource_of_pool: dict[str, str] = field(default_factory=dict)
    pools_of_model: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def leaves(self) -> list[str]:
        parents = {q.parent for q in self.queues.values()}
        return sorted(name for name in self.queues if name not in parents and name != ROOT_QUEUE)

    def tenant_queue(self, tenant: str) -> str | None:
        return next((q.name for q in self.queues.values() if q.tenant == tenant and q.name in self.leaves()), None)

    def total(self) -> Amounts:
        out: Amounts = {}
        for node in self.nodes:
            for resource, value in node.allocatable.items():
                out[resource] = out.get(resource, 0) + value
        return out


def read_volcano(objects: list[dict[str, Any]], nodes: tuple[VNode, ...]) -> VolcanoSetup:
    queues: dict[str, VQueue] = {ROOT_QUEUE: VQueue(ROOT_QUEUE, None, {}, {}, None)}
    priorities: dict[str, int] = {}
    quotas: dict[str, Amounts] = {}
    for obj in objects:
        if obj.get("kind") == "ResourceQuota":
            tenant = (obj["metadata"].get("labels") or {}).get(LABEL_TENANT) or obj["metadata"].get("namespace", "")
            hard = {k.removeprefix("requests."): v for k, v in ((obj.get("spec") or {}).get("hard") or {}).items()}
            for resource, value in amounts(hard).items():
                mine = quotas.setdefault(tenant, {})
                mine[resource] = min(mine.get(resource, value), value)
        if obj.get("kind") == "PriorityClass":
            priorities[obj["metadata"]["name"]] = int(obj.get("value", 0))
        if obj.get("kind") != "Queue" or obj.get("apiVersion") != VOLCANO_API:
            continue
        spec, meta = obj.get("spec") or {}, obj["metadata"]
        affinity = (spec.get("affinity") or {}).get("nodeGroupAffinity") or {}
        queues[meta["name"]] = VQueue(
            meta["name"], spec.get("parent") or ROOT_QUEUE, amounts(spec.get("deserved")),
            amounts((spec.get("guarantee") or {}).get("resource")),
            amounts(spec["capability"]) if spec.get("capability") else None, spec.get("reclaimable", True) is not False,
            (meta.get("labels") or {}).get(LABEL_TENANT, ""),
            tuple(affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or ()))
    # vc-scheduler's own `default` Queue, under the root: no deserved, no guarantee, no jobs of gpugov's
    queues.setdefault("default", VQueue("default", ROOT_QUEUE, {}, {}, None))
    for q in queues.values():
        if q.parent is not None and q.parent not in queues:
            raise SetupError(f"Queue {q.name}'s parent {q.parent} is not compiled")
    return VolcanoSetup(queues, nodes, priorities, quotas)


def volcano_setup(model: Model, cluster: str) -> VolcanoSetup:
    """The Volcano objects compile emits for `cluster`, and the nodes its pools declare."""
    pools = {name: pool for name, pool in model.pools.items() if model.pool_cluster(pool) == cluster}
    nodes = []
    for name, pool in pools.items():
        for node in pool.nodes:
            devices = dict(pool.node_accelerators(node.mig_layout, node.vnpu_layout))
            if pool.mig_layouts.get(node.mig_layout or "") is not None:  # every GPU of the node is split
                devices["nvidia.com/gpu"] = Decimal(0)
            elif pool.vnpu_layouts.get(node.vnpu_layout or "") is not None:
                devices[pool.model.resource] = Decimal(0)
            allocatable = {r: int(Decimal(v)) for r, v in devices.items() if is_accelerator(r) and Decimal(v) >= 1}
            nodes.append(VNode(node.name, node_group(pool), name, allocatable))
    setup = read_volcano(compile(model, backend="volcano", cluster=cluster), tuple(sorted(nodes, key=lambda n: n.name)))
    models: dict[str, list[str]] = {}
    for name, pool in sorted(pools.items()):
        models.setdefault(pool.model.name.lower(), []).append(name)
    return VolcanoSetup(setup.queues, setup.nodes, setup.priorities, setup.quotas,
                        {name: pool.model.resource for name, pool in pools.items()},
                        {k: tuple(v) for k, v in models.items()})
