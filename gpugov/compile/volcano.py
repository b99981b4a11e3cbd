"""Volcano backend (scheduling.volcano.sh/v1beta1 Queue, scheduling.k8s.io/v1 PriorityClass).

How declarations map to Volcano (queues are cluster-wide per resource name; Volcano has no
flavors, so a pool is expressed as a node group):
- Tenant -> leaf Queue named after the tenant.
  deserved   = sum of its nominal accelerator quotas per resource name (capacity plugin: its
               fair share; cpu and memory are left out, or CPU use alone would make the queue
               reclaimable);
  guarantee  = sum of (nominal - lendingLimit) where a lendingLimit is set: the part never lent;
               accelerators only, as deserved;
  capability = nominal + borrowingLimit per resource when every pool quota of that resource
               sets a borrowingLimit; otherwise the resource is left out (no ceiling). A tenant
               without a department cannot borrow, and one that runs non-preemptible work
               must not (Model.never_borrows: what it borrowed could never be given back,
               since its queue is not reclaimable): capability = deserved.
  So guarantee <= deserved <= capability per resource, as Volcano's webhook demands.
  weight = fairSharing.weight (proportion plugin); reclaimable = false when every queue of the
  tenant only admits non-preemptible priority classes (its work must not be reclaimed), else
  whether SchedulingPolicy lets cohorts reclaim; affinity.nodeGroupAffinity = the node groups
  of its pools (node_group).
- GPUPool -> a node group. Volcano's nodegroup plugin reads one node label only,
  volcano.sh/nodegroup-name, and a Queue's affinity lists values of it. Nodes listed by name
  get that label (= the pool name) from gpugov's node patch. A selector pool's nodes are not
  known by name, so gpugov cannot label them: the pool's group is the value its own
  nodeSelector gives volcano.sh/nodegroup-name, which every node it selects carries by
  definition (GG055 refuses a Volcano selector pool without one; the admin labels the nodes).
- Department -> parent Queue (capacity plugin only, which supports hierarchy): parent = parent
  department, or ``root`` (written out: Volcano's queue controller writes it anyway, and drift
  compares only what gpugov sets); deserved and guarantee = the children's sums plus the department's own quota,
  so the children's sums always fit within the parent. The proportion plugin has no
  hierarchy: departments then emit no queue and tenants sit under root.
- PriorityClass -> PriorityClass (value, description; preemptionPolicy PreemptLowerPriority, or Never
  where SchedulingPolicy.preemption.withinClusterQueue is Never: Volcano's preempt action honours it).
  Non-preemptible classes carry the label gpugov.io/preemptible=false; jobs of those classes
  should also set the pod annotation volcano.sh/preemptable: "false".
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Any

from gpugov.compile.common import (
    LABEL_DEPARTMENT,
    LABEL_PRIORITY_CLASS,
    Object,
    Scope,
    metadata,
    resource_order,
    tenant_labels,
)
from gpugov.declarations.model import GPUPool, PoolQuota, Tenant
from gpugov.kube.names import SCHEDULING_API, VOLCANO_API, VOLCANO_NODEGROUP_LABEL
from gpugov.kube.objects import LABEL_PREEMPTIBLE
from gpugov.kube.quantity import format_quantity
from gpugov.kube.resources import is_accelerator

Amounts = dict[str, Decimal]
ROOT_QUEUE = "root"  # the capacity plugin's root of the queue tree, which vc-scheduler creates


def node_group(pool: GPUPool) -> str:
    """The value of volcano.sh/nodegroup-name that the pool's nodes carry (see the module doc)."""
    return dict(pool.node_selector).get(VOLCANO_NODEGROUP_LABEL) or pool.name


def _resources(amounts: Amounts) -> dict[str, str]:
    return {r: format_quantity(amounts[r]) for r in sorted(amounts, key=resource_order)}


def _sums(quotas: tuple[PoolQuota, ...]) -> tuple[Amounts, Amounts, Amounts | None]:
    deserved: Amounts = defaultdict(Decimal)
    guarantee: Amounts = defaultdict(Decimal)
    capability: Amounts = defaultdict(Decimal)
    unlimited: set[str] = set()
    for quota in quotas:
        for rq in quota.resources:
            if is_accelerator(rq.resource):
                # Accelerators only: with cpu or memory in deserved, a queue that uses more CPU
                # than that share becomes reclaimable even while its GPUs are within their share.
                deserved[rq.resource] += rq.nominal
                if rq.lending_limit is not None:
                    guarantee[rq.resource] += rq.nominal - rq.lending_limit
            if rq.borrowing_limit is None:
                unlimited.add(rq.resource)
            else:
                capability[rq.resource] += rq.nominal + rq.borrowing_limit
    for resource in unlimited:
        capability.pop(resource, None)
    return dict(deserved), {r: v for r, v in guarantee.items() if v}, dict(capability)


def _reclaimable(scope: Scope, tenant: Tenant) -> bool:
    classes = [scope.model.priority_classes.get(n) for q in tenant.queues for n in q.priority_classes]
    if classes and all(pc is not None and not pc.preemptible for pc in classes):
        return False
    return scope.model.policy.reclaim_within_cohort != "Never"


def _queue(name: str, decl: Any, labels: dict[str, str], spec: dict[str, Any]) -> Object:
    return {"apiVersion": VOLCANO_API, "kind": "Queue", "metadata": metadata(name, decl, labels), "spec": spec}


def tenant_queue(scope: Scope, tenant: Tenant, hierarchical: bool) -> tuple[Object, Amounts, Amounts]:
    quotas = scope.quotas[tenant.name]
    deserved, guarantee, capability = _sums(quotas)
    if not tenant.department or scope.model.never_borrows(tenant):
        capability = dict(deserved)
    spec: dict[str, Any] = {"weight": tenant.weight or 1, "reclaimable": _reclaimable(scope, tenant)}
    if hierarchical:
        # Explicit, so that drift sees a queue moved under another parent: Volcano's queue controller
        # writes `root` onto a queue created without one, and gpugov compares only what it sets.
        spec["parent"] = tenant.department or ROOT_QUEUE
    if capability:
        spec["capability"] = _resources(capability)
    if deserved:
        spec["deserved"] = _resources(deserved)
    if guarantee:
        spec["guarantee"] = {"resource": _resources(guarantee)}
    groups = sorted({node_group(scope.pools[q.pool]) for q in quotas})
    if groups:
        spec["affinity"] = {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": groups}}
    return _queue(tenant.name, tenant, tenant_labels(tenant), spec), deserved, guarantee


def _depth(scope: Scope, name: str) -> int:
    return len(scope.model.ancestors(name))


def department_queues(scope: Scope, child_sums: dict[str, tuple[Amounts, Amounts]]) -> list[Object]:
    """Parent queues, deepest first while summing, so each parent adds up its children."""
    totals: dict[str, tuple[Amounts, Amounts]] = {}
    for name in sorted(scope.departments, key=lambda n: (-_depth(scope, n), n)):
        own_deserved, own_guarantee, _ = _sums(scope.department_quotas.get(name, ()))
        children_deserved, children_guarantee = child_sums.get(name, ({}, {}))
        deserved, guarantee = _add(own_deserved, children_deserved), _add(own_guarantee, children_guarantee)
        totals[name] = (deserved, guarantee)
        parent = scope.departments[name].parent
        if parent:
            acc_deserved, acc_guarantee = child_sums.get(parent, ({}, {}))
            child_sums[parent] = (_add(acc_deserved, deserved), _add(acc_guarantee, guarantee))
    objects = []
    for name in sorted(scope.departments, key=lambda n: (_depth(scope, n), n)):
        department = scope.departments[name]
        deserved, guarantee = totals[name]
        spec: dict[str, Any] = {"weight": department.weight or 1, "reclaimable": True}
        spec["parent"] = department.parent or ROOT_QUEUE
        if deserved:
            spec["deserved"] = _resources(deserved)
        if guarantee:
            spec["guarantee"] = {"resource": _resources(guarantee)}
        objects.append(_queue(name, department, {LABEL_DEPARTMENT: name}, spec))
    return objects


def _add(a: Amounts, b: Amounts) -> Amounts:
    total = defaultdict(Decimal, a)
    for r, v in b.items():
        total[r] += v
    return dict(total)


def priority_classes(scope: Scope) -> list[Object]:
    # Volcano's preempt action never lets a pod whose preemptionPolicy is Never preempt (actions/preempt
    # taskEligibleToPreempt); the admission plugin copies it from the class, so withinClusterQueue: Never
    # holds on Volcano too. Reclaim between queues does not read it (reclaimWithinCohort, reclaimable).
    preemption = "Never" if scope.model.policy.within_cluster_queue == "Never" else "PreemptLowerPriority"
    objects = []
    for name, pc in sorted(scope.model.priority_classes.items()):
        labels = {LABEL_PRIORITY_CLASS: name}
        if not pc.preemptible:
            labels[LABEL_PREEMPTIBLE] = "false"
        obj: Object = {
            "apiVersion": SCHEDULING_API,
            "kind": "PriorityClass",
            "metadata": metadata(name, pc, labels),
            "value": pc.value,  # globalDefault left out: false is how the API server stores it (absent)
            "preemptionPolicy": preemption,
        }
        if pc.description:
            obj["description"] = pc.description
        objects.append(obj)
    return objects


def compile_volcano(scope: Scope) -> list[Object]:
    hierarchical = scope.model.policy.volcano_plugin == "capacity"
    objects: list[Object] = []
    child_sums: dict[str, tuple[Amounts, Amounts]] = {}
    for tenant in scope.tenants.values():
        queue, deserved, guarantee = tenant_queue(scope, tenant, hierarchical)
        objects.append(queue)
        if tenant.department:
            acc_deserved, acc_guarantee = child_sums.get(tenant.department, ({}, {}))
            child_sums[tenant.department] = (_add(acc_deserved, deserved), _add(acc_guarantee, guarantee))
    if hierarchical:
        objects = department_queues(scope, child_sums) + objects
    objects.extend(priority_classes(scope))
    return objects
