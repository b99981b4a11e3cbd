"""apply takes over nothing it does not own, unless the declarations adopt it.

Before the first write, every object apply would write is read from the cluster. One that exists
without gpugov's mark (the label app.kubernetes.io/managed-by: gpugov, which compile puts on every
object) belongs to someone else: an operator's namespace such as argocd or monitoring, another team's
namespace, a ClusterQueue made by hand. Server-side apply with force would take its fields over and
a tenant's RoleBinding would give the tenant edit there, so apply refuses, naming each such object,
unless the declarations adopt it: a Namespace that its tenant lists in spec.adoptNamespaces (a plan
risk, GP013), or a scheduler object (a ClusterQueue written by hand before `gpugov import`) that the
Cluster lists in spec.adopt (GP026; GG160 keeps each entry naming an object compile writes). Nodes
are exempt: gpugov only patches labels and taints onto Nodes that the kubelet owns.

A Namespace that prune released (its tenant no longer declared it) keeps one annotation,
gpugov.io/released-from: the tenant (or gpugov component) it was released from. That same tenant may
take it back without adopting it; any other needs spec.adoptNamespaces, like any foreign namespace.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from gpugov.cluster.rest import Api, read_object
from gpugov.declarations.model import Model
from gpugov.kube.kinds import kind_of
from gpugov.kube.objects import LABEL_COMPONENT, LABEL_TENANT, MANAGED_BY, MANAGER

MAX_NAMED = 5
RELEASED_FROM = "gpugov.io/released-from"  # on a Namespace prune released: whose it was


class ForeignObjects(Exception):
    """Objects apply would write exist on the cluster without being gpugov's (one line, names them)."""


ObjectKey = tuple[str, str, str]  # (kind, namespace or "", name)


@dataclass(frozen=True)
class Adoption:
    """What the declarations let apply take over on one cluster."""

    namespaces: frozenset[str] = frozenset()  # every tenant's spec.adoptNamespaces
    objects: frozenset[ObjectKey] = frozenset()  # the Cluster's spec.adopt


def declared_adoption(model: Model, cluster: str) -> Adoption:
    """The adoption the declarations make for `cluster` (both apply and the Pulumi guard ask this)."""
    return Adoption(
        frozenset(name for tenant in model.tenants.values() for name in tenant.adopt_namespaces),
        frozenset((entry.kind, entry.namespace, entry.name) for entry in model.cluster(cluster).adopt),
    )


@dataclass
class Ownership:
    adopted: list[str] = field(default_factory=list)  # Namespaces taken over because the declarations adopt them
    adopted_objects: list[str] = field(default_factory=list)  # "ClusterQueue nlp": taken over per Cluster spec.adopt
    returned: list[str] = field(default_factory=list)  # Namespaces prune released, taken back by their tenant
    foreign: list[str] = field(default_factory=list)  # "Namespace argocd", "ClusterQueue team-a"

    def notes(self) -> list[str]:
        return ([f"adopting Namespace {name} (spec.adoptNamespaces)" for name in self.adopted]
                + [f"adopting {label} (Cluster spec.adopt)" for label in self.adopted_objects]
                + [f"taking back Namespace {name} (gpugov released it from the same owner)" for name in self.returned])


def owner_of(obj: dict[str, Any]) -> str:
    """Whose a gpugov object is: its tenant, else its gpugov component (operations), else gpugov."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return str(labels.get(LABEL_TENANT) or labels.get(LABEL_COMPONENT) or MANAGER)


def release_marker(obj: dict[str, Any]) -> dict[str, Any]:
    """The metadata prune leaves on an object it releases: a Namespace says whose it was."""
    return {"annotations": {RELEASED_FROM: owner_of(obj)}} if obj.get("kind") == "Namespace" else {}


def _label(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{obj['kind']} {meta['namespace'] + '/' if meta.get('namespace') else ''}{meta['name']}"


def is_gpugovs(live: dict[str, Any]) -> bool:
    return ((live.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY) == MANAGER


def ownership(api_client: client.ApiClient, objects: Iterable[dict[str, Any]], adopt: Adoption) -> Ownership:
    """Which of `objects` exist on the cluster without being gpugov's; `adopt`: what may be taken over."""
    api = Api(api_client)
    result = Ownership()
    for obj in objects:
        if obj["kind"] == "Node":
            continue
        meta = obj["metadata"]
        live = read_object(api, kind_of(obj), meta["name"], meta.get("namespace", ""))
        if live is None or is_gpugovs(live):
            continue
        if obj["kind"] == "Namespace" and meta["name"] in adopt.namespaces:
            result.adopted.append(meta["name"])
        elif (obj["kind"], meta.get("namespace") or "", meta["name"]) in adopt.objects:
            result.adopted_objects.append(_label(obj))
        elif obj["kind"] == "Namespace" and _released_from(live) == owner_of(obj):
            result.returned.append(meta["name"])
        else:
            result.foreign.append(_label(obj))
    return result


def _released_from(live: dict[str, Any]) -> str | None:
    return ((live.get("metadata") or {}).get("annotations") or {}).get(RELEASED_FROM)


def refuse_foreign(api_client: client.ApiClient, objects: list[dict[str, Any]], adopt: Adoption) -> Ownership:
    """ownership(), raising ForeignObjects when anything would be taken over without adoption."""
    found = ownership(api_client, objects, adopt)
    if found.foreign:
        named = ", ".join(found.foreign[:MAX_NAMED]) + (
            f" and {len(found.foreign) - MAX_NAMED} more" if len(found.foreign) > MAX_NAMED else "")
        raise ForeignObjects(
            f"refusing to take over {len(found.foreign)} object(s) that exist on the cluster without being gpugov's "
            f"(no {MANAGED_BY}: {MANAGER} label): {named} (a tenant adopts a namespace with spec.adoptNamespaces, the "
            "Cluster a scheduler object (ClusterQueue, Cohort, ResourceFlavor, LocalQueue, WorkloadPriorityClass, "
            "Topology) with spec.adopt; anything else: rename it in the declarations or remove it from the cluster)")
    return found
