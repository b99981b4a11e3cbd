"""Risks of every change that widens power, raised from the direction table (directions.py).

Each declaration of the base and the head is flattened to its fields (fields.py); a field that
changes in its widening direction is a risk of the rule the table names. A new declaration is one
risk (GP021) that lists what it brings; a removed singleton (Guardrails, SchedulingPolicy) compares
with its defaults, so deleting the guardrails loosens each of them. Files outside the declaration
folders are one more risk (GP011): the gate that made this plan read the head's declarations only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from gpugov.declarations.loader import is_declaration_path
from gpugov.declarations.model import Decl, Model
from gpugov.i18n import Joined, Text
from gpugov.kube.quantity import parse_quantity
from gpugov.plan.directions import REPORTED_ELSEWHERE, Direction, direction
from gpugov.plan.fields import Path, flatten, place
from gpugov.plan.risks import (
    DECLARATION_ADDED,
    NAMESPACE_ADOPTED,
    NAMESPACE_CLAIMED,
    OBJECTS_ADOPTED,
    OUTSIDE_DECLARATIONS,
    POOL_GAINS_NODE,
    Risk,
    risk,
)

SINGLETONS = ("Guardrails", "SchedulingPolicy")
NOTES = {
    NAMESPACE_CLAIMED.id: Text("its RoleBindings give the tenant's owners, members and viewers their roles there; "
    "gpugov apply refuses a namespace that exists on the cluster without being gpugov's unless "
    "spec.adoptNamespaces names it"),
    NAMESPACE_ADOPTED.id: Text("gpugov apply takes over the namespace even where it exists on the cluster without "
    "being gpugov's (another team's or an operator's)"),
    OBJECTS_ADOPTED.id: Text("gpugov apply takes the object over although it exists on the cluster without being "
    "gpugov's, and prune owns it from then on: removing it from the declarations deletes it"),
}
UNSET, ADDED, REMOVED = Text("unset"), Text("added"), Text("removed")
MAX_LISTED = 8


def declarations(model: Model) -> dict[tuple[str, str], Decl]:
    """(kind, name) -> declaration; a singleton kind is keyed by its kind alone."""
    decls: list[Decl] = [*model.accelerator_models.values(), *model.clusters.values(), *model.pools.values(),
                         *model.departments.values(), *model.tenants.values(), *model.priority_classes.values()]
    for single in (model.scheduling, model.guardrails):
        if single is not None and getattr(single, "declared", True):
            decls.append(single)
    return {(d.kind, "" if d.kind in SINGLETONS else d.name): d for d in decls}


def _document(decl: Decl | None) -> dict[str, Any]:
    data = getattr(decl.source, "data", None) if decl is not None else None
    return data if isinstance(data, dict) else {}


def _number(value: Any) -> Decimal | None:
    if isinstance(value, bool):
        return Decimal(int(value))
    if isinstance(value, int | float):
        return Decimal(str(value))
    if isinstance(value, str):
        try:
            return parse_quantity(value)
        except (ValueError, InvalidOperation, ArithmeticError):
            return None
    return None


def widened(when: str, old: Any, new: Any) -> bool:
    """Whether a field's change from `old` to `new` (None: unset or absent) widens, per `when`."""
    if old == new:
        return False
    if when == "changed":
        return True
    if isinstance(old, tuple) or isinstance(new, tuple):
        before, after = set(old or ()), set(new or ())
        return bool(after - before) if when in ("added", "up") else bool(before - after) if when == "removed" \
            else before != after
    if when == "added":
        return old is None
    if when == "removed":
        return new is None
    if when == "up-or-unset" and new is None:
        return True
    if new is None:
        return False
    if old is None:
        return when in ("up", "changed")
    a, b = _number(old), _number(new)
    if a is None or b is None:
        return True  # not comparable as numbers: ask
    return b > a if when in ("up", "up-or-unset") else b < a if when == "down" else a != b


def _show(value: Any) -> str:
    if value is None:
        return UNSET
    if isinstance(value, tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _change(old: Any, new: Any) -> str:
    if isinstance(old, tuple) or isinstance(new, tuple):
        before, after = list(old or ()), list(new or ())
        parts = []
        if added := [v for v in after if v not in before]:
            parts.append(Text("adds {values}", values=", ".join(str(v) for v in added)))
        if removed := [v for v in before if v not in after]:
            parts.append(Text("removes {values}", values=", ".join(str(v) for v in removed)))
        return Joined("; ", parts) if parts else _from_to(old, new)
    if old is None and new is True:
        return ADDED
    if old is True and new is None:
        return REMOVED
    return _from_to(old, new)


def _from_to(old: Any, new: Any) -> str:
    return Text("{before} -> {after}", before=_show(old), after=_show(new))


def _inside(path: Path, prefixes: Iterable[Path]) -> bool:
    return any(path[: len(p)] == p and len(path) > len(p) for p in prefixes)


def _node_pools(model: Model) -> dict[str, str]:
    return {node.name: pool.name for pool in model.pools.values() for node in pool.nodes}


def declaration_risks(base: Model, head: Model) -> list[Risk]:
    """Every widening change between two models' declarations, per the direction table."""
    old_decls, new_decls = declarations(base), declarations(head)
    base_nodes = _node_pools(base)
    risks: list[Risk] = []
    for key in sorted(set(old_decls) | set(new_decls)):
        kind, _ = key
        old, new = old_decls.get(key), new_decls.get(key)
        if old is None and new is not None and kind not in SINGLETONS:
            risks.append(_added(kind, new))
            continue
        if new is None and kind not in SINGLETONS:
            continue  # removing a tenant, pool or class takes power away (GP002 names a removed tenant)
        before, after = _document(old), _document(new)
        if before == after:
            continue  # the same document (a moved line is the same too): nothing to compare
        risks += field_risks(kind, (new or old).name, before, after, base_nodes)  # type: ignore[union-attr]
    return risks


def field_risks(kind: str, name: str, before_doc: dict[str, Any], after_doc: dict[str, Any],
                base_nodes: dict[str, str] | None = None) -> list[Risk]:
    """The widening changes between two versions of one declaration (documents as declared)."""
    before, after = flatten(kind, before_doc), flatten(kind, after_doc)
    appeared = [p for p in after if p not in before and after[p][1] is True]
    vanished = [p for p in before if p not in after and before[p][1] is True]
    risks: list[Risk] = []
    for path in sorted(set(before) | set(after), key=lambda p: (len(p), p)):
        if _inside(path, appeared) or _inside(path, vanished):
            continue  # an element added or removed as a whole is one change
        field = (after.get(path) or before[path])[0]
        was, now = (before.get(path) or (field, None))[1], (after.get(path) or (field, None))[1]
        entry = direction(kind, field)
        if entry.direction is not Direction.WIDENS or entry.rule is None or entry.rule.id in REPORTED_ELSEWHERE:
            continue
        if not widened(entry.when or "changed", was, now):
            continue
        message = Text("{kind} {name}: {field} {change}", kind=kind, name=name, field=place(path),
                       change=_change(was, now))
        if entry.rule.id == POOL_GAINS_NODE.id:
            message = _gains_node(kind, name, path[-1].split("=", 1)[1], base_nodes or {})
        note = NOTES.get(entry.rule.id)
        if note:
            message = Text("{change}: {note}", change=message, note=note)
        risks.append(risk(entry.rule, message))
    return risks


def _gains_node(kind: str, name: str, node: str, base_nodes: dict[str, str]) -> str:
    source = base_nodes.get(node)
    if source and source != name:
        return Text("{kind} {name} gains node {node}, taken from pool {source}", kind=kind, name=name, node=node,
                    source=source)
    return Text("{kind} {name} gains node {node} (new to the declarations)", kind=kind, name=name, node=node)


def _added(kind: str, decl: Decl) -> Risk:
    """One risk for a new declaration, naming the fields that give it power."""
    values = flatten(kind, _document(decl))
    listed: list[str] = []
    for path, (field, value) in sorted(values.items(), key=lambda item: (len(item[0]), item[0])):
        entry = direction(kind, field)
        if entry.direction is Direction.WIDENS and widened(entry.when or "changed", None, value) \
                and not _inside(path, [p for p in values if values[p][1] is True and p != path and len(p) < len(path)]):
            listed.append(f"{place(path)}" + ("" if value is True else f" {_show(value)}"))
    shown: str = Joined("; ", listed[:MAX_LISTED])
    if len(listed) > MAX_LISTED:
        shown = Text("{fields}; and {count} more", fields=shown, count=len(listed) - MAX_LISTED)
    message = Text("new {kind} {name} ({fields})", kind=kind, name=decl.name, fields=shown) if listed else \
        Text("new {kind} {name}", kind=kind, name=decl.name)
    if kind == "Tenant":
        message = Text("{declaration}: gpugov apply refuses any of its namespaces that exists on the cluster without "
                       "being gpugov's unless spec.adoptNamespaces names it", declaration=message)
    return risk(DECLARATION_ADDED, message)


def outside_risks(changed: Sequence[str]) -> list[Risk]:
    """GP011: the files a change touches outside the declaration folders (paths relative to the gpugov
    repository; a path above it starts with '../' as git prints it)."""
    outside = sorted(p for p in changed if not is_declaration_path(p))
    if not outside:
        return []
    shown = ", ".join(outside[:MAX_LISTED])
    if len(outside) > MAX_LISTED:
        shown = Text("{files} and {count} more", files=shown, count=len(outside) - MAX_LISTED)
    message = Text("{count} file(s) outside the declaration folders change ({files}): the verdict comes from the "
                   "trusted gpugov reading declarations only, so code, schemas, workflows, CODEOWNERS and build files "
                   "need the platform team's review", count=len(outside), files=shown)
    return [risk(OUTSIDE_DECLARATIONS, message)]
