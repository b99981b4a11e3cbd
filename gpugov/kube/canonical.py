"""Kueue's scheduler objects in one canonical form: two spellings of one meaning compare equal.

Kueue and the API server accept several forms of the same thing: a namespaceSelector by
`matchLabels` or by `matchExpressions` In [one value] (in any order); quantities "8", 8 and
"8000m"; `coveredResources` and a flavor's `resources` in any order (the order of the
flavors does matter: it is the order Kueue tries them in); a toleration without `operator`
(Equal). And an object that leaves a field out means what Kueue's CRDs default it to
(queueingStrategy BestEffortFIFO, preemption Never, fair-sharing weight 1, stopPolicy None...).
`canonical` rewrites the first kind of difference; `with_defaults` fills in the second.
Drift (gpugov.drift.objects) and import's round trip (gpugov.adopt.canonical) both read them.
"""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

from gpugov.kube.quantity import QuantityError, parse_quantity

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # every Namespace carries its own name here
NEVER = "Never"
Obj = dict[str, Any]

# What Kueue v0.17's CRDs default (apis/kueue/v1beta2: +kubebuilder:default), per kind and spec field.
# fairSharing.weight defaults to 1 only inside a fairSharing object; an absent one weighs 1 too.
DEFAULTS: dict[str, Obj] = {
    "ClusterQueue": {
        "queueingStrategy": "BestEffortFIFO",
        "preemption": {"reclaimWithinCohort": NEVER, "withinClusterQueue": NEVER, "borrowWithinCohort": {"policy": NEVER}},
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        "stopPolicy": "None",
        "fairSharing": {"weight": 1},
    },
    "Cohort": {"fairSharing": {"weight": 1}},
    "LocalQueue": {"stopPolicy": "None"},
}
SCHEDULER_KINDS = frozenset({"ClusterQueue", "Cohort", "LocalQueue", "ResourceFlavor"})


def quantity(value: Any) -> Decimal | None:
    """A quantity as an exact Decimal; None for None or what is not a quantity."""
    if value is None:
        return None
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


def canonical_selector(selector: Any) -> Any:
    """A label selector as sorted `matchExpressions` alone (matchLabels k: v is `k In [v]`), values
    sorted and repeats dropped; None (selects nothing) and {} (selects everything) stay as they are."""
    if not isinstance(selector, dict):
        return selector
    expressions = [{"key": k, "operator": "In", "values": [v]} for k, v in (selector.get("matchLabels") or {}).items()]
    for expression in selector.get("matchExpressions") or []:
        entry = {"key": expression.get("key"), "operator": expression.get("operator")}
        if expression.get("values"):
            entry["values"] = sorted(set(expression["values"]))
        expressions.append(entry)
    unique = {(e["key"], e["operator"], tuple(e.get("values", ()))): e for e in expressions}
    return {"matchExpressions": [unique[k] for k in sorted(unique, key=str)]} if unique else {}


def selected_names(selector: Any) -> frozenset[str] | None:
    """The namespaces a selector names one by one (metadata.name In / matchLabels), None for any other selector."""
    canonical = canonical_selector(selector)
    if not canonical:
        return None
    names: set[str] | None = None
    for expression in canonical["matchExpressions"]:
        if expression["key"] != NAMESPACE_NAME_LABEL or expression["operator"] != "In":
            return None
        values = set(expression.get("values", ()))
        names = values if names is None else names & values
    return None if names is None else frozenset(names)


def _resource_groups(groups: Any) -> Any:
    if not isinstance(groups, list):
        return groups
    result = []
    for group in groups:
        group = dict(group)
        if isinstance(group.get("coveredResources"), list):
            group["coveredResources"] = sorted(group["coveredResources"])
        flavors = []
        for flavor in group.get("flavors") or []:
            flavor = dict(flavor)
            if isinstance(flavor.get("resources"), list):
                flavor["resources"] = sorted(flavor["resources"], key=lambda r: str(r.get("name", "")))
            flavors.append(flavor)
        if "flavors" in group:
            group["flavors"] = flavors
        result.append(group)
    return result


def canonical(obj: Obj, kind: str | None = None) -> Obj:
    """A copy of a Kueue scheduler object (desired or live) in canonical form; other kinds unchanged.
    `kind` for a view of an object that no longer carries it.

    Quantities keep their spelling: comparisons parse them (gpugov.kube.quantity)."""
    kind = kind or obj.get("kind")
    if kind not in SCHEDULER_KINDS or not isinstance(obj.get("spec"), dict):
        return obj
    spec = dict(obj["spec"])
    if "namespaceSelector" in spec:
        spec["namespaceSelector"] = canonical_selector(spec["namespaceSelector"])
    if "resourceGroups" in spec:
        spec["resourceGroups"] = _resource_groups(spec["resourceGroups"])
    if isinstance(spec.get("tolerations"), list):
        spec["tolerations"] = [{"operator": "Equal", **t} if isinstance(t, dict) and "operator" not in t else t
                               for t in spec["tolerations"]]
    return {**obj, "spec": spec}


def _fill(target: Obj, defaults: Obj) -> None:
    for key, value in defaults.items():
        if key not in target or target[key] is None:
            target[key] = copy.deepcopy(value)
        elif isinstance(value, dict) and isinstance(target[key], dict):
            target[key] = dict(target[key])  # copied on the way down: the given object stays as it was
            _fill(target[key], value)


def with_defaults(obj: Obj) -> Obj:
    """A copy of a Kueue object with every field its CRD defaults filled in where it is left out,
    as the API server would store it (and as Kueue reads one stored before a default existed).
    Only the maps on the defaults' paths are copied, the rest is shared: read it, never change it
    (a deep copy of every live ClusterQueue cost drift more than comparing them)."""
    defaults = DEFAULTS.get(str(obj.get("kind")))
    if defaults is None:
        return obj
    filled = dict(obj)
    spec = filled.get("spec")
    spec = filled["spec"] = dict(spec) if isinstance(spec, dict) else {}
    _fill(spec, defaults)
    return filled
