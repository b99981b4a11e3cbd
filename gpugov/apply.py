"""apply: server-side apply of compiled objects to a cluster (field manager gpugov).

This is the edge that talks to a cluster through the `kubernetes` client; it takes the
objects compile produced and derives nothing. Node objects are patches: a Node that does
not exist is reported and skipped, never created.

Node taints are an atomic list for server-side apply: applying gpugov's would replace the
admins', the autoscaler's and the GPU Operator's. So a Node's labels go by server-side
apply and its taints are merged: gpugov's taints (the ones it declares now, and the ones
it recorded in the ``gpugov.io/taints`` annotation last time) are replaced, every other
taint is kept, written with the Node's resourceVersion so a concurrent writer is never
overwritten.
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
TAINTS_ANNOTATION = "gpugov.io/taints"  # the taints gpugov set on a Node, to remove them when undeclared
_CONFLICT = 409


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
                merge_taints(client.CoreV1Api(api), obj)
            except NotFoundError:
                result.skipped_nodes.append(meta["name"])
                continue
            except ApiException as exc:
                if exc.status == 404:
                    result.skipped_nodes.append(meta["name"])
                    continue
                raise ApplyError(f"Node {meta['name']}: {exc.status} {exc.reason}: {_message(exc)}") from exc
            obj = without_taints(obj)
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


def _taint_key(taint: dict[str, Any]) -> str:
    return f"{taint['key']}={taint.get('value', '')}:{taint['effect']}"


def taint_annotation(node_patch: dict[str, Any]) -> str:
    return ",".join(sorted(_taint_key(t) for t in (node_patch.get("spec") or {}).get("taints", [])))


def without_taints(node_patch: dict[str, Any]) -> dict[str, Any]:
    """The Node patch for server-side apply: labels, and the record of gpugov's taints."""
    body = {k: v for k, v in node_patch.items() if k != "spec"}
    body["metadata"] = {**node_patch["metadata"]}
    body["metadata"]["annotations"] = {**node_patch["metadata"].get("annotations", {}),
                                       TAINTS_ANNOTATION: taint_annotation(node_patch)}
    return body


def merged_taints(live: list[dict[str, Any]], recorded: str, desired: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Live taints minus gpugov's (recorded or desired, matched by key and effect), plus the desired ones."""
    ours = {(t["key"], t["effect"]) for t in desired}
    for item in filter(None, recorded.split(",")):
        key_value, _, effect = item.rpartition(":")
        ours.add((key_value.split("=", 1)[0], effect))
    kept = [t for t in live if (t.get("key"), t.get("effect")) not in ours]
    return kept + [dict(t) for t in desired]


def merge_taints(core: client.CoreV1Api, node_patch: dict[str, Any], attempts: int = 5) -> None:
    """Put gpugov's taints on the Node without touching anyone else's (optimistic concurrency)."""
    name = node_patch["metadata"]["name"]
    desired = (node_patch.get("spec") or {}).get("taints", [])
    for _ in range(attempts):
        node = core.api_client.sanitize_for_serialization(core.read_node(name))
        live = (node.get("spec") or {}).get("taints") or []
        recorded = (node["metadata"].get("annotations") or {}).get(TAINTS_ANNOTATION, "")
        wanted = merged_taints(live, recorded, desired)
        if wanted == live:
            return
        body = {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"]}, "spec": {"taints": wanted}}
        try:
            core.patch_node(name, body)  # a strategic merge patch replaces the list as a whole
            return
        except ApiException as exc:
            if exc.status != _CONFLICT:
                raise
    raise ApplyError(f"Node {name}: taints changed concurrently {attempts} times; try again")


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
