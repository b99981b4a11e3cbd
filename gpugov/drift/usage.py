"""Usage drift: who holds accelerators, and whether they got them through the queues.

The tenant ceilings are what compile gives each tenant (nominal plus what it may borrow,
capped by the pools: the Volcano ResourceQuota backstop's numbers); which pool a node is in
comes from the compiled node patches.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any

from gpugov.catalog import MODELS
from gpugov.compile import Object
from gpugov.compile.common import LABEL_POOL, select
from gpugov.compile.core import accelerator_ceiling
from gpugov.declarations.model import Model
from gpugov.declarations.timeline import boundaries, model_at, parse_instant
from gpugov.drift.live import LiveState
from gpugov.drift.rules import (
    BORROWING,
    FOREIGN_NAMESPACE,
    HELD_FROM_HIGHER_QUOTA,
    OVER_QUOTA,
    PENDING,
    POOL_WITHOUT_QUOTA,
    QUEUE_BYPASS,
    UNADMITTED,
)
from gpugov.findings import Finding, make
from gpugov.i18n import Text
from gpugov.kube.names import KUEUE_ADMITTED_LABEL, KUEUE_QUEUE_LABEL, KUEUE_WORKLOAD_ANNOTATION
from gpugov.kube.quantity import QuantityError, format_quantity, parse_quantity
from gpugov.kube.resources import is_accelerator

SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease"})
_WHOLE_DEVICES = frozenset(model.resource for model in MODELS.values())
# The same few spellings ("1", "8") repeat across 150,000 pods: parse each once (typed: 1, 1.0 and True differ).
_quantity = lru_cache(maxsize=1024, typed=True)(parse_quantity)


def accelerator_resources(model: Model) -> frozenset[str]:
    """Every accelerator resource name: the catalog's whole devices, and whatever the model's pools
    advertise (declared models, vNPU templates, HAMi's units)."""
    pooled = {r for pool in model.pools.values() for r in pool.capacity if is_accelerator(r)}
    return _WHOLE_DEVICES | pooled


def is_known_accelerator(resource: str, known: frozenset[str] = _WHOLE_DEVICES) -> bool:
    """A device gpugov knows (the catalog's or the model's, or a MIG slice): narrower than
    kube.resources.is_accelerator, so a pod's other extended resources (RDMA, FUSE...) are not counted."""
    return resource in known or resource.startswith("nvidia.com/mig-")


def accelerator_requests(pod: dict[str, Any], known: frozenset[str] = _WHOLE_DEVICES) -> dict[str, Decimal]:
    """Accelerators a pod holds: extended resources are set in limits (requests default to them)."""
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        amounts = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for resource, amount in amounts.items():
            if is_known_accelerator(resource, known):
                try:
                    totals[resource] += _quantity(amount)
                except QuantityError:
                    continue
    return {r: v for r, v in totals.items() if v}


def went_through_kueue(pod: dict[str, Any]) -> bool:
    """Queued by its user (queue-name label) or admitted by Kueue as part of a workload."""
    labels = pod["metadata"].get("labels") or {}
    annotations = pod["metadata"].get("annotations") or {}
    return KUEUE_QUEUE_LABEL in labels or KUEUE_ADMITTED_LABEL in labels or KUEUE_WORKLOAD_ANNOTATION in annotations


def _unheld(pod: dict[str, Any], held_by: set[str]) -> bool:
    """A pod no admitted Workload holds: it has no owner (a controller's pod has one, and the Workload
    is its controller's or an ancestor's) and is not itself a Workload's owner (the pod integration)."""
    meta = pod["metadata"]
    return not meta.get("ownerReferences") and meta.get("uid", "") not in held_by


def _pod_name(pod: dict[str, Any]) -> str:
    return f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"


def usage_findings(model: Model, objects: list[Object], live: LiveState, backend: str, cluster: str,
                   ignore_namespaces: frozenset[str] = frozenset()) -> list[Finding]:
    findings: list[Finding] = []
    owner_of = model.tenant_of_namespace()
    node_pool = {o["metadata"]["name"]: o["metadata"]["labels"][LABEL_POOL] for o in objects if o["kind"] == "Node"}
    scope = select(model, cluster=cluster, backend=backend)
    ceilings = {name: accelerator_ceiling(scope, tenant) for name, tenant in scope.tenants.items()}
    used: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    starts: dict[str, list[tuple[datetime, dict[str, Decimal]]]] = defaultdict(list)  # running pods' start, requests
    ignored = SYSTEM_NAMESPACES | ignore_namespaces
    known = accelerator_resources(model)
    pools_of = {name: {q.pool for q in tenant.quotas} for name, tenant in model.tenants.items()}
    # who an admitted Workload belongs to (a Job, a JobSet, a pod of the pod integration...): None, not read
    held_by = None if live.admitted is None else {uid for _, _, uids in live.admitted for uid in uids}
    for pod in live.pods:
        requests = accelerator_requests(pod, known)
        if not requests:
            continue
        namespace = pod["metadata"].get("namespace", "")
        name = _pod_name(pod)
        tenant = owner_of.get(namespace)
        if tenant is None:
            if namespace not in ignored:
                findings.append(make(FOREIGN_NAMESPACE, Text("pod {pod} requests {amounts} in namespace {namespace}, "
                                                             "which belongs to no tenant", pod=name,
                                                             amounts=_amounts(requests), namespace=namespace), None, object=f"Pod {name}"))
            continue
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Running":
            for resource, amount in requests.items():
                used[tenant][resource] += amount
            started = parse_instant((pod.get("status") or {}).get("startTime") or "")
            starts[tenant].append((started or NEVER, requests))  # unknown: it cannot have started under more
        bypass = not went_through_kueue(pod) if backend == "kueue" else (pod.get("spec") or {}).get(
            "schedulerName") != "volcano"
        if bypass:
            how = Text("no {label} label", label=KUEUE_QUEUE_LABEL) if backend == "kueue" else \
                Text("not scheduled by volcano")
            findings.append(make(QUEUE_BYPASS, Text("pod {pod} of tenant {tenant} requests {amounts} with {how}",
                                                    pod=name, tenant=tenant, amounts=_amounts(requests), how=how),
                                 model.tenants[tenant].name_at(),
                                 object=f"Pod {name}"))
        elif backend == "kueue" and phase == "Running" and held_by is not None and _unheld(pod, held_by):
            findings.append(make(UNADMITTED, Text("pod {pod} of tenant {tenant} holds {amounts} on node {node} with "
                                                  "no owner, and no admitted Workload is its: released from its "
                                                  "controller or orphaned", pod=name, tenant=tenant,
                                                  amounts=_amounts(requests),
                                                  node=(pod.get("spec") or {}).get("nodeName", "")),
                                 model.tenants[tenant].name_at(), object=f"Pod {name}"))
        pool = node_pool.get((pod.get("spec") or {}).get("nodeName", ""))
        if pool is not None and pool not in pools_of[tenant]:
            findings.append(make(POOL_WITHOUT_QUOTA, Text("pod {pod} of tenant {tenant} runs in pool {pool}, where "
                                                          "the tenant has no quota", pod=name, tenant=tenant,
                                                          pool=pool), None, object=f"Pod {name}"))
    for tenant, amounts in sorted(used.items()):
        ceiling = ceilings.get(tenant, {})
        for resource, amount in sorted(amounts.items()):
            limit = ceiling.get(resource, Decimal(0))
            if amount <= limit:
                continue
            if _each_started_within_its_quota(model, tenant, resource, starts[tenant], cluster, backend):
                since = min(start for start, _ in starts[tenant])
                findings.append(make(HELD_FROM_HIGHER_QUOTA, Text("tenant {tenant}: running pods request {amount} "
                                                                  "{resource}, its quota allows {limit} now; each "
                                                                  "started within the quota of its time (the first at "
                                                                  "{since})", tenant=tenant,
                                                                  amount=format_quantity(amount), resource=resource,
                                                                  limit=format_quantity(limit), since=_rfc3339(since)),
                                     model.tenants[tenant].at("quotas"), object=f"Tenant {tenant}",
                                     declared=format_quantity(limit), live=format_quantity(amount)))
            else:
                findings.append(make(OVER_QUOTA, Text("tenant {tenant}: running pods request {amount} {resource}, its "
                                                      "quota allows at most {limit}", tenant=tenant,
                                                      amount=format_quantity(amount), resource=resource,
                                                      limit=format_quantity(limit)),
                                     model.tenants[tenant].at("quotas"), object=f"Tenant {tenant}",
                                     declared=format_quantity(limit), live=format_quantity(amount)))
    findings.extend(queue_status_findings(live))
    return findings


NEVER = datetime.max.replace(tzinfo=UTC)


def _each_started_within_its_quota(model: Model, tenant: str, resource: str,
                                   starts: list[tuple[datetime, dict[str, Decimal]]], cluster: str, backend: str) -> bool:
    """Whether the tenant's running pods hold more than its quota now only because the quota dropped
    under them (a grant ended, a window closed): when each started, it and the pods running since
    before it fit the quota of that instant. Never where quotas do not change with time, or a start
    is unknown."""
    if model.instant is None or not model.has_timeline or any(start == NEVER for start, _ in starts):
        return False
    declared = model.declared or model
    ordered = sorted(starts, key=lambda s: s[0])
    edges = [ordered[0][0], *boundaries(declared, ordered[0][0], model.instant)]
    ceilings = [accelerator_ceiling(select(shifted := model_at(declared, t), cluster=cluster, backend=backend),
                                    shifted.tenants[tenant]).get(resource, Decimal(0)) for t in edges]
    held = Decimal(0)
    for start, requests in ordered:
        held += requests.get(resource, Decimal(0))
        if held > ceilings[bisect_right(edges, start) - 1]:
            return False
    return True


def _rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _amounts(requests: dict[str, Decimal]) -> str:
    return ", ".join(f"{format_quantity(v)} {r}" for r, v in sorted(requests.items()))


def queue_status_findings(live: LiveState) -> list[Finding]:
    """Pending and borrowed usage as the scheduler reports them in ClusterQueue status."""
    findings = []
    for (_, kind, _, name), obj in sorted(live.objects.items()):
        if kind != "ClusterQueue":
            continue
        status = obj.get("status") or {}
        pending = status.get("pendingWorkloads") or 0
        if pending:
            findings.append(make(PENDING, Text("ClusterQueue {queue}: {count} pending workloads", queue=name,
                                               count=pending), None,
                                 object=f"ClusterQueue {name}", live=str(pending)))
        for flavor in status.get("flavorsUsage") or []:
            for resource in flavor.get("resources") or []:
                borrowed = resource.get("borrowed")
                if borrowed and parse_quantity(borrowed) > 0:
                    findings.append(make(BORROWING, Text("ClusterQueue {queue}: borrows {amount} {resource} in flavor "
                                                         "{flavor}", queue=name, amount=borrowed,
                                                         resource=resource["name"], flavor=flavor["name"]), None, object=f"ClusterQueue {name}"))
    return findings
