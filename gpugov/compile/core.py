"""Core Kubernetes objects per tenant namespace: Namespace, the tenant roles' RoleBindings, ResourceQuota.

The ResourceQuota is a backstop: a pod that bypasses the queue still cannot request more
accelerators in one namespace than its tenant may hold at most (nominal plus what it may
borrow, never more than the pools physically have).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from gpugov.compile.common import Object, Scope, metadata, resource_order, tenant_labels
from gpugov.compile.fleet import worker_fleets
from gpugov.compile.kueue import queue_flavors
from gpugov.compile.roles import role_bindings
from gpugov.declarations.model import Tenant
from gpugov.kube.names import VOLCANO_QUEUE_ANNOTATION
from gpugov.kube.quantity import format_quantity
from gpugov.kube.resources import is_accelerator

RESOURCEQUOTA_NAME = "gpugov-accelerators"


# A tenant's namespace holds its workloads and data: a GitOps sync that prunes must never delete
# it when the tenant is removed from Git (gpugov apply and Pulumi keep namespaces too).
KEEP_ON_PRUNE = {
    "argocd.argoproj.io/sync-options": "Prune=false",
    "kustomize.toolkit.fluxcd.io/prune": "disabled",
}


def namespace(scope: Scope, tenant: Tenant, name: str) -> Object:
    annotations = dict(KEEP_ON_PRUNE)
    if scope.backend == "volcano":
        annotations[VOLCANO_QUEUE_ANNOTATION] = tenant.name
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": metadata(name, tenant, {**tenant_labels(tenant), **pod_security_labels(scope)},
                             annotations=annotations),
    }


POD_SECURITY = "pod-security.kubernetes.io/"


def pod_security_labels(scope: Scope) -> dict[str, str]:
    """Pod Security Admission on a tenant namespace, at Guardrails.isolation.podSecurity: what keeps
    privileged containers, hostPath /dev mounts and host namespaces (accelerators without a resource
    request) out. Tenants cannot relabel their namespaces (their roles hold no namespace writes)."""
    level = scope.model.limits.isolation.pod_security
    return {f"{POD_SECURITY}enforce": level, f"{POD_SECURITY}enforce-version": "latest", f"{POD_SECURITY}warn": level}


def accelerator_ceiling(scope: Scope, tenant: Tenant) -> dict[str, Decimal]:
    """Most of each accelerator resource the tenant can hold: nominal + borrowable, capped by capacity.

    Without a department (or when it must never borrow, see Model.never_borrows) it holds its
    nominal quota only. With one it may borrow in every pool of its queue: up to its
    borrowingLimit where one is set, else up to all the pool has."""
    flavors, covered = queue_flavors(scope, tenant)
    accelerators = [r for r in covered if is_accelerator(r)]
    quotas = [(q.pool, rq) for q in scope.quotas[tenant.name] for rq in q.resources]
    if not tenant.department or scope.model.never_borrows(tenant):
        nominal = dict.fromkeys(accelerators, Decimal(0))
        for _, rq in quotas:
            if rq.resource in nominal:
                nominal[rq.resource] += rq.nominal
        return nominal
    physical = scope.capacity_of(frozenset(flavors))
    total = {r: physical.get(r, Decimal(0)) for r in accelerators}
    for pool, rq in quotas:
        if rq.resource in total and rq.borrowing_limit is not None:
            pool_capacity = scope.pools[pool].capacity.get(rq.resource, Decimal(0))
            total[rq.resource] += rq.nominal + rq.borrowing_limit - pool_capacity
    return {r: min(total[r], physical.get(r, Decimal(0))) for r in accelerators}


def resource_quota(scope: Scope, tenant: Tenant, name: str) -> Object | None:
    ceiling = accelerator_ceiling(scope, tenant)
    if not ceiling:
        return None
    hard: dict[str, Any] = {f"requests.{r}": format_quantity(ceiling[r]) for r in sorted(ceiling, key=resource_order)}
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": metadata(RESOURCEQUOTA_NAME, tenant, tenant_labels(tenant), name),
        "spec": {"hard": hard},
    }


def compile_core(scope: Scope) -> list[Object]:
    objects: list[Object] = []
    for tenant in scope.tenants.values():
        for name in sorted(tenant.namespaces):
            objects.append(namespace(scope, tenant, name))
            # Kueue: no ResourceQuota. The admission policies send every accelerator through a
            # queue and the ClusterQueue holds the tenant's ceiling across all its namespaces and
            # pools; a per-namespace quota would repeat that ceiling in every namespace and refuse
            # the gated pods of Kueue's pod integration at creation instead of letting them queue.
            backstop = resource_quota(scope, tenant, name) if scope.backend == "volcano" else None
            # gpugov's own tenant roles (compile.roles), never the built-in edit.
            objects.extend(role_bindings(tenant, name, view_only=bool(worker_fleets(scope, tenant))))
            if backstop is not None:
                objects.append(backstop)
    return objects
