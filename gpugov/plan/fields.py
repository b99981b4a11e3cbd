"""The fields of every declaration kind, read from its JSON Schema, and a declaration's values by field.

A field is a path through a kind's schema: properties joined by `.`, a map's entries as `*`, an
array of objects as `name[]` (its elements, told apart by their identity keys, ELEMENT_KEYS) and an
array of scalars as one field holding a set. `schema_fields` lists them all, so the direction table
(directions.py) can be checked against the schemas; `flatten` gives a declaration's values at those
fields, so two revisions compare field by field.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

from gpugov.declarations.schema import SPECS, defaulted, kind_schema

# How the elements of each array of objects are told apart (their identity). The key fields are no
# fields of their own: a changed key is an element removed and another added.
ELEMENT_KEYS: dict[str, tuple[str, ...]] = {
    "spec.quotas[]": ("pool",),
    "spec.queues[]": ("namespace", "name"),
    "spec.nodes[]": ("name",),
    "spec.taints[]": ("key", "effect"),
    "spec.adopt[]": ("kind", "namespace", "name"),
    "spec.workers[]": ("cluster",),  # Fleet
    "spec.tenants[]": ("tenant",),  # Fleet
}

Path = tuple[str, ...]  # a concrete place in one declaration: ("spec", "quotas", "pool=a100", ...)


class UnknownShape(Exception):
    """A schema node the walker cannot give fields to (an array of objects without identity keys)."""


def _object_branch(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The object branch of an anyOf (a quota is a quantity or {nominal, borrowingLimit, lendingLimit})."""
    for branch in schema.get("anyOf", ()):
        if "properties" in branch:
            return branch
    return None


def _items(schema: dict[str, Any]) -> dict[str, Any] | None:
    items = schema.get("items")
    return items if isinstance(items, dict) and "properties" in items else None


def _map_values(schema: dict[str, Any]) -> dict[str, Any] | None:
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def _walk_schema(schema: dict[str, Any], field: str) -> Iterator[str]:
    node = _object_branch(schema) or schema
    if "properties" in node:
        for name, sub in node["properties"].items():
            yield from _walk_schema(sub, f"{field}.{name}" if field else name)
    elif (items := _items(node)) is not None:
        element = f"{field}[]"
        if element not in ELEMENT_KEYS:
            raise UnknownShape(f"{element}: an array of objects without identity keys (plan/fields.py ELEMENT_KEYS)")
        yield element
        keys = ELEMENT_KEYS[element]
        for name, sub in items["properties"].items():
            if name not in keys:
                yield from _walk_schema(sub, f"{element}.{name}")
    elif (values := _map_values(node)) is not None:
        yield from _walk_schema(values, f"{field}.*")
    else:
        yield field


def schema_fields(kind: str, schema: dict[str, Any] | None = None) -> list[str]:
    """Every field of a declaration kind, from its JSON Schema (the package's, or `schema`, e.g. a
    file of schemas/); apiVersion, kind and metadata.name, the declaration's identity, are no fields."""
    fields = _walk_schema(schema if schema is not None else kind_schema(kind), "")
    return [f for f in fields if f not in ("apiVersion", "kind", "metadata.name")]


@cache
def _schema(kind: str) -> dict[str, Any]:
    return kind_schema(kind)


def kinds() -> list[str]:
    return sorted(SPECS)


def _element_id(keys: tuple[str, ...], element: dict[str, Any]) -> str:
    # An optional key left out is no part of the identity (a cluster-scoped object in spec.adopt).
    return ",".join(f"{k}={element[k]}" for k in keys if element.get(k) is not None)


def _walk_value(schema: dict[str, Any], value: Any, field: str, path: Path, out: dict[Path, tuple[str, Any]]) -> None:
    branch = _object_branch(schema)
    if branch is not None and not isinstance(value, dict) and len(branch.get("required", ())) == 1:
        value = {branch["required"][0]: value}  # a bare quantity is the nominal amount
    node = branch if branch is not None and isinstance(value, dict) else schema
    if "properties" in node and isinstance(value, dict):
        for name, sub in node["properties"].items():
            if name in value:
                _walk_value(sub, value[name], f"{field}.{name}" if field else name, (*path, name), out)
    elif (items := _items(node)) is not None and isinstance(value, list):
        element = f"{field}[]"
        keys = ELEMENT_KEYS[element]
        for item in value:
            if not isinstance(item, dict):
                continue
            here = (*path, _element_id(keys, item))
            out[here] = (element, True)
            for name, sub in items["properties"].items():
                if name not in keys and name in item:
                    _walk_value(sub, item[name], f"{element}.{name}", (*here, name), out)
    elif (values := _map_values(node)) is not None and isinstance(value, dict):
        for key, sub in value.items():
            _walk_value(values, sub, f"{field}.*", (*path, str(key)), out)
    else:
        out[path] = (field, tuple(value) if isinstance(value, list) else value)


def flatten(kind: str, document: dict[str, Any]) -> dict[Path, tuple[str, Any]]:
    """A declaration's values by place: place -> (field, value). The spec's schema defaults are
    filled in, so a field left out and one set to its default compare equal. An array of
    scalars is a tuple; an element of an array of objects is present (True) at its own place."""
    data = {"metadata": {k: v for k, v in (document.get("metadata") or {}).items() if k != "name"},
            "spec": defaulted(kind, document.get("spec") or {})}
    out: dict[Path, tuple[str, Any]] = {}
    _walk_value(_schema(kind), data, "", (), out)
    return out


def place(path: Path) -> str:
    """A place as people read it: spec.quotas[pool=a100].resources.accelerators.nominal."""
    text = ""
    for step in path:
        text += f"[{step}]" if "=" in step else (f".{step}" if text else step)
    return text
