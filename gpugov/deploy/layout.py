"""Which component owns each compiled object, and which objects it must wait for.

Pure (no pulumi import): everything here is read off compile's objects, through their
gpugov.io labels and the names they reference. Nothing is invented.
"""

from __future__ import annotations

from typing import Any

from gpugov.compile.nodes import MIG_CONFIG_LABEL
from gpugov.kube.names import KUEUE_GROUP, VOLCANO_GROUP
from gpugov.kube.objects import LABEL_COMPONENT, LABEL_MIG_CONFIG, LABEL_POOL, LABEL_TENANT, Key, Object, object_key

RBAC_GROUP = "rbac.authorization.k8s.io"

ORGANISATION, OPERATIONS, POOL, TENANT = "organisation", "operations", "pool", "tenant"


def owner(obj: Object) -> tuple[str, str]:
    """(component kind, component name) that holds `obj`.

    Tenant first: a tenant's objects also carry its department label. gpugov's own workloads
    (drift CronJob, agent DaemonSet; label gpugov.io/component) form one operations group.
    Cohorts, parent queues, priority classes, the cluster-wide MIG ConfigMap (one for all MIG
    pools: it names no pool) and anything unlabelled belong to the organisation."""
    labels = obj["metadata"].get("labels", {})
    if LABEL_TENANT in labels:
        return TENANT, labels[LABEL_TENANT]
    if LABEL_POOL in labels:
        return POOL, labels[LABEL_POOL]
    if LABEL_COMPONENT in labels:
        return OPERATIONS, ""
    return ORGANISATION, ""


def is_mig_config(obj: Object) -> bool:
    return obj["metadata"].get("labels", {}).get(LABEL_MIG_CONFIG) == "true"


def resource_name(obj: Object) -> str:
    """Pulumi name: the object's own name, namespace-qualified. The URN adds the type, so
    names only need to be unique per kind, as they are on the cluster."""
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta["name"])


def _group(api_version: str) -> str:
    return api_version.split("/")[0] if "/" in api_version else ""


def _flavors(spec: dict[str, Any]) -> list[str]:
    return [flavor["name"] for group in spec.get("resourceGroups", []) for flavor in group.get("flavors", [])]


def references(obj: Object, mig_config: Key | None = None) -> list[Key]:
    """Keys of the objects `obj` names, which must exist before it (and outlive it).

    Namespace of a namespaced object; Kueue: flavor -> topology, cohort -> parent cohort and
    its flavors, ClusterQueue -> cohort and flavors, LocalQueue -> ClusterQueue; Volcano:
    queue -> parent queue; a node that selects a MIG config -> the MIG ConfigMap; RBAC
    bindings -> their ClusterRole and ServiceAccounts; workloads -> their ServiceAccount.
    (Callers keep only the keys that are compiled objects, e.g. not a built-in ClusterRole such as `view`.)"""
    api, kind, meta = obj["apiVersion"], obj["kind"], obj["metadata"]
    spec: dict[str, Any] = obj.get("spec") or {}
    refs: list[Key] = []
    if meta.get("namespace"):
        refs.append(("v1", "Namespace", "", meta["namespace"]))
    group = _group(api)
    if group == KUEUE_GROUP:
        if kind == "ResourceFlavor" and spec.get("topologyName"):
            refs.append((api, "Topology", "", spec["topologyName"]))
        if kind == "Cohort" and spec.get("parentName"):
            refs.append((api, "Cohort", "", spec["parentName"]))
        if kind == "ClusterQueue" and spec.get("cohortName"):
            refs.append((api, "Cohort", "", spec["cohortName"]))
        if kind in ("Cohort", "ClusterQueue"):
            refs.extend((api, "ResourceFlavor", "", name) for name in dict.fromkeys(_flavors(spec)))
        if kind == "LocalQueue" and spec.get("clusterQueue"):
            refs.append((api, "ClusterQueue", "", spec["clusterQueue"]))
    elif group == VOLCANO_GROUP and kind == "Queue" and spec.get("parent"):
        refs.append((api, "Queue", "", spec["parent"]))
    elif group == RBAC_GROUP and kind in ("RoleBinding", "ClusterRoleBinding"):
        role = obj.get("roleRef", {})
        if role.get("kind") == "ClusterRole":
            refs.append((api, "ClusterRole", "", role["name"]))
        refs.extend(
            ("v1", "ServiceAccount", subject.get("namespace", ""), subject["name"])
            for subject in obj.get("subjects", [])
            if subject.get("kind") == "ServiceAccount"
        )
    pod = _pod_spec(kind, spec)
    if pod.get("serviceAccountName") and meta.get("namespace"):
        refs.append(("v1", "ServiceAccount", meta["namespace"], pod["serviceAccountName"]))
    if kind == "Node" and mig_config is not None and MIG_CONFIG_LABEL in meta.get("labels", {}):
        refs.append(mig_config)
    return refs


def _pod_spec(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    if kind == "CronJob":
        spec = spec.get("jobTemplate", {}).get("spec", {})
    if kind in ("CronJob", "Job", "DaemonSet", "Deployment", "StatefulSet"):
        return dict(spec.get("template", {}).get("spec", {}))
    return {}


def mig_config_key(objects: list[Object]) -> Key | None:
    return next((object_key(obj) for obj in objects if is_mig_config(obj)), None)


__all__ = [
    "LABEL_COMPONENT",
    "LABEL_MIG_CONFIG",
    "OPERATIONS",
    "ORGANISATION",
    "POOL",
    "TENANT",
    "is_mig_config",
    "mig_config_key",
    "owner",
    "references",
    "resource_name",
]
