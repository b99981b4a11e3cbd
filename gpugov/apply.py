"""apply: server-side apply of compiled objects to a cluster (field manager gpugov).

This is the edge that talks to a cluster through the `kubernetes` client; it takes the
objects compile produced and derives nothing. Node objects are patches: a Node that does
not exist is reported and skipped, never created.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

FIELD_MANAGER = "gpugov"


class ApplyError(Exception):
    """An object could not be applied; names the object."""


@dataclass
class ApplyResult:
    applied: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, namespace, name)
    skipped_nodes: list[str] = field(default_factory=list)
    missing: list[tuple[str, str, str]] = field(default_factory=list)  # applied, yet not found on read-back


def apply_objects(api: client.ApiClient, objects: list[dict[str, Any]], force: bool = True) -> ApplyResult:
    """Apply each object in order (compile's apply order: namespaces and flavors first),
    then read every applied object back from the server."""
    dynamic = DynamicClient(api)
    result = ApplyResult()
    for obj in objects:
        resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        meta = obj["metadata"]
        if obj["kind"] == "Node":
            try:
                resource.get(name=meta["name"])
            except NotFoundError:
                result.skipped_nodes.append(meta["name"])
                continue
        try:
            dynamic.server_side_apply(
                resource,
                body=obj,
                name=meta["name"],
                namespace=meta.get("namespace"),
                field_manager=FIELD_MANAGER,
                force_conflicts=force,
            )
        except ApiException as exc:
            where = f"{meta['namespace']}/" if meta.get("namespace") else ""
            raise ApplyError(
                f"{obj['kind']} {where}{meta['name']}: {exc.status} {exc.reason}: {_message(exc)}"
            ) from exc
        result.applied.append((obj["kind"], meta.get("namespace", ""), meta["name"]))
    for obj in objects_applied(objects, result):
        resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        try:
            resource.get(name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"))
        except NotFoundError:
            result.missing.append((obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]))
    return result


def objects_applied(objects: Iterable[dict[str, Any]], result: ApplyResult) -> list[dict[str, Any]]:
    done = set(result.applied)
    return [o for o in objects if (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) in done]


def _message(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body).get("message", ""))
    except (TypeError, ValueError):
        return str(exc.body or "")


def list_managed(api: client.ApiClient, kinds: Iterable[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """(kind, namespace, name) of every object labelled managed-by gpugov, for the given kinds."""
    dynamic = DynamicClient(api)
    found = []
    for api_version, kind in kinds:
        resource = dynamic.resources.get(api_version=api_version, kind=kind)
        items = resource.get(label_selector="app.kubernetes.io/managed-by=gpugov").items
        found.extend((kind, item.metadata.namespace or "", item.metadata.name) for item in items)
    return sorted(found)
