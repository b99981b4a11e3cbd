"""Kueue objects -> declaration documents, and a gap in the report for whatever they cannot say.

The mapping is the inverse of gpugov.compile.kueue, keeping the cluster's names:
ResourceFlavor -> GPUPool (its nodeLabels as the pool's nodeSelector, so the compiled flavor
selects the same nodes; none as nodeSelector {}, every node; the model from the nodes' GPU Feature Discovery product label),
ClusterQueue -> Tenant (namespaces from its namespaceSelector and its LocalQueues, quotas per
flavor and resource), Cohort -> Department (parent, quotas), WorkloadPriorityClass ->
PriorityClass, and the queues' common preemption and queueing strategy -> SchedulingPolicy.
Pure: no I/O. What the declarations compile back to is checked against the input in
gpugov.adopt.run, so a gap this module does not foresee still reaches the report.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from gpugov.adopt.canonical import preemption_view, weight_view
from gpugov.adopt.inventory import Inventory, Obj
from gpugov.adopt.report import ImportReport
from gpugov.catalog import MODELS, AcceleratorModel, mig_resource_name
from gpugov.catalog.spec import RESOURCE_PATTERN
from gpugov.compile.mig import ALL_DISABLED
from gpugov.compile.nodes import MIG_CONFIG_LABEL
from gpugov.declarations.model import RESERVED_NAMESPACES
from gpugov.declarations.schema import API_VERSION, defaulted
from gpugov.kube.canonical import DEFAULTS, quantity, selected_names
from gpugov.kube.canonical import NAMESPACE_NAME_LABEL as NAME_LABEL
from gpugov.kube.objects import ANNOTATION_ALLOWED_PRIORITY_CLASSES, LABEL_COST_CENTER, LABEL_MIG_CONFIG, LABEL_POOL

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MIG_PROFILE = re.compile(r"^[0-9]+g\.[0-9]+gb([+-][a-z.]+)?$")
NON_DEVICE = ("cpu", "memory", "pods")
KUEUE_FUNGIBILITY = DEFAULTS["ClusterQueue"]["flavorFungibility"]  # what Kueue fills in
GPUGOV_FUNGIBILITY = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}  # what compile writes
EXTENDED_RESOURCE = re.compile(RESOURCE_PATTERN)  # what an AcceleratorModel's resource may be
POD_SECURITY = "pod-security.kubernetes.io/"
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")  # most permissive first
# Namespaces a tenant may never claim (policy.naming): the built-in ones and the default cluster's.
RESERVED = (*RESERVED_NAMESPACES, "gpugov-system")
HOSTNAME_LEVEL = "kubernetes.io/hostname"  # the lowest topology level gpugov accepts
# Why a namespace two ClusterQueues serve is declared as one tenant's (validate: GG012).
ONE_TENANT = ("a namespace is one tenant's: access is per namespace (gpugov-queue-access lets a workload name any "
              "queue of its namespace, and a tenant's RoleBindings let its owners and members submit there), so two "
              "tenants' queues in one namespace would let each tenant's members spend the other's quota (GG012)")
CPU_ONLY_MODEL = "cpu-only"
CPU_ONLY_RESOURCE = "gpugov.io/no-accelerator"  # advertised by no node: the pool holds no devices


@dataclass
class Declarations:
    """Documents per file (relative path), in the order they are written."""

    files: dict[str, list[Obj]] = field(default_factory=dict)
    report: ImportReport = field(default_factory=ImportReport)


def document(kind: str, name: str, spec: Obj) -> Obj:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}


def is_label(name: str) -> bool:
    return len(name) <= 63 and DNS_LABEL.match(name) is not None


def _amount(value: Any) -> Any:
    """A quantity as written in the input: integers stay numbers, the rest strings."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return value
    number = quantity(value)
    if number is not None and number == number.to_integral_value() and str(value).strip().isdigit():
        return int(number)
    return str(value)


@dataclass
class _Pool:
    name: str
    model: AcceleratorModel | None
    model_name: str
    per_node: int
    node_count: int | None  # None: no node known to hold its devices (fixed from the quotas)
    declared_nodes: int = 0  # nodes declared one by one (spec.nodes)
    offered: set[str] | None = None  # accelerator resources the declared pool offers (None: not known)


class Converter:
    POOL_SOURCE = "ResourceFlavor"  # what a pool is imported from, as the report names it

    def __init__(self, inv: Inventory, cluster: str) -> None:
        self.inv = inv
        self.cluster = cluster
        self.out = Declarations()
        self.report = self.out.report
        self.pools: dict[str, _Pool] = {}
        self.declared_models: dict[str, Obj] = {}
        self.nominal: Counter[tuple[str, str]] = Counter()  # (pool, resource) -> summed nominal
        self.tenant_namespaces: list[str] = []  # every namespace a tenant declares
        self.threshold: int | None = None  # maxPriorityThreshold the priority classes reproduce
        self.mig_config: tuple[str, str] | None = None  # (namespace, name) of the mig-parted ConfigMap the pools use
        # Whether any flavor is topology-aware: if none is, the Cluster keeps Kueue admitting by quota alone
        # (spec.topologyAwareScheduling false), since a TAS flavor also checks that the pods fit the nodes.
        self.topology_aware = any((f.get("spec") or {}).get("topologyName") for f in inv.flavors.values())

    # -- resources in use ---------------------------------------------------------------------
    def _holders(self) -> list[tuple[str, Obj]]:
        return [(f"ClusterQueue {n}", o) for n, o in sorted(self.inv.cluster_queues.items())] + [
            (f"Cohort {n}", o) for n, o in sorted(self.inv.cohorts.items())
        ]

    def _resources_on(self, flavor: str) -> set[str]:
        used = set()
        for _, obj in self._holders():
            for group in (obj.get("spec") or {}).get("resourceGroups") or []:
                for entry in group.get("flavors") or []:
                    if entry.get("name") == flavor:
                        used.update(r["name"] for r in entry.get("resources") or [])
        return used

    # -- pools ----------------------------------------------------------------------------------
    def _nodes_of(self, labels: dict[str, str]) -> list[Obj]:
        def matches(node: Obj) -> bool:
            have = node["metadata"].get("labels") or {}
            return all(have.get(k) == v for k, v in labels.items())

        return [node for _, node in sorted(self.inv.nodes.items()) if matches(node)]

    @staticmethod
    def _catalog_model(nodes: list[Obj]) -> AcceleratorModel | None:
        """The catalog model whose product label (GFD's nvidia.com/gpu.product, Ascend's accelerator) most nodes carry."""
        votes: Counter[str] = Counter()
        for node in nodes:
            labels = node["metadata"].get("labels") or {}
            for name, model in MODELS.items():
                label = model.product_label
                if label and labels.get(label.key) in label.values:
                    votes[name] += 1
                    break
        return MODELS[votes.most_common(1)[0][0]] if votes else None

    def _declared_model(self, resource: str) -> str:
        """An AcceleratorModel for a device resource the catalog cannot pin to one model."""
        vendor = re.sub(r"[^a-z0-9-]", "-", resource.split("/")[0].split(".")[0].lower()).strip("-") or "unknown"
        name = re.sub(r"[^A-Za-z0-9._-]", "-", f"imported-{resource.replace('/', '-')}")[:63]
        spec = {"description": f"Devices of {resource}, as imported (model unknown).", "vendor": vendor,
                "resource": resource}
        self.declared_models[name] = document("AcceleratorModel", name, spec)
        return name

    def _pool(self, name: str, flavor: Obj) -> None:
        spec = flavor.get("spec") or {}
        label = f"ResourceFlavor {name}"
        labels = dict(spec.get("nodeLabels") or {})
        # No nodeLabels: the flavor matches every node. The pool declares that (nodeSelector {}) and compiles back to
        # a flavor without nodeLabels; validate says what gpugov cannot govern there (GG056). Its nodes are those
        # that advertise its devices (capacity.nodes.pool_nodes), so nodeCount counts no control plane.
        nodes = self._nodes_of(labels)
        used = self._resources_on(name)
        known = {m.resource for m in MODELS.values()}
        # A resource the catalog knows is the pool's device first; the others are gaps on their queues.
        # Only an extended resource (a domain, '/' and a name) can be a device: ephemeral-storage, hugepages-*
        # and names without a domain belong to the node itself (gaps on their queues).
        devices = sorted((r for r in used if r not in NON_DEVICE and not r.startswith("nvidia.com/mig-")
                          and EXTENDED_RESOURCE.match(r)), key=lambda r: (r not in known, r))
        model = self._catalog_model(nodes)
        if model is not None and any(r == model.resource for r in devices):
            model_name = model.name
        elif devices:
            candidates = [m for m in MODELS.values() if m.resource == devices[0]]
            if model is not None and model.resource == devices[0]:
                candidates = [model]
            if len(candidates) == 1:
                model, model_name = candidates[0], candidates[0].name
            else:
                model, model_name = None, self._declared_model(devices[0])
                self.report.note(label, "accelerator.model", f"no GPU Feature Discovery product label on its nodes: "
                                 f"declared AcceleratorModel {model_name} for {devices[0]}; name the real model")
        elif model is not None:
            model_name = model.name
        else:
            model, model_name = None, CPU_ONLY_MODEL
            if CPU_ONLY_MODEL not in self.declared_models:
                self.declared_models[CPU_ONLY_MODEL] = document("AcceleratorModel", CPU_ONLY_MODEL, {
                    "description": "Nodes without accelerators, for CPU-only queues (imported).",
                    "vendor": "none", "resource": CPU_ONLY_RESOURCE})
            self.report.note(label, "accelerator.model", f"no queue holds accelerators here: a CPU-only pool of the "
                             f"declared AcceleratorModel {CPU_ONLY_MODEL}")
        resource = model.resource if model else (devices[0] if devices else CPU_ONLY_RESOURCE)
        per_node = max((max(int(quantity((n.get("status") or {}).get("allocatable", {}).get(resource, 0)) or 0),
                            _gpu_count(n) if model is not None and model.vendor == "nvidia" else 0)
                        for n in nodes), default=0)
        layouts, node_layouts = self._mig(label, name, model, nodes)
        members = nodes if labels else [n for n in nodes if quantity(
            ((n.get("status") or {}).get("allocatable") or {}).get(resource, 0))]
        node_count: int | None = len(members) if per_node else None
        pool = _Pool(name, model, model_name, min(max(per_node, 1), 64), node_count)
        self.pools[name] = pool
        pool_spec: Obj = {"description": f"Imported from ResourceFlavor {name}.", "cluster": self.cluster,
                          "accelerator": {"model": model_name}, "acceleratorsPerNode": pool.per_node}
        # Nodes are declared one by one where each needs its own MIG layout, or where the flavor selects them
        # by gpugov's own pool label (so the node patches write again exactly what the nodes carry); else the
        # pool selects its nodes by the flavor's labels.
        by_name = bool(nodes) and per_node > 0 and (bool(layouts) or labels == {LABEL_POOL: name})
        if by_name and labels != {LABEL_POOL: name}:
            self.report.gap(label, "spec.nodeLabels", f"{_show_labels(labels)}: a MIG pool declares its nodes (each "
                            f"with its layout), whose flavor selects them by {LABEL_POOL}={name} (added to the same "
                            "nodes)")
        if not by_name:
            pool_spec["nodeSelector"] = {"matchLabels": labels} if labels else {}
        taints = self._taints(label, spec)
        if taints:
            pool_spec["taints"] = taints
        levels = self._topology(label, name, spec)
        if levels:
            pool_spec["topology"] = {"levels": levels}
        if layouts:
            pool_spec["migLayouts"] = layouts
        if by_name:
            pool.node_count = None
            pool.declared_nodes = len(nodes)
            declared = []
            for node in nodes:
                have = node["metadata"].get("labels") or {}
                entry: Obj = {"name": node["metadata"]["name"]}
                extra = {k: have[k] for k in levels if k != HOSTNAME_LEVEL and k in have}
                if extra:
                    entry["labels"] = extra
                if node_layouts.get(entry["name"]):
                    entry["migLayout"] = node_layouts[entry["name"]]
                declared.append(entry)
            pool_spec["nodes"] = declared
        pool.offered = self._offered(pool, layouts, node_layouts, len(nodes) if by_name else None)
        self.out.files[f"hardware/{name}.yaml"] = [document("GPUPool", name, pool_spec)]

    def _offered(self, pool: _Pool, layouts: dict[str, dict[str, int]], node_layouts: dict[str, str | None],
                 declared: int | None) -> set[str] | None:
        """The accelerator resources the pool's declaration offers (None: whatever its quotas hold)."""
        if pool.model is None or pool.model.vendor != "nvidia":
            return None
        whole = declared is None or sum(1 for v in node_layouts.values() if not v) + declared - len(node_layouts) > 0
        offered = {mig_resource_name(profile) for layout in set(node_layouts.values()) if layout
                   for profile in layouts[layout]}
        return offered | ({pool.model.resource} if whole else set())

    def _mig_parted(self, names: set[str]) -> tuple[str, str, Obj] | None:
        """(namespace, name, mig-configs) of the mig-parted ConfigMap that defines every config in `names`:
        gpugov's own (labelled gpugov.io/mig-config) first, then by namespace and name."""
        found = sorted(((ns, n), cm) for (ns, n), cm in self.inv.mig_parted.items()
                       if names <= set(cm["mig-parted"]["mig-configs"]))
        found.sort(key=lambda item: (((item[1]["metadata"].get("labels") or {}).get(LABEL_MIG_CONFIG) != "true"),
                                     item[0]))
        if not found:
            return None
        (namespace, name), cm = found[0]
        return namespace, name, cm["mig-parted"]["mig-configs"]

    def _mig(self, label: str, pool: str, model: AcceleratorModel | None,
             nodes: list[Obj]) -> tuple[dict[str, dict[str, int]], dict[str, str | None]]:
        """The pool's MIG layouts and each node's layout (None: whole GPUs), read back from the nodes'
        nvidia.com/mig.config labels and the mig-parted config that defines them."""
        selected = {n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(MIG_CONFIG_LABEL) for n in nodes}
        used = {v for v in selected.values() if v}
        if not used or model is None or not model.mig_capable:
            return {}, {}
        source = self._mig_parted(used)
        if source is None:
            missing = sorted(used - {c for cm in self.inv.mig_parted.values() for c in cm["mig-parted"]["mig-configs"]})
            self.report.gap(label, f"nodes.labels[{MIG_CONFIG_LABEL}]", f"{', '.join(missing or sorted(used))}: no "
                            "mig-parted ConfigMap read defines "
                            f"{'them' if len(missing) > 1 else 'it'} (nor all of {', '.join(sorted(used))}): the MIG "
                            "layouts of its nodes are not imported")
            return {}, {}
        namespace, cm_name, configs = source
        self.mig_config = self.mig_config or (namespace, cm_name)
        if self.mig_config != (namespace, cm_name):
            self.report.gap(label, f"nodes.labels[{MIG_CONFIG_LABEL}]", f"its configs are in ConfigMap {namespace}/"
                            f"{cm_name}, another pool's in {self.mig_config[0]}/{self.mig_config[1]}: gpugov writes "
                            "one mig-parted ConfigMap per cluster")
        layouts: dict[str, dict[str, int]] = {}
        node_layouts: dict[str, str | None] = {}
        for node, config in sorted(selected.items()):
            if not config:
                self.report.gap(label, f"nodes[{node}].labels[{MIG_CONFIG_LABEL}]", f"absent: gpugov labels every "
                                f"node of a MIG pool, this one {ALL_DISABLED} (whole GPUs)")
                node_layouts[node] = None
                continue
            entries = configs[config]
            mix = _mig_mix(entries)
            if mix is None:
                self.report.gap(label, f"nodes[{node}].labels[{MIG_CONFIG_LABEL}]", f"{config}: not one "
                                "`devices: all` entry: gpugov declares one MIG mix for every GPU of a node")
                node_layouts[node] = None
                continue
            if not mix:  # MIG disabled: whole GPUs
                if config != ALL_DISABLED:
                    self.report.gap(label, f"nodes[{node}].labels[{MIG_CONFIG_LABEL}]", f"{config}: gpugov names the "
                                    f"config of whole-GPU nodes {ALL_DISABLED}")
                node_layouts[node] = None
                continue
            layout = config.removeprefix(f"{pool}-")
            if layout == config or not is_label(layout):
                layout = re.sub(r"[^a-z0-9-]+", "-", config.lower()).strip("-")[:63] or "layout"
                self.report.gap(label, f"nodes[{node}].labels[{MIG_CONFIG_LABEL}]", f"{config}: gpugov names a "
                                f"pool's MIG configs <pool>-<layout>; declared as layout {layout}, so the node's "
                                f"label (and the config mig-manager applies) becomes {pool}-{layout}")
            if layouts.setdefault(layout, mix) != mix:
                self.report.gap(label, f"nodes[{node}].labels[{MIG_CONFIG_LABEL}]", f"{config}: two configs give "
                                f"layout {layout}")
            node_layouts[node] = layout
        return layouts, node_layouts

    def _taints(self, label: str, spec: Obj) -> list[Obj]:
        taints = []
        for taint in spec.get("nodeTaints") or []:
            entry = {"key": taint["key"]}
            if taint.get("value"):
                entry["value"] = taint["value"]
            entry["effect"] = taint["effect"]
            taints.append(entry)
        expected = [{"key": t["key"], "operator": "Equal", "value": t.get("value", ""), "effect": t["effect"]}
                    for t in taints]

        def canonical(items: list[Obj]) -> list[tuple[str, ...]]:
            return sorted((t.get("key", ""), t.get("operator", "Equal"), t.get("value", ""), t.get("effect", ""))
                          for t in items)

        if canonical(spec.get("tolerations") or []) != canonical(expected):
            self.report.gap(label, "spec.tolerations", "gpugov gives a flavor exactly the tolerations of its "
                            "nodeTaints (operator Equal); these differ")
        return taints

    def _topology(self, label: str, name: str, spec: Obj) -> list[str]:
        topology_name = spec.get("topologyName")
        if any(not (f.get("spec") or {}).get("nodeLabels") for f in self.inv.flavors.values()):
            # A flavor matches every node: Kueue refuses it a topology, so gpugov makes no flavor here TAS (GG057).
            if topology_name:
                self.report.gap(label, "spec.topologyName", f"{topology_name}: a flavor of this cluster has no "
                                "nodeLabels (every node), which Kueue refuses a topology, so gpugov makes none of "
                                "the cluster's flavors topology-aware")
            return []
        if not topology_name:
            if self.topology_aware:  # another flavor has one: gpugov makes every flavor TAS, this one too
                self.report.gap(label, "spec.topologyName", f"none, while other flavors of this cluster have one: "
                                f"gpugov makes every flavor of a cluster topology-aware (Topology {name} at "
                                f"{HOSTNAME_LEVEL}), so Kueue admits a job to this flavor only where its pods fit the "
                                "nodes' free capacity (a job larger than a node waits although its queue has quota), "
                                "and ordinary jobs of a queue that mixes this flavor with topology-aware ones are no "
                                "longer held to this flavor")
            return []
        topology = self.inv.topologies.get(topology_name)
        if topology is None:
            self.report.gap(label, "spec.topologyName", f"Topology {topology_name} was not found")
            return []
        levels = [level.get("nodeLabel", "") for level in (topology.get("spec") or {}).get("levels") or []]
        if not levels or levels[-1] != HOSTNAME_LEVEL:
            self.report.gap(f"Topology {topology_name}", "spec.levels", f"its lowest level is not {HOSTNAME_LEVEL}, "
                            "which gpugov requires: the pool's topology is its nodes alone")
            return []
        if topology_name != name:
            self.report.note(label, "spec.topologyName", f"Topology {topology_name} becomes Topology {name}: "
                             "gpugov names a pool's topology after the pool")
        return levels

    # -- quotas ---------------------------------------------------------------------------------
    def _key(self, pool: _Pool, resource: str) -> str | None:
        """The declarations' quota key of a resource on a pool; None when there is none."""
        if resource in NON_DEVICE:
            return resource
        if pool.model is not None and resource == pool.model.resource:
            return "accelerators"
        if pool.model is None and pool.model_name in self.declared_models:
            if self.declared_models[pool.model_name]["spec"]["resource"] == resource:
                return "accelerators"
        if resource.startswith("nvidia.com/mig-"):
            profile = resource.removeprefix("nvidia.com/mig-")
            if MIG_PROFILE.match(profile) and mig_resource_name(profile) == resource:
                return profile
        if pool.model is not None:
            for key, name in pool.model.partition_resources.items():
                if name == resource:
                    return key
        return None

    def _device(self, pool: _Pool) -> str:
        """The device resource a pool holds."""
        if pool.model is not None:
            return pool.model.resource
        declared = self.declared_models.get(pool.model_name)
        return str(declared["spec"]["resource"]) if declared else pool.model_name

    def _quotas(self, label: str, spec: Obj) -> list[Obj]:
        groups = spec.get("resourceGroups") or []
        if len(groups) > 1:
            self.report.gap(label, "spec.resourceGroups", f"{len(groups)} resource groups: gpugov puts every "
                            "resource of a queue in one group, so one flavor is chosen for a pod's whole request")
        quotas = []
        for group in groups:
            for flavor in group.get("flavors") or []:
                pool = self.pools.get(flavor["name"])
                if pool is None:
                    self.report.gap(label, f"spec.resourceGroups.flavors[{flavor['name']}]",
                                    "no ResourceFlavor of that name: its quota is not imported")
                    continue
                resources: Obj = {}
                for entry in flavor.get("resources") or []:
                    key = self._key(pool, entry["name"])
                    where = f"spec.resourceGroups.flavors[{pool.name}].resources[{entry['name']}]"
                    if key is None:
                        self.report.gap(label, where, _no_key(entry["name"], pool, self._device(pool)))
                        continue
                    if pool.offered is not None and key not in NON_DEVICE and entry["name"] not in pool.offered:
                        # A queue's flavors cover the same resources (Kueue), so a resource another pool offers
                        # stands at 0 here: compile writes it again. A quota the nodes could never serve is a gap.
                        if quantity(entry.get("nominalQuota", 0)):
                            self.report.gap(label, where, f"pool {pool.name} offers no {entry['name']} (its nodes "
                                            f"advertise {', '.join(sorted(pool.offered)) or 'none'}): the quota is "
                                            "not imported")
                        continue
                    amounts = {"nominal": _amount(entry.get("nominalQuota", 0))}
                    for source, target in (("borrowingLimit", "borrowingLimit"), ("lendingLimit", "lendingLimit")):
                        if entry.get(source) is not None:
                            amounts[target] = _amount(entry[source])
                    resources[key] = amounts if len(amounts) > 1 else amounts["nominal"]
                    self.nominal[(pool.name, key)] += quantity(entry.get("nominalQuota", 0)) or Decimal(0)
                if resources:
                    quotas.append({"pool": pool.name, "resources": resources})
        return quotas

    def _weight(self, label: str, spec: Obj) -> int | None:
        weight = weight_view(spec)
        if weight is None or weight == 1:
            return None
        if weight != weight.to_integral_value() or not 1 <= weight <= 65535:
            self.report.gap(label, "spec.fairSharing.weight", f"{weight}: gpugov's weights are whole numbers 1-65535")
            return None
        return int(weight)

    # -- scheduling policy ------------------------------------------------------------------------
    def _scheduling(self) -> None:
        def policy(obj: Obj) -> tuple[Any, ...]:
            spec = obj.get("spec") or {}
            return (spec.get("queueingStrategy") or "BestEffortFIFO", *preemption_view(spec).values())

        votes = Counter(policy(o) for o in self.inv.cluster_queues.values())
        common = min(votes, key=lambda p: (-votes[p], str(p))) if votes else ("BestEffortFIFO", "Never", "Never",
                                                                               "Never", None)
        fields = ("queueingStrategy", "preemption.reclaimWithinCohort", "preemption.withinClusterQueue",
                  "preemption.borrowWithinCohort.policy", "preemption.borrowWithinCohort.maxPriorityThreshold")
        for name, obj in sorted(self.inv.cluster_queues.items()):
            mine = policy(obj)
            for index, path in enumerate(fields):
                if mine[index] != common[index]:
                    self.report.gap(f"ClusterQueue {name}", f"spec.{path}", f"{mine[index]}: gpugov applies one "
                                    f"SchedulingPolicy to every queue, imported as the most common {common[index]}")
            if mine[4] is not None and mine[4] != self.threshold:
                self.report.gap(f"ClusterQueue {name}", "spec.preemption.borrowWithinCohort.maxPriorityThreshold",
                                "gpugov sets it from non-preemptible priority classes: the highest value of the "
                                "preemptible ones (no such split of the imported classes gives it)")
        strategy, reclaim, within, borrow, _ = common
        spec = {"queueingStrategy": strategy, "preemption": {
            "reclaimWithinCohort": reclaim, "withinClusterQueue": within, "borrowWithinCohort": {"policy": borrow}}}
        self.out.files["policies/scheduling.yaml"] = [document("SchedulingPolicy", "default", spec)]

    # -- tenants ---------------------------------------------------------------------------------
    def _selected(self, label: str, selector: Any) -> set[str]:
        if selector is None:
            self.report.gap(label, "spec.namespaceSelector", "absent: Kueue admits from no namespace; gpugov lists "
                            "the namespaces of the queue's LocalQueues")
            return set()
        names = selected_names(selector)
        if names is not None:
            return set(names)
        matched = {name for name, ns in self.inv.namespaces.items()
                   if _selects(selector, {**(ns["metadata"].get("labels") or {}), NAME_LABEL: name})}
        what = "every namespace" if not selector else "namespaces by label"
        self.report.gap(label, "spec.namespaceSelector", f"selects {what}; gpugov lists namespaces by name: declared "
                        f"as the {len(matched)} it selects today plus those of its LocalQueues")
        return matched

    def _tenants(self) -> None:
        queues_of: dict[str, list[tuple[str, str]]] = {}
        for key, lq in sorted(self.inv.local_queues.items()):
            target = (lq.get("spec") or {}).get("clusterQueue", "")
            if target not in self.inv.cluster_queues:
                self.report.gap(f"LocalQueue {key[0]}/{key[1]}", "spec.clusterQueue",
                                f"ClusterQueue {target or '(none)'} was not found: the queue is not imported")
                continue
            queues_of.setdefault(target, []).append(key)
        # A namespace belongs to one tenant: the queue whose LocalQueues are there, else the first that selects it.
        owner: dict[str, str] = {}
        for name in sorted(self.inv.cluster_queues):
            for namespace, _ in queues_of.get(name, []):
                owner.setdefault(namespace, name)
        wanted: dict[str, set[str]] = {}
        for name, obj in sorted(self.inv.cluster_queues.items()):
            spec = obj.get("spec") or {}
            lending = spec.get("namespaceSelector") is None and not queues_of.get(name) and spec.get("cohortName")
            selected = set() if lending else self._selected(f"ClusterQueue {name}", spec.get("namespaceSelector"))
            wanted[name] = selected | {ns for ns, _ in queues_of.get(name, [])}
            for namespace in sorted(selected):
                owner.setdefault(namespace, name)
        for name, obj in sorted(self.inv.cluster_queues.items()):
            self._tenant(name, obj, wanted[name], queues_of.get(name, []), owner)

    def _tenant(self, name: str, obj: Obj, wanted: set[str], queues: list[tuple[str, str]], owner: dict[str, str]) -> None:
        label = f"ClusterQueue {name}"
        spec = obj.get("spec") or {}
        if not is_label(name):
            self.report.gap(label, "metadata.name", "not a DNS-1123 label, which every gpugov name is: not imported")
            return
        namespaces = []
        selected = selected_names(spec.get("namespaceSelector"))
        for namespace in sorted(wanted):
            if any(fnmatch.fnmatchcase(namespace, pattern) for pattern in RESERVED):
                self.report.gap(label, f"namespaces[{namespace}]", "a reserved namespace no tenant may claim: left out")
            elif owner.get(namespace) != name:
                self.report.gap(label, f"namespaces[{namespace}]", f"also ClusterQueue {owner[namespace]}'s, whose "
                                f"tenant declares it; {ONE_TENANT}. Apply would drop {namespace} from this queue's "
                                "namespaceSelector, so Kueue admits no more of its workloads through this queue")
            else:
                namespaces.append(namespace)
                if selected is not None and namespace not in selected:
                    self.report.gap(label, f"namespaces[{namespace}]", "has a LocalQueue of this queue but is not "
                                    "selected by its namespaceSelector: declared, so that LocalQueue admits")
        declared_queues = []
        for namespace, queue in queues:
            where = f"LocalQueue {namespace}/{queue}"
            if namespace not in namespaces:
                other = owner.get(namespace)
                why = (f"is ClusterQueue {other}'s tenant's, and {ONE_TENANT}" if other not in (None, name)
                       else f"is not ClusterQueue {name}'s tenant's")
                self.report.gap(where, "metadata.namespace", f"namespace {namespace} {why}: the queue is not imported; "
                                f"once apply drops {namespace} from ClusterQueue {name}'s namespaceSelector, the "
                                "workloads it holds are not admitted")
                continue
            if not is_label(queue):
                self.report.gap(where, "metadata.name", "not a DNS-1123 label: the queue is not imported")
                continue
            lq = self.inv.local_queues[(namespace, queue)]
            for extra in sorted(set(lq.get("spec") or {}) - {"clusterQueue", "stopPolicy"}):
                self.report.gap(where, f"spec.{extra}", "gpugov's LocalQueues set only spec.clusterQueue")
            if (lq.get("spec") or {}).get("stopPolicy", "None") != "None":
                self.report.gap(where, "spec.stopPolicy", "gpugov's LocalQueues always admit (stopPolicy None)")
            entry: Obj = {"name": queue, "namespace": namespace}
            allowed = ((lq["metadata"].get("annotations") or {}).get(ANNOTATION_ALLOWED_PRIORITY_CLASSES) or "").split(",")
            if [c for c in allowed if c]:
                entry["priorityClasses"] = [c for c in allowed if c]
            declared_queues.append(entry)
        for extra, why in (("admissionChecks", "admission checks"), ("admissionChecksStrategy", "admission checks"),
                           ("admissionScope", "admission fair sharing")):
            if spec.get(extra):
                self.report.gap(label, f"spec.{extra}", f"gpugov declares no {why}")
        if (spec.get("stopPolicy") or "None") != "None":
            self.report.gap(label, "spec.stopPolicy", f"{spec['stopPolicy']}: gpugov's queues always admit")
        fungibility = _fungibility(spec)
        quotas = self._quotas(label, spec)
        if not namespaces and (spec.get("namespaceSelector") is not None or queues or not spec.get("cohortName")):
            self.report.gap(label, "spec.namespaceSelector", "no namespace to declare (a tenant needs one, or none at "
                            "all and a cohort: a lending queue): the queue is not imported")
            return
        tenant: Obj = {"description": f"Imported from ClusterQueue {name}."}
        if spec.get("cohortName"):
            tenant["department"] = spec["cohortName"]
        self._tenant_identity(tenant, obj, name, namespaces)
        if declared_queues:
            tenant["queues"] = declared_queues
        if quotas:
            tenant["quotas"] = quotas
        if (weight := self._weight(label, spec)) is not None:
            tenant["fairSharing"] = {"weight": weight}
        if fungibility:
            tenant["flavorFungibility"] = fungibility
        self.out.files[f"tenants/{name}.yaml"] = [document("Tenant", name, tenant)]

    def _tenant_identity(self, tenant: Obj, queue: Obj, name: str, namespaces: list[str]) -> None:
        """What a tenant imported from its queue `queue` carries whatever the scheduler: its cost centre (a
        queue gpugov wrote has its tenant's), owners, members and viewers, and its namespaces (those that
        exist adopted)."""
        cost_center = (queue["metadata"].get("labels") or {}).get(LABEL_COST_CENTER)
        if cost_center:
            tenant["costCenter"] = cost_center
        tenant.update(self._personas(name, namespaces))
        tenant["namespaces"] = namespaces
        self.tenant_namespaces.extend(namespaces)
        existing = [n for n in namespaces if n in self.inv.namespaces] if self.inv.namespaces else namespaces
        if existing:
            tenant["adoptNamespaces"] = existing

    def _personas(self, name: str, namespaces: list[str]) -> Obj:
        """spec.owners, members and viewers from gpugov's tenant RoleBindings in the tenant's namespaces (what an
        earlier gpugov apply bound): the users and groups of each, gpugov binding the same in every namespace."""
        found: Obj = {}
        for persona, key in (("owner", "owners"), ("member", "members"), ("viewer", "viewers")):
            binding = f"gpugov-tenant-{persona}s"
            held = {ns: self.inv.role_bindings[(ns, binding)] for ns in namespaces
                    if (ns, binding) in self.inv.role_bindings}
            if not held:
                continue
            per_namespace: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
            for namespace, obj in sorted(held.items()):
                subjects = obj.get("subjects") or []
                for subject in subjects:
                    if subject.get("kind") not in ("User", "Group"):
                        self.report.gap(f"RoleBinding {namespace}/{binding}", "subjects", f"{subject.get('kind')} "
                                        f"{subject.get('name')}: gpugov binds a tenant's {key} as users and groups; "
                                        "apply would drop it")
                per_namespace[namespace] = (
                    tuple(sorted({str(s["name"]) for s in subjects if s.get("kind") == "User"})),
                    tuple(sorted({str(s["name"]) for s in subjects if s.get("kind") == "Group"})))
            users = sorted({u for us, _ in per_namespace.values() for u in us})
            groups = sorted({g for _, gs in per_namespace.values() for g in gs})
            for namespace in namespaces:
                if per_namespace.get(namespace) != (tuple(users), tuple(groups)):
                    self.report.gap(f"RoleBinding {namespace}/{binding}", "subjects", f"gpugov binds tenant {name}'s "
                                    f"{key} alike in each of its namespaces, so apply would bind "
                                    f"{', '.join([*users, *groups])} here")
            if users or groups:
                found[key] = {**({"users": users} if users else {}), **({"groups": groups} if groups else {})}
        return found

    # -- departments ------------------------------------------------------------------------------
    def _departments(self) -> None:
        names = set(self.inv.cohorts)
        names |= {(o.get("spec") or {}).get("cohortName") for o in self.inv.cluster_queues.values()}
        names |= {(o.get("spec") or {}).get("parentName") for o in self.inv.cohorts.values()}
        documents = []
        for name in sorted(n for n in names if n):
            label = f"Cohort {name}"
            if not is_label(name):
                self.report.gap(label, "metadata.name", "not a DNS-1123 label, which every gpugov name is")
            spec = (self.inv.cohorts.get(name) or {}).get("spec") or {}
            department: Obj = {"description": f"Imported from Cohort {name}."}
            if spec.get("parentName"):
                department["parent"] = spec["parentName"]
            quotas = self._quotas(label, spec)
            if quotas:
                department["quotas"] = quotas
            if (weight := self._weight(label, spec)) is not None:
                department["fairSharing"] = {"weight": weight}
            documents.append(document("Department", name, department))
        if documents:
            self.out.files["tenants/departments.yaml"] = documents

    # -- the rest ---------------------------------------------------------------------------------
    def _pod_security(self) -> Obj | None:
        """Guardrails.isolation at the Pod Security level the tenant namespaces enforce today (no label:
        privileged), the most permissive where they differ, so apply refuses no pod the cluster admits now."""
        known = [n for n in self.tenant_namespaces if n in self.inv.namespaces]
        if not known:
            return None
        levels = {n: (self.inv.namespaces[n]["metadata"].get("labels") or {}).get(f"{POD_SECURITY}enforce",
                                                                                   "privileged") for n in known}
        level = min(levels.values(), key=lambda v: POD_SECURITY_LEVELS.index(v) if v in POD_SECURITY_LEVELS else 0)
        level = level if level in POD_SECURITY_LEVELS else "privileged"
        for namespace, have in sorted(levels.items()):
            if have != level:
                self.report.gap(f"Namespace {namespace}", f"metadata.labels[{POD_SECURITY}enforce]", f"{have}: gpugov "
                                f"enforces one level on every tenant namespace, imported as the most permissive, {level}")
        if level == "restricted":
            return None
        return {"podSecurity": level, "podSecurityReason": f"imported: the tenant namespaces enforce {level} today "
                "(pod-security.kubernetes.io/enforce); raise it once their pods comply"}

    def _operations(self) -> Obj | None:
        """Cluster spec.operations from the CronJobs and the agent DaemonSet gpugov applied before: the image and
        namespace of its drift CronJob, each schedule, whether the agent runs, the reclaim CronJob's Prometheus;
        only what differs from the defaults besides the image. None where gpugov runs no drift CronJob here."""
        drift = self.inv.operations.get("gpugov-drift")
        if drift is None:
            return None

        def pod(obj: Obj) -> Obj:
            return ((((obj.get("spec") or {}).get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get(
                "spec") or {}

        containers = pod(drift).get("containers") or [{}]
        read: Obj = {"image": containers[0].get("image", ""), "namespace": drift["metadata"].get("namespace"),
                     "driftSchedule": (drift.get("spec") or {}).get("schedule"),
                     "agent": "gpugov-agent" in self.inv.operations}
        for name, key in (("gpugov-reclaim", "reclaimSchedule"), ("gpugov-budget", "budgetSchedule")):
            if name in self.inv.operations:
                read[key] = (self.inv.operations[name].get("spec") or {}).get("schedule")
        if "gpugov-reclaim" in self.inv.operations:
            args = list((pod(self.inv.operations["gpugov-reclaim"]).get("containers") or [{}])[0].get("args") or [])
            if "--prometheus" in args[:-1]:
                read["prometheus"] = args[args.index("--prometheus") + 1]
        defaults = defaulted("Cluster", {"operations": {"image": read["image"]}})["operations"]
        return {k: v for k, v in read.items() if v is not None and (k == "image" or v != defaults.get(k))}

    def _threshold(self) -> int | None:
        """The borrowWithinCohort.maxPriorityThreshold every borrowing-preempting queue shares, where the priority
        classes reproduce it (gpugov: the highest value of the preemptible classes, those above are not)."""
        views = [preemption_view(o.get("spec") or {}) for o in self.inv.cluster_queues.values()]
        found = {v["borrowWithinCohort.maxPriorityThreshold"] for v in views if v["borrowWithinCohort.policy"] != "Never"}
        if len(found) != 1 or None in found:
            return None
        threshold = int(next(iter(found)))
        values = [int(o.get("value", 0)) for o in self.inv.priority_classes.values()]
        if threshold not in values or not any(v > threshold for v in values):
            return None
        # A queue admitting a class above it, in a cohort reclaiming with Any, must never borrow (GG063).
        protected = {n for n, o in self.inv.priority_classes.items() if int(o.get("value", 0)) > threshold}
        for lq in self.inv.local_queues.values():
            allowed = set(((lq["metadata"].get("annotations") or {}).get(ANNOTATION_ALLOWED_PRIORITY_CLASSES) or "")
                          .split(","))
            cq = self.inv.cluster_queues.get((lq.get("spec") or {}).get("clusterQueue", "")) or {}
            spec = cq.get("spec") or {}
            if not allowed & protected or not spec.get("cohortName"):
                continue
            if any(quantity(r.get("borrowingLimit", 0)) for g in spec.get("resourceGroups") or []
                   for f in g.get("flavors") or [] for r in f.get("resources") or []):
                return None
        return threshold

    def _priorities(self) -> None:
        documents = []
        for name, obj in sorted(self.inv.priority_classes.items()):
            spec: Obj = {"value": int(obj.get("value", 0))}
            if self.threshold is not None and spec["value"] > self.threshold:
                spec["preemptible"] = False
            if obj.get("description"):
                spec["description"] = obj["description"]
            if not is_label(name):
                self.report.gap(f"WorkloadPriorityClass {name}", "metadata.name", "not a DNS-1123 label")
            documents.append(document("PriorityClass", name, spec))
        if documents:
            self.out.files["policies/priorities.yaml"] = documents

    def _capacity(self) -> dict[str, float]:
        """Node counts of pools whose devices no known node holds, and the capacity ratios quotas need."""
        ratios: dict[str, float] = {}
        for name, pool in sorted(self.pools.items()):
            doc = self.out.files[f"hardware/{name}.yaml"][0]["spec"]
            held = self.nominal.get((name, "accelerators"), Decimal(0))
            if pool.declared_nodes:
                continue  # its nodes are declared one by one (a MIG pool's capacity is per layout)
            if pool.node_count is None:
                count = math.ceil(held / pool.per_node) if held else 0
                doc["nodeCount"] = count
                if self.inv.nodes_known and held:
                    self.report.note(f"{self.POOL_SOURCE} {name}", "nodes", f"no node with its labels advertises its "
                                     f"devices: nodeCount {count} covers the {held} its quotas hold")
                elif held:
                    self.report.note(f"{self.POOL_SOURCE} {name}", "nodes", f"nodes not known: nodeCount {count} "
                                     f"(x {pool.per_node}) covers the {held} its quotas hold; set the real ones")
                continue
            doc["nodeCount"] = pool.node_count
            capacity = Decimal(pool.node_count * pool.per_node)
            if held > capacity and capacity:
                ratio = math.ceil(held / capacity * 100) / 100
                ratios[name] = ratio
                self.report.note(f"{self.POOL_SOURCE} {name}", "nominalQuota", f"quotas hold {held} of {capacity} "
                                 f"devices: Guardrails.poolCapacityRatios[{name}] = {ratio}")
        return ratios

    def convert(self) -> Declarations:
        for name in self.inv.unsupported:
            self.report.gap(name, "", "gpugov declares no such object")
        self.threshold = self._threshold()
        for name, flavor in sorted(self.inv.flavors.items()):
            if not is_label(name):
                self.report.gap(f"ResourceFlavor {name}", "metadata.name", "not a DNS-1123 label: not imported")
                continue
            self._pool(name, flavor)
        self._departments()
        self._tenants()
        self._priorities()
        self._scheduling()
        ratios = self._capacity()
        cluster: Obj = {"description": "Imported by gpugov import.", "backend": "kueue"}
        if not self.topology_aware:  # no flavor had a topologyName: none becomes topology-aware
            cluster["topologyAwareScheduling"] = False
        if self.mig_config is not None:
            cluster["migConfig"] = {"name": self.mig_config[1], "namespace": self.mig_config[0]}
        if (operations := self._operations()) is not None:
            cluster["operations"] = operations
        # Read from a live cluster: pin the declaration to it (kube-system's uid), so apply refuses any other.
        uid = ((self.inv.namespaces.get("kube-system") or {}).get("metadata") or {}).get("uid")
        if uid:
            cluster["identity"] = {"kubeSystemUID": uid}
        self.out.files = {"policies/clusters.yaml": [document("Cluster", self.cluster, cluster)], **self.out.files}
        guardrails: Obj = {"requireOwner": False, "requireCostCenter": False}
        if self.inv.platform_team:  # the team gpugov's admission messages name (and code owners of the files)
            guardrails["platformTeam"] = self.inv.platform_team
        if ratios:
            guardrails["poolCapacityRatios"] = ratios
        if (isolation := self._pod_security()) is not None:
            guardrails["isolation"] = isolation
        self.out.files["policies/guardrails.yaml"] = [document("Guardrails", "default", guardrails)]
        self.report.note("Guardrails default", "requireOwner, requireCostCenter", "false: the cluster names no "
                         "owners or cost centres; add them to each tenant, then turn these on")
        if self.declared_models:
            self.out.files["hardware/models.yaml"] = [self.declared_models[n] for n in sorted(self.declared_models)]
        return self.out


def _selects(selector: Obj, labels: dict[str, str]) -> bool:
    """Whether a Kubernetes label selector selects an object with these labels."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def _gpu_count(node: Obj) -> int:
    """GPUs of a node as GPU Feature Discovery counts them (nvidia.com/gpu.count), whole or split by MIG."""
    value = (node["metadata"].get("labels") or {}).get("nvidia.com/gpu.count", "")
    return int(value) if value.isdigit() else 0


def _mig_mix(entries: Any) -> dict[str, int] | None:
    """A mig-parted config as one per-GPU mix ({} for MIG disabled); None when it is not one `devices: all` entry."""
    if not isinstance(entries, list) or len(entries) != 1 or not isinstance(entries[0], dict):
        return None
    entry = entries[0]
    if entry.get("devices", "all") != "all":
        return None
    if not entry.get("mig-enabled"):
        return {}
    devices = entry.get("mig-devices") or {}
    if not isinstance(devices, dict) or not devices or not all(isinstance(v, int) and v > 0 for v in devices.values()):
        return None
    return {str(profile): count for profile, count in sorted(devices.items())}


def _fungibility(spec: Obj) -> Obj:
    """A ClusterQueue's flavorFungibility as the Tenant declares it: the fields where it differs from what gpugov
    compiles unless told (whenCanBorrow and whenCanPreempt TryNextFlavor), Kueue's defaults filled in."""
    have = {**KUEUE_FUNGIBILITY, **(spec.get("flavorFungibility") or {})}
    return {k: v for k, v in have.items() if v and v != GPUGOV_FUNGIBILITY.get(k)}


def _no_key(resource: str, pool: _Pool, device: str) -> str:
    """Why a queue's quota on `resource` in `pool` has no declaration, for the report."""
    dropped = (f"not imported, so the queue no longer covers {resource} there and Kueue admits no workload that "
               "requests it through that flavor")
    if not EXTENDED_RESOURCE.match(resource):
        return (f"gpugov governs accelerators and the cpu, memory and pods that come with them; {resource} is the "
                f"node's own resource, not a device a pool holds: {dropped}")
    return (f"a pool holds one kind of device (here {device}, of {pool.model_name}) so its quota, cost and reach "
            f"mean one thing; {resource} needs a pool (a flavor) of its own: {dropped}")


def _show_labels(labels: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items())) or "{}"


def convert(inv: Inventory, cluster: str) -> Declarations:
    """Declaration documents for the objects of `inv` on cluster `cluster`, and the gaps."""
    return Converter(inv, cluster).convert()
