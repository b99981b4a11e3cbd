"""References resolve: pools, departments, priority classes, clusters, MIG layouts."""

from __future__ import annotations

from collections.abc import Iterator

from gpugov.declarations.model import Decl, Model
from gpugov.findings import Finding, Level, make, rule
from gpugov.policy.checks import check

UNKNOWN_REFERENCE = rule(
    "GG020",
    "unknown-reference",
    Level.ERROR,
    "A declaration names a pool, department, priority class, cluster or MIG layout that is not declared.",
    "Fix the name or declare the object it refers to.",
)
DEPARTMENT_CYCLE = rule(
    "GG021",
    "department-cycle",
    Level.ERROR,
    "Departments form a cycle through their parents; Kueue would disable every queue in it.",
    "Make the department tree acyclic.",
)
AMBIGUOUS_CLUSTER = rule(
    "GG022",
    "pool-cluster-ambiguous",
    Level.ERROR,
    "Several clusters are declared and a pool does not say which one it belongs to.",
    "Set spec.cluster on the pool.",
)


def _unknown(decl: Decl, what: str, name: str, known: object, *path: object) -> Finding:
    names = sorted(known) if known else []  # type: ignore[call-overload]
    choices = f" (declared: {', '.join(names)})" if names and len(names) <= 12 else ""
    return make(UNKNOWN_REFERENCE, f"{decl.name}: unknown {what} '{name}'{choices}", decl.at(*path))


@check
def check_references(model: Model) -> Iterator[Finding]:
    clusters = set(model.cluster_names())
    for pool in model.pools.values():
        if pool.cluster and pool.cluster not in clusters:
            yield _unknown(pool, "cluster", pool.cluster, clusters, "cluster")
        if not pool.cluster and len(clusters) > 1:
            yield make(
                AMBIGUOUS_CLUSTER,
                f"pool '{pool.name}' must name its cluster, one of: {', '.join(sorted(clusters))}",
                pool.name_at(),
            )
        for node in pool.nodes:
            if node.mig_layout and node.mig_layout not in pool.mig_layouts:
                yield _unknown(pool, "MIG layout", node.mig_layout, pool.mig_layouts, "nodes", node.index, "migLayout")
    for department in model.departments.values():
        if department.parent and department.parent not in model.departments:
            yield _unknown(department, "parent department", department.parent, model.departments, "parent")
        for quota in department.quotas:
            if quota.pool not in model.pools:
                yield _unknown(department, "pool", quota.pool, model.pools, "quotas", quota.index, "pool")
    for tenant in model.tenants.values():
        if tenant.department and tenant.department not in model.departments:
            yield _unknown(tenant, "department", tenant.department, model.departments, "department")
        for index, cluster in enumerate(tenant.clusters):
            if cluster not in clusters:
                yield _unknown(tenant, "cluster", cluster, clusters, "clusters", index)
        for quota in tenant.quotas:
            if quota.pool not in model.pools:
                yield _unknown(tenant, "pool", quota.pool, model.pools, "quotas", quota.index, "pool")
        for queue in tenant.queues:
            for index, name in enumerate(queue.priority_classes):
                if name not in model.priority_classes:
                    yield _unknown(
                        tenant,
                        "priority class",
                        name,
                        model.priority_classes,
                        "queues",
                        queue.index,
                        "priorityClasses",
                        index,
                    )


@check
def check_department_cycles(model: Model) -> Iterator[Finding]:
    reported: set[str] = set()
    for start in sorted(model.departments):
        path: list[str] = []
        current: str | None = start
        while current and current in model.departments and current not in path:
            path.append(current)
            current = model.departments[current].parent
        if current in path and current not in reported:
            cycle = path[path.index(current) :]
            reported.update(cycle)
            department = model.departments[current]
            yield make(DEPARTMENT_CYCLE, "department cycle: " + " -> ".join([*cycle, current]), department.at("parent"))
