"""What a tenant's users need to know, read from compile's objects (never re-derived): per cluster its
queues (LocalQueues on Kueue, the tenant's leaf Queue on Volcano), the priority classes each admits,
the pools it holds accelerators in, and one sample Job per pool that the cluster admits.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gpugov.declarations.model import Model, Tenant
from gpugov.kube.names import KUEUE_API, KUEUE_PRIORITY_LABEL, KUEUE_QUEUE_LABEL, VOLCANO_API, VOLCANO_QUEUE_ANNOTATION
from gpugov.kube.objects import LABEL_TENANT, RESTRICTED_CONTAINER, RESTRICTED_POD, Object
from gpugov.kube.resources import is_accelerator
from gpugov.reach import Tree


@dataclass(frozen=True)
class PriorityInfo:
    name: str
    value: int
    preemptible: bool
    description: str


@dataclass(frozen=True)
class QueueInfo:
    cluster: str
    backend: str
    namespace: str  # on Volcano the tenant's first namespace: its Queue serves every one of them
    name: str
    priority_classes: tuple[str, ...]  # what a job in it may ask for, lowest value first


@dataclass(frozen=True)
class PoolInfo:
    cluster: str
    backend: str
    pool: str
    model: str
    resource: str  # the accelerator resource a job asks for here
    nominal: Decimal  # guaranteed
    borrowing_limit: Decimal | None  # how much more it may borrow by its own limit; None: no limit
    node_labels: tuple[tuple[str, str], ...]  # what pins a pod to the pool (the ResourceFlavor's nodeLabels)
    queue: QueueInfo  # the queue its sample Job goes through
    extra: tuple[str, ...]  # other resources the queue covers and a pod must ask within (cpu, memory)
    # Kueue: the most its queue can ever hold here (gpugov.reach: nominal plus what the cohort tree can
    # lend within every borrowing and lending limit); None where only the borrowing limit is known (Volcano)
    maximum: Decimal | None = None

    @property
    def may_borrow(self) -> Decimal | None:
        """The most it can hold beyond its guarantee; None: no limit known."""
        if self.maximum is not None:
            return max(Decimal(0), self.maximum - self.nominal)
        return self.borrowing_limit


@dataclass(frozen=True)
class TenantFacts:
    tenant: Tenant
    platform_team: tuple[str, ...]
    priorities: dict[str, PriorityInfo]
    queues: tuple[QueueInfo, ...]
    pools: tuple[PoolInfo, ...]


class GuideError(Exception):
    """No such tenant, or one with nothing to guide to (no queue, no accelerator quota)."""


def tenant_facts(model: Model, compiled: dict[str, list[Object]], name: str) -> TenantFacts:
    """The facts of tenant `name` from a valid model and each cluster's compiled objects."""
    tenant = model.tenants.get(name)
    if tenant is None:
        known = ", ".join(sorted(model.tenants)) or "none"
        raise GuideError(f"no tenant {name!r} is declared (tenants: {known})")
    priorities = {pc.name: PriorityInfo(pc.name, pc.value, pc.preemptible, pc.description)
                  for pc in model.priority_classes.values()}
    queues: list[QueueInfo] = []
    pools: list[PoolInfo] = []
    for cluster in sorted(compiled):
        backend = model.cluster(cluster).backend
        objects = compiled[cluster]
        if backend == "volcano":
            found_queues, found_pools = _volcano(model, tenant, cluster, objects, priorities)
        else:
            found_queues, found_pools = _kueue(model, tenant, cluster, objects, priorities)
        queues += found_queues
        pools += found_pools
    if not queues:
        raise GuideError(f"tenant {name!r} has no queue on any cluster: nothing to submit to")
    return TenantFacts(tenant, tuple(model.limits.platform_team), priorities, tuple(queues), tuple(pools))


def _allowed(declared: tuple[str, ...], priorities: dict[str, PriorityInfo]) -> tuple[str, ...]:
    """A queue's priority classes, lowest first; none declared: the preemptible ones (the admission policy's rule)."""
    names = declared or tuple(p.name for p in priorities.values() if p.preemptible)
    return tuple(sorted((n for n in names if n in priorities), key=lambda n: (priorities[n].value, n)))


def _of_kind(objects: list[Object], api: str, kind: str) -> list[Object]:
    return [o for o in objects if o["kind"] == kind and o["apiVersion"] == api]


def _kueue(model: Model, tenant: Tenant, cluster: str, objects: list[Object],
           priorities: dict[str, PriorityInfo]) -> tuple[list[QueueInfo], list[PoolInfo]]:
    declared = {(q.namespace, q.name): q.priority_classes for q in tenant.queues}
    cluster_queues = {o["metadata"]["name"]: o for o in _of_kind(objects, KUEUE_API, "ClusterQueue")}
    flavors = {o["metadata"]["name"]: o for o in _of_kind(objects, KUEUE_API, "ResourceFlavor")}
    queues: list[tuple[QueueInfo, str]] = []
    for lq in _of_kind(objects, KUEUE_API, "LocalQueue"):
        meta = lq["metadata"]
        if meta.get("labels", {}).get(LABEL_TENANT) != tenant.name:
            continue
        info = QueueInfo(cluster, "kueue", meta["namespace"], meta["name"],
                         _allowed(declared.get((meta["namespace"], meta["name"]), ()), priorities))
        queues.append((info, lq["spec"]["clusterQueue"]))
    pools: dict[str, PoolInfo] = {}
    tree = Tree(objects)
    for info, cq_name in queues:
        cq = cluster_queues.get(cq_name)
        if cq is None:
            continue
        for group in cq["spec"].get("resourceGroups", []):
            covered = tuple(r for r in group.get("coveredResources", []) if r in ("cpu", "memory"))
            for flavor in group.get("flavors", []):
                pool = flavor["name"]
                found = _first_accelerator(flavor.get("resources", []))
                if pool in pools or found is None or pool not in model.pools:
                    continue
                resource, nominal, borrowing = found
                labels = tuple(sorted(flavors.get(pool, {}).get("spec", {}).get("nodeLabels", {}).items()))
                room = tree.room(cq_name, pool, resource)
                pools[pool] = PoolInfo(cluster, "kueue", pool, model.pools[pool].model_name, resource, nominal,
                                       borrowing, labels, info, covered, None if room is None else room.maximum)
    return [q for q, _ in queues], [pools[p] for p in sorted(pools)]


def _first_accelerator(resources: list[dict[str, Any]]) -> tuple[str, Decimal, Decimal | None] | None:
    """(resource, nominal, borrowing limit) of the first accelerator with a guaranteed quota of 1 or more."""
    for r in resources:
        nominal = Decimal(str(r.get("nominalQuota", 0)))
        if is_accelerator(r["name"]) and nominal >= 1:
            limit = r.get("borrowingLimit")
            return r["name"], nominal, None if limit is None else Decimal(str(limit))
    return None


def _volcano(model: Model, tenant: Tenant, cluster: str, objects: list[Object],
             priorities: dict[str, PriorityInfo]) -> tuple[list[QueueInfo], list[PoolInfo]]:
    leaf = next((o for o in _of_kind(objects, VOLCANO_API, "Queue")
                 if o["metadata"].get("labels", {}).get(LABEL_TENANT) == tenant.name), None)
    if leaf is None:
        return [], []
    classes = _allowed(tuple(sorted({pc for q in tenant.queues for pc in q.priority_classes})), priorities)
    namespace = tenant.namespaces[0] if tenant.namespaces else tenant.name
    info = QueueInfo(cluster, "volcano", namespace, leaf["metadata"]["name"], classes)
    pools = []
    for quota in tenant.quotas:
        pool = model.pools.get(quota.pool)
        if pool is None or model.pool_cluster(pool) != cluster:
            continue
        accelerator = next((r for r in quota.resources if is_accelerator(r.resource) and r.nominal >= 1), None)
        if accelerator is not None:
            pools.append(PoolInfo(cluster, "volcano", pool.name, pool.model_name, accelerator.resource,
                                  accelerator.nominal, accelerator.borrowing_limit, (), info,
                                  tuple(r.resource for r in quota.resources if r.resource in ("cpu", "memory"))))
    return [info], sorted(pools, key=lambda p: p.pool)


IMAGES = {"nvidia.com/": ("nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", ["nvidia-smi", "-L"])}
DEFAULT_IMAGE = ("registry.example.com/your-team/your-image:tag", ["sleep", "60"])


def sample_job(pool: PoolInfo, tenant: str) -> dict[str, Any]:
    """A Job that asks for one accelerator of `pool` through its queue, as the tenant's user writes it."""
    queue = pool.queue
    image, command = next((v for prefix, v in IMAGES.items() if pool.resource.startswith(prefix)), DEFAULT_IMAGE)
    requests = {pool.resource: "1"}
    requests.update({r: {"cpu": "1", "memory": "1Gi"}[r] for r in pool.extra})
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "securityContext": dict(RESTRICTED_POD),  # Pod Security restricted, the tenant namespaces' default
        "containers": [{"name": "main", "image": image, "command": command,
                        "resources": {"requests": requests, "limits": dict(requests)},
                        "securityContext": dict(RESTRICTED_CONTAINER)}],
    }
    metadata: dict[str, Any] = {"name": f"{tenant}-{pool.pool}-sample", "namespace": queue.namespace}
    template: dict[str, Any] = {"spec": pod}
    spec: dict[str, Any] = {"backoffLimit": 0, "template": template}
    if pool.backend == "volcano":
        spec["template"] = {"metadata": {"annotations": {VOLCANO_QUEUE_ANNOTATION: queue.name}}, "spec": pod}
        pod["schedulerName"] = "volcano"
    else:
        labels = {KUEUE_QUEUE_LABEL: queue.name}
        if queue.priority_classes:
            labels[KUEUE_PRIORITY_LABEL] = queue.priority_classes[0]
        metadata["labels"] = labels
        spec = {"suspend": True, **spec}  # Kueue unsuspends it when admitted (its webhook would set it too)
        if pool.node_labels:
            pod["nodeSelector"] = dict(pool.node_labels)  # Kueue admits it only to this pool's flavor
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}
