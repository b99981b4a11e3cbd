"""Object drift: desired objects against live ones, comparing only what gpugov sets.

Only fields present in the desired object are compared, so server defaults and status
never count; quantities compare canonically ("8", 8 and "8000m" are equal); lists of
named entries (flavors, resources, tolerations by key) match by name; an empty map or list
equals an absent one. Kueue's scheduler objects compare by meaning (gpugov.kube.canonical):
a namespaceSelector by matchLabels equals its matchExpressions, resources may come in any
order, and a field gpugov sets to Kueue's default equals a live object that leaves it out
(a ClusterQueue written by hand before gpugov took it over). The field managers recorded in
managedFields name who changed a field.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpugov.compile import Object, object_key
from gpugov.compile.origin import source_location
from gpugov.declarations.model import Model
from gpugov.drift.live import LiveState
from gpugov.drift.rules import OBJECT_CHANGED, OBJECT_MISSING, OBJECT_NOT_DESIRED
from gpugov.findings import Finding, Location, make
from gpugov.i18n import Text
from gpugov.kube.canonical import canonical, with_defaults
from gpugov.kube.objects import LABEL_TENANT, MANAGED_BY, MANAGER, without_source
from gpugov.kube.quantity import QuantityError, parse_quantity

Path = tuple[str | int, ...]


def _equal(desired: Any, live: Any) -> bool:
    if desired == live:
        return True
    if isinstance(desired, bool) or isinstance(live, bool):
        return False
    if isinstance(desired, int | float | str) and isinstance(live, int | float | str):
        try:
            return parse_quantity(desired) == parse_quantity(live)
        except QuantityError:
            return False
    return False


def _named(items: list[Any]) -> bool:
    return bool(items) and all(isinstance(i, dict) and "name" in i for i in items)


def differences(desired: Any, live: Any, path: Path = ()) -> Iterator[tuple[Path, Any, Any]]:
    """(path, desired, live) for every value gpugov sets that the live object does not hold."""
    if desired == live:  # compared in C, and nothing below would differ: most of a live object is as declared
        return
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            yield path, desired, live
            return
        for key, value in desired.items():
            if key not in live or live[key] is None:
                if value not in ({}, [], None):  # an empty map or list is what the API stores as absent
                    yield (*path, key), value, None
            else:
                yield from differences(value, live[key], (*path, key))
    elif isinstance(desired, list):
        if not isinstance(live, list):
            yield path, desired, live
        elif _named(desired) and _named(live):
            by_name = {item["name"]: item for item in live}
            if [i["name"] for i in desired] != [i["name"] for i in live]:
                yield path, [i["name"] for i in desired], [i["name"] for i in live]
            for item in desired:
                if item["name"] in by_name:
                    yield from differences(item, by_name[item["name"]], (*path, item["name"]))
        elif len(desired) != len(live):
            yield path, desired, live
        else:
            for index, (d, v) in enumerate(zip(desired, live, strict=True)):
                yield from differences(d, v, (*path, index))
    elif not _equal(desired, live):
        yield path, desired, live


def owned_view(obj: Object) -> Object:
    """The part of a desired object drift compares: everything but the source annotation."""
    meta = without_source({k: v for k, v in obj["metadata"].items() if k in ("labels", "annotations")})
    return {**{k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}, "metadata": meta}


def compared_part(live: dict[str, Any], view: Object) -> dict[str, Any]:
    """What of a live object `differences` can reach from the owned `view`: its top-level fields,
    and labels and annotations of the metadata. with_defaults copies what it is given, and
    managedFields and status are most of a live object."""
    meta = live.get("metadata") or {}
    return {"kind": live.get("kind"), **{k: live[k] for k in view if k != "metadata" and k in live},
            "metadata": {k: v for k, v in meta.items() if k in ("labels", "annotations")}}


def changed_by(live: dict[str, Any], path: Path) -> list[str]:
    """Field managers other than gpugov that own `path`, or the atomic field above it, in managedFields."""
    managers = set()
    for entry in live.get("metadata", {}).get("managedFields") or []:
        if entry.get("manager") == MANAGER:
            continue
        node: Any = entry.get("fieldsV1") or {}
        depth = 0
        for step in path:
            key = f"f:{step}"
            if not isinstance(node, dict) or key not in node:
                break
            node, depth = node[key], depth + 1
        # Atomic lists (resourceGroups, taints) are owned as a whole: two levels deep is enough.
        if depth >= min(2, len(path)):
            managers.add(entry.get("manager", "?"))
    return sorted(managers)


def _text(path: Path) -> str:
    return ".".join(str(p) for p in path)


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 120 else text[:117] + "..."


QUOTA_FIELDS = {"nominalQuota": "nominal", "borrowingLimit": "borrowingLimit", "lendingLimit": "lendingLimit"}


def quota_location(model: Model | None, obj: Object, path: Path) -> Location | None:
    """Where a drifted quota of a ClusterQueue (a tenant's) or Cohort (a department's) was declared:
    the quota's line in spec.quotas (its field where written out), not the document's first line."""
    if model is None or obj["kind"] not in ("ClusterQueue", "Cohort") or "flavors" not in path:
        return None
    at = path.index("flavors")
    if len(path) < at + 4 or path[at + 2] != "resources":
        return None
    pool, resource = path[at + 1], path[at + 3]
    field = QUOTA_FIELDS.get(str(path[at + 4])) if len(path) > at + 4 else None
    labels = obj["metadata"].get("labels") or {}
    holder = (model.tenants.get(labels.get(LABEL_TENANT, "")) if obj["kind"] == "ClusterQueue"
              else model.departments.get(obj["metadata"]["name"]))
    for quota in getattr(holder, "quotas", ()):
        for rq in quota.resources if quota.pool == pool else ():
            if rq.resource == resource and holder is not None:
                where = ("spec", "quotas", quota.index, "resources", rq.key)
                return holder.source.locate((*where, field) if field else where)
    return None


def object_findings(desired: list[Object], live: LiveState, model: Model | None = None) -> list[Finding]:
    findings: list[Finding] = []
    # Node patches are judged by drift.hardware; the GPU Operator's ClusterPolicy (a patch of env entries
    # inside lists gpugov does not own whole) by doctor DR018.
    wanted = {object_key(o): o for o in desired if o["kind"] not in ("Node", "ClusterPolicy")}
    for key, obj in wanted.items():
        _, kind, namespace, name = key
        label = f"{kind} {namespace + '/' if namespace else ''}{name}"
        current = live.objects.get(key)
        if current is None:
            findings.append(make(OBJECT_MISSING, Text("{object} is missing", object=label), source_location(obj),
                                 object=label))
            continue
        view = owned_view(obj)
        diffs = list(differences(canonical(view, kind), canonical(with_defaults(compared_part(current, view)))))
        if not diffs:
            continue
        path, declared, actual = diffs[0]
        managers = changed_by(current, path)
        by = Text("; changed by {managers}", managers=", ".join(managers)) if managers else ""
        more = Text(" (+{count} more fields)", count=len(diffs) - 1) if len(diffs) > 1 else ""
        findings.append(make(
            OBJECT_CHANGED, Text("{object}: {field} is {live}, declared {declared}{changed_by}{more}", object=label,
                                 field=_text(path), live=_short(actual), declared=_short(declared), changed_by=by,
                                 more=more),
            quota_location(model, obj, path) or source_location(obj), object=label, field=_text(path), declared=_short(declared), live=_short(actual),
            changed_by=",".join(managers), fields=",".join(_text(d[0]) for d in diffs),
        ))
    for key, current in live.objects.items():
        labels = current.get("metadata", {}).get("labels") or {}
        if key not in wanted and labels.get(MANAGED_BY) == MANAGER and key[1] != "Node":
            _, kind, namespace, name = key
            label = f"{kind} {namespace + '/' if namespace else ''}{name}"
            findings.append(make(OBJECT_NOT_DESIRED, Text("{object} is labelled managed-by gpugov but no longer "
                                                          "declared", object=label),
                                 None, object=label))
    return findings
