"""Compiled objects obey the Kueue rules that no CRD schema expresses.

These run on compile's output, not on declarations: compile builds one resource group per
queue with a fixed resource order, so these rules hold by construction today, and this
family is the guard that keeps them holding (Kueue's webhook would reject the object at
apply time, far from the pull request). Limits are Kueue v0.19's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from gpugov.compile.origin import source_location
from gpugov.findings import Finding, Level, make, rule
from gpugov.i18n import Text

KUEUE_LIMITS = rule(
    "GG080",
    "kueue-limits",
    Level.ERROR,
    "A compiled Kueue object exceeds Kueue's limits: 16 resource groups, 64 flavors or covered resources per "
    "group, 256 flavors in all, 512 flavor x resource pairs per group, 8 node labels, taints or tolerations per "
    "flavor.",
    "Split the tenant's quotas, or reduce the pools its cohort spans.",
)
FLAVOR_RESOURCE_ORDER = rule(
    "GG081",
    "flavor-resource-order",
    Level.ERROR,
    "A flavor does not list its resources in exactly the order of coveredResources (Kueue's webhook rejects it).",
    "This is a gpugov bug if it comes from compile; report it.",
)
RESOURCE_IN_TWO_GROUPS = rule(
    "GG082",
    "resource-in-two-groups",
    Level.ERROR,
    "A resource is covered by more than one resource group of a queue (Kueue's webhook rejects it).",
    "Each resource may be covered by one resource group only.",
)
FLAVOR_IN_TWO_GROUPS = rule(
    "GG083",
    "flavor-in-two-groups",
    Level.ERROR,
    "A flavor appears in more than one resource group of a queue (Kueue's webhook rejects it).",
    "Each flavor may appear in one resource group only.",
)
DUPLICATE_OBJECT = rule(
    "GG084",
    "duplicate-object",
    Level.ERROR,
    "Two declarations compile to the same Kubernetes object (same kind, namespace and name), e.g. a Volcano "
    "department queue and a tenant queue with one name.",
    "Rename one of the declarations.",
)


def check_objects(objects: list[dict[str, Any]]) -> list[Finding]:
    findings: list[Finding] = []
    in_order: dict[int, list[str]] = {}
    clean: set[int] = set()
    for obj in objects:
        if obj["kind"] in ("ClusterQueue", "Cohort"):
            findings.extend(_check_queue_groups(obj, in_order, clean))
        elif obj["kind"] == "ResourceFlavor":
            findings.extend(_check_flavor(obj))
    keys = [(o["apiVersion"], o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in objects]
    counts = Counter(keys)
    if len(counts) == len(keys):  # no object twice: nothing to report
        return findings
    for obj, key in zip(objects, keys, strict=True):
        if counts[key] > 1:
            findings.append(
                make(
                    DUPLICATE_OBJECT,
                    Text("{kind} '{name}' is produced by more than one declaration", kind=obj["kind"],
                         name=obj["metadata"]["name"]),
                    source_location(obj),
                )
            )
    return findings


def _check_queue_groups(obj: dict[str, Any], in_order: dict[int, list[str]], clean: set[int]) -> list[Finding]:
    """_check_groups, once per resourceGroups list that passes: compile shares equal groups between queues
    (Scope.resource_groups), and what is checked depends on the list alone. `clean`: ids of such lists,
    kept across one check_objects, as `in_order`; a list with findings is checked for each queue, whose
    name they carry."""
    groups = obj.get("spec", {}).get("resourceGroups")
    if groups is not None and id(groups) in clean:
        return []
    findings = list(_check_groups(obj, in_order))
    if groups is not None and not findings:
        clean.add(id(groups))
    return findings


def _check_groups(obj: dict[str, Any], in_order: dict[int, list[str]] | None = None) -> Iterator[Finding]:
    """`in_order`: id of a flavor's resources list -> the coveredResources it was found to follow,
    kept across one check_objects (whose objects stay alive meanwhile): compile shares a
    borrow-only flavor's entry between the queues that list it, so each is read once."""
    in_order = {} if in_order is None else in_order
    label = f"{obj['kind']} '{obj['metadata']['name']}'"
    groups = obj.get("spec", {}).get("resourceGroups", [])
    if len(groups) > 16:
        yield make(KUEUE_LIMITS, Text("{object} has {count} resource groups (max 16)", object=label, count=len(groups)),
                   source_location(obj))
    resource_groups: dict[str, int] = {}
    flavor_groups: dict[str, int] = {}
    total_flavors = 0
    for index, group in enumerate(groups):
        covered = group.get("coveredResources", [])
        covered_list = list(covered)
        flavors = group.get("flavors", [])
        total_flavors += len(flavors)
        if len(covered) > 64 or len(flavors) > 64:
            yield make(
                KUEUE_LIMITS,
                Text("{object} group {index}: {flavors} flavors and {covered} covered resources (max 64 each)",
                     object=label, index=index, flavors=len(flavors), covered=len(covered)),
                source_location(obj),
            )
        if len(covered) * len(flavors) > 512:
            yield make(
                KUEUE_LIMITS,
                Text("{object} group {index}: {pairs} flavor x resource pairs (max 512)", object=label, index=index,
                     pairs=len(covered) * len(flavors)),
                source_location(obj),
            )
        for resource in covered:
            if resource in resource_groups:
                yield make(
                    RESOURCE_IN_TWO_GROUPS,
                    Text("{object}: resource {resource} is in groups {first} and {index}", object=label,
                         resource=resource, first=resource_groups[resource], index=index),
                    source_location(obj),
                )
            resource_groups.setdefault(resource, index)
        for flavor in flavors:
            name = flavor["name"]
            if name in flavor_groups:
                yield make(
                    FLAVOR_IN_TWO_GROUPS,
                    Text("{object}: flavor {flavor} is in groups {first} and {index}", object=label,
                         flavor=name, first=flavor_groups[name], index=index),
                    source_location(obj),
                )
            else:
                flavor_groups[name] = index
            resources = flavor.get("resources", [])
            if in_order.get(id(resources)) == covered_list:
                continue
            names = [r["name"] for r in resources]
            if names == covered_list:
                in_order[id(resources)] = covered_list
            else:
                yield make(
                    FLAVOR_RESOURCE_ORDER,
                    Text("{object}: flavor {flavor} lists {names}, coveredResources is {covered}", object=label,
                         flavor=flavor["name"], names=names, covered=list(covered)),
                    source_location(obj),
                )
    if total_flavors > 256:
        yield make(KUEUE_LIMITS, Text("{object} has {count} flavors in all (max 256)", object=label,
                                      count=total_flavors), source_location(obj))


def _check_flavor(obj: dict[str, Any]) -> Iterator[Finding]:
    spec = obj.get("spec", {})
    for field in ("nodeLabels", "nodeTaints", "tolerations"):
        if len(spec.get(field, ())) > 8:
            yield make(
                KUEUE_LIMITS,
                Text("ResourceFlavor '{name}' has {count} {field} (max 8)", name=obj["metadata"]["name"],
                     count=len(spec[field]), field=field),
                source_location(obj),
            )
