"""References resolve: pools, departments, priority classes, clusters, MIG layouts."""

from __future__ import annotations

from collections.abc import Iterator

from gpugov.declarations.model import Decl, Model
from gpugov.findings import Finding, Level, make, rule
from gpugov.i18n import Text
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
    """`what` is a Text: the kind of thing referred to, in the reader's language."""
    names = sorted(known) if known else []  # type: ignore[call-overload]
    fields = {"decl": decl.name, "what": what, "name": name, "declared": ", ".join(names)}
    message = Text("{decl}: unknown {what} '{name}' (declared: {declared})", **fields) \
        if names and len(names) <= 12 else Text("{decl}: unknown {what} '{name}'", **fields)
    return make(UNKNOWN_REFERENCE, message, decl.at(*path))


@check
def check_references(model: Model) -> Iterator[Finding]:
    clusters = set(model.cluster_names())
    for pool in model.pools.values():
        if pool.cluster and pool.cluster not in clusters:
            yield _unknown(pool, Text("cluster"), pool.cluster, clusters, "cluster")
        if not pool.cluster and len(clusters) > 1:
            yield make(
                AMBIGUOUS_CLUSTER,
                Text("pool '{pool}' must name its cluster, one of: {clusters}", pool=pool.name,
                     clusters=", ".join(sorted(clusters))),
                pool.name_at(),
            )
        for node in pool.nodes:
            if node.mig_layout and node.mig_layout not in pool.mig_layouts:
                yield _unknown(pool, Text("MIG layout"), node.mig_layout, pool.mig_layouts, "nodes", node.index, "migLayout")
    for department in model.departments.values():
        if department.parent and department.parent not in model.departments:
            yield _unknown(department, Text("parent department"), department.parent, model.departments, "parent")
        for quota in department.quotas:
            if quota.pool not in model.pools:
                yield _unknown(department, Text("pool"), quota.pool, model.pools, "quotas", quota.index, "pool")
    for tenant in model.tenants.values():
        if tenant.department and tenant.department not in model.departments:
            yield _unknown(tenant, Text("department"), tenant.department, model.departments, "department")
        for index, cluster in enumerate(tenant.clusters):
            if cluster not in clusters:
                yield _unknown(tenant, Text("cluster"), cluster, clusters, "clusters", index)
        for quota in tenant.quotas:
            if quota.pool not in model.pools:
                yield _unknown(tenant, Text("pool"), quota.pool, model.pools, "quotas", quota.index, "pool")
        for queue in tenant.queues:
            for index, name in enumerate(queue.priority_classes):
                if name not in model.priority_classes:
                    yield _unknown(
                        tenant,
                        Text("priority class"),
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
            yield make(DEPARTMENT_CYCLE, Text("department cycle: {cycle}", cycle=" -> ".join([*cycle, current])),
                       department.at("parent"))
