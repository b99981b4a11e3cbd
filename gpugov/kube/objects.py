"""The vocabulary of the Kubernetes objects gpugov writes: identity, ownership labels and the
source annotation that points every object back to the declaration it came from."""

from __future__ import annotations

from typing import Any

Object = dict[str, Any]
Key = tuple[str, str, str, str]  # apiVersion, kind, namespace, name

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "gpugov"
LABEL_TENANT = "gpugov.io/tenant"
LABEL_DEPARTMENT = "gpugov.io/department"
LABEL_POOL = "gpugov.io/pool"
LABEL_COST_CENTER = "gpugov.io/cost-center"
LABEL_PRIORITY_CLASS = "gpugov.io/priority-class"
LABEL_PREEMPTIBLE = "gpugov.io/preemptible"  # "false" on a Volcano PriorityClass that may not preempt
ANNOTATION_SOURCE = "gpugov.io/source"  # "file:line[,file:line...]" of the declarations
# Quota over time (issue #27): the span of instants a compiled object holds for, as an ISO 8601 interval
# (`start/end`, `..` an open end); only where a QuotaGrant or QuotaWindow is declared.
ANNOTATION_DESIRED_AT = "gpugov.io/desired-at"
LABEL_COMPONENT = "gpugov.io/component"  # gpugov's own objects: operations, admission, tenant-roles...
LABEL_MIG_CONFIG = "gpugov.io/mig-config"  # "true" on the MIG ConfigMap
ANNOTATION_TAINTS = "gpugov.io/taints"  # on a Node: the taints gpugov set, to remove them when undeclared
ANNOTATION_ALLOWED_PRIORITY_CLASSES = "gpugov.io/allowed-priority-classes"  # on a LocalQueue
# gpugov reclaim (issue #26), on a Workload: when gpugov warned it was idle, when it deactivated it,
# and the snooze its owner may set (an RFC 3339 time, at most the declared snooze.maximum ahead).
ANNOTATION_RECLAIM_WARNED = "gpugov.io/reclaim-warned-at"
ANNOTATION_RECLAIM_DEACTIVATED = "gpugov.io/reclaim-deactivated-at"
ANNOTATION_RECLAIM_SNOOZE = "gpugov.io/reclaim-snooze-until"
# gpugov budget on Volcano, on a tenant's Queue: since when gpugov closed it for a spent hold budget (its
# mark: only a Queue carrying it is ever opened again by gpugov; cluster/volcano_budget.py).
ANNOTATION_BUDGET_HELD = "gpugov.io/budget-held"


def object_key(obj: Object) -> Key:
    """(apiVersion, kind, namespace, name): identity of an object on a cluster."""
    meta = obj["metadata"]
    return (obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"])  # the API may send null


def without_source(metadata: dict[str, Any]) -> dict[str, Any]:
    """Metadata without the source and desired-at annotations (moving a declaration's line, or the
    span a quota holds for, changes nothing by itself); an annotations map left empty is dropped."""
    meta = dict(metadata)
    provenance = (ANNOTATION_SOURCE, ANNOTATION_DESIRED_AT)
    annotations = {k: v for k, v in meta.get("annotations", {}).items() if k not in provenance}
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    return meta


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """metav1.LabelSelector semantics: None matches nothing, {} everything."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True

# What Pod Security's restricted level (the tenant namespaces' default) asks of a pod and of each
# container: the sandbox's sample jobs and the tenant guide's example are written so.
RESTRICTED_POD = {"runAsNonRoot": True, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
