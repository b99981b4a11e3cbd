"""Read YAML into plain data while keeping every node's file:line:col.

PyYAML's C parser composes a node tree whose marks carry positions; we keep that tree as
the location map (walked only when a finding needs a location) and convert it to plain
Python data ourselves, which is where duplicate keys, alias bombs and over-deep nesting
are caught. The conversion replaces PyYAML's Python constructor, so locations cost no
extra parse.

Ground-floor work: the declarations' loader and the accelerator catalog both read YAML
with it, under the same rules (GG001, GG002, GG004).
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import yaml

from gpugov.findings import Finding, Level, Location, make, rule
from gpugov.i18n import Text
from gpugov.yamlpos.hints import YamlError, syntax_hint

MAX_DEPTH = 64

SYNTAX = rule("GG001", "yaml-syntax", Level.ERROR, "The file is not valid YAML.", "Fix the YAML at the position shown.")
DUPLICATE_KEY = rule(
    "GG002", "duplicate-key", Level.ERROR, "A mapping has the same key twice.", "Remove or rename one of the keys."
)
UNREADABLE = rule(
    "GG004",
    "unreadable-file",
    Level.ERROR,
    "The file cannot be read as declarations: binary, UTF-16 or otherwise not UTF-8, too large, too deeply nested "
    "or an alias bomb.",
    "Declarations are UTF-8 YAML text files under 16 MiB.",
)

_CORE = "tag:yaml.org,2002:"
_STR, _SEQ, _MAP, _MERGE = _CORE + "str", _CORE + "seq", _CORE + "map", _CORE + "merge"
_constructor = yaml.constructor.SafeConstructor()

try:
    _Base: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - pyyaml built without libyaml
    _Base = yaml.SafeLoader

_TAGS: dict[tuple[str, tuple[bool, bool]], str] = {}  # (scalar text, implicit) -> its resolved tag
_TAGS_MAX = 1 << 16
_TAG_TEXT_MAX = 64  # only short scalars are remembered: keys and small values, which repeat
_PLAIN: dict[str, str] = {}  # plain scalar text -> its resolved tag (no path resolvers)
_BaseResolve = _Base.resolve


class _Loader(_Base):  # type: ignore[misc, valid-type]
    """The safe loader whose implicit scalar tags are resolved once per distinct text.

    Composing calls resolve() for every node, in Python, where it matches regular expressions: the
    same keys and small values resolve the same way every time. The safe loader has no path resolvers
    (the only reason resolve() would look at where a node is), so the tag of a scalar depends on its
    text and whether it was plain, nothing else: a quoted or block scalar is a string, and a
    collection gets its kind's default tag (BaseResolver.resolve without path resolvers)."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode and isinstance(value, str) and len(value) <= _TAG_TEXT_MAX:
            key = (value, implicit)
            tag = _TAGS.get(key)
            if tag is None:
                tag = super().resolve(kind, value, implicit)
                if len(_TAGS) < _TAGS_MAX:
                    _TAGS[key] = tag
            return tag
        return super().resolve(kind, value, implicit)

    if not _Base.yaml_path_resolvers:  # nothing to track on the way down or up: skip the calls
        def resolve(self, kind: Any, value: Any, implicit: Any) -> str:  # type: ignore[no-redef]
            if kind is yaml.ScalarNode:
                if not implicit[0]:  # quoted or a block: never an implicit tag
                    return _STR
                tag = _PLAIN.get(value)
                if tag is None:
                    tag = _BaseResolve(self, kind, value, implicit)
                    if len(value) <= _TAG_TEXT_MAX and len(_PLAIN) < _TAGS_MAX:
                        _PLAIN[value] = tag
                return tag
            if kind is yaml.MappingNode:
                return _MAP
            if kind is yaml.SequenceNode:
                return _SEQ
            return _BaseResolve(self, kind, value, implicit)

        # The C composer calls these around every node; builtins that take the same arguments and do
        # nothing cost less than a Python method (a builtin is not bound: no self is passed).
        descend_resolver = operator.is_  # (parent, index) -> a bool, dropped
        ascend_resolver = tuple  # () -> the empty tuple, dropped


class LoadError(Exception):
    """A problem that stops one file from loading; carries its finding."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.message)
        self.finding = finding


@dataclass(eq=False)
class SourceDoc:
    """One YAML document: its file, composed node tree (the location map) and plain data."""

    file: str
    index: int
    node: yaml.Node
    data: Any

    @property
    def line(self) -> int:
        return self.node.start_mark.line + 1

    @property
    def origin(self) -> str:
        return f"{self.file}:{self.line}"

    def locate(self, path: tuple[Any, ...] = (), key: bool = False) -> Location:
        """The location of the value at `path` (or of its key when `key` is set).

        Walks as deep as the path exists, so a path into missing data points at its
        nearest existing parent.
        """
        node = self.node
        key_node: yaml.Node | None = None
        for step in path:
            found = _child(node, step)
            if found is None:
                break
            key_node, node = found
        target = key_node if key and key_node is not None else node
        mark = target.start_mark
        return Location(self.file, mark.line + 1, mark.column + 1)


def _child(node: yaml.Node, step: Any) -> tuple[yaml.Node | None, yaml.Node] | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(step):
                return key_node, value_node
    elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and 0 <= step < len(node.value):
        return None, node.value[step]
    return None


def parse_documents(text: str, rel: str) -> Iterator[SourceDoc]:
    """Compose each document with the C parser and convert it to plain data."""
    # Expansion budget: real declarations expand aliases a little; a bomb expands
    # exponentially and is refused long before it costs memory or time.
    budget = _Budget(max(200_000, 20 * len(text)))
    loader = _Loader(text)
    try:
        index = 0
        while loader.check_node():
            node = loader.get_node()
            if node is None:  # pragma: no cover - check_node said there is one
                break
            data = _convert(node, rel, budget, 0)
            if data is not None:
                yield SourceDoc(rel, index, node, data)
            index += 1
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = Location(rel, mark.line + 1, mark.column + 1) if mark else Location(rel)
        problem = exc.problem or str(exc)
        context = f" ({exc.context})" if exc.context else ""
        # libyaml >= 0.2.5 stops at its own depth limit: that is a hostile file, not a typo.
        rule_ = UNREADABLE if "nesting depth" in problem else SYNTAX
        message = f"{problem}{context}"
        tab = _tab_on_line(text, mark.index) if mark and rule_ is SYNTAX else None
        if tab and mark:  # PyYAML's words for a tab do not say "tab"; these do, and point at it
            column, message = tab
            where = Location(rel, mark.line + 1, column + 1)
        finding = make(rule_, message, where)
        if mark and rule_ is SYNTAX:
            context_line = exc.context_mark.line if exc.context_mark else None
            hint = syntax_hint(text, YamlError(message, mark.line, mark.column, context_line))
            finding = replace(finding, hint=hint or finding.hint)
        raise LoadError(finding) from exc
    except yaml.YAMLError as exc:
        raise LoadError(make(SYNTAX, str(exc), Location(rel))) from exc
    except RecursionError as exc:
        raise LoadError(make(UNREADABLE, Text("YAML nesting is too deep"), Location(rel))) from exc
    finally:
        loader.dispose()


def reconvert(docs: list[SourceDoc], text: str) -> list[SourceDoc]:
    """The documents of `text` again, when `docs` are what parse_documents made of the same text: its
    composed nodes (the location map, never changed once composed) reused, the plain data converted afresh
    so that nothing downstream shares it."""
    budget = _Budget(max(200_000, 20 * len(text)))
    return [SourceDoc(doc.file, doc.index, doc.node, _convert(doc.node, doc.file, budget, 0)) for doc in docs]


_LINE_BREAKS = "\n\r\x85\u2028\u2029"  # what libyaml counts as line breaks


def _tab_on_line(text: str, index: int) -> tuple[int, str] | None:
    """(column, message) when a tab on the line of a syntax error at `index` explains it."""
    start = max(text.rfind(c, 0, index) for c in _LINE_BREAKS) + 1
    ends = [i for i in (text.find(c, start) for c in _LINE_BREAKS) if i >= 0]
    line = text[start : min(ends, default=len(text))]
    indent = line[: len(line) - len(line.lstrip(" \t"))]
    if "\t" in indent:
        return indent.index("\t"), Text("tab character used for indentation (YAML allows only spaces)")
    if text[index : index + 1] == "\t":
        return index - start, Text("tab character where YAML needs a space (YAML indents only with spaces)")
    return None


class _Budget:
    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left


def _where(node: yaml.Node, rel: str) -> Location:
    return Location(rel, node.start_mark.line + 1, node.start_mark.column + 1)


def _convert(node: yaml.Node, rel: str, budget: _Budget, depth: int) -> Any:
    # Hot path: exact class checks and plain strings handled inline.
    cls = node.__class__
    if cls is yaml.ScalarNode:
        return node.value if node.tag == _STR else _scalar(node, rel)
    budget.left -= 1
    if budget.left < 0:
        raise LoadError(make(UNREADABLE, Text("YAML aliases expand too far (an alias bomb?)"), _where(node, rel)))
    if depth > MAX_DEPTH:
        raise LoadError(make(UNREADABLE, Text("YAML nesting is deeper than {depth} levels", depth=MAX_DEPTH),
                             _where(node, rel)))
    if cls is yaml.MappingNode and node.tag == _MAP:
        return _mapping(node, rel, budget, depth)
    if cls is yaml.SequenceNode and node.tag == _SEQ:
        budget.left -= len(node.value)
        return [_convert(item, rel, budget, depth + 1) for item in node.value]
    raise LoadError(make(SYNTAX, Text("unsupported YAML tag {tag}", tag=node.tag), _where(node, rel)))


def _mapping(node: yaml.MappingNode, rel: str, budget: _Budget, depth: int) -> dict[str, Any]:
    result: dict[str, Any] = {}
    merged: dict[str, Any] | None = None
    budget.left -= len(node.value)
    for key_node, value_node in node.value:
        if key_node.__class__ is not yaml.ScalarNode or key_node.tag != _STR:
            if key_node.tag == _MERGE:
                merged = _merge(merged, value_node, rel, budget, depth)
                continue
            if key_node.__class__ is not yaml.ScalarNode:
                raise LoadError(make(SYNTAX, Text("mapping keys must be plain scalars"), _where(key_node, rel)))
        key = key_node.value
        if key in result:
            first = next(k for k, _ in node.value if k.__class__ is yaml.ScalarNode and k.value == key)
            raise LoadError(make(DUPLICATE_KEY, Text("duplicate key '{key}'", key=key), _where(key_node, rel),
                                 _where(first, rel)))
        value_cls = value_node.__class__
        if value_cls is yaml.ScalarNode and value_node.tag == _STR:
            result[key] = value_node.value
        else:
            result[key] = _convert(value_node, rel, budget, depth + 1)
    if merged:
        return {**merged, **result}
    return result


def _merge(merged: dict[str, Any] | None, value_node: yaml.Node, rel: str, budget: _Budget, depth: int) -> dict[str, Any]:
    value = _convert(value_node, rel, budget, depth + 1)
    sources = value if isinstance(value, list) else [value]
    merged = dict(merged or {})
    for source in reversed(sources):
        if not isinstance(source, dict):
            raise LoadError(make(SYNTAX, Text("a merge key (<<) needs a mapping"), _where(value_node, rel)))
        merged.update(source)
    return merged


def _scalar(node: yaml.ScalarNode, rel: str) -> Any:
    tag = node.tag
    value = node.value
    if tag == _CORE + "str":
        return value
    if tag == _CORE + "int":
        return int(value) if value.isdigit() else _constructor.construct_yaml_int(node)
    if tag == _CORE + "null":
        return None
    if tag == _CORE + "bool":
        return _constructor.construct_yaml_bool(node)
    if tag == _CORE + "float":
        return _constructor.construct_yaml_float(node)
    if tag == _CORE + "timestamp":
        return value  # dates stay text: no declaration field is a date object
    raise LoadError(make(SYNTAX, Text("unsupported YAML tag {tag}", tag=tag), _where(node, rel)))
