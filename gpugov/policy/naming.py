"""Names are valid Kubernetes names, each namespace and queue belongs to one tenant, and no
tenant claims a namespace the platform keeps (a tenant's namespaces get its RoleBindings)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from fnmatch import fnmatchcase, translate

from gpugov.declarations.model import RESERVED_NAMESPACES, Model
from gpugov.findings import Finding, Level, Location, make, rule
from gpugov.i18n import Joined, Text
from gpugov.policy.checks import change_check, check

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

INVALID_NAME = rule(
    "GG011",
    "invalid-name",
    Level.ERROR,
    "A name is not a DNS-1123 label (lower case letters, digits and '-', at most 63 characters).",
    "Kubernetes object names must be DNS-1123 labels: use lower case and '-'.",
)
SHARED_NAMESPACE = rule(
    "GG012",
    "namespace-in-two-tenants",
    Level.ERROR,
    "A namespace is claimed by more than one tenant. With the base revision known (plan, validate --base) it is "
    "reported at the claim the change added, the older claim related; without one at every claim, each naming the others.",
    "A namespace belongs to exactly one tenant: access is per namespace (the tenant's RoleBindings let its owners and "
    "members submit there, and gpugov-queue-access lets a workload name any queue of its namespace), so two tenants' "
    "queues in one namespace would let each tenant's members spend the other's quota, and reclaim, the queue view and "
    "the namespace's gpugov.io/tenant label know one tenant per namespace. Give each tenant a namespace of its own.",
)
QUEUE_NAMESPACE = rule(
    "GG013",
    "queue-namespace-not-owned",
    Level.ERROR,
    "A queue lives in a namespace that is not one of its tenant's namespaces.",
    "Add the namespace to spec.namespaces or move the queue.",
)
DUPLICATE_QUEUE = rule(
    "GG014",
    "duplicate-queue",
    Level.ERROR,
    "Two queues share a name in the same namespace.",
    "Queue names are unique per namespace.",
)
RESERVED_NAMESPACE = rule(
    "GG015",
    "reserved-namespace",
    Level.ERROR,
    "A tenant claims a reserved namespace (kube-*, default, the GPU Operator's, Kueue's, Volcano's, every "
    "cluster's gpugov operations and MIG config namespaces, Guardrails.reservedNamespaces), where its RoleBindings "
    "would give its owners and members the tenant roles.",
    "Give the tenant a namespace of its own; Guardrails.reservedNamespaces reserves more.",
)


def _is_label(name: str) -> bool:
    return len(name) <= 63 and DNS_LABEL.match(name) is not None


@check
def check_names(model: Model) -> Iterator[Finding]:
    groups = [model.clusters, model.pools, model.departments, model.tenants, model.priority_classes]
    for group in groups:
        for decl in group.values():
            if not _is_label(decl.name):
                kind = decl.kind
                yield make(
                    INVALID_NAME,
                    Text("{kind} name '{name}' is not a DNS-1123 label", kind=kind, name=decl.name),
                    decl.name_at(),
                )
    for tenant in model.tenants.values():
        for index, namespace in enumerate(tenant.namespaces):
            if not _is_label(namespace):
                yield make(
                    INVALID_NAME, Text("namespace '{namespace}' is not a DNS-1123 label", namespace=namespace),
                    tenant.at("namespaces", index)
                )
        for queue in tenant.queues:
            if not _is_label(queue.name):
                yield make(
                    INVALID_NAME,
                    Text("queue name '{queue}' is not a DNS-1123 label", queue=queue.name),
                    tenant.at("queues", queue.index, "name"),
                )
    for pool in model.pools.values():
        for layout in pool.mig_layouts:
            if not _is_label(layout):
                yield make(
                    INVALID_NAME,
                    Text("MIG layout name '{layout}' is not a DNS-1123 label", layout=layout),
                    pool.at("migLayouts", layout, key=True),
                )


def _claims(model: Model) -> dict[str, list[tuple[str, Location]]]:
    """namespace -> every (tenant, location of its first claim), tenants sorted by name; only the
    namespaces that more than one tenant claims (a location is looked up only for a finding)."""
    claims: dict[str, list[tuple[str, int]]] = {}
    for name in sorted(model.tenants):
        tenant = model.tenants[name]
        for index, namespace in enumerate(tenant.namespaces):
            holders = claims.setdefault(namespace, [])
            if all(holder != name for holder, _ in holders):
                holders.append((name, index))
    return {namespace: [(name, model.tenants[name].at("namespaces", index)) for name, index in holders]
            for namespace, holders in claims.items() if len(holders) > 1}


def any_pattern(patterns: list[str]) -> Callable[[str], object]:
    """A test that is true where fnmatchcase(name, pattern) is for any of `patterns`: one regular
    expression instead of a call per pattern (each is fnmatch's own translation, anchored)."""
    if not patterns:
        return lambda name: None
    return re.compile("|".join(translate(pattern) for pattern in patterns)).match


@change_check
def check_shared_namespaces(model: Model, base: Model | None) -> Iterator[Finding]:
    """GG012 where the change is: with a base, at each claim the base did not have (the claims it
    had are the related locations); without one, at every claim, each naming the others."""
    old = {(t.name, ns) for t in base.tenants.values() for ns in t.namespaces} if base is not None else set()
    for namespace, holders in sorted(_claims(model).items()):
        if len(holders) < 2:
            continue
        new = [(tenant, at) for tenant, at in holders if (tenant, namespace) not in old]
        for tenant, at in new or holders:
            others = [(t, loc) for t, loc in holders if t != tenant]
            if new and base is not None:
                # the parts are built apart from Joined: Babel does not extract a Text nested in another call
                parts = [Text("tenant '{tenant}' ({location}, in the base revision)", tenant=t, location=loc)
                         if (t, namespace) in old else Text("tenant '{tenant}' ({location}, new too)", tenant=t,
                                                            location=loc) for t, loc in others]
                named = Joined(", ", parts)
                message = Text("namespace '{namespace}' is newly claimed by tenant '{tenant}' here; also claimed by "
                               "{others}", namespace=namespace, tenant=tenant, others=named)
            else:
                parts = [Text("tenant '{tenant}' ({location})", tenant=t, location=loc) for t, loc in others]
                named = Joined(", ", parts)
                message = Text("namespace '{namespace}' is claimed by tenant '{tenant}' here and by {others}",
                               namespace=namespace, tenant=tenant, others=named)
            yield make(SHARED_NAMESPACE, message, at, *(loc for _, loc in others))


@check
def check_namespace_ownership(model: Model) -> Iterator[Finding]:
    for tenant in model.tenants.values():
        seen: set[tuple[str, str]] = set()
        for queue in tenant.queues:
            if queue.namespace not in tenant.namespaces:
                yield make(
                    QUEUE_NAMESPACE,
                    Text("queue '{queue}' is in namespace '{namespace}', which tenant '{tenant}' does not own",
                         queue=queue.name, namespace=queue.namespace, tenant=tenant.name),
                    tenant.at("queues", queue.index, "namespace"),
                )
            if (queue.namespace, queue.name) in seen:
                yield make(
                    DUPLICATE_QUEUE,
                    Text("queue '{queue}' appears twice in namespace '{namespace}'", queue=queue.name,
                         namespace=queue.namespace),
                    tenant.at("queues", queue.index, "name"),
                )
            seen.add((queue.namespace, queue.name))


def reserved_patterns(model: Model) -> list[tuple[str, str]]:
    """(pattern, why) of every namespace no tenant may claim."""
    patterns: list[tuple[str, str]] = [(pattern, Text("a system, scheduler or GPU Operator namespace"))
                                       for pattern in RESERVED_NAMESPACES]
    patterns += [(pattern, "Guardrails.reservedNamespaces") for pattern in model.limits.reserved_namespaces]
    for name in model.cluster_names():
        cluster = model.cluster(name)
        patterns.append((cluster.operations_namespace,
                         Text("gpugov's operations namespace on cluster {cluster}", cluster=name)))
        patterns.append((cluster.mig_config_namespace, Text("the MIG config namespace on cluster {cluster}", cluster=name)))
    return patterns


@check
def check_reserved_namespaces(model: Model) -> Iterator[Finding]:
    patterns = reserved_patterns(model)
    reserved = any_pattern([p for p, _ in patterns])
    for tenant in model.tenants.values():
        for index, namespace in enumerate(tenant.namespaces):
            if not reserved(namespace):
                continue
            match = next(((p, why) for p, why in patterns if fnmatchcase(namespace, p)), None)
            if match is not None:
                pattern, why = match
                reason = why if pattern == namespace else Text("matches '{pattern}': {why}", pattern=pattern, why=why)
                yield make(
                    RESERVED_NAMESPACE,
                    Text("tenant '{tenant}' claims namespace '{namespace}', which is reserved ({reason}): gpugov "
                         "would bind its owners and members to the tenant roles there",
                         tenant=tenant.name, namespace=namespace, reason=reason),
                    tenant.at("namespaces", index),
                )


ADOPT_UNCLAIMED = rule(
    "GG093",
    "adopt-unclaimed-namespace",
    Level.ERROR,
    "A tenant's spec.adoptNamespaces names a namespace that is not in its spec.namespaces.",
    "Adopt only a namespace the tenant claims: add it to spec.namespaces, or drop it from spec.adoptNamespaces.",
)


@check
def check_adopted_namespaces(model: Model) -> Iterator[Finding]:
    for tenant in model.tenants.values():
        for index, namespace in enumerate(tenant.adopt_namespaces):
            if namespace not in tenant.namespaces:
                yield make(
                    ADOPT_UNCLAIMED,
                    Text("tenant '{tenant}' adopts namespace '{namespace}', which is not one of its namespaces "
                         "({namespaces})", tenant=tenant.name, namespace=namespace,
                         namespaces=", ".join(tenant.namespaces)),
                    tenant.at("adoptNamespaces", index),
                )
