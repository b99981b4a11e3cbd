"""Read declaration files into plain data while keeping every node's file:line:col.

PyYAML's C parser composes a node tree whose marks carry positions; we keep that tree as
the location map (walked only when a finding needs a location) and convert it to plain
Python data ourselves, which is where duplicate keys, alias bombs and over-deep nesting
are caught. The conversion replaces PyYAML's Python constructor, so locations cost no
extra parse.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpugov.findings import Finding, Level, Location, make, rule

DECLARATION_DIRS = ("hardware", "policies", "tenants")
MAX_FILE_BYTES = 16 * 1024 * 1024
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
EMPTY = rule(
    "GG005", "empty-file", Level.WARNING, "The file holds no documents.", "Delete the file or add declarations."
)

_CORE = "tag:yaml.org,2002:"
_constructor = yaml.constructor.SafeConstructor()

try:
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - pyyaml built without libyaml
    _Loader = yaml.SafeLoader


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


@dataclass
class LoadResult:
    documents: list[SourceDoc] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SourceFile:
    """A declaration file from any source (working tree, a git revision): path, size, reader."""

    rel: str
    size: int
    read: Callable[[], bytes]


def discover(root: Path) -> list[Path]:
    """Every .yaml/.yml file under the declaration folders, in a stable order."""
    files: list[Path] = []
    for folder in DECLARATION_DIRS:
        base = root / folder
        if not base.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            files.extend(Path(dirpath) / f for f in sorted(filenames) if f.endswith((".yaml", ".yml")))
    return files


def is_declaration_path(rel: str) -> bool:
    parts = rel.split("/")
    return (
        len(parts) > 1
        and parts[0] in DECLARATION_DIRS
        and rel.endswith((".yaml", ".yml"))
        and not any(p.startswith(".") for p in parts[1:-1])
    )


def tree_files(root: Path) -> list[SourceFile]:
    return [
        SourceFile(path.relative_to(root).as_posix(), path.stat().st_size, path.read_bytes) for path in discover(root)
    ]


def load_tree(root: Path) -> LoadResult:
    return load_files(tree_files(root))


def load_files(files: Iterable[SourceFile]) -> LoadResult:
    result = LoadResult()
    for source in files:
        result.files.append(source.rel)
        try:
            text = decode(source)
            docs = list(parse_documents(text, source.rel))
        except LoadError as exc:
            result.findings.append(exc.finding)
            continue
        if not docs:
            result.findings.append(make(EMPTY, "the file holds no YAML documents", Location(source.rel, 1, 1)))
        result.documents.extend(docs)
    return result


def decode(source: SourceFile) -> str:
    """The file's text, refusing huge, binary and non-UTF-8 files before parsing."""
    rel = source.rel
    if source.size > MAX_FILE_BYTES:
        raise LoadError(
            make(UNREADABLE, f"file is {source.size} bytes, over the {MAX_FILE_BYTES}-byte limit", Location(rel))
        )
    raw = source.read()
    wide = wide_encoding(raw)
    if wide:
        encoding, iconv_name = wide
        message = f"file is {encoding}: declarations must be UTF-8; convert it, e.g. `iconv -f {iconv_name} -t UTF-8`"
        raise LoadError(make(UNREADABLE, message, Location(rel)))
    if b"\0" in raw:
        raise LoadError(make(UNREADABLE, "file is binary (it contains NUL bytes)", Location(rel)))
    # A UTF-8 byte-order mark is allowed and dropped here, so that parser positions index the text.
    body = raw.removeprefix(codecs.BOM_UTF8)
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = body[: exc.start].count(b"\n") + 1
        raise LoadError(
            make(UNREADABLE, f"file is not UTF-8 (invalid byte 0x{body[exc.start]:02x})", Location(rel, line, 1))
        ) from exc


# UTF-32 first: its little-endian mark begins with UTF-16's.
_BYTE_ORDER_MARKS = (
    (codecs.BOM_UTF32_LE, "UTF-32LE"),
    (codecs.BOM_UTF32_BE, "UTF-32BE"),
    (codecs.BOM_UTF16_LE, "UTF-16LE"),
    (codecs.BOM_UTF16_BE, "UTF-16BE"),
)


def wide_encoding(raw: bytes) -> tuple[str, str] | None:
    """For UTF-16/32 text, its description ("UTF-16LE (with a byte-order mark)") and iconv's
    name for it (which, for a file with a mark, reads and drops the mark); else None.

    Without a mark, UTF-16 is told from binary by its NUL bytes: YAML is mostly ASCII, whose
    UTF-16 has a NUL in every high byte (odd positions little-endian, even big-endian) and none
    in the low ones, and the whole file must decode.
    """
    for mark, name in _BYTE_ORDER_MARKS:
        if raw.startswith(mark):
            return f"{name} (with a byte-order mark)", name[:-2]
    sample = raw[:4096]
    sample = sample[: len(sample) // 2 * 2]
    if len(sample) < 4:
        return None
    even_nuls, odd_nuls = sample[0::2].count(0), sample[1::2].count(0)
    half = len(sample) // 2
    for name, high, low in (("UTF-16LE", odd_nuls, even_nuls), ("UTF-16BE", even_nuls, odd_nuls)):
        if low == 0 and high * 2 >= half and _decodes(raw, name):
            return f"{name} (without a byte-order mark)", name
    return None


def _decodes(raw: bytes, encoding: str) -> bool:
    try:
        raw.decode(encoding)
    except UnicodeDecodeError:
        return False
    return True


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
        raise LoadError(make(rule_, message, where)) from exc
    except yaml.YAMLError as exc:
        raise LoadError(make(SYNTAX, str(exc), Location(rel))) from exc
    except RecursionError as exc:
        raise LoadError(make(UNREADABLE, "YAML nesting is too deep", Location(rel))) from exc
    finally:
        loader.dispose()


_LINE_BREAKS = "\n\r\x85\u2028\u2029"  # what libyaml counts as line breaks


def _tab_on_line(text: str, index: int) -> tuple[int, str] | None:
    """(column, message) when a tab on the line of a syntax error at `index` explains it."""
    start = max(text.rfind(c, 0, index) for c in _LINE_BREAKS) + 1
    ends = [i for i in (text.find(c, start) for c in _LINE_BREAKS) if i >= 0]
    line = text[start : min(ends, default=len(text))]
    indent = line[: len(line) - len(line.lstrip(" \t"))]
    if "\t" in indent:
        return indent.index("\t"), "tab character used for indentation (YAML allows only spaces)"
    if text[index : index + 1] == "\t":
        return index - start, "tab character where YAML needs a space (YAML indents only with spaces)"
    return None


class _Budget:
    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left


def _where(node: yaml.Node, rel: str) -> Location:
    return Location(rel, node.start_mark.line + 1, node.start_mark.column + 1)


_STR, _SEQ, _MAP, _MERGE = _CORE + "str", _CORE + "seq", _CORE + "map", _CORE + "merge"


def _convert(node: yaml.Node, rel: str, budget: _Budget, depth: int) -> Any:
    # Hot path: exact class checks and plain strings handled inline.
    cls = node.__class__
    if cls is yaml.ScalarNode:
        return node.value if node.tag == _STR else _scalar(node, rel)
    budget.left -= 1
    if budget.left < 0:
        raise LoadError(make(UNREADABLE, "YAML aliases expand too far (an alias bomb?)", _where(node, rel)))
    if depth > MAX_DEPTH:
        raise LoadError(make(UNREADABLE, f"YAML nesting is deeper than {MAX_DEPTH} levels", _where(node, rel)))
    if cls is yaml.MappingNode and node.tag == _MAP:
        return _mapping(node, rel, budget, depth)
    if cls is yaml.SequenceNode and node.tag == _SEQ:
        budget.left -= len(node.value)
        return [_convert(item, rel, budget, depth + 1) for item in node.value]
    raise LoadError(make(SYNTAX, f"unsupported YAML tag {node.tag}", _where(node, rel)))


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
                raise LoadError(make(SYNTAX, "mapping keys must be plain scalars", _where(key_node, rel)))
        key = key_node.value
        if key in result:
            first = next(k for k, _ in node.value if k.__class__ is yaml.ScalarNode and k.value == key)
            raise LoadError(make(DUPLICATE_KEY, f"duplicate key '{key}'", _where(key_node, rel), _where(first, rel)))
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
            raise LoadError(make(SYNTAX, "a merge key (<<) needs a mapping", _where(value_node, rel)))
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
    raise LoadError(make(SYNTAX, f"unsupported YAML tag {tag}", _where(node, rel)))
