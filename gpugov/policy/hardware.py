"""Pools are well formed: each node in one pool, topology labels present, nodes declared."""

from __future__ import annotations

from collections.abc import Iterator

from gpugov.compile.volcano import node_group
from gpugov.declarations.model import GPUPool, Model
from gpugov.findings import Finding, Level, make, rule
from gpugov.i18n import Joined, Text
from gpugov.kube.names import VOLCANO_NODEGROUP_LABEL
from gpugov.policy.checks import check

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
CPU_MEMORY_UNKNOWN = rule(
    "GG054",
    "pool-cpu-memory-unknown",
    Level.ERROR,
    "A Kueue pool declares no nodeResources cpu or memory while a tenant's quota there leaves them undeclared, "
    "so its ClusterQueue gets 0 of them and Kueue admits no pod that requests CPU or memory on that pool.",
    "Declare spec.nodeResources (cpu and memory per node) on the pool, or cpu and memory in the tenant's quota.",
)

VOLCANO_NODE_GROUP = rule(
    "GG055",
    "volcano-node-group",
    Level.ERROR,
    "A pool of a Volcano cluster has no node group of its own: it selects its nodes by nodeSelector without "
    f"{VOLCANO_NODEGROUP_LABEL}, so no node carries the group its tenants' Queues require and their jobs never schedule "
    "(gpugov labels only nodes listed by name), or it shares its node group with another pool.",
    f"Add {VOLCANO_NODEGROUP_LABEL}: <group> (e.g. the pool's name) to the pool's nodeSelector.matchLabels and give the "
    f"nodes that label (kubectl label nodes -l <selector> {VOLCANO_NODEGROUP_LABEL}=<group>); one node group per pool.",
)

EVERY_NODE = rule(
    "GG056",
    "pool-selects-every-node",
    Level.WARNING,
    "A pool's nodeSelector is empty ({}): like a Kueue ResourceFlavor without nodeLabels it selects every node of its "
    "cluster, so gpugov cannot govern its nodes as a pool's: it labels and taints none of them, "
    "gpugov-pool-placement cannot keep work that requests no accelerator off them (no node label picks them out), "
    "and where the cluster has other pools their nodes are this pool's too (a workload admitted here can run there, "
    "outside their quotas).",
    "Give the pool's nodes a label of their own and select it (nodeSelector.matchLabels with nodeCount), or list "
    "them by name (spec.nodes); declare taints only where the nodes carry them.",
)
EVERY_NODE_TOPOLOGY = rule(
    "GG057",
    "every-node-topology",
    Level.ERROR,
    "A pool of a Kueue cluster declares topology levels while a pool of the same cluster selects every node: Kueue "
    "refuses a topology-aware flavor without nodeLabels, and a queue mixing topology-aware flavors with others gives "
    "workloads that ask for no topology only the others, so gpugov compiles no flavor of that cluster "
    "topology-aware and the levels would not hold.",
    "Select the every-node pool's nodes by a label of their own (nodeSelector.matchLabels), or drop topology.levels.",
)

TOPOLOGY_OFF = rule(
    "GG058",
    "topology-without-tas",
    Level.ERROR,
    "A pool of a Kueue cluster declares topology levels while its Cluster sets topologyAwareScheduling: false: gpugov "
    "then compiles no Topology and no topology-aware flavor for that cluster, so the levels would not hold.",
    "Drop the pool's topology.levels, or set topologyAwareScheduling: true on the Cluster (every flavor of the "
    "cluster becomes topology-aware: Kueue then places each job on nodes with room for it).",
)


@check
def check_topology_without_tas(model: Model) -> Iterator[Finding]:
    """Topology levels on a pool whose cluster turns topology-aware scheduling off."""
    for pool_name in sorted(model.pools):
        pool = model.pools[pool_name]
        cluster = model.pool_cluster(pool)
        if not pool.topology_levels or not cluster:
            continue
        declared = model.cluster(cluster)
        if declared.backend == "kueue" and not declared.topology_aware_scheduling:
            yield make(
                TOPOLOGY_OFF,
                Text("pool '{pool}' declares topology levels, but cluster '{cluster}' sets topologyAwareScheduling: "
                     "false: no flavor of that cluster is topology-aware", pool=pool.name, cluster=cluster),
                pool.at("topology", "levels"),
                declared.at("topologyAwareScheduling"),
            )


@check
def check_every_node(model: Model) -> Iterator[Finding]:
    """What gpugov cannot govern of a pool that selects every node (an imported ResourceFlavor without nodeLabels)."""
    for pool_name in sorted(model.pools):
        pool = model.pools[pool_name]
        if not pool.every_node:
            continue
        cluster = model.pool_cluster(pool) or ""
        yield make(
            EVERY_NODE,
            Text("pool '{pool}' selects every node of cluster '{cluster}' (nodeSelector {{}}), as a Kueue ResourceFlavor "
                 "without nodeLabels: gpugov labels none of its nodes, and gpugov-pool-placement cannot keep work that "
                 "requests no accelerator off them, since no node label picks them out", pool=pool.name,
                 cluster=cluster),
            pool.at("nodeSelector"),
        )
        if pool.taints:
            yield make(
                EVERY_NODE,
                Text("pool '{pool}' selects every node but declares taints ({taints}): gpugov taints none of its nodes "
                     "(that would be every node of the cluster, the control plane's and other pools' too); its flavor "
                     "admits only workloads that tolerate them, and those run on any node, tainted or not",
                     pool=pool.name, taints=", ".join(t.key for t in pool.taints)),
                pool.at("taints"),
            )
        others = [p for n, p in sorted(model.pools.items()) if n != pool.name and model.pool_cluster(p) == cluster]
        if cluster and model.cluster(cluster).backend == "kueue":
            for other in [pool, *others]:
                if other.topology_levels:
                    yield make(
                        EVERY_NODE_TOPOLOGY,
                        Text("pool '{other}' declares topology levels, but pool '{pool}' of cluster '{cluster}' "
                             "selects every node: Kueue refuses a topology-aware flavor without nodeLabels, so no "
                             "flavor of that cluster is topology-aware", other=other.name, pool=pool.name,
                             cluster=cluster),
                        other.at("topology", "levels"),
                        pool.at("nodeSelector"),
                    )
        if others:
            yield make(
                EVERY_NODE,
                Text("pool '{pool}' selects every node of cluster '{cluster}', the nodes of {others} too: a workload "
                     "admitted to it can run on theirs, outside their tenants' quotas, where their taints let it",
                     pool=pool.name, cluster=cluster, others=Joined(", ", [f"'{p.name}'" for p in others])),
                pool.at("nodeSelector"),
                *(p.name_at() for p in others),
            )


@check
def check_cpu_memory_known(model: Model) -> Iterator[Finding]:
    """Every ClusterQueue covers cpu and memory; an unknown pool size would compile to nominal 0."""
    for tenant_name in sorted(model.tenants):
        tenant = model.tenants[tenant_name]
        for quota in tenant.quotas:
            pool = model.pools.get(quota.pool)
            cluster = model.pool_cluster(pool) if pool else None
            if pool is None or cluster is None or model.cluster(cluster).backend != "kueue":
                continue
            declared = {rq.key for rq in quota.resources}
            missing = [r for r in ("cpu", "memory") if r not in declared and r not in pool.capacity]
            if missing:
                yield make(
                    CPU_MEMORY_UNKNOWN,
                    Text("tenant '{tenant}' has quota on pool '{pool}', which declares no nodeResources {either}: its "
                         "ClusterQueue would get 0 {both} there, so no pod requesting them is admitted",
                         tenant=tenant.name, pool=pool.name, either=Joined(" or ", missing),
                         both=Joined(" and ", missing)),
                    tenant.at("quotas", quota.index, "pool"),
                    pool.name_at(),
                )


@check
def check_node_membership(model: Model) -> Iterator[Finding]:
    first_seen: dict[str, tuple[GPUPool, int]] = {}  # located only when a node shows up twice
    for pool_name in sorted(model.pools):
        pool = model.pools[pool_name]
        for node in pool.nodes:
            if node.name in first_seen:
                other, index = first_seen[node.name]
                yield make(NODE_IN_TWO_POOLS, Text("node '{node}' is already in pool '{pool}'", node=node.name,
                                                   pool=other.name), pool.at("nodes", node.index, "name"),
                           other.at("nodes", index, "name"))
                continue
            first_seen[node.name] = (pool, node.index)


@check
def check_topology(model: Model) -> Iterator[Finding]:
    for pool in model.pools.values():
        levels = pool.topology_levels
        if len(set(levels)) != len(levels) or (HOSTNAME in levels and levels[-1] != HOSTNAME):
            yield make(
                TOPOLOGY_LEVELS,
                Text("pool '{pool}': topology levels {levels} repeat a label or put {hostname} above the lowest level",
                     pool=pool.name, levels=list(levels), hostname=HOSTNAME),
                pool.at("topology", "levels"),
            )
        for node in pool.nodes:
            labels = dict(node.labels)
            for level in levels:
                if level != HOSTNAME and level not in labels:
                    yield make(
                        TOPOLOGY_LABEL_MISSING,
                        Text("node '{node}' has no value for topology level '{level}'", node=node.name, level=level),
                        pool.at("nodes", node.index, "name"),
                    )
        if not pool.nodes and not pool.node_count:
            yield make(NO_NODES, Text("pool '{pool}' has no nodes", pool=pool.name), pool.name_at())


@check
def check_volcano_node_groups(model: Model) -> Iterator[Finding]:
    """Volcano pins a Queue to nodes only through the node group label (compile/volcano.py)."""
    first: dict[tuple[str, str], str] = {}
    for pool_name in sorted(model.pools):
        pool = model.pools[pool_name]
        cluster = model.pool_cluster(pool)
        if cluster is None or model.cluster(cluster).backend != "volcano":
            continue
        if (pool.node_selector or pool.every_node) and not pool.nodes and \
                VOLCANO_NODEGROUP_LABEL not in dict(pool.node_selector):
            yield make(
                VOLCANO_NODE_GROUP,
                Text("pool '{pool}' of Volcano cluster '{cluster}' selects its nodes without {label}: its tenants' "
                     "Queues would require node group '{pool}', which no node carries", pool=pool.name, cluster=cluster,
                     label=VOLCANO_NODEGROUP_LABEL),
                pool.at("nodeSelector", "matchLabels") if pool.node_selector else pool.at("nodeSelector"),
            )
            continue
        group = node_group(pool)
        other = first.setdefault((cluster, group), pool.name)
        if other != pool.name:
            yield make(
                VOLCANO_NODE_GROUP,
                Text("pool '{pool}' has node group '{group}', like pool '{other}' of Volcano cluster '{cluster}': a "
                     "Queue pinned to either could run on the nodes of both", pool=pool.name, group=group, other=other,
                     cluster=cluster),
                pool.at("nodeSelector", "matchLabels") if pool.node_selector else pool.name_at(),
            )
