"""Whose a Workload's admission is and which pools it may have run in: the two rules the usage
ledger reads every admitted segment by (segments.segments takes them as callables)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from gpugov.declarations.model import GPUPool, Model
from gpugov.kube.objects import Object
from gpugov.queueing.clusterqueue import ClusterQueue, cluster_queue
from gpugov.queueing.workload import Workload
from gpugov.usage.ledger import cluster_pools


def workload_tenant(workload: Workload, tenants: Collection[str], owners: Mapping[str, str]) -> str:
    """The tenant a Workload is charged to: its ClusterQueue when that is a tenant's (gpugov names
    each tenant's queue after it), else the owner of its namespace, else its queue or namespace as read."""
    if workload.cluster_queue in tenants:
        return workload.cluster_queue
    return owners.get(workload.namespace) or workload.cluster_queue or f"(namespace {workload.namespace})"


def offered_pools(queue: ClusterQueue | None, resource: str, pools: Mapping[str, GPUPool]) -> list[str]:
    """The pools a queue lists `resource` in and that have it (queues list every covered resource on
    every flavor, at nominal 0 where the pool has none); none without a queue."""
    if queue is None:
        return []
    return [f for f in queue.offers(resource) if f in pools and resource in pools[f].capacity]


@dataclass(frozen=True)
class Attribution:
    """The two rules bound to one cluster's declarations and compiled ClusterQueues."""

    tenants: frozenset[str]
    owners: Mapping[str, str]  # namespace -> tenant
    queues: Mapping[str, ClusterQueue]
    pools: Mapping[str, GPUPool]

    def tenant_of(self, workload: Workload) -> str:
        return workload_tenant(workload, self.tenants, self.owners)

    def offers(self, workload: Workload, resource: str) -> list[str]:
        return offered_pools(self.queues.get(self.tenant_of(workload)), resource, self.pools)


def attribution(model: Model, cluster: str, objects: list[Object]) -> Attribution:
    queues = {o["metadata"]["name"]: cluster_queue(o) for o in objects if o["kind"] == "ClusterQueue"}
    return Attribution(frozenset(model.tenants), model.tenant_of_namespace(), queues, cluster_pools(model, cluster))


__all__ = ["Attribution", "attribution", "offered_pools", "workload_tenant"]
