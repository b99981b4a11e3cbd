"""Compile's Kueue objects as the simulator reads them: flavors, cohorts, ClusterQueues,
LocalQueues, priority classes and namespaces.

Nothing is re-derived from the declarations: quotas, limits, preemption policies, flavor
order and fungibility, weights and namespace selectors come from the objects that
`gpugov.compile.compile(model, "kueue", cluster)` emits (or any Kueue v1beta2 objects),
with the API server's defaults filled in where a field is absent.

Quantities become integers the way Kueue counts them (resources.ResourceValue): cpu in
millicores, everything else in whole units, rounded up.

The maximum runtime per namespace and priority class is read from compile's admission policy
`gpugov-max-runtime` (its `limits` variable, a JSON-shaped CEL map): a job there must carry Kueue's
max-exec-time label at most that limit, and Kueue ends it once it has run that long, so
`cap_runtimes` ends a trace's job there at the limit (the job names none: it is taken to ask for
the most its queue allows).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from gpugov import reach
from gpugov.compile.admission import MAX_RUNTIME
from gpugov.kube.names import KUEUE_API
from gpugov.kube.objects import ANNOTATION_ALLOWED_PRIORITY_CLASSES, LABEL_TENANT
from gpugov.kube.quantity import parse_quantity
from gpugov.reach import FR, Quota
from gpugov.whatif.trace import DEFAULT_RESOURCE, Job

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


class SetupError(ValueError):
    """Objects the simulator cannot use (a ClusterQueue naming a missing flavor, a bad quantity)."""


def resource_value(resource: str, quantity: Any) -> int:
    """Kueue's int64 for a quantity (gpugov.reach.resource_value), SetupError when it is none."""
    try:
        return reach.resource_value(resource, quantity)
    except reach.ReachError as exc:
        raise SetupError(str(exc)) from None


@dataclass(frozen=True)
class Flavor:
    name: str
    node_labels: dict[str, str]
    untolerated_taints: tuple[str, ...]  # NoSchedule/NoExecute taints its own tolerations leave open
    topology: bool  # a TAS flavor (spec.topologyName)


@dataclass(frozen=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[str, ...]  # preference order


@dataclass(frozen=True)
class Preemption:
    within_cluster_queue: str = "Never"
    reclaim_within_cohort: str = "Never"
    borrow_within_cohort: str = "Never"
    max_priority_threshold: int | None = None


@dataclass(frozen=True)
class Fungibility:
    when_can_borrow: str = "MayStopSearch"
    when_can_preempt: str = "TryNextFlavor"
    preference: str | None = None


@dataclass(frozen=True)
class ClusterQueueSpec:
    name: str
    tenant: str
    cohort: str | None
    groups: tuple[ResourceGroup, ...]
    quotas: dict[FR, Quota]
    queueing_strategy: str
    preemption: Preemption
    fungibility: Fungibility
    weight: float
    namespace_selector: dict[str, Any] | None  # None: admits no namespace
    stopped: bool
    tas_only: bool  # every flavor is a TAS flavor: Kueue then treats every podset as topology-aware


@dataclass(frozen=True)
class CohortSpec:
    name: str
    parent: str | None
    quotas: dict[FR, Quota]
    weight: float


@dataclass
class Setup:
    """Everything the simulator reads, by name, sorted for deterministic iteration."""

    flavors: dict[str, Flavor] = field(default_factory=dict)
    cohorts: dict[str, CohortSpec] = field(default_factory=dict)
    cluster_queues: dict[str, ClusterQueueSpec] = field(default_factory=dict)
    local_queues: dict[str, str] = field(default_factory=dict)  # "namespace/name" -> ClusterQueue
    local_queues_of_tenant: dict[str, list[str]] = field(default_factory=dict)
    allowed_priority_classes: dict[str, tuple[str, ...]] = field(default_factory=dict)  # LocalQueue -> classes
    priority_classes: dict[str, int] = field(default_factory=dict)
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    # namespace -> priority class ('*': any class not listed) -> the longest a job there may run, seconds
    max_runtime_s: dict[str, dict[str, int]] = field(default_factory=dict)

    def queue_for(self, tenant: str = "", namespace: str = "", queue: str = "") -> str | None:
        """The LocalQueue (namespace/name) a job goes to: the named one, else the first of its
        namespace, else the first of its tenant."""
        if queue:
            return queue if queue in self.local_queues else None
        if namespace:
            candidates = sorted(q for q in self.local_queues if q.split("/", 1)[0] == namespace)
            return candidates[0] if candidates else None
        candidates = self.local_queues_of_tenant.get(tenant, [])
        return candidates[0] if candidates else None

    def tenant_of(self, cluster_queue: str) -> str:
        spec = self.cluster_queues.get(cluster_queue)
        return spec.tenant if spec else cluster_queue


def _weight(spec: dict[str, Any]) -> float:
    weight = (spec.get("fairSharing") or {}).get("weight")
    if weight is None:
        return 1.0
    return float(parse_quantity(weight if isinstance(weight, int | str) else str(weight)))


def _quotas(groups: list[dict[str, Any]], owner: str) -> tuple[tuple[ResourceGroup, ...], dict[FR, Quota], set[str]]:
    parsed: list[ResourceGroup] = []
    quotas: dict[FR, Quota] = {}
    flavor_names: set[str] = set()
    for group in groups or []:
        covered = tuple(str(r) for r in group.get("coveredResources") or [])
        names = []
        for flavor in group.get("flavors") or []:
            name = str(flavor["name"])
            names.append(name)
            flavor_names.add(name)
            for resource in flavor.get("resources") or []:
                rname = str(resource["name"])
                borrowing, lending = resource.get("borrowingLimit"), resource.get("lendingLimit")
                try:
                    quotas[(name, rname)] = Quota(
                        resource_value(rname, resource.get("nominalQuota", 0)),
                        None if borrowing is None else resource_value(rname, borrowing),
                        None if lending is None else resource_value(rname, lending),
                    )
                except SetupError as exc:
                    raise SetupError(f"{owner} flavor {name}: {exc}") from None
        parsed.append(ResourceGroup(covered, tuple(names)))
    return tuple(parsed), quotas, flavor_names


def _untolerated(spec: dict[str, Any]) -> tuple[str, ...]:
    tolerations = spec.get("tolerations") or []
    open_taints = []
    for taint in spec.get("nodeTaints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        tolerated = any(
            (t.get("operator") == "Exists" and t.get("key") in (None, "", taint.get("key")))
            or (t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""))
            for t in tolerations
            if t.get("effect") in (None, "", taint.get("effect"))
        )
        if not tolerated:
            open_taints.append(f"{taint.get('key')}={taint.get('value', '')}:{taint.get('effect')}")
    return tuple(open_taints)


def read_setup(objects: Iterable[dict[str, Any]]) -> Setup:
    """The simulator's view of a cluster's Kueue objects; SetupError when they do not hold together."""
    setup = Setup()
    kueue = [o for o in objects if o.get("apiVersion") == KUEUE_API]
    for obj in objects:
        if obj.get("apiVersion") == "v1" and obj.get("kind") == "Namespace":
            name = obj["metadata"]["name"]
            setup.namespace_labels[name] = {**(obj["metadata"].get("labels") or {}), NAMESPACE_NAME_LABEL: name}
    for obj in sorted(kueue, key=lambda o: (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace", ""))):
        kind, meta = obj["kind"], obj["metadata"]
        name, spec = meta["name"], obj.get("spec") or {}
        if kind == "ResourceFlavor":
            setup.flavors[name] = Flavor(name, dict(spec.get("nodeLabels") or {}), _untolerated(spec),
                                         bool(spec.get("topologyName")))
        elif kind == "WorkloadPriorityClass":
            setup.priority_classes[name] = int(obj.get("value", 0))
        elif kind == "Cohort":
            _groups, quotas, _ = _quotas(spec.get("resourceGroups") or [], f"Cohort {name}")
            setup.cohorts[name] = CohortSpec(name, spec.get("parentName") or None, quotas, _weight(spec))
        elif kind == "LocalQueue":
            key = f"{meta.get('namespace', 'default')}/{name}"
            setup.local_queues[key] = str(spec.get("clusterQueue", ""))
            allowed = (meta.get("annotations") or {}).get(ANNOTATION_ALLOWED_PRIORITY_CLASSES, "")
            setup.allowed_priority_classes[key] = tuple(c for c in allowed.split(",") if c)
            tenant = (meta.get("labels") or {}).get(LABEL_TENANT)
            if tenant:
                setup.local_queues_of_tenant.setdefault(tenant, []).append(key)
    setup.max_runtime_s = max_runtimes(objects)
    for obj in sorted((o for o in kueue if o["kind"] == "ClusterQueue"), key=lambda o: o["metadata"]["name"]):
        setup.cluster_queues[obj["metadata"]["name"]] = _cluster_queue(obj, setup)
    for queues in setup.local_queues_of_tenant.values():
        queues.sort()
    # A cohort named by a ClusterQueue or a child without its own object exists, without quota.
    referenced = {cq.cohort for cq in setup.cluster_queues.values() if cq.cohort}
    referenced |= {c.parent for c in setup.cohorts.values() if c.parent}
    for name in sorted(referenced - set(setup.cohorts)):
        setup.cohorts[name] = CohortSpec(name, None, {}, 1.0)
    _check_no_cycle(setup)
    return setup


def max_runtimes(objects: Iterable[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """namespace -> priority class -> seconds, from the max-runtime admission policies (one, or its shards)."""
    limits: dict[str, dict[str, int]] = {}
    for obj in objects:
        name = (obj.get("metadata") or {}).get("name", "")
        if obj.get("kind") != "ValidatingAdmissionPolicy" or not (name == MAX_RUNTIME or
                                                                  name.startswith(f"{MAX_RUNTIME}-")):
            continue
        for variable in (obj.get("spec") or {}).get("variables") or []:
            if variable.get("name") != "limits":
                continue
            try:
                shard = json.loads(variable["expression"])
            except (KeyError, ValueError):
                raise SetupError(f"ValidatingAdmissionPolicy {name}: its limits are not a JSON-shaped map") from None
            limits.update({ns: {pc: int(sec) for pc, sec in per.items()} for ns, per in shard.items()})
    return dict(sorted(limits.items()))


def runtime_limit_s(setup: Setup, job: Job) -> int | None:
    """The longest the job's queue lets it run (seconds), None where no maximum is declared."""
    queue = setup.queue_for(job.tenant, job.namespace, job.queue)
    per_class = setup.max_runtime_s.get(queue.split("/", 1)[0]) if queue else None
    if not per_class:
        return None
    return per_class.get(job.priority_class if job.priority_class in per_class else "*")


def cap_runtimes(setup: Setup, jobs: list[Job]) -> tuple[list[Job], int]:
    """The jobs with each one that runs past its queue's maximum runtime ended at it, and how many were."""
    capped, cut = [], 0
    for job in jobs:
        limit = runtime_limit_s(setup, job)
        if limit is not None and job.duration_ms > limit * 1000:
            job = replace(job, duration_ms=limit * 1000)
            cut += 1
        capped.append(job)
    return capped, cut


def _cluster_queue(obj: dict[str, Any], setup: Setup) -> ClusterQueueSpec:
    meta, spec = obj["metadata"], obj.get("spec") or {}
    name = meta["name"]
    groups, quotas, flavor_names = _quotas(spec.get("resourceGroups") or [], f"ClusterQueue {name}")
    missing = sorted(flavor_names - set(setup.flavors))
    if missing:
        raise SetupError(f"ClusterQueue {name} names ResourceFlavor {missing[0]}, which is not among the objects")
    preemption = spec.get("preemption") or {}
    borrow = preemption.get("borrowWithinCohort") or {}
    fungibility = spec.get("flavorFungibility") or {}
    threshold = borrow.get("maxPriorityThreshold")
    return ClusterQueueSpec(
        name=name,
        tenant=(meta.get("labels") or {}).get(LABEL_TENANT, name),
        cohort=spec.get("cohortName") or None,
        groups=groups,
        quotas=quotas,
        queueing_strategy=spec.get("queueingStrategy", "BestEffortFIFO"),
        preemption=Preemption(
            within_cluster_queue=preemption.get("withinClusterQueue", "Never"),
            reclaim_within_cohort=preemption.get("reclaimWithinCohort", "Never"),
            borrow_within_cohort=borrow.get("policy", "Never"),
            max_priority_threshold=None if threshold is None else int(threshold),
        ),
        fungibility=Fungibility(
            when_can_borrow=fungibility.get("whenCanBorrow", "MayStopSearch"),
            when_can_preempt=fungibility.get("whenCanPreempt", "TryNextFlavor"),
            preference=fungibility.get("preference"),
        ),
        weight=_weight(spec),
        namespace_selector=spec.get("namespaceSelector"),
        stopped=spec.get("stopPolicy", "None") != "None",
        tas_only=bool(flavor_names) and all(setup.flavors[f].topology for f in flavor_names),
    )


def _check_no_cycle(setup: Setup) -> None:
    for start in setup.cohorts:
        seen = {start}
        parent = setup.cohorts[start].parent
        while parent is not None:
            if parent in seen:
                raise SetupError(f"Cohort {start} is in a parent cycle (Kueue disables every queue in it)")
            seen.add(parent)
            parent = setup.cohorts[parent].parent if parent in setup.cohorts else None


@dataclass(frozen=True)
class PoolSharing:
    """How a pool can hold less than one device for a job that uses a share of each of its devices
    (trace column `share`): through HAMi's units or through MIG devices. Facts about the hardware."""

    # HAMi: (resource, what one physical device has of it), the vGPU count first; its memory and
    # compute as the device has them, unscaled: a share is of the physical device.
    hami: tuple[tuple[str, Decimal], ...] = ()
    # MIG: (resource, compute share of the GPU) of every profile the pool's layouts offer, smallest first.
    mig: tuple[tuple[str, Decimal], ...] = ()

    def requests(self, share: Decimal, devices: int) -> tuple[dict[str, int], str] | None:
        """What a job of `devices` devices at `share` of each asks on this pool, and how (HAMI, or
        the MIG resource); None where the pool cannot hold less than a device for it."""
        if self.hami:
            (count, _), *views = self.hami
            requests = {count: devices}
            for resource, per_device in views:
                requests[resource] = math.ceil(share * per_device) * devices
            return requests, HAMI
        for resource, compute in self.mig:  # the smallest MIG device that covers the share
            if compute >= share:
                return {resource: devices}, resource
        return None


# How a job that uses a share of a device is held (Simulator.held_as, Run.held_as), besides a MIG resource's name.
WHOLE_DEVICES = "whole"  # its pools hold whole devices (or it names no pool or model)
HAMI = "hami"  # a vGPU slot with that share of the device's memory and compute, per device
MIXED = "mixed"  # its pools would hold it differently: one request cannot say both, so whole devices


@dataclass(frozen=True)
class Placement:
    """Where a trace's `pool` and `model` columns let a job run, which resource it asks for
    when the trace names none, and how a pool holds a share of a device: facts about the
    hardware (a pool's accelerator model, its device-plugin resource and its sharing), never
    about quotas."""

    resource_of_pool: dict[str, str] = field(default_factory=dict)
    pools_of_model: dict[str, tuple[str, ...]] = field(default_factory=dict)  # lower-cased model name
    resource_of_model: dict[str, str] = field(default_factory=dict)
    sharing_of_pool: dict[str, PoolSharing] = field(default_factory=dict)

    def share_requests(self, job: Job, resource: str, pools: frozenset[str] | None) -> tuple[dict[str, int], str]:
        """The accelerator requests of a job that uses a share of each device, and how they hold it.

        Kueue reads one request for every flavor it tries, so a share becomes HAMi units or a MIG
        device only where every pool the job may use (`pools`, of this cluster) holds it the same
        way; elsewhere it asks whole devices, as a pod that asks `resource` does."""
        whole = {resource: job.gpu_count}
        if not pools:
            return whole, WHOLE_DEVICES
        ways = set()
        for pool in pools:
            sharing = self.sharing_of_pool.get(pool)
            held = sharing.requests(job.share, job.gpu_count) if sharing else None
            requests, how = held or (whole, WHOLE_DEVICES)
            ways.add((tuple(sorted(requests.items())), how))
        if len(ways) > 1:
            return whole, MIXED
        requests_items, how = ways.pop()
        return dict(requests_items), how

    def resolve(self, job: Job) -> tuple[str, frozenset[str] | None]:
        """(resource, the flavors its pods may use; None: any) of a job."""
        if job.pool:
            return job.resource or self.resource_of_pool.get(job.pool, DEFAULT_RESOURCE), frozenset({job.pool})
        if job.model:
            # Alternatives (A|B|C) allow the pools of each: the ClusterQueue's flavor order decides
            # which is tried first, as Kueue skips flavors whose node labels the pods do not match.
            models = [m.lower() for m in job.models]
            known = [m for m in models if m in self.resource_of_model]
            resource = job.resource or (self.resource_of_model[known[0]] if known else DEFAULT_RESOURCE)
            pools = {pool for m in models if self.resource_of_model.get(m, resource) == resource
                     for pool in self.pools_of_model.get(m, ())}
            return resource, frozenset(pools)
        return job.resource or DEFAULT_RESOURCE, None


DEFAULT_PLACEMENT = Placement()
