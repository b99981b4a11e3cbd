"""What every compiled object shares: its metadata (vocabulary in gpugov.kube.objects) and the cluster scope."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from functools import cached_property
from typing import Any

from gpugov.declarations.equivalents import gpu_equivalents
from gpugov.declarations.model import Cluster, Decl, Department, GPUPool, Model, PoolQuota, Tenant
from gpugov.i18n import Text
from gpugov.kube.objects import (  # noqa: F401  (re-exported for the compile modules)
    ANNOTATION_SOURCE,
    LABEL_COST_CENTER,
    LABEL_DEPARTMENT,
    LABEL_POOL,
    LABEL_PRIORITY_CLASS,
    LABEL_TENANT,
    MANAGED_BY,
    MANAGER,
    Object,
)

LISTED_LAST = ("cpu", "memory", "pods")  # a queue lists these after its accelerators, in this order
_NOT_LABEL = re.compile(r"[^A-Za-z0-9._-]")


def metadata(
    name: str,
    decl: Decl,
    labels: dict[str, str],
    namespace: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = {MANAGED_BY: MANAGER, **labels}
    meta["annotations"] = {ANNOTATION_SOURCE: decl.origin, **(annotations or {})}
    return meta


def tenant_labels(tenant: Tenant) -> dict[str, str]:
    labels = {LABEL_TENANT: tenant.name}
    if tenant.department:
        labels[LABEL_DEPARTMENT] = tenant.department
    if tenant.cost_center:
        labels[LABEL_COST_CENTER] = _label_value(tenant.cost_center)
    return labels


def _label_value(text: str) -> str:
    return _NOT_LABEL.sub("-", text)[:63].strip("-_.")


def resource_order(resource: str) -> tuple[int, str]:
    """Accelerators first (sorted), then cpu, memory, pods: one order for every queue."""
    if resource in LISTED_LAST:
        return (1 + LISTED_LAST.index(resource), resource)
    return (0, resource)


class Backend(StrEnum):
    """The scheduler a cluster's quotas compile for."""

    KUEUE = "kueue"
    VOLCANO = "volcano"


BACKENDS = tuple(b.value for b in Backend)


@dataclass
class Scope:
    """The resolved target of one compile (cluster and backend, resolved once by `select` and
    carried from there) and the part of the model it gets: its pools, and tenants' quotas on them."""

    model: Model
    cluster: Cluster
    backend: Backend
    pools: dict[str, GPUPool] = field(default_factory=dict)
    tenants: dict[str, Tenant] = field(default_factory=dict)
    departments: dict[str, Department] = field(default_factory=dict)
    # quotas per tenant/department, restricted to this cluster's pools, in declared order
    quotas: dict[str, tuple[PoolQuota, ...]] = field(default_factory=dict)
    department_quotas: dict[str, tuple[PoolQuota, ...]] = field(default_factory=dict)
    _capacity_cache: dict[frozenset[str], dict[str, Decimal]] = field(default_factory=dict, repr=False)
    _equivalents_cache: dict[str, tuple[dict[str, Decimal], Decimal]] = field(default_factory=dict, repr=False,
                                                                              compare=False)
    queue_flavors_cache: dict[str, tuple[list[str], list[str]]] = field(default_factory=dict, repr=False, compare=False)
    # A borrow-only flavor entry of a resource group (every covered resource at nominal 0) per
    # covered resources and pool, built once and shared by the queues of this compile that list it.
    borrow_only_flavors: dict[tuple[str, ...], dict[str, dict[str, Any]]] = field(
        default_factory=dict, repr=False, compare=False)
    # A queue's resourceGroups per the exact inputs that make them (_resource_groups_key in
    # compile/kueue.py), shared by the queues of this compile whose groups come out equal.
    resource_groups: dict[tuple[Any, ...], list[dict[str, Any]]] = field(
        default_factory=dict, repr=False, compare=False)

    def root_of(self, department: str) -> str:
        return self._roots.get(department, department)

    @cached_property
    def _roots(self) -> dict[str, str]:
        return {name: self.model.root_department(name) for name in self.model.departments}

    def pool_equivalents(self, name: str) -> tuple[dict[str, Decimal], Decimal]:
        """(gpu_equivalents of the pool, its whole capacity in GPU equivalents), once per pool."""
        found = self._equivalents_cache.get(name)
        if found is None:
            pool = self.pools[name]
            weights = gpu_equivalents(pool)
            whole = sum((amount * weights.get(r, Decimal(0)) for r, amount in pool.capacity.items()), Decimal(0))
            found = self._equivalents_cache[name] = (weights, whole)
        return found

    def capacity_of(self, pools: frozenset[str]) -> dict[str, Decimal]:
        """Summed capacity per resource of a set of pools (cached: queues of one cohort share it)."""
        if pools not in self._capacity_cache:
            total: dict[str, Decimal] = {}
            for name in pools:
                for resource, amount in self.pools[name].capacity.items():
                    total[resource] = total.get(resource, Decimal(0)) + amount
            self._capacity_cache[pools] = total
        return self._capacity_cache[pools]

    @cached_property
    def cohort_offers(self) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
        """Per root cohort: the pools and resources anyone in its tree holds quota in.

        Computed once per scope: every tenant's queue lists these flavors and resources so it
        can borrow there (see kueue.py)."""
        pools: dict[str, set[str]] = {}
        resources: dict[str, set[str]] = {}
        owners = [(t.department, self.quotas[t.name]) for t in self.tenants.values() if t.department]
        owners += list(self.department_quotas.items())
        for department, quotas in owners:
            root = self.root_of(department)
            pools.setdefault(root, set()).update(q.pool for q in quotas)
            resources.setdefault(root, set()).update(rq.resource for q in quotas for rq in q.resources)
        return {root: (frozenset(pools[root]), frozenset(resources[root])) for root in pools}


class CompileError(ValueError):
    """The model cannot be compiled for the asked cluster (e.g. unknown cluster name)."""


def select(model: Model, *, cluster: str | None = None, backend: str | None = None) -> Scope:
    """Resolve --cluster/--backend once: the only cluster when none is named, the cluster's
    declared backend when none is asked; CompileError for an unknown one."""
    if backend is not None and backend not in BACKENDS:
        raise CompileError(f"unknown backend '{backend}' (choose {' or '.join(BACKENDS)})")
    names = model.cluster_names()
    if cluster is None:
        if len(names) > 1:
            raise CompileError(Text("this repository drives several clusters ({names}): choose one with --cluster",
                                    names=", ".join(names)))
        cluster = names[0]
    if cluster not in names:
        raise CompileError(f"unknown cluster '{cluster}' (declared: {', '.join(names)})")
    target = model.cluster(cluster)
    scope = Scope(model, target, Backend(backend or target.backend))
    scope.pools = {name: pool for name, pool in sorted(model.pools.items()) if model.pool_cluster(pool) == cluster}
    # A fleet's manager (issue #43) holds its tenants' namespaces and queues: their jobs queue there.
    dispatched = {t for fleet in model.fleets_managed_by(cluster) for t in fleet.tenant_names()}
    for name, tenant in sorted(model.tenants.items()):
        quotas = tuple(q for q in tenant.quotas if q.pool in scope.pools)
        wanted = cluster in tenant.clusters if tenant.clusters else bool(quotas) or not tenant.quotas
        wanted = wanted or name in dispatched
        if wanted:
            scope.tenants[name] = tenant
            scope.quotas[name] = quotas
    needed: set[str] = set()
    for tenant in scope.tenants.values():
        if tenant.department:
            needed.add(tenant.department)
            needed.update(model.ancestors(tenant.department))
    for name, department in model.departments.items():
        quotas = tuple(q for q in department.quotas if q.pool in scope.pools)
        if quotas:
            needed.add(name)
            needed.update(model.ancestors(name))
    for name in sorted(needed):
        if name in model.departments:
            scope.departments[name] = model.departments[name]
            scope.department_quotas[name] = tuple(q for q in model.departments[name].quotas if q.pool in scope.pools)
    return scope
