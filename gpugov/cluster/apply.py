"""apply: server-side apply of compiled objects to a cluster (field manager gpugov).

This is the edge that writes to a cluster; it takes the objects compile produced and derives
nothing. Requests are raw JSON through rest.py, so an endpoint that is not a Kubernetes API
stops apply with one line (CheckIncomplete) instead of a traceback. Node objects are
patches: a Node that does not exist is reported and skipped, never created.

Node taints are an atomic list for server-side apply: applying gpugov's would replace the
admins', the autoscaler's and the GPU Operator's. So a Node's labels go by server-side
apply and its taints are merged: gpugov's taints (the ones it declares now, and the ones
it recorded in the ``gpugov.io/taints`` annotation last time) are replaced, every other
taint is kept, written with the Node's resourceVersion so a concurrent writer is never
overwritten.

Volcano's hierarchical Queues are applied in an order its webhook accepts, see
``queue_apply_plan``. What is no longer declared is removed afterwards by prune.py.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from gpugov.cluster.rest import (
    APPLY_PATCH,
    FIELD_MANAGER,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    Api,
    Rejected,
    list_all,
    read_object,
    served_versions,
    server_side_apply,
    unserved,
    write,
)
from gpugov.compile.gpu_operator import is_clusterpolicy, merged_policy
from gpugov.kube.kinds import KINDS, kind_of
from gpugov.kube.names import VOLCANO_API
from gpugov.kube.objects import ANNOTATION_TAINTS as TAINTS_ANNOTATION
from gpugov.kube.quantity import format_quantity, parse_quantity

NODE = KINDS[("v1", "Node")]
_CONFLICT = 409

__all__ = ["FIELD_MANAGER", "TAINTS_ANNOTATION", "ApplyError", "ApplyResult", "apply_objects", "merge_taints"]


class ApplyError(Exception):
    """The cluster refused an object; names the object."""


@dataclass
class ApplyResult:
    applied: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, namespace, name)
    skipped_nodes: list[str] = field(default_factory=list)
    missing: list[tuple[str, str, str]] = field(default_factory=list)  # applied, yet not found on read-back
    # What applying did to each: created, configured (a Node: labelled) or unchanged (its resourceVersion kept).
    changes: dict[tuple[str, str, str], str] = field(default_factory=dict)

    def count(self, change: str) -> int:
        return sum(1 for c in self.changes.values() if c == change)


def _label(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{obj['kind']} {meta['namespace'] + '/' if meta.get('namespace') else ''}{meta['name']}"


def apply_objects(api_client: client.ApiClient, objects: list[dict[str, Any]], force: bool = True) -> ApplyResult:
    """Apply each object in order (compile's apply order: namespaces and flavors first),
    then read every applied object back from the server.

    Raises ApplyError when the server refuses an object, CheckIncomplete when there is no
    well-formed answer (unreachable, not a Kubernetes API)."""
    api = Api(api_client)
    check_served(api, objects)
    result = ApplyResult()
    seen: set[tuple[str, str, str]] = set()
    before: dict[tuple[str, str, str], dict[str, Any] | None] = {}  # the object before the first write; None: absent
    for obj in _in_apply_order(api, objects):
        meta = obj["metadata"]
        applied = (obj["kind"], meta.get("namespace", ""), meta["name"])
        try:
            if applied not in before:
                before[applied] = read_object(api, kind_of(obj), meta["name"], meta.get("namespace", ""))
            if obj["kind"] == "Node":
                if not merge_taints(api, obj):
                    result.skipped_nodes.append(meta["name"])
                    continue
                obj = without_taints(obj)
            if is_clusterpolicy(obj):
                patched = merge_clusterpolicy(api, obj)
                if patched is None:
                    result.skipped_nodes.append(f"ClusterPolicy {meta['name']}")
                    continue
                answer = patched
            else:
                answer = server_side_apply(api, kind_of(obj), obj, force=force)
        except Rejected as exc:
            raise ApplyError(f"{_label(obj)}: {exc}") from exc
        result.changes[applied] = change_of(obj["kind"], before[applied], answer)
        if applied not in seen:  # a Volcano parent Queue is applied twice (widened, then settled)
            seen.add(applied)
            result.applied.append(applied)
    for obj in objects_applied(objects, result):
        meta = obj["metadata"]
        if read_object(api, kind_of(obj), meta["name"], meta.get("namespace", "")) is None:
            result.missing.append((obj["kind"], meta.get("namespace", ""), meta["name"]))
    return result


def change_of(kind: str, before: dict[str, Any] | None, answer: dict[str, Any]) -> str:
    """What applying did, from the object before the first write and the last answer: unchanged when
    the resourceVersion stayed, or when only the server's bookkeeping moved. The API server rewrites
    gpugov's managedFields entry (a new resourceVersion, the same generation) on the first apply after
    another manager applied to the status subresource, e.g. kube-controller-manager's
    ValidatingAdmissionPolicy status controller (status.typeChecking): nothing was configured, and the
    dry run (preview_changes) compares the same way."""
    if before is None:
        return "created"
    if str(answer["metadata"].get("resourceVersion")) == str(before["metadata"].get("resourceVersion")):
        return "unchanged"
    if _comparable(answer) == _comparable(before):
        return "unchanged"
    return "labelled" if kind == "Node" else "configured"


VOLATILE = ("resourceVersion", "managedFields", "generation")


def _comparable(obj: dict[str, Any]) -> dict[str, Any]:
    """What an apply configures: the object without its status and the server's bookkeeping
    (resourceVersion, generation, managedFields)."""
    body = {k: v for k, v in obj.items() if k != "status"}
    body["metadata"] = {k: v for k, v in obj["metadata"].items() if k not in VOLATILE}
    return body


def preview_changes(api_client: client.ApiClient, objects: list[dict[str, Any]]) -> dict[tuple[str, str, str], str]:
    """What apply would do to each object, changing nothing: create (absent), skip (a Node that is
    not there), else a server-side apply dry run (dryRun=All) compared with the live object:
    configure (label, a Node) or unchanged. An object the dry run refuses on its own (a Volcano
    Queue whose order matters) reads "apply"."""
    api = Api(api_client)
    changes: dict[tuple[str, str, str], str] = {}
    for obj in objects:
        meta = obj["metadata"]
        key = (obj["kind"], meta.get("namespace", ""), meta["name"])
        live = read_object(api, kind_of(obj), meta["name"], meta.get("namespace", ""))
        if live is None:
            changes[key] = "skip" if obj["kind"] in ("Node", "ClusterPolicy") else "create"
            continue
        if is_clusterpolicy(obj):
            try:
                answer = write(api, "PATCH", kind_of(obj), meta["name"], "", merged_policy(live, obj), MERGE_PATCH,
                               [("fieldManager", FIELD_MANAGER), ("dryRun", "All")])
            except Rejected:
                changes[key] = "apply"
                continue
            changes[key] = "unchanged" if _comparable(answer) == _comparable(live) else "configure"
            continue
        body = obj
        taints_change = False
        if obj["kind"] == "Node":
            current = (live.get("spec") or {}).get("taints") or []
            wanted = merged_taints(current, ",".join(recorded_taints(live)), (obj.get("spec") or {}).get("taints", []))
            taints_change = wanted != current
            body = without_taints(obj)
        query = [("fieldManager", FIELD_MANAGER), ("force", "true"), ("dryRun", "All")]
        try:
            answer = write(api, "PATCH", kind_of(body), meta["name"], meta.get("namespace", ""), body, APPLY_PATCH, query)
        except Rejected:
            changes[key] = "apply"
            continue
        same = _comparable(answer) == _comparable(live) and not taints_change
        changes[key] = "unchanged" if same else ("label" if obj["kind"] == "Node" else "configure")
    return changes


def check_served(api: Api, objects: list[dict[str, Any]], served: set[str] | None = None) -> None:
    """Before the first write: every kind to apply is served (CheckIncomplete names the first that is not).
    `served`: served_versions, when already read."""
    served = served_versions(api) if served is None else served
    for kind in sorted({kind_of(o) for o in objects}, key=lambda k: (k.api_version, k.kind)):
        if kind.api_version not in served:
            raise unserved(api, kind)


def _in_apply_order(api: Api, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """compile's order, with Volcano's Queues as queue_apply_plan orders them (at their first place), and the
    admission policies apply's wait probes after the others (enforcement.probed_last)."""
    from gpugov.cluster.enforcement import probed_last

    objects = probed_last(objects)
    queues = [o for o in objects if is_volcano_queue(o)]
    if not queues:
        return objects
    live = {q["metadata"]["name"]: q for q in list_all(api, kind_of(queues[0]))}
    first = objects.index(queues[0])
    rest = [o for o in objects if not is_volcano_queue(o)]
    return rest[:first] + queue_apply_plan(queues, live) + rest[first:]


def merge_clusterpolicy(api: Api, patch: dict[str, Any], attempts: int = 5) -> dict[str, Any] | None:
    """Put the compiled settings on the GPU Operator's ClusterPolicy (compile.gpu_operator): never
    created (None where it does not exist), its env lists merged by name under its resourceVersion,
    read again on a conflict."""
    kind = kind_of(patch)
    name = patch["metadata"]["name"]
    for attempt in range(attempts):
        live = read_object(api, kind, name)
        if live is None:
            return None
        try:
            return write(api, "PATCH", kind, name, "", merged_policy(live, patch), MERGE_PATCH,
                         [("fieldManager", FIELD_MANAGER)])
        except Rejected as exc:
            if exc.answer.status != _CONFLICT or attempt == attempts - 1:
                raise
    return None


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


def recorded_taints(node: dict[str, Any]) -> list[str]:
    """The taints gpugov recorded on a live Node ("key=value:Effect")."""
    recorded = (node["metadata"].get("annotations") or {}).get(TAINTS_ANNOTATION, "")
    return [item for item in str(recorded).split(",") if item]


def merged_taints(live: list[dict[str, Any]], recorded: str, desired: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Live taints minus gpugov's (recorded or desired, matched by key and effect), plus the desired ones."""
    ours = {(t["key"], t["effect"]) for t in desired}
    for item in filter(None, recorded.split(",")):
        key_value, _, effect = item.rpartition(":")
        ours.add((key_value.split("=", 1)[0], effect))
    kept = [t for t in live if (t.get("key"), t.get("effect")) not in ours]
    return kept + [dict(t) for t in desired]


def merge_taints(api: Api, node_patch: dict[str, Any], attempts: int = 5) -> bool:
    """Put gpugov's taints on the Node without touching anyone else's (optimistic concurrency).
    False when the Node does not exist."""
    name = node_patch["metadata"]["name"]
    desired = (node_patch.get("spec") or {}).get("taints", [])
    for _ in range(attempts):
        node = read_object(api, NODE, name)
        if node is None:
            return False
        live = (node.get("spec") or {}).get("taints") or []
        wanted = merged_taints(live, ",".join(recorded_taints(node)), desired)
        if wanted == live:
            return True
        body = {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"]}, "spec": {"taints": wanted}}
        try:  # a strategic merge patch replaces the list as a whole
            write(api, "PATCH", NODE, name, "", body, STRATEGIC_MERGE_PATCH, [("fieldManager", FIELD_MANAGER)])
            return True
        except Rejected as exc:
            if exc.answer.status != _CONFLICT:
                raise
    raise ApplyError(f"Node {name}: taints changed concurrently {attempts} times; try again")


def objects_applied(objects: Iterable[dict[str, Any]], result: ApplyResult) -> list[dict[str, Any]]:
    done = set(result.applied)
    return [o for o in objects if (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) in done]


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

Queue = dict[str, Any]


def is_volcano_queue(obj: dict[str, Any]) -> bool:
    return obj.get("apiVersion") == VOLCANO_API and obj.get("kind") == "Queue"


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


def queue_depth(name: str, parent_of: dict[str, str]) -> int:
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
    by_depth = sorted(queues, key=lambda q: queue_depth(q["metadata"]["name"], parent_of))
    plan = []
    for queue in by_depth:  # top-down
        name = queue["metadata"]["name"]
        if name in parents:
            plan.append(widened(queue, live[name]) if name in live else queue)
    plan.extend(reversed(by_depth))  # bottom-up, at the desired values
    return plan
