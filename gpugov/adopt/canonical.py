"""What a Kueue or Volcano scheduler object means, canonically, and where two sets of them differ.

The views keep only what decides admission: a ResourceFlavor's nodeLabels and nodeTaints, a ClusterQueue's cohort, namespace selector,
queueing strategy, preemption, fair-sharing weight, flavor fungibility, flavors in order and each flavor and
resource's nominal/borrowing/lending quota (quantities as Decimals, so "8", 8 and "8000m" are
equal); a Cohort's parent, quotas and weight; a LocalQueue's ClusterQueue. Kueue's defaults
fill what an object leaves out, so a field written out and one defaulted compare equal. The
canonical forms and the defaults are gpugov.kube.canonical's, which drift reads too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gpugov.adopt.inventory import Inventory, Obj
from gpugov.kube.canonical import NEVER, canonical_selector, quantity, selected_names, with_defaults


def selector_view(selector: Any) -> Any:
    if selector is None:
        return "none"
    names = selected_names(selector)
    if names is not None:
        return sorted(names)
    return json.dumps(canonical_selector(selector), sort_keys=True)


def preemption_view(spec: Obj) -> dict[str, Any]:
    preemption = with_defaults({"kind": "ClusterQueue", "spec": spec})["spec"]["preemption"]
    borrow = preemption.get("borrowWithinCohort") or {}
    return {
        "reclaimWithinCohort": preemption.get("reclaimWithinCohort") or NEVER,
        "withinClusterQueue": preemption.get("withinClusterQueue") or NEVER,
        "borrowWithinCohort.policy": borrow.get("policy") or NEVER,
        "borrowWithinCohort.maxPriorityThreshold": borrow.get("maxPriorityThreshold"),
    }


def weight_view(spec: Obj) -> Decimal | None:
    return quantity(with_defaults({"kind": "Cohort", "spec": spec})["spec"]["fairSharing"].get("weight", 1))


def quota_view(spec: Obj) -> tuple[list[str], dict[tuple[str, str], tuple[Decimal | None, ...]]]:
    """(flavors in order over every resource group, (flavor, resource) -> (nominal, borrowing, lending))."""
    flavors: list[str] = []
    quotas: dict[tuple[str, str], tuple[Decimal | None, ...]] = {}
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            flavors.append(flavor["name"])
            for resource in flavor.get("resources") or []:
                quotas[(flavor["name"], resource["name"])] = (
                    quantity(resource.get("nominalQuota", 0)),
                    quantity(resource.get("borrowingLimit")),
                    quantity(resource.get("lendingLimit")),
                )
    return flavors, quotas


def cluster_queue_view(obj: Obj) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    flavors, quotas = quota_view(spec)
    return {
        "cohortName": spec.get("cohortName") or None,
        "namespaceSelector": selector_view(spec.get("namespaceSelector")),
        "queueingStrategy": with_defaults(obj)["spec"]["queueingStrategy"],
        **{f"preemption.{k}": v for k, v in preemption_view(spec).items()},
        "fairSharing.weight": weight_view(spec),
        "flavorFungibility": dict(sorted(with_defaults(obj)["spec"]["flavorFungibility"].items())),
        "flavors": flavors,
        "quotas": quotas,
    }


def cohort_view(obj: Obj) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    flavors, quotas = quota_view(spec)
    return {"parentName": spec.get("parentName") or None, "fairSharing.weight": weight_view(spec),
            "flavors": flavors, "quotas": quotas}


def flavor_view(obj: Obj) -> dict[str, Any]:
    """What picks a flavor's nodes: its nodeLabels (none: every node) and nodeTaints."""
    spec = obj.get("spec") or {}
    taints = sorted((t.get("key", ""), t.get("value", ""), t.get("effect", "")) for t in spec.get("nodeTaints") or [])
    return {"nodeLabels": dict(sorted((spec.get("nodeLabels") or {}).items())), "nodeTaints": taints}


@dataclass(frozen=True)
class Difference:
    object: str
    field: str
    before: Any  # what the input holds
    after: Any  # what the declarations compile to


def _quota_field(key: tuple[str, str]) -> str:
    return f"spec.resourceGroups.flavors[{key[0]}].resources[{key[1]}]"


def _limits(value: tuple[Decimal | None, ...] | None) -> str:
    if value is None:
        return "absent"
    nominal, borrowing, lending = value
    return (f"nominal {nominal}, borrowingLimit {'unlimited' if borrowing is None else borrowing}, "
            f"lendingLimit {'all' if lending is None else lending}")


def _compare(label: str, before: dict[str, Any], after: dict[str, Any]) -> list[Difference]:
    found = []
    for key in before:
        if key == "quotas":
            for q in sorted(set(before[key]) | set(after[key])):
                if before[key].get(q) != after[key].get(q):
                    found.append(Difference(label, _quota_field(q), _limits(before[key].get(q)),
                                            _limits(after[key].get(q))))
        elif before[key] != after[key]:
            where = "spec.resourceGroups.flavors" if key == "flavors" else f"spec.{key}"
            found.append(Difference(label, where, before[key], after[key]))
    return found


def differences(before: Inventory, after: Inventory) -> list[Difference]:
    """Every semantic difference of ResourceFlavors (the nodes they pick), ClusterQueues, Cohorts and LocalQueues
    between two inventories.

    A Cohort that only one side declares as an object compares against an empty one: Kueue
    treats a cohort named by a ClusterQueue but never created as an empty Cohort."""
    found: list[Difference] = []
    for name in sorted(set(before.flavors) & set(after.flavors)):
        found.extend(_compare(f"ResourceFlavor {name}", flavor_view(before.flavors[name]),
                              flavor_view(after.flavors[name])))
    for name in sorted(set(before.cluster_queues) | set(after.cluster_queues)):
        label = f"ClusterQueue {name}"
        old, new = before.cluster_queues.get(name), after.cluster_queues.get(name)
        if old is None or new is None:
            found.append(Difference(label, "", "present" if old else "absent", "present" if new else "absent"))
            continue
        found.extend(_compare(label, cluster_queue_view(old), cluster_queue_view(new)))
    empty: Obj = {"spec": {}}
    for name in sorted(set(before.cohorts) | set(after.cohorts)):
        old, new = before.cohorts.get(name, empty), after.cohorts.get(name, empty)
        found.extend(_compare(f"Cohort {name}", cohort_view(old), cohort_view(new)))
    found.extend(queue_differences(before, after))
    for key in sorted(set(before.local_queues) | set(after.local_queues)):
        old_lq, new_lq = before.local_queues.get(key), after.local_queues.get(key)
        old_cq = (old_lq or {}).get("spec", {}).get("clusterQueue") if old_lq else None
        new_cq = (new_lq or {}).get("spec", {}).get("clusterQueue") if new_lq else None
        if old_cq != new_cq:
            found.append(Difference(f"LocalQueue {key[0]}/{key[1]}", "spec.clusterQueue", old_cq, new_cq))
    return found


# -- Volcano ------------------------------------------------------------------------------------
VOLCANO_ROOT = "root"  # the capacity plugin's root queue, which vc-scheduler makes and gpugov never declares


def _amounts(value: Any, zero_is_absent: bool) -> dict[str, Decimal | None]:
    """A ResourceList as Decimals; deserved and guarantee read a missing resource as 0, so 0 compares as absent."""
    found = {str(k): quantity(v) for k, v in (value or {}).items()}
    return {k: v for k, v in sorted(found.items()) if not (zero_is_absent and v == 0)}


def queue_view(obj: Obj) -> dict[str, Any]:
    """What a Volcano Queue means to the scheduler: a missing parent is root, a missing weight 1, a missing
    reclaimable true (Volcano's defaults), capability absent for a resource means no ceiling on it."""
    spec = obj.get("spec") or {}
    affinity = spec.get("affinity") or {}
    reclaimable = spec.get("reclaimable")
    return {
        "parent": spec.get("parent") or VOLCANO_ROOT,
        "weight": _whole(spec.get("weight") or 1),
        "reclaimable": True if reclaimable is None else bool(reclaimable),
        "deserved": _amounts(spec.get("deserved"), True),
        "guarantee.resource": _amounts((spec.get("guarantee") or {}).get("resource"), True),
        "capability": _amounts(spec.get("capability"), False),
        "affinity": json.dumps(_affinity_view(affinity), sort_keys=True),
        "type": spec.get("type") or None,
        "priority": _whole(spec.get("priority") or 0),
        "extendClusters": json.dumps(spec.get("extendClusters") or [], sort_keys=True),
        "dequeueStrategy": spec.get("dequeueStrategy") or "traverse",
    }


def _whole(value: Any) -> Any:
    """An int32 field as a number; something else (a hand-written folder's typo) as it is written."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return str(value)


def _affinity_view(affinity: Obj) -> dict[str, list[str]]:
    found = {}
    for kind in ("nodeGroupAffinity", "nodeGroupAntiAffinity"):
        for mode in ("requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"):
            groups = sorted(str(g) for g in (affinity.get(kind) or {}).get(mode) or [])
            if groups:
                found[f"{kind}.{mode.split('During')[0]}"] = groups
    return found


def _shown_amounts(value: dict[str, Decimal | None]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in value.items()) or "none"


def queue_differences(before: Inventory, after: Inventory) -> list[Difference]:
    """Every semantic difference of Volcano Queues (root aside, which Volcano makes itself)."""
    found: list[Difference] = []
    for name in sorted((set(before.volcano_queues) | set(after.volcano_queues)) - {VOLCANO_ROOT}):
        label = f"Queue {name}"
        old, new = before.volcano_queues.get(name), after.volcano_queues.get(name)
        if old is None or new is None:
            found.append(Difference(label, "", "present" if old else "absent", "present" if new else "absent"))
            continue
        was, now = queue_view(old), queue_view(new)
        for key in was:
            if was[key] == now[key]:
                continue
            if key in ("deserved", "guarantee.resource", "capability"):
                found.append(Difference(label, f"spec.{key}", _shown_amounts(was[key]), _shown_amounts(now[key])))
            else:
                found.append(Difference(label, f"spec.{key}", was[key], now[key]))
    return found
