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

Volcano's hierarchical Queues are applied in an order its webhook accepts, see
``queue_apply_plan``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

from gpugov.kube.quantity import format_quantity, parse_quantity

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
    seen: set[tuple[str, str, str]] = set()
    for obj in _in_apply_order(dynamic, objects):
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
        applied = (obj["kind"], meta.get("namespace", ""), meta["name"])
        if applied not in seen:  # a Volcano parent Queue is applied twice (widened, then settled)
            seen.add(applied)
            result.applied.append(applied)
    for obj in objects_applied(objects, result):
        resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        try:
            resource.get(name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"))
        except NotFoundError:
            result.missing.append((obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]))
    return result


def _in_apply_order(dynamic: DynamicClient, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """compile's order, with Volcano's Queues as queue_apply_plan orders them (at their first place)."""
    queues = [o for o in objects if is_volcano_queue(o)]
    if not queues:
        return objects
    api = dynamic.resources.get(api_version=QUEUE_API, kind="Queue")
    live = {q["metadata"]["name"]: q for q in api.get().to_dict().get("items", [])}
    first = objects.index(queues[0])
    rest = [o for o in objects if not is_volcano_queue(o)]
    return rest[:first] + queue_apply_plan(queues, live) + rest[first:]


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


# -- Volcano queue order ------------------------------------------------------
#
# The order in which Volcano's hierarchical Queues can be updated.
#
# Volcano's queue webhook checks, on every create and update, that the children's deserved and
# guarantee add up to no more than their parent's, that a child's capability stays within its
# ancestors', and that a parent exists before its children. So applying compile's Queues in one
# pass breaks: parents first fails a decrease (the parent shrinks below its current children),
# children first fails an increase. ``queue_apply_plan`` gives an order that holds at every step:
#
# 1. parents top-down: a new parent at its desired values, an existing one widened to the larger
#    of its live and desired values per resource (an absent capability is the widest);
# 2. every Queue bottom-up at its desired values: children shrink or grow under widened parents,
#    then each parent settles once its children have.

QUEUE_API = "scheduling.volcano.sh/v1beta1"
Queue = dict[str, Any]


def is_volcano_queue(obj: dict[str, Any]) -> bool:
    return obj.get("apiVersion") == QUEUE_API and obj.get("kind") == "Queue"


def _wider(live: dict[str, Any] | None, desired: dict[str, Any] | None, absent_is_widest: bool) -> dict[str, Any] | None:
    if live is None or desired is None:
        if absent_is_widest:
            return None
        return dict(live or desired or {}) or None
    result = {}
    for resource in sorted(set(live) | set(desired)):
        if resource in live and resource in desired:
            result[resource] = format_quantity(max(parse_quantity(live[resource]), parse_quantity(desired[resource])))
        elif not absent_is_widest:
            result[resource] = live.get(resource, desired.get(resource))
    return result


def widened(desired: Queue, live: Queue) -> Queue:
    """``desired`` with deserved, guarantee and capability at least as large as ``live``'s."""
    body = copy.deepcopy(desired)
    spec, live_spec = body.setdefault("spec", {}), live.get("spec") or {}
    for name, absent_is_widest in (("deserved", False), ("capability", True)):
        value = _wider(live_spec.get(name), spec.get(name), absent_is_widest)
        if value is None:
            spec.pop(name, None)
        else:
            spec[name] = value
    guarantee = _wider((live_spec.get("guarantee") or {}).get("resource"), (spec.get("guarantee") or {}).get("resource"),
                       False)
    if guarantee:
        spec["guarantee"] = {"resource": guarantee}
    return body


def _depth(name: str, parent_of: dict[str, str]) -> int:
    depth, seen = 0, set()
    while name in parent_of and name not in seen:
        seen.add(name)
        name = parent_of[name]
        depth += 1
    return depth


def queue_apply_plan(desired: Iterable[Queue], live: dict[str, Queue]) -> list[Queue]:
    """Queue bodies to apply, in order (see the module doc). ``live``: existing Queues by name."""
    queues = list(desired)
    parent_of = {q["metadata"]["name"]: q["spec"]["parent"] for q in queues if (q.get("spec") or {}).get("parent")}
    parents = set(parent_of.values())
    by_depth = sorted(queues, key=lambda q: _depth(q["metadata"]["name"], parent_of))
    plan = []
    for queue in by_depth:  # top-down
        name = queue["metadata"]["name"]
        if name in parents:
            plan.append(widened(queue, live[name]) if name in live else queue)
    plan.extend(reversed(by_depth))  # bottom-up, at the desired values
    return plan
