"""Find and read declaration files: the folders, the sources (working tree or a git revision),
bytes to UTF-8 text, and each file's documents through the positioned YAML reader
(gpugov.yamlpos), so every node keeps its file:line:col.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from gpugov.findings import Finding, Level, Location, make, rule
from gpugov.i18n import Text
from gpugov.yamlpos import UNREADABLE, LoadError, SourceDoc, parse_documents, reconvert

DECLARATION_DIRS = ("hardware", "policies", "tenants")
MAX_FILE_BYTES = 16 * 1024 * 1024

EMPTY = rule(
    "GG005", "empty-file", Level.WARNING, "The file holds no documents.", "Delete the file or add declarations."
)


# Per file that loaded: its text and documents, so that another revision holding the same text reuses
# what the C parser composed (plan reads two revisions that differ in a file or two).
Parsed = dict[str, tuple[str, list[SourceDoc]]]


@dataclass
class LoadResult:
    documents: list[SourceDoc] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    parsed: Parsed = field(default_factory=dict, repr=False)


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


def load_files(files: Iterable[SourceFile], reuse: Parsed | None = None) -> LoadResult:
    """Each file's documents and the findings of loading them. `reuse`: another load's `parsed`; a file
    whose text is the same there is not parsed again (its composed nodes are reused)."""
    result = LoadResult()
    for source in files:
        result.files.append(source.rel)
        try:
            text = decode(source)
            known = reuse.get(source.rel) if reuse is not None else None
            if known is not None and known[0] == text:
                docs = reconvert(known[1], text)
            else:
                docs = list(parse_documents(text, source.rel))
        except LoadError as exc:
            result.findings.append(exc.finding)
            continue
        result.parsed[source.rel] = (text, docs)
        if not docs:
            result.findings.append(make(EMPTY, Text("the file holds no YAML documents"), Location(source.rel, 1, 1)))
        result.documents.extend(docs)
    return result


def decode(source: SourceFile) -> str:
    """The file's text, refusing huge, binary and non-UTF-8 files before parsing."""
    rel = source.rel
    if source.size > MAX_FILE_BYTES:
        raise LoadError(
            make(UNREADABLE, Text("file is {size} bytes, over the {limit}-byte limit", size=source.size,
                                  limit=MAX_FILE_BYTES), Location(rel))
        )
    raw = source.read()
    wide = wide_encoding(raw)
    if wide:
        encoding, iconv_name = wide
        message = Text("file is {encoding}: declarations must be UTF-8; convert it, e.g. `iconv -f {iconv} -t UTF-8`",
                       encoding=encoding, iconv=iconv_name)
        raise LoadError(make(UNREADABLE, message, Location(rel)))
    if b"\0" in raw:
        raise LoadError(make(UNREADABLE, Text("file is binary (it contains NUL bytes)"), Location(rel)))
    # A UTF-8 byte-order mark is allowed and dropped here, so that parser positions index the text.
    body = raw.removeprefix(codecs.BOM_UTF8)
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = body[: exc.start].count(b"\n") + 1
        byte = f"0x{body[exc.start]:02x}"
        raise LoadError(
            make(UNREADABLE, Text("file is not UTF-8 (invalid byte {byte})", byte=byte), Location(rel, line, 1))
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
