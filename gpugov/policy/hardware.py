"""Pools are well formed: each node in one pool, topology labels present, nodes declared."""

from __future__ import annotations

from collections.abc import Iterator

from gpugov.declarations.model import Model
from gpugov.findings import Finding, Level, Location, make, rule
from gpugov.policy import check

HOSTNAME = "kubernetes.io/hostname"

NODE_IN_TWO_POOLS = rule(
    "GG050",
    "node-in-two-pools",
    Level.ERROR,
    "A node is a member of more than one pool (or listed twice in one).",
    "Each node belongs to exactly one pool.",
)
TOPOLOGY_LABEL_MISSING = rule(
    "GG051",
    "topology-label-missing",
    Level.ERROR,
    "A node of a pool with topology levels has no value for one of the level labels.",
    "Give the node a value for each level in spec.nodes[].labels.",
)
TOPOLOGY_LEVELS = rule(
    "GG052",
    "topology-levels-invalid",
    Level.ERROR,
    "Topology levels repeat a label, or kubernetes.io/hostname is not the lowest level (Kueue rejects both).",
    "List each node label once, from the widest level to the narrowest.",
)
NO_NODES = rule(
    "GG053",
    "pool-without-nodes",
    Level.WARNING,
    "A pool lists no nodes and no nodeCount, so its capacity is zero.",
    "List the pool's nodes, or give nodeSelector with nodeCount.",
)


@check
def check_node_membership(model: Model) -> Iterator[Finding]:
    first_seen: dict[str, tuple[str, Location]] = {}
    for pool_name in sorted(model.pools):
        pool = model.pools[pool_name]
        for node in pool.nodes:
            where = pool.at("nodes", node.index, "name")
            if node.name in first_seen:
                other, location = first_seen[node.name]
                yield make(NODE_IN_TWO_POOLS, f"node '{node.name}' is already in pool '{other}'", where, location)
                continue
            first_seen[node.name] = (pool.name, where)


@check
def check_topology(model: Model) -> Iterator[Finding]:
    for pool in model.pools.values():
        levels = pool.topology_levels
        if len(set(levels)) != len(levels) or (HOSTNAME in levels and levels[-1] != HOSTNAME):
            yield make(
                TOPOLOGY_LEVELS,
                f"pool '{pool.name}': topology levels {list(levels)} repeat a label or put "
                f"{HOSTNAME} above the lowest level",
                pool.at("topology", "levels"),
            )
        for node in pool.nodes:
            labels = dict(node.labels)
            for level in levels:
                if level != HOSTNAME and level not in labels:
                    yield make(
                        TOPOLOGY_LABEL_MISSING,
                        f"node '{node.name}' has no value for topology level '{level}'",
                        pool.at("nodes", node.index, "name"),
                    )
        if not pool.nodes and not pool.node_count:
            yield make(NO_NODES, f"pool '{pool.name}' has no nodes", pool.doc.locate(("metadata", "name")))
