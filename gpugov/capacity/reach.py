"""What a Kueue ClusterQueue can reach at most: Kueue v0.17's own arithmetic over compile's objects.

Kueue (pkg/cache/scheduler/resource_node.go) keeps, per flavor and resource, a tree of nodes:
ClusterQueues under Cohorts under Cohorts. A node's subtree quota is its own nominal quota plus
what each child passes up (the child's subtree quota minus its local quota); a node's local
quota is what its lendingLimit keeps from its parent (subtree quota - lendingLimit, at least 0;
0 without a lendingLimit). The most a node can ever hold (``potentialAvailable``, the "maximum
capacity" in a pending Workload's message) is, at a root, its subtree quota; below, its local
quota plus its parent's maximum, capped at subtree quota + borrowingLimit where one is set.

This is the one computation of what a tenant can reach: the capacity report's ceilings and
"may borrow" use it, and it is the number Kueue writes into `gpugov queue why`'s never-fits
reasons, so the two never disagree. Only quota counts: capacity no nominal quota holds
(unassigned) is reachable by nobody.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from gpugov.kube.names import KUEUE_API
from gpugov.kube.objects import LABEL_TENANT, Object
from gpugov.kube.quantity import parse_quantity

FlavorResource = tuple[str, str]


@dataclass
class _Node:
    parent: str | None
    nominal: dict[FlavorResource, Decimal] = field(default_factory=dict)
    borrowing: dict[FlavorResource, Decimal] = field(default_factory=dict)
    lending: dict[FlavorResource, Decimal] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)


def _quotas(node: _Node, spec: dict) -> None:
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for resource in flavor.get("resources") or []:
                key = (str(flavor["name"]), str(resource["name"]))
                node.nominal[key] = parse_quantity(resource.get("nominalQuota", 0))
                if resource.get("borrowingLimit") is not None:
                    node.borrowing[key] = parse_quantity(resource["borrowingLimit"])
                if resource.get("lendingLimit") is not None:
                    node.lending[key] = parse_quantity(resource["lendingLimit"])


class Reach:
    """The cohort trees of compile's Kueue objects, with Kueue's arithmetic over them."""

    def __init__(self, objects: Iterable[Object]) -> None:
        self.nodes: dict[str, _Node] = {}  # "cq:NAME" or "cohort:NAME"
        parents: dict[str, str | None] = {}
        for obj in objects:
            if obj.get("apiVersion") != KUEUE_API or obj["kind"] not in ("ClusterQueue", "Cohort"):
                continue
            spec = obj.get("spec") or {}
            if obj["kind"] == "ClusterQueue":
                key, parent = f"cq:{obj['metadata']['name']}", spec.get("cohortName")
            else:
                key, parent = f"cohort:{obj['metadata']['name']}", spec.get("parentName")
            node = self.nodes.setdefault(key, _Node(None))
            node.parent = f"cohort:{parent}" if parent else None
            _quotas(node, spec)
            parents[key] = node.parent
        for key, parent in sorted(parents.items()):
            if parent is not None:
                self.nodes.setdefault(parent, _Node(None)).children.append(key)  # a Cohort named but not declared
        self._subtree: dict[str, dict[FlavorResource, Decimal]] = {}

    def subtree(self, key: str) -> dict[FlavorResource, Decimal]:
        if key not in self._subtree:
            node = self.nodes[key]
            total: dict[FlavorResource, Decimal] = defaultdict(Decimal, node.nominal)
            for child in node.children:
                for fr, quota in self.subtree(child).items():
                    total[fr] += quota - self.local(child, fr)
            self._subtree[key] = dict(total)
        return self._subtree[key]

    def local(self, key: str, fr: FlavorResource) -> Decimal:
        lending = self.nodes[key].lending.get(fr)
        return max(Decimal(0), self.subtree(key).get(fr, Decimal(0)) - lending) if lending is not None else Decimal(0)

    def potential(self, key: str, fr: FlavorResource) -> Decimal:
        """Kueue's potentialAvailable: the most the node can hold of `fr` with nothing else running."""
        node = self.nodes[key]
        own = self.subtree(key).get(fr, Decimal(0))
        if node.parent is None:
            return own
        available = self.local(key, fr) + self.potential(node.parent, fr)
        borrowing = node.borrowing.get(fr)
        return min(own + borrowing, available) if borrowing is not None else available

    def cluster_queue(self, name: str) -> dict[FlavorResource, Decimal]:
        """The most ClusterQueue `name` can hold per (flavor, resource) it lists; {} when there is none."""
        key = f"cq:{name}"
        if key not in self.nodes:
            return {}
        return {fr: self.potential(key, fr) for fr in sorted(self.nodes[key].nominal)}


def tenant_ceilings(objects: Iterable[Object]) -> dict[str, dict[str, Decimal]]:
    """Per tenant (its ClusterQueue, by the gpugov.io/tenant label) and resource, the most it can
    hold over all its flavors: Kueue's maximum capacity summed over the pools its queue lists."""
    objects = list(objects)
    reach = Reach(objects)
    ceilings: dict[str, dict[str, Decimal]] = {}
    for obj in objects:
        if obj.get("apiVersion") == KUEUE_API and obj["kind"] == "ClusterQueue":
            tenant = (obj["metadata"].get("labels") or {}).get(LABEL_TENANT, obj["metadata"]["name"])
            total: dict[str, Decimal] = defaultdict(Decimal)
            for (_, resource), amount in reach.cluster_queue(obj["metadata"]["name"]).items():
                total[resource] += amount
            ceilings[tenant] = dict(total)
    return ceilings


__all__ = ["Reach", "tenant_ceilings"]
