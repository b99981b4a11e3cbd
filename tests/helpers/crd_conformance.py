"""Conformance checker: rendered objects against the upstream CRDs' openAPIV3Schema and CEL rules.

A test helper (no tests here). It reads the CRDs the sandbox installs, `gpugov.sandbox.crds.crd_dirs()`:
Kueue v0.17.0's and Volcano v1.14.1's own CRDs, which `tools/build kueue` / `tools/build volcano` copy
from the Go modules beside the binaries they build, so objects are checked against the versions gpugov
runs. It checks an object the way the API server would on create, with two deliberate differences that
make it stricter:

* unknown fields are reported (the API server silently prunes them; a field gpugov emits that
  the CRD does not know is a gpugov bug), and
* `null` where the schema is not `nullable` is reported (the API server prunes it).

Order of the checks, as in the API server: defaults from the schema are applied first, then the
structural schema is checked (with jsonschema, after converting the OpenAPI v3 dialect), then every
`x-kubernetes-validations` CEL rule is evaluated with cel-python (`celpy`) at its node.

Transition rules (rules that reference `oldSelf`) are skipped on create, as Kubernetes does; when
`validate_object(..., old=previous)` is given they are evaluated wherever the old object has a
correlatable value (object fields, map values, items of `x-kubernetes-list-type: map` lists).

A rule that cannot be evaluated by this checker (a function cel-python lacks, a parse error, an
internal error) is never a silent pass: it is returned as an `unsupported CEL rule` error.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import celpy
import celpy.evaluation
import yaml
from jsonschema import ValidationError, validators

from gpugov.sandbox.crds import crd_dirs

# --------------------------------------------------------------------------------------------
# Locating and loading the CRDs


@dataclass
class CrdVersion:
    """One served version of one CRD."""

    group: str
    version: str
    kind: str
    scope: str  # "Namespaced" or "Cluster"
    served: bool
    deprecated: bool
    schema: dict[str, Any]  # the raw openAPIV3Schema
    source: str
    _validator: Any = field(default=None, repr=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def validator(self) -> Any:
        if self._validator is None:
            self._validator = _Validator(to_json_schema(self.schema, root=True))
        return self._validator


@dataclass
class Stats:
    """What the checker did; the tests assert on it so that "nothing checked" cannot pass."""

    objects: Counter[str] = field(default_factory=Counter)  # kind -> objects validated
    rules_evaluated: Counter[str] = field(default_factory=Counter)  # kind -> CEL rule evaluations
    transition_rules_skipped: Counter[str] = field(default_factory=Counter)  # kind -> skipped evaluations
    distinct_rules: dict[str, set[str]] = field(default_factory=dict)  # kind -> rule texts evaluated
    unsupported: list[str] = field(default_factory=list)


class CrdSet:
    """The CRDs of some folders, indexed by (group, version, kind)."""

    def __init__(self, documents: list[tuple[str, dict[str, Any]]]) -> None:
        self.versions: dict[tuple[str, str, str], CrdVersion] = {}
        for source, doc in documents:
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for entry in spec["versions"]:
                key = (spec["group"], entry["name"], spec["names"]["kind"])
                self.versions[key] = CrdVersion(
                    group=spec["group"],
                    version=entry["name"],
                    kind=spec["names"]["kind"],
                    scope=spec["scope"],
                    served=bool(entry.get("served", False)),
                    deprecated=bool(entry.get("deprecated", False)),
                    schema=entry["schema"]["openAPIV3Schema"],
                    source=source,
                )

    @classmethod
    def load(cls, directories: Iterable[Path] | None = None) -> CrdSet:
        """The CRDs of `directories`; by default the ones the sandbox installs (built by tools/build if needed)."""
        directories = crd_dirs() if directories is None else list(directories)
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the safe loader, C-accelerated when available
        documents = []
        for directory in directories:
            for path in sorted(directory.rglob("*.yaml")):
                with path.open(encoding="utf-8") as handle:
                    for doc in yaml.load_all(handle, Loader=loader):  # a SafeLoader
                        documents.append((path.relative_to(directory.parent).as_posix(), doc))
        return cls(documents)

    @property
    def groups(self) -> set[str]:
        return {group for group, _, _ in self.versions}

    def covers(self, obj: dict[str, Any]) -> bool:
        """Whether the object's API group is one these CRDs define (core objects are not)."""
        group, _ = split_api_version(obj.get("apiVersion", ""))
        return group in self.groups

    def lookup(self, obj: dict[str, Any]) -> CrdVersion | None:
        group, version = split_api_version(obj.get("apiVersion", ""))
        return self.versions.get((group, version, obj.get("kind", "")))


def load_crds(directories: Iterable[Path] | None = None) -> CrdSet:
    return CrdSet.load(directories)


def split_api_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


# --------------------------------------------------------------------------------------------
# OpenAPI v3 (structural) -> JSON Schema

_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]
_DROPPED = {"description", "default", "format", "example", "x-kubernetes-map-type", "x-kubernetes-embedded-resource"}
_PASSED = {
    "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength",
    "pattern", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties", "required",
    "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
}  # fmt: skip

_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_ROOT_METADATA = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
    },
    # other metadata fields (uid, finalizers...) are the API server's business, not checked here
}


def to_json_schema(node: dict[str, Any], *, root: bool = False, in_junctor: bool = False) -> dict[str, Any]:
    """Convert one structural-schema node (recursively) to JSON Schema.

    Objects with `properties` and neither `additionalProperties` nor
    `x-kubernetes-preserve-unknown-fields` are closed (`additionalProperties: false`), except
    inside anyOf/allOf/oneOf/not, where closing would reject the outer node's fields.
    """
    out: dict[str, Any] = {}
    nullable = bool(node.get("nullable"))
    preserve = bool(node.get("x-kubernetes-preserve-unknown-fields"))
    unknown = set(node) - _DROPPED - _PASSED - {
        "type", "nullable", "properties", "additionalProperties", "items", "anyOf", "allOf", "oneOf", "not",
        "x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-validations",
        "title",
    }  # fmt: skip
    if unknown:
        raise ValueError(f"schema keyword(s) this converter does not know: {sorted(unknown)}")

    if node.get("x-kubernetes-int-or-string"):
        out["anyOf"] = [*_INT_OR_STRING, {"type": "null"}] if nullable else list(_INT_OR_STRING)
    elif "type" in node:
        out["type"] = [node["type"], "null"] if nullable else node["type"]

    for key in _PASSED:
        if key in node:
            out[key] = copy.deepcopy(node[key])
    if nullable and "enum" in out and None not in out["enum"]:
        out["enum"].append(None)

    if "properties" in node:
        out["properties"] = {
            name: to_json_schema(sub, in_junctor=in_junctor) for name, sub in node["properties"].items()
        }
        if root and "metadata" in out["properties"]:
            out["properties"]["metadata"] = copy.deepcopy(_ROOT_METADATA)
    additional = node.get("additionalProperties")
    if isinstance(additional, dict):
        out["additionalProperties"] = to_json_schema(additional, in_junctor=in_junctor)
    elif additional is not None:
        out["additionalProperties"] = bool(additional)
    elif "properties" in node and not preserve and not in_junctor:
        out["additionalProperties"] = False
    if "items" in node:
        out["items"] = to_json_schema(node["items"], in_junctor=in_junctor)
    for junctor in ("anyOf", "allOf", "oneOf"):
        if junctor == "anyOf" and node.get("x-kubernetes-int-or-string") and node.get("anyOf") == _INT_OR_STRING:
            continue  # the int-or-string marker's own anyOf, already expressed above
        if junctor in node:
            converted = [to_json_schema(sub, in_junctor=True) for sub in node[junctor]]
            if junctor in out:  # int-or-string plus an anyOf of its own: both must hold
                out.setdefault("allOf", []).append({junctor: converted})
            elif junctor == "allOf":
                out["allOf"] = out.get("allOf", []) + converted
            else:
                out[junctor] = converted
    if "not" in node:
        out["not"] = to_json_schema(node["not"], in_junctor=True)
    return out


def go_regex(pattern: str) -> str:
    """Translate the RE2 (Go) pattern dialect of CRDs to Python `re`.

    `$` is end-of-text in RE2 (Python's `$` also matches before a final newline), and a
    leading inline flag group after `^` (e.g. `^(?i)...`) is scoped to the rest of the pattern.
    """
    match = re.fullmatch(r"(\^?)\(\?([ims]+)\)(.*)", pattern, flags=re.S)
    if match:
        pattern = f"{match.group(1)}(?{match.group(2)}:{match.group(3)})"
        if "m" in match.group(2):
            return pattern  # multi-line `$` means end of line in both dialects
    out, in_class, escaped = [], False, False
    for char in pattern:
        if escaped:
            out.append(char)
            escaped = False
        elif char == "\\":
            out.append(char)
            escaped = True
        elif char == "[":
            in_class = True
            out.append(char)
        elif char == "]":
            in_class = False
            out.append(char)
        elif char == "$" and not in_class:
            out.append(r"\Z")
        else:
            out.append(char)
    return "".join(out)


@cache
def _compiled_pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(go_regex(pattern))


def _pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    try:
        regex = _compiled_pattern(pattern)
    except re.error as exc:
        yield ValidationError(f"unsupported pattern {pattern!r} in the CRD: {exc}")
        return
    if not regex.search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _list_type(validator: Any, list_type: str, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "array"):
        return
    if list_type == "set":
        seen: list[Any] = []
        for item in instance:
            if item in seen:
                yield ValidationError(f"duplicate entry {item!r} in a list of type set")
            seen.append(item)
    elif list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys", [])
        seen_keys: set[tuple[str, ...]] = set()
        for item in instance:
            if not isinstance(item, dict):
                continue
            key = tuple(repr(item.get(k)) for k in keys)
            if key in seen_keys:
                yield ValidationError(
                    f"duplicate entry with key {dict(zip(keys, key, strict=True))} in a list of type map"
                )
            seen_keys.add(key)


def _strict_type_checker() -> Any:
    """JSON integers are ints (not floats like 1.0, not bools); numbers are ints or floats, not bools."""
    base = validators.Draft7Validator.TYPE_CHECKER

    def is_integer(checker: Any, instance: Any) -> bool:
        return isinstance(instance, int) and not isinstance(instance, bool)

    def is_number(checker: Any, instance: Any) -> bool:
        return isinstance(instance, int | float) and not isinstance(instance, bool)

    return base.redefine_many({"integer": is_integer, "number": is_number})


_Validator = validators.extend(
    validators.Draft7Validator,
    validators={"pattern": _pattern, "x-kubernetes-list-type": _list_type},
    type_checker=_strict_type_checker(),
)


# --------------------------------------------------------------------------------------------
# Paths

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def format_path(segments: list[str | int] | tuple[str | int, ...]) -> str:
    out = ""
    for segment in segments:
        if isinstance(segment, int):
            out += f"[{segment}]"
        elif _IDENT.fullmatch(segment):
            out += f".{segment}" if out else segment
        else:
            out += f"[{segment}]"
    return out or "<root>"


# --------------------------------------------------------------------------------------------
# Defaulting (the API server defaults before it validates)


def apply_defaults(value: Any, schema: dict[str, Any]) -> Any:
    """A deep copy of value with the schema's `default`s filled in for absent fields."""
    value = copy.deepcopy(value)
    _default_in_place(value, schema)
    return value


def _default_in_place(value: Any, schema: dict[str, Any]) -> None:
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name, sub in properties.items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
        additional = schema.get("additionalProperties")
        for name, child in value.items():
            if name in properties:
                _default_in_place(child, properties[name])
            elif isinstance(additional, dict):
                _default_in_place(child, additional)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for child in value:
            _default_in_place(child, schema["items"])


# --------------------------------------------------------------------------------------------
# CEL

# macros cel-python evaluates itself; Kubernetes CEL has the same ones
_CEL_MACROS = {"has", "all", "exists", "exists_one", "map", "filter", "dyn"}
_CEL_FUNCTIONS = {name for name in celpy.evaluation.base_functions if not name.startswith(("_", "!", "-"))}
_ENV = celpy.Environment()


@dataclass(frozen=True)
class CelRule:
    text: str
    program: Any  # celpy Runner, or None when it could not be compiled
    identifiers: frozenset[str]
    unsupported: str | None  # why this checker cannot evaluate it, or None

    @property
    def is_transition(self) -> bool:
        return "oldSelf" in self.identifiers


@cache
def compile_rule(text: str) -> CelRule:
    try:
        tree = _ENV.compile(text)
    except Exception as exc:  # celpy raises CELParseError; anything else is just as unsupported
        return CelRule(text, None, frozenset(), f"cel-python cannot parse it: {exc}")
    identifiers = frozenset(str(token) for sub in tree.find_data("ident") for token in sub.children)
    functions = {str(sub.children[0]) for sub in tree.find_data("ident_arg")}
    functions |= {str(sub.children[1]) for sub in tree.find_data("member_dot_arg")}
    bound = {  # the iteration variables of macros: list.all(x, ...), list.filter(i, ...)
        str(token)
        for sub in tree.find_data("member_dot_arg")
        if str(sub.children[1]) in _CEL_MACROS and len(sub.children) > 2 and sub.children[2].children
        for ident in sub.children[2].children[0].find_data("ident")
        for token in ident.children
    }
    missing = sorted(functions - _CEL_FUNCTIONS - _CEL_MACROS)
    unknown_vars = sorted(identifiers - bound - {"self", "oldSelf"})
    if missing:
        return CelRule(text, None, identifiers, f"uses function(s) cel-python lacks: {', '.join(missing)}")
    if unknown_vars:
        return CelRule(text, None, identifiers, f"references variable(s) not bound here: {', '.join(unknown_vars)}")
    return CelRule(text, _ENV.program(tree), identifiers, None)


def to_cel(value: Any, *, root: bool = False) -> Any:
    """A JSON value as a CEL value. At the root, `metadata` only exposes name and generateName (as in Kubernetes)."""
    if root and isinstance(value, dict) and isinstance(value.get("metadata"), dict):
        value = dict(value)
        value["metadata"] = {k: v for k, v in value["metadata"].items() if k in ("name", "generateName")}
    return celpy.json_to_cel(value)


class _EvalError(Exception):
    pass


def _evaluate(rule: CelRule, activation: dict[str, Any]) -> Any:
    try:
        result = rule.program.evaluate(activation)
    except celpy.CELEvalError as exc:
        raise _EvalError(_cel_error_text(exc)) from exc
    if isinstance(result, celpy.CELEvalError):
        raise _EvalError(_cel_error_text(result))
    return result


def _cel_error_text(exc: BaseException) -> str:
    text = str(exc.args[0]) if exc.args else str(exc)
    return text.split(" (in activation", 1)[0]


def _is_unsupported_eval_error(text: str) -> bool:
    """Errors that mean "this checker lacks something", as opposed to an error Kubernetes would also raise."""
    return text.startswith("undeclared reference") or "no such overload" in text or "unsupported" in text


# --------------------------------------------------------------------------------------------
# Metadata (names and labels, as ObjectMeta validation does for every object)

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def _qualified_name_errors(key: str) -> list[str]:
    prefix, slash, name = key.rpartition("/")
    errors = []
    if slash and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix)):
        errors.append(f"key prefix {prefix!r} is not a DNS-1123 subdomain")
    if not name or len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        errors.append(f"key name {name!r} is not a qualified name (<= 63 alphanumerics, '-', '_', '.')")
    return errors


def metadata_errors(obj: dict[str, Any], crd: CrdVersion) -> list[str]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return []  # the schema check reports the type
    errors = []
    name = meta.get("name")
    if isinstance(name, str) and (len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name)):
        errors.append(f"metadata.name: {name!r} is not a DNS-1123 subdomain")
    namespace = meta.get("namespace")
    if crd.scope == "Namespaced" and not namespace:
        errors.append("metadata.namespace: required for a namespaced resource")
    if crd.scope == "Cluster" and namespace:
        errors.append(f"metadata.namespace: {namespace!r} set on a cluster-scoped resource")
    if isinstance(namespace, str) and namespace and (len(namespace) > 63 or not _DNS1123_LABEL.fullmatch(namespace)):
        errors.append(f"metadata.namespace: {namespace!r} is not a DNS-1123 label")
    labels = meta.get("labels")
    if isinstance(labels, dict):
        for key, value in labels.items():
            errors += [f"metadata.labels[{key}]: {e}" for e in _qualified_name_errors(str(key))]
            if isinstance(value, str) and (len(value) > 63 or not _LABEL_VALUE.fullmatch(value)):
                errors.append(f"metadata.labels[{key}]: value {value!r} is not a valid label value")
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        for key in annotations:
            errors += [f"metadata.annotations[{key}]: {e}" for e in _qualified_name_errors(str(key))]
        size = sum(len(str(k)) + len(str(v)) for k, v in annotations.items())
        if size > 256 * 1024:
            errors.append(f"metadata.annotations: total size {size} exceeds 256 KiB")
    return errors


# --------------------------------------------------------------------------------------------
# The checker


def _schema_errors(obj: dict[str, Any], crd: CrdVersion) -> list[str]:
    errors = []
    for error in crd.validator().iter_errors(obj):
        path = format_path(list(error.absolute_path))
        if (
            error.validator == "additionalProperties"
            and error.validator_value is False
            and isinstance(error.instance, dict)
        ):
            known = set(error.schema.get("properties", {}))
            extra = sorted(k for k in error.instance if k not in known)
            errors.append(f"{path}: unknown field(s) {', '.join(map(repr, extra))} (not in the CRD schema)")
        else:
            errors.append(f"{path}: {error.message}")
    return errors


@dataclass
class _Walk:
    kind: str
    stats: Stats
    errors: list[str]


def _correlate_list(value: list[Any], old: Any, schema: dict[str, Any]) -> list[tuple[bool, Any]]:
    """(has_old, old_item) for each item; only items of map-type lists correlate."""
    if schema.get("x-kubernetes-list-type") != "map" or not isinstance(old, list):
        return [(False, None)] * len(value)
    keys = schema.get("x-kubernetes-list-map-keys", [])
    index = {tuple(repr(o.get(k)) for k in keys): o for o in old if isinstance(o, dict)}
    out = []
    for item in value:
        key = tuple(repr(item.get(k)) for k in keys) if isinstance(item, dict) else None
        out.append((key in index, index.get(key)))
    return out


def _walk_rules(
    value: Any, schema: dict[str, Any], path: list[str | int], has_old: bool, old: Any, walk: _Walk
) -> None:
    if value is None:
        return
    for rule_spec in schema.get("x-kubernetes-validations", []):
        _check_rule(rule_spec, value, path, has_old, old, walk)
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        additional = schema.get("additionalProperties")
        old_map = old if has_old and isinstance(old, dict) else {}
        for name, child in value.items():
            sub = properties.get(name) if name in properties else additional if isinstance(additional, dict) else None
            if sub is not None:
                _walk_rules(child, sub, [*path, name], name in old_map, old_map.get(name), walk)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        pairs = _correlate_list(value, old if has_old else None, schema)
        for index, (child, (child_has_old, child_old)) in enumerate(zip(value, pairs, strict=True)):
            _walk_rules(child, schema["items"], [*path, index], child_has_old, child_old, walk)


def _check_rule(
    rule_spec: dict[str, Any], value: Any, path: list[str | int], has_old: bool, old: Any, walk: _Walk
) -> None:
    text = rule_spec["rule"]
    message = rule_spec.get("message") or f"failed rule: {text}"
    where = format_path(path) + (rule_spec.get("fieldPath") or "")
    rule = compile_rule(text)
    if rule.is_transition and not has_old:
        walk.stats.transition_rules_skipped[walk.kind] += 1  # Kubernetes evaluates these on update only
        return
    if rule.unsupported:
        note = f"{walk.kind} {where}: unsupported CEL rule {text!r}: {rule.unsupported}"
        walk.stats.unsupported.append(note)
        walk.errors.append(note)
        return
    activation = {"self": to_cel(value, root=not path)}
    if rule.is_transition:
        activation["oldSelf"] = to_cel(old, root=not path)
    walk.stats.rules_evaluated[walk.kind] += 1
    walk.stats.distinct_rules.setdefault(walk.kind, set()).add(text)
    try:
        result = _evaluate(rule, activation)
    except _EvalError as exc:
        if _is_unsupported_eval_error(str(exc)):
            note = f"{walk.kind} {where}: unsupported CEL rule {text!r}: {exc}"
            walk.stats.unsupported.append(note)
            walk.errors.append(note)
        else:  # e.g. "no such key": the API server rejects the object too
            walk.errors.append(f"{where}: {message} (rule evaluation error: {exc}; rule: {text})")
        return
    except Exception as exc:  # a cel-python internal failure is not a pass
        note = f"{walk.kind} {where}: unsupported CEL rule {text!r}: cel-python failed: {exc!r}"
        walk.stats.unsupported.append(note)
        walk.errors.append(note)
        return
    if not (isinstance(result, celpy.celtypes.BoolType) or type(result) is bool):
        walk.errors.append(f"{where}: rule did not evaluate to a bool ({result!r}; rule: {text})")
    elif not bool(result):
        walk.errors.append(f"{where}: {_message(rule_spec, activation) or message} (rule: {text})")


def _message(rule_spec: dict[str, Any], activation: dict[str, Any]) -> str | None:
    expression = rule_spec.get("messageExpression")
    if not expression:
        return None
    compiled = compile_rule(expression)
    if compiled.program is None:
        return None
    try:
        result = _evaluate(compiled, activation)
    except Exception:
        return None  # Kubernetes falls back to `message` too
    return str(result) if isinstance(result, str) else None  # StringType is a str; constants fold to str


def validate_object(
    obj: dict[str, Any], crds: CrdSet, *, old: dict[str, Any] | None = None, stats: Stats | None = None
) -> list[str]:
    """Errors (each with its JSON path) for one object of a CRD-defined kind; [] when it conforms.

    `old`: the object as it was, to also evaluate transition rules (an update); None is a create.
    `stats`: accumulates what was checked.
    """
    stats = Stats() if stats is None else stats
    kind = str(obj.get("kind", ""))
    crd = crds.lookup(obj)
    if crd is None:
        return [f"no CRD defines apiVersion {obj.get('apiVersion')!r} kind {kind!r}"]
    stats.objects[kind] += 1
    errors: list[str] = []
    if not crd.served:
        errors.append(f"apiVersion {crd.api_version} is not served by the {kind} CRD")
    defaulted = apply_defaults(obj, crd.schema)
    errors += _schema_errors(defaulted, crd)
    errors += metadata_errors(obj, crd)
    old_defaulted = apply_defaults(old, crd.schema) if old is not None else None
    walk = _Walk(kind, stats, errors)
    _walk_rules(defaulted, crd.schema, [], old is not None, old_defaulted, walk)
    name = (obj.get("metadata") or {}).get("name") if isinstance(obj.get("metadata"), dict) else None
    return [f"{kind}/{name}: {e}" for e in errors]


__all__ = [
    "CrdSet",
    "CrdVersion",
    "Stats",
    "apply_defaults",
    "compile_rule",
    "crd_dirs",
    "format_path",
    "load_crds",
    "split_api_version",
    "to_json_schema",
    "validate_object",
]
