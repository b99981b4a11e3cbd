"""Volcano objects -> declaration documents for a Volcano cluster, and a gap for whatever they cannot say.

The inverse of gpugov.compile.volcano, keeping the cluster's names:
- a node group (the volcano.sh/nodegroup-name value nodes carry and Queues' nodeGroupAffinity lists) -> a
  GPUPool of that name: its nodes by name where gpugov labelled them (gpugov.io/pool), else a selector pool
  on volcano.sh/nodegroup-name (so gpugov relabels no node); the model from the nodes' product label or the
  device resource they advertise;
- a leaf Queue -> a Tenant: deserved per accelerator -> nominal quota, guarantee -> nominal - lendingLimit,
  capability -> nominal + borrowingLimit (absent: no borrowingLimit, no ceiling), weight ->
  fairSharing.weight, the groups of its affinity -> the pools of its quotas; its namespaces are those
  labelled gpugov.io/tenant=<queue> and those whose PodGroups name the queue;
- a Queue other Queues name as parent (capacity plugin with hierarchy) -> a Department: its own quota is
  what its deserved and guarantee hold beyond its children's sums; a missing parent reads as root;
- scheduling.k8s.io PriorityClasses (system-* aside) -> PriorityClasses (gpugov.io/preemptible=false ->
  preemptible: false), their preemptionPolicy -> SchedulingPolicy preemption.withinClusterQueue;
- the scheduler ConfigMap's queue plugin (capacity or proportion) -> SchedulingPolicy volcano.plugin; the
  Queues' reclaimable -> preemption.reclaimWithinCohort.

What gpugov cannot express is a gap with its reason: a queue without accelerators, a capability below
deserved or on a queue without a department, quotas on cpu or memory, jobs in a non-leaf queue, Volcano's
default queue, a closed queue, fields gpugov never writes (type, priority, extendClusters, dequeueStrategy,
anti-affinity). Whatever compiles back differently from the input is a gap too (gpugov.adopt.run).
"""

from __future__ import annotations

import fnmatch
import json
import math
from collections import Counter, defaultdict
from decimal import Decimal
from typing import Any

import yaml

from gpugov.adopt.canonical import VOLCANO_ROOT, queue_view
from gpugov.adopt.convert import CPU_ONLY_MODEL, RESERVED, Converter, Declarations, _Pool, document, is_label
from gpugov.adopt.inventory import VOLCANO_CONF, Inventory, Obj
from gpugov.catalog import MODELS
from gpugov.compile.volcano_scheduler import action_names, plugin_names
from gpugov.kube.canonical import quantity
from gpugov.kube.names import VOLCANO_NODEGROUP_LABEL
from gpugov.kube.objects import LABEL_POOL, LABEL_PREEMPTIBLE, LABEL_TENANT
from gpugov.kube.resources import is_accelerator

DEFAULT_QUEUE = "default"  # Volcano's controller makes it; a job that names no queue lands there
SHARED = "shared"  # the department tenants that borrow are put in under the proportion plugin (it emits no queue)
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
UNSUPPORTED_FIELDS = {
    "type": "gpugov writes no queue type",
    "priority": "gpugov writes no queue priority (queues are ordered by share)",
    "extendClusters": "gpugov schedules within one cluster",
    "dequeueStrategy": "gpugov writes no dequeue strategy (Volcano's traverse)",
}


def _fair_sharing(report: Any, label: str, weight: Any) -> Obj | None:
    """fairSharing for a Queue's weight (Volcano: any int32), where gpugov's 1-65535 can say it."""
    if weight == 1:
        return None
    if not isinstance(weight, int) or not 1 <= weight <= 65535:
        report.gap(label, "spec.weight", f"{weight}: gpugov's weights are whole numbers 1-65535; imported as 1")
        return None
    return {"weight": weight}


def _number(value: Decimal) -> int | str:
    return int(value) if value == value.to_integral_value() else str(value)


class VolcanoConverter(Converter):
    POOL_SOURCE = "node group"

    def __init__(self, inv: Inventory, cluster: str) -> None:
        super().__init__(inv, cluster)
        self.plugin = "capacity"
        self.pool_resource: dict[str, str] = {}  # pool -> the device resource it holds
        self.departments: set[str] = set()
        self.shared_needed = False

    # -- the scheduler configuration ----------------------------------------------------------------
    def _plugin(self) -> str:
        cm = self.inv.volcano_conf
        if cm is None:
            self.report.note("ConfigMap volcano-system/volcano-scheduler-configmap", VOLCANO_CONF, "not read: "
                             "the queue plugin is taken as capacity with hierarchy")
            return "capacity"
        label = f"ConfigMap {cm['metadata'].get('namespace', '')}/{cm['metadata']['name']}"
        try:
            conf = yaml.safe_load(cm["data"][VOLCANO_CONF]) or {}
        except yaml.YAMLError:
            conf = None
        if not isinstance(conf, dict):
            self.report.gap(label, f"data[{VOLCANO_CONF}]", "not a YAML mapping: imported as the capacity plugin")
            return "capacity"
        plugins = plugin_names(conf)
        if "capacity" in plugins and "proportion" in plugins:
            self.report.gap(label, f"data[{VOLCANO_CONF}]", "both capacity and proportion: Volcano cannot combine "
                            "them; imported as capacity")
            return "capacity"
        if "proportion" in plugins:
            return "proportion"
        if "capacity" not in plugins:
            self.report.gap(label, f"data[{VOLCANO_CONF}]", "no capacity or proportion plugin, so no Queue's quota "
                            "is read today; gpugov configures capacity with hierarchy, which enforces them")
        elif plugins["capacity"].get("enableHierarchy") is not True:
            self.report.gap(label, f"data[{VOLCANO_CONF}]", "capacity without enableHierarchy: gpugov enables it, "
                            "so parent queues start to bound their children")
        return "capacity"

    # -- pools --------------------------------------------------------------------------------------
    def _affinity(self, name: str, spec: Obj) -> list[str]:
        affinity = spec.get("affinity") or {}
        for kind, mode in (("nodeGroupAffinity", "preferredDuringSchedulingIgnoredDuringExecution"),
                           ("nodeGroupAntiAffinity", REQUIRED),
                           ("nodeGroupAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution")):
            if (affinity.get(kind) or {}).get(mode):
                self.report.gap(f"Queue {name}", f"spec.affinity.{kind}.{mode}", "gpugov writes only required "
                                "node group affinity (the groups of the tenant's pools)")
        return sorted({str(g) for g in (affinity.get("nodeGroupAffinity") or {}).get(REQUIRED) or []})

    def _device_of(self, nodes: list[Obj], group: str) -> str | None:
        """The accelerator resource a group's nodes advertise, else the one the queues of the group hold."""
        found: Counter[str] = Counter()
        for node in nodes:
            for resource, amount in ((node.get("status") or {}).get("allocatable") or {}).items():
                if is_accelerator(resource) and quantity(amount):
                    found[resource] += 1
        if not found:
            for obj in self.inv.volcano_queues.values():
                spec = obj.get("spec") or {}
                if group in self._affinity_quiet(spec):
                    for key in ("deserved", "capability"):
                        found.update(r for r in spec.get(key) or {} if is_accelerator(r))
        return min(found, key=lambda r: (-found[r], r)) if found else None

    @staticmethod
    def _affinity_quiet(spec: Obj) -> list[str]:
        return [str(g) for g in ((spec.get("affinity") or {}).get("nodeGroupAffinity") or {}).get(REQUIRED) or []]

    def _pools(self) -> None:
        by_group: dict[str, list[Obj]] = defaultdict(list)
        for _, node in sorted(self.inv.nodes.items()):
            group = (node["metadata"].get("labels") or {}).get(VOLCANO_NODEGROUP_LABEL)
            if group:
                by_group[group].append(node)
        groups = set(by_group) | {g for o in self.inv.volcano_queues.values()
                                  for g in self._affinity_quiet(o.get("spec") or {})}
        for group in sorted(groups):
            label = f"node group {group}"
            if not is_label(group):
                self.report.gap(label, VOLCANO_NODEGROUP_LABEL, "not a DNS-1123 label, which a pool's name is: "
                                "not imported")
                continue
            nodes = by_group.get(group, [])
            resource = self._device_of(nodes, group)
            if resource is None:
                self.report.gap(label, "nodes", "no accelerator on its nodes or in the quotas of the queues bound "
                                "to it: gpugov's pools hold accelerators, so it is not imported")
                continue
            model = self._catalog_model(nodes)
            if model is None or model.resource != resource:
                candidates = [m for m in MODELS.values() if m.resource == resource]
                model = candidates[0] if len(candidates) == 1 else None
            model_name = model.name if model else self._declared_model(resource)
            if model is None:
                self.report.note(label, "accelerator.model", f"no product label on its nodes: declared "
                                 f"AcceleratorModel {model_name} for {resource}; name the real model")
            per_node = max((int(quantity(((n.get("status") or {}).get("allocatable") or {}).get(resource, 0)) or 0)
                            for n in nodes), default=0)
            pool = _Pool(group, model, model_name, min(max(per_node, 1), 64), len(nodes) if per_node else None)
            spec: Obj = {"description": f"Imported from Volcano node group {group}.", "cluster": self.cluster,
                         "accelerator": {"model": model_name}, "acceleratorsPerNode": pool.per_node}
            by_name = bool(nodes) and per_node > 0 and all(
                (n["metadata"].get("labels") or {}).get(LABEL_POOL) == group for n in nodes)
            if by_name:
                pool.node_count, pool.declared_nodes = None, len(nodes)
                spec["nodes"] = [{"name": n["metadata"]["name"]} for n in nodes]
            else:
                spec["nodeSelector"] = {"matchLabels": {VOLCANO_NODEGROUP_LABEL: group}}
            self.pools[group] = pool
            self.pool_resource[group] = resource
            self.out.files[f"hardware/{group}.yaml"] = [document("GPUPool", group, spec)]

    # -- queues -------------------------------------------------------------------------------------
    def _check_queue(self, name: str, obj: Obj) -> None:
        spec = obj.get("spec") or {}
        label = f"Queue {name}"
        for key, why in UNSUPPORTED_FIELDS.items():
            view = queue_view(obj)[key]
            if view not in (None, 0, "[]", "traverse"):
                self.report.gap(label, f"spec.{key}", f"{spec.get(key)}: {why}")
        state = (obj.get("status") or {}).get("state")
        if state in ("Closed", "Closing"):
            self.report.gap(label, "status.state", f"{state}: the queue admits no new jobs; gpugov declares every "
                            "queue open (apply does not reopen it, but the declarations do not say it is closed)")

    def _non_accelerators(self, name: str, spec: Obj) -> None:
        for key, value in (("deserved", spec.get("deserved")), ("capability", spec.get("capability")),
                           ("guarantee.resource", (spec.get("guarantee") or {}).get("resource"))):
            for resource in sorted(value or {}):
                if not is_accelerator(resource):
                    self.report.gap(f"Queue {name}", f"spec.{key}[{resource}]", f"{value[resource]}: gpugov's Volcano "
                                    "queues carry accelerators only (with cpu or memory in deserved a queue that uses "
                                    "more CPU than that share becomes reclaimable): not imported")

    def _split(self, name: str, spec: Obj, pools: list[str], department: bool) -> list[Obj]:
        """Per-pool quotas that compile back to the queue's deserved, guarantee and capability."""
        label = f"Queue {name}"
        view = queue_view({"spec": spec})
        quotas: dict[str, Obj] = {pool: {} for pool in pools}
        resources = sorted({r for key in ("deserved", "guarantee.resource", "capability") for r in view[key]
                            if is_accelerator(r)})
        for resource in resources:
            mine = [p for p in pools if self.pool_resource.get(p) == resource]
            if not mine:
                self.report.gap(label, f"spec.deserved[{resource}]", f"no node group of the queue holds {resource}: "
                                "gpugov keeps a quota on a pool of that device; not imported")
                continue
            deserved = view["deserved"].get(resource) or Decimal(0)
            guarantee = view["guarantee.resource"].get(resource) or Decimal(0)
            capability = view["capability"].get(resource)
            if guarantee > deserved:
                self.report.gap(label, f"spec.guarantee.resource[{resource}]", f"{guarantee} above deserved "
                                f"{deserved}: gpugov guarantees part of a nominal quota; imported as {deserved}")
                guarantee = deserved
            if capability is not None and capability < deserved:
                self.report.gap(label, f"spec.capability[{resource}]", f"{capability} below deserved {deserved}: "
                                "gpugov's ceiling is nominal + borrowingLimit; imported as no borrowing")
                capability = deserved
            if capability is not None and department is False and capability != deserved:
                self.report.gap(label, f"spec.capability[{resource}]", f"{capability} above deserved {deserved} on "
                                "a queue without a parent: in gpugov a tenant without a department never borrows "
                                "(capability = deserved)")
            if capability is None and department is False and self.plugin == "capacity":
                self.report.gap(label, f"spec.capability[{resource}]", "absent (no ceiling) on a queue without a "
                                "parent: in gpugov a tenant without a department never borrows (capability = "
                                f"deserved, {deserved})")
            if len(mine) > 1:
                self.report.gap(label, f"spec.affinity.nodeGroupAffinity.{REQUIRED}", f"node groups "
                                f"{', '.join(mine)} all hold {resource}: a Volcano Queue's deserved is one amount per "
                                f"resource, so gpugov keeps a tenant's {resource} in one pool (GG036); imported on "
                                f"{mine[0]} alone, the queue's jobs no longer run on {', '.join(mine[1:])}")
                for pool in mine[1:]:
                    quotas.pop(pool, None)
            pool = mine[0]
            amounts: Obj = {"nominal": _number(deserved)}
            if capability is not None and department:
                amounts["borrowingLimit"] = _number(capability - deserved)
            if guarantee:
                amounts["lendingLimit"] = _number(deserved - guarantee)
            quotas[pool]["accelerators"] = amounts if len(amounts) > 1 else amounts["nominal"]
            self.nominal[(pool, "accelerators")] += deserved
        # A pool of its affinity holding none of its resources: a zero quota keeps the group, one pool per device.
        held = {self.pool_resource[p] for p, q in quotas.items() if q}
        for pool in list(quotas):
            if quotas[pool]:
                continue
            if self.pool_resource[pool] in held:
                self.report.gap(label, f"spec.affinity.nodeGroupAffinity.{REQUIRED}", f"node group {pool} holds "
                                f"{self.pool_resource[pool]} as another group of the queue does: gpugov keeps a "
                                "tenant's device in one pool (GG036); the queue's jobs no longer run there")
                quotas.pop(pool)
                continue
            held.add(self.pool_resource[pool])
            quotas[pool]["accelerators"] = 0
        return [{"pool": pool, "resources": quotas[pool]} for pool in quotas]

    def _pools_of(self, name: str, spec: Obj) -> list[str]:
        groups = self._affinity(name, spec)
        if groups:
            missing = [g for g in groups if g not in self.pools]
            for group in missing:
                self.report.gap(f"Queue {name}", f"spec.affinity.nodeGroupAffinity.{REQUIRED}", f"node group {group} "
                                "is not a pool (see its gap): left out of the queue's affinity")
            return [g for g in groups if g in self.pools]
        wanted = sorted({r for key in ("deserved", "capability") for r in (spec.get(key) or {}) if is_accelerator(r)})
        pools = sorted(p for p, r in self.pool_resource.items() if r in wanted)
        if pools:
            self.report.gap(f"Queue {name}", "spec.affinity", f"none (its jobs may run on any node group): gpugov binds "
                            f"a queue to its pools' node groups, here {', '.join(pools)}")
        return pools

    def _namespaces(self) -> dict[str, list[str]]:
        """Queue -> the namespaces that submit to it: labelled gpugov.io/tenant=<queue>, else its PodGroups'."""
        found: dict[str, set[str]] = defaultdict(set)
        for name, ns in self.inv.namespaces.items():
            tenant = (ns["metadata"].get("labels") or {}).get(LABEL_TENANT)
            if tenant:
                found[tenant].add(name)
        labelled = {n for names in found.values() for n in names}
        for (namespace, _), group in sorted(self.inv.podgroups.items()):
            queue = (group.get("spec") or {}).get("queue") or DEFAULT_QUEUE
            if namespace not in labelled:
                found[queue].add(namespace)
        return {k: sorted(v) for k, v in found.items()}

    def _tenant_of(self, name: str, obj: Obj, namespaces: list[str], owner: dict[str, str], parent: str) -> None:
        label = f"Queue {name}"
        spec = obj.get("spec") or {}
        if not is_label(name):
            self.report.gap(label, "metadata.name", "not a DNS-1123 label, which every gpugov name is: not imported")
            return
        pools = self._pools_of(name, spec)
        if not pools:
            self.report.gap(label, "spec", "a queue without accelerators (no node group of accelerators, no "
                            "accelerator in deserved or capability): gpugov governs accelerator quotas; not imported")
            return
        declared = []
        for namespace in namespaces:
            if any(fnmatch.fnmatchcase(namespace, pattern) for pattern in RESERVED):
                self.report.gap(label, f"namespaces[{namespace}]", "a reserved namespace no tenant may claim: left out")
            elif owner.get(namespace) != name:
                self.report.gap(label, f"namespaces[{namespace}]", f"also Queue {owner[namespace]}'s, whose tenant "
                                "declares it: a namespace is one tenant's (gpugov-volcano-queue-access lets its pods "
                                "name that tenant's queue only)")
            else:
                declared.append(namespace)
        if not declared:
            self.report.gap(label, "namespaces", "no namespace submits to it (no PodGroup names it, no namespace is "
                            f"labelled {LABEL_TENANT}={name}): a tenant needs one; not imported")
            return
        department = parent != VOLCANO_ROOT and self.plugin == "capacity"
        view = queue_view(obj)
        accelerators = {r: v for r, v in view["deserved"].items() if is_accelerator(r)}
        borrows = {r: v for r, v in view["capability"].items() if is_accelerator(r)} != accelerators
        if self.plugin == "proportion" and borrows:
            department = True
            self.shared_needed = True
        quotas = self._split(name, spec, pools, department)
        tenant: Obj = {"description": f"Imported from Volcano Queue {name}."}
        if department:
            tenant["department"] = parent if self.plugin == "capacity" else SHARED
        self._tenant_identity(tenant, obj, name, declared)
        tenant["queues"] = self._queues_of(name, declared)
        tenant["quotas"] = quotas
        if (fair := _fair_sharing(self.report, label, view["weight"])) is not None:
            tenant["fairSharing"] = fair
        self.out.files[f"tenants/{name}.yaml"] = [document("Tenant", name, tenant)]

    def _queues_of(self, name: str, namespaces: list[str]) -> list[Obj]:
        """The tenant's queues: one per namespace, for gpugov-volcano-pod-priority (which PriorityClasses its pods
        may name). Read back from that policy where gpugov applied it; else a queue naming no class, which may use
        every preemptible one, so apply refuses no pod a class it names today (system-* never)."""
        read = self.inv.pod_priorities or {}
        queues = []
        for namespace in namespaces:
            entry: Obj = {"name": name, "namespace": namespace}
            classes = [c for c in read.get(namespace, []) if c not in read.get("", [])] if read else []
            if classes:
                entry["priorityClasses"] = classes
            elif read and namespace in read:
                entry["priorityClasses"] = read[namespace]
            queues.append(entry)
        if self.inv.pod_priorities is None:
            self.report.note(f"Queue {name}", "namespaces", f"{', '.join(namespaces)}: gpugov lets a tenant's pods "
                             "name only its queues' PriorityClasses (gpugov-volcano-pod-priority); imported as every "
                             "preemptible class")
        return queues

    def _department(self, name: str, obj: Obj, children: list[str], parent: str) -> Obj:
        label = f"Queue {name}"
        spec = obj.get("spec") or {}
        view = queue_view(obj)
        for key in ("capability", "affinity"):
            if spec.get(key):
                self.report.gap(label, f"spec.{key}", f"a parent queue: gpugov writes no {key} on a department's "
                                "queue (its children's capability and node groups bound them)")
        if not view["reclaimable"]:
            self.report.gap(label, "spec.reclaimable", "false: gpugov's department queues are reclaimable")
        for (namespace, group_name), group in sorted(self.inv.podgroups.items()):
            if (group.get("spec") or {}).get("queue") == name:
                self.report.gap(label, f"PodGroup {namespace}/{group_name}", "a job in a non-leaf queue: gpugov's "
                                "jobs run in a tenant's leaf queue, a department holds none")
        own: dict[str, tuple[Decimal, Decimal]] = {}
        for resource in sorted(set(view["deserved"]) | set(view["guarantee.resource"])):
            if not is_accelerator(resource):
                continue
            deserved, guarantee = view["deserved"].get(resource) or Decimal(0), Decimal(0)
            guarantee = view["guarantee.resource"].get(resource) or Decimal(0)
            for child in children:
                child_view = queue_view(self.inv.volcano_queues[child])
                deserved -= child_view["deserved"].get(resource) or Decimal(0)
                guarantee -= child_view["guarantee.resource"].get(resource) or Decimal(0)
            if deserved < 0 or guarantee < 0 or guarantee > deserved:
                self.report.gap(label, f"spec.deserved[{resource}]", "below its children's sums: gpugov's parent "
                                "queue holds its children's deserved and guarantee plus its own")
                continue
            if deserved:
                own[resource] = (deserved, guarantee)
        department: Obj = {"description": f"Imported from Volcano Queue {name}."}
        if parent != VOLCANO_ROOT:
            department["parent"] = parent
        quotas = []
        for resource, (deserved, guarantee) in own.items():
            pools = sorted(p for p, r in self.pool_resource.items() if r == resource)
            if not pools:
                self.report.gap(label, f"spec.deserved[{resource}]", f"no node group holds {resource}: not imported")
                continue
            amounts: Obj = {"nominal": _number(deserved)}
            if guarantee:
                amounts["lendingLimit"] = _number(deserved - guarantee)
            quotas.append({"pool": pools[0], "resources": {"accelerators": amounts if len(amounts) > 1
                                                           else amounts["nominal"]}})
            self.nominal[(pools[0], "accelerators")] += deserved
        if quotas:
            department["quotas"] = quotas
        if (fair := _fair_sharing(self.report, label, view["weight"])) is not None:
            department["fairSharing"] = fair
        return document("Department", name, department)

    def _queues(self) -> None:
        queues = {n: o for n, o in sorted(self.inv.volcano_queues.items()) if n != VOLCANO_ROOT}
        if DEFAULT_QUEUE in queues:
            self.report.gap(f"Queue {DEFAULT_QUEUE}", "(object)", "Volcano's default queue (a job naming no queue "
                            "lands there): gpugov declares no tenant for it and refuses tenants' pods that name no "
                            "queue; left to Volcano, not imported")
            queues.pop(DEFAULT_QUEUE)
        parent_of = {n: ((o.get("spec") or {}).get("parent") or VOLCANO_ROOT) for n, o in queues.items()}
        children: dict[str, list[str]] = defaultdict(list)
        for name, parent in parent_of.items():
            if parent == VOLCANO_ROOT:
                continue
            if self.plugin != "capacity":
                self.report.gap(f"Queue {name}", "spec.parent", f"{parent}: the proportion plugin has no hierarchy; "
                                "gpugov writes no parent there")
                parent_of[name] = VOLCANO_ROOT
            elif parent not in queues:
                self.report.gap(f"Queue {name}", "spec.parent", f"{parent}: no such queue; Volcano treats the queue "
                                "as invalid, imported under root")
                parent_of[name] = VOLCANO_ROOT
            elif not is_label(parent):
                self.report.gap(f"Queue {name}", "spec.parent", f"{parent}: not a DNS-1123 label, which a department's "
                                "name is: imported under root")
                parent_of[name] = VOLCANO_ROOT
            else:
                children[parent].append(name)
        for name, obj in queues.items():
            self._check_queue(name, obj)
            self._non_accelerators(name, obj.get("spec") or {})
        namespaces = self._namespaces()
        owner: dict[str, str] = {}
        for name in queues:
            for namespace in namespaces.get(name, []):
                owner.setdefault(namespace, name)
        for namespace in namespaces.get(DEFAULT_QUEUE, []):
            if namespace not in owner and not any(fnmatch.fnmatchcase(namespace, p) for p in RESERVED):
                self.report.gap(f"Namespace {namespace}", "PodGroups", "its jobs run in Volcano's default queue: no "
                                "tenant declares it")
        self.departments = set(children)
        departments = [self._department(n, queues[n], children[n], parent_of[n]) for n in sorted(children)]
        for name, obj in queues.items():
            if name not in children:
                self._tenant_of(name, obj, namespaces.get(name, []), owner, parent_of[name])
        if self.shared_needed:
            departments.append(document("Department", SHARED, {"description": "Imported: the tenants whose Volcano "
                                        "Queue may borrow (capability above deserved); under the proportion plugin "
                                        "a department writes no queue."}))
            self.report.note(f"Department {SHARED}", "spec", "under the proportion plugin a tenant borrows only in a "
                             "department; this one writes no Queue")
        if departments:
            self.out.files["tenants/departments.yaml"] = departments
        # Reclaimable: the tenant queues' most common value is the policy; the others are gaps.
        tenants = [n for n in queues if n not in children and f"tenants/{n}.yaml" in self.out.files]
        votes = Counter(queue_view(queues[n])["reclaimable"] for n in tenants)
        self.reclaimable = not votes or votes[True] >= votes[False]
        for name in tenants:
            if queue_view(queues[name])["reclaimable"] != self.reclaimable:
                self.report.gap(f"Queue {name}", "spec.reclaimable", f"{not self.reclaimable}: gpugov sets one "
                                f"reclaim policy for every queue (SchedulingPolicy preemption.reclaimWithinCohort), "
                                f"imported as the most common, {self.reclaimable}")

    def _capacity(self) -> dict[str, float]:
        """Node counts and capacity ratios as for Kueue's flavors, pools that list their nodes included."""
        listed = {name: pool.declared_nodes for name, pool in self.pools.items() if pool.declared_nodes}
        ratios = super()._capacity()
        for name, nodes in sorted(listed.items()):
            held = self.nominal.get((name, "accelerators"), Decimal(0))
            capacity = Decimal(nodes * self.pools[name].per_node)
            if capacity and held > capacity:
                ratios[name] = math.ceil(held / capacity * 100) / 100
                self.report.note(f"{self.POOL_SOURCE} {name}", "deserved", f"queues hold {held} of {capacity} "
                                 f"devices: Guardrails.poolCapacityRatios[{name}] = {ratios[name]}")
        return ratios

    # -- priority classes and policy ------------------------------------------------------------------
    def _pod_priorities(self) -> str:
        documents = []
        policies: Counter[str] = Counter()
        for name, obj in sorted(self.inv.pod_priority_classes.items()):
            if name.startswith("system-"):
                continue
            label = f"PriorityClass {name}"
            if not is_label(name):
                self.report.gap(label, "metadata.name", "not a DNS-1123 label: not imported")
                continue
            if obj.get("globalDefault"):
                self.report.gap(label, "globalDefault", "true: gpugov writes no default priority class")
            spec: Obj = {"value": int(obj.get("value", 0))}
            if (obj["metadata"].get("labels") or {}).get(LABEL_PREEMPTIBLE) == "false":
                spec["preemptible"] = False
            if obj.get("description"):
                spec["description"] = obj["description"]
            policies[obj.get("preemptionPolicy") or "PreemptLowerPriority"] += 1
            documents.append(document("PriorityClass", name, spec))
        if documents:
            self.out.files["policies/priorities.yaml"] = documents
        common = "Never" if policies and policies["Never"] > policies["PreemptLowerPriority"] else "PreemptLowerPriority"
        for name, obj in sorted(self.inv.pod_priority_classes.items()):
            have = obj.get("preemptionPolicy") or "PreemptLowerPriority"
            if not name.startswith("system-") and have != common:
                self.report.gap(f"PriorityClass {name}", "preemptionPolicy", f"{have}: gpugov gives every class one "
                                f"(SchedulingPolicy preemption.withinClusterQueue), imported as the most common {common}")
        return "Never" if common == "Never" else "LowerPriority"

    def convert(self) -> Declarations:
        self.plugin = self._plugin()
        self._pools()
        self._queues()
        within = self._pod_priorities()
        spec = {"queueingStrategy": "BestEffortFIFO", "preemption": {
            "reclaimWithinCohort": "Any" if self.reclaimable else "Never", "withinClusterQueue": within,
            "borrowWithinCohort": {"policy": "Never"}}, "volcano": {"plugin": self.plugin}}
        self.out.files["policies/scheduling.yaml"] = [document("SchedulingPolicy", "default", spec)]
        ratios = self._capacity()
        cluster: Obj = {"description": "Imported by gpugov import from Volcano.", "backend": "volcano"}
        if (operations := self._operations()) is not None:
            cluster["operations"] = operations
        uid = ((self.inv.namespaces.get("kube-system") or {}).get("metadata") or {}).get("uid")
        if uid:
            cluster["identity"] = {"kubeSystemUID": uid}
        self.out.files = {"policies/clusters.yaml": [document("Cluster", self.cluster, cluster)], **self.out.files}
        guardrails: Obj = {"requireOwner": False, "requireCostCenter": False}
        if self.inv.platform_team:
            guardrails["platformTeam"] = self.inv.platform_team
        if ratios:
            guardrails["poolCapacityRatios"] = ratios
        isolation = self._pod_security()
        if extra := (self.inv.pod_priorities or {}).get(""):  # the classes any other namespace's pods may name
            isolation = {**(isolation or {}), "podPriorityClasses": extra}
        if isolation is not None:
            guardrails["isolation"] = isolation
        self.out.files["policies/guardrails.yaml"] = [document("Guardrails", "default", guardrails)]
        self.report.note("Guardrails default", "requireOwner, requireCostCenter", "false: the cluster names no "
                         "owners or cost centres; add them to each tenant, then turn these on")
        self.declared_models.pop(CPU_ONLY_MODEL, None)
        if self.declared_models:
            self.out.files["hardware/models.yaml"] = [self.declared_models[n] for n in sorted(self.declared_models)]
        return self.out


def convert_volcano(inv: Inventory, cluster: str) -> Declarations:
    """Declaration documents for the Volcano objects of `inv` on cluster `cluster`, and the gaps."""
    return VolcanoConverter(inv, cluster).convert()


def conf_differences(before: str, after: str) -> list[tuple[str, Any, Any]]:
    """(where, the cluster's, the declarations') of two scheduler configurations: the actions in order, then
    each tier's plugins with their arguments; anything else (configurations, metrics) as a whole."""
    try:
        old = yaml.safe_load(before)
    except yaml.YAMLError:
        old = None
    new = yaml.safe_load(after)
    if not isinstance(old, dict):
        return [("(text)", "no YAML mapping", "gpugov's configuration")]
    found: list[tuple[str, Any, Any]] = []
    old_actions, new_actions = action_names(old), action_names(new)
    if old_actions != new_actions:
        found.append(("actions", ", ".join(old_actions), ", ".join(new_actions)))
    old_tiers, new_tiers = old.get("tiers") or [], new.get("tiers") or []
    for index in range(max(len(old_tiers), len(new_tiers))):
        was, now = _tier(old_tiers, index), _tier(new_tiers, index)
        if was != now:
            found.append((f"tiers[{index}].plugins", _plugins(was), _plugins(now)))
    for key in sorted((set(old) | set(new)) - {"actions", "tiers"}):
        if old.get(key) != new.get(key):
            found.append((key, old.get(key, "absent"), new.get(key, "absent")))
    return found


def _tier(tiers: list[Any], index: int) -> list[Obj]:
    tier = tiers[index] if index < len(tiers) and isinstance(tiers[index], dict) else {}
    return [p for p in tier.get("plugins") or [] if isinstance(p, dict)]


def _plugins(plugins: list[Obj]) -> str:
    def one(plugin: Obj) -> str:
        args = {k: v for k, v in plugin.items() if k != "name"}
        return str(plugin.get("name")) + (f" {json.dumps(args, sort_keys=True)}" if args else "")

    return ", ".join(one(p) for p in plugins) or "none"
