"""Block YAML for compile's plain data (dict, list, str, int, bool, None), fast.

PyYAML spends most of a big render in its Python representer and serializer. This writer
produces, byte for byte, what `yaml.dump_all(..., CSafeDumper, sort_keys=False,
default_flow_style=False, width=120, allow_unicode=True)` produces with literal blocks for
multi-line strings and no aliases (the layout and the 120-column folding are libyaml's), so
rendered trees committed for Argo CD or Flux do not churn, with two deliberate differences
that make the output safe for YAML 1.2 and Go readers too (go-yaml v2/v3 in kubectl,
kustomize, Argo CD and Flux):

- a string is written plain only when it also reads back as that string under go-yaml's
  resolver and the YAML 1.2 core schema: PyYAML's YAML 1.1 resolver lets 'y', 'n', '1e3',
  '0o17', '0X1F', '08' or '2001-12-14 1:2:3' stay plain, which Go reads as a bool, number or
  timestamp; those are quoted;
- strings with the line separators that only YAML 1.1 treats as breaks (NEL, U+2028,
  U+2029) are double-quoted with escapes instead of written raw.

Speed comes from caches: each distinct string is analysed once, and equal subtrees at equal
depth (the same resource groups in a thousand ClusterQueues) are written once.
"""

from __future__ import annotations

import marshal
import re
from collections.abc import Iterable, Iterator
from typing import Any

import yaml

WIDTH = 120  # libyaml folds a long scalar at a space once a line passes this column
INDENT = 2
SIMPLE_KEY_BYTES = 128  # libyaml writes longer keys as explicit "? key" entries

_STR_TAG = "tag:yaml.org,2002:str"
_RESOLVER = yaml.resolver.Resolver()
_RESOLVED_FIRST = frozenset(ch for ch in _RESOLVER.yaml_implicit_resolvers if ch is not None)

# The line breaks of YAML 1.1; YAML 1.2 keeps only \r and \n.
_BREAKS = frozenset("\r\n\x85\u2028\u2029")
_NON_ASCII_BREAKS = ("\x85", "\u2028", "\u2029")

# go-yaml reads these plain as non-strings although PyYAML's YAML 1.1 resolver does not.
_GO_BOOLS = frozenset({"y", "Y", "n", "N"})
# After go-yaml drops underscores: what strconv.ParseInt/ParseUint (base 0) or its float
# pattern accept, a superset of the YAML 1.2 core int and float forms.
_GO_NUMBER = re.compile(r"[-+]?(?:0[xXoObB][0-9a-fA-F]+|[0-9]+|(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?)")
_GO_DOT_FLOAT = re.compile(r"\.[0-9]")  # strconv.ParseFloat on a leading '.'
_GO_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?![0-9])")  # a date prefix, any time part

# Strings that libyaml's analysis passes as plain at a glance: no indicator first, no
# ': ' or ' #', no ':' last, single inner spaces, printable ASCII.
_SIMPLE = re.compile(r"[A-Za-z0-9_/(][A-Za-z0-9_./@+=()\-,;]*(?:(?::|(?<!:) )[A-Za-z0-9_./@+=()\-,;]+)*")

_ESCAPES = {
    "\0": "0", "\a": "a", "\b": "b", "\t": "t", "\n": "n", "\v": "v", "\f": "f", "\r": "r",
    "\x1b": "e", '"': '"', "\\": "\\", "\x85": "N", "\u2028": "L", "\u2029": "P",
}

_PLAIN, _SINGLE, _DOUBLE, _LITERAL = "plain", "single", "double", "literal"


def go_reads_as_non_string(value: str) -> bool:
    """Whether go-yaml v2/v3 (or a YAML 1.2 core reader) would resolve plain `value` as
    something other than a string. A superset: quoting one string too many is harmless."""
    if value in _GO_BOOLS:
        return True
    if not value or value[0] not in "+-.0123456789":
        return False
    if value[0] == ".":
        return _GO_DOT_FLOAT.match(value) is not None
    return _GO_NUMBER.fullmatch(value.replace("_", "")) is not None or _GO_TIMESTAMP.match(value) is not None


def _printable(ch: str) -> bool:
    """libyaml's IS_PRINTABLE: what it writes raw rather than escaped."""
    code = ord(ch)
    return (
        code == 0x0A
        or 0x20 <= code <= 0x7E
        or 0xA0 <= code <= 0xD7FF
        or (0xE000 <= code <= 0xFFFD and code != 0xFEFF)
    )


_BLANKZ = " \t\0\r\n\x85\u2028\u2029"  # libyaml's IS_BLANKZ, end of string aside
_NOT_PRINTABLE = re.compile("[^\n\x20-\x7e\xa0-\ud7ff\ue000-\ufefe\uff00-\ufffd]")
_LINE_BREAK = re.compile("[\r\n\x85\u2028\u2029]")
_BREAK_SPACE = re.compile("[\r\n\x85\u2028\u2029] ")
_SPACE_BREAK = re.compile(" [\r\n\x85\u2028\u2029]")
_LATER_INDICATOR = re.compile(f"[{_BLANKZ}]#|:(?:[{_BLANKZ}]|\\Z)")  # searched from the second character


class _Analysis:
    """What libyaml's yaml_emitter_analyze_scalar decides about a string in block context:
    whether it has line breaks, and whether plain, single-quoted and literal are allowed."""

    __slots__ = ("block", "multiline", "plain", "single")

    def __init__(self, value: str) -> None:
        if _SIMPLE.fullmatch(value):
            self.multiline, self.plain, self.single, self.block = False, True, True, True
            return
        if not value:
            self.multiline, self.plain, self.single, self.block = False, True, True, False
            return
        first = value[0]
        followed_by_blank = len(value) == 1 or value[1] in _BLANKZ
        block_indicators = (
            value.startswith(("---", "..."))
            or first in "#,[]{}&*!|>'\"%@`"
            or (first in "?:-" and followed_by_blank)
            or _LATER_INDICATOR.search(value, 1) is not None
        )
        special = _NOT_PRINTABLE.search(value) is not None
        line_breaks = _LINE_BREAK.search(value) is not None
        edges = first == " " or value[-1] == " " or first in _BREAKS or value[-1] in _BREAKS
        break_space = line_breaks and _BREAK_SPACE.search(value) is not None
        space_break = line_breaks and _SPACE_BREAK.search(value) is not None
        self.multiline = line_breaks
        self.plain = not (edges or special or line_breaks or block_indicators)
        self.single = not (break_space or space_break or special)
        self.block = not (value[-1] == " " or space_break or special)


def _resolves_to_str(value: str) -> bool:
    """PyYAML's YAML 1.1 resolver (the one render's readers and PyYAML's dumper share) keeps
    plain `value` a string."""
    if value and value[0] not in _RESOLVED_FIRST:
        return True
    return bool(_RESOLVER.resolve(yaml.ScalarNode, value, (True, False)) == _STR_TAG)


def _style(value: str, simple_key: bool) -> str:
    """libyaml's yaml_emitter_select_scalar_style for a string in block context, after the
    representer's request (literal for multi-line) and the Go-safety overrides."""
    if _SIMPLE.fullmatch(value):  # the common case, decided without the full analysis
        return _PLAIN if _resolves_to_str(value) and not go_reads_as_non_string(value) else _SINGLE
    if not value.isascii() and any(ch in value for ch in _NON_ASCII_BREAKS):
        return _DOUBLE
    analysis = _Analysis(value)
    if simple_key and analysis.multiline:
        return _DOUBLE
    if "\n" in value:
        return _LITERAL if analysis.block and not simple_key else _DOUBLE
    if analysis.plain and value and _resolves_to_str(value) and not go_reads_as_non_string(value):
        return _PLAIN
    return _SINGLE if analysis.single else _DOUBLE


def _escape(ch: str) -> str:
    short = _ESCAPES.get(ch)
    if short is not None:
        return "\\" + short
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02X}"
    if code <= 0xFFFF:
        return f"\\u{code:04X}"
    return f"\\U{code:08X}"


def _flow_scalar(value: str, style: str, column: int, indent: int, allow_breaks: bool) -> str:
    """A plain, single- or double-quoted scalar starting at `column` (after the indicator's
    space), folded at spaces past WIDTH onto lines indented by `indent` when `allow_breaks`,
    exactly as libyaml's write_plain, write_single_quoted and write_double_quoted do."""
    if style == _DOUBLE:
        return _double_quoted(value, column, indent, allow_breaks)
    text = value if style == _PLAIN else "'" + value.replace("'", "''") + "'"
    # A fold needs a space past WIDTH with more of the scalar after it on the line.
    if not allow_breaks or column + len(text) <= WIDTH + 1:
        return text
    # libyaml folds at a space only while past WIDTH and only where the space has text on
    # both sides: neither next to another space nor first or last in the scalar.
    words = value.split(" ")
    quote = style == _SINGLE
    out = ["'"] if quote else []
    column += quote
    previous = None
    for word in words:
        if previous is not None:
            if column > WIDTH and previous and word:
                out.append("\n" + " " * indent)
                column = indent
            else:
                out.append(" ")
                column += 1
        if quote and "'" in word:
            word = word.replace("'", "''")
        out.append(word)
        column += len(word)
        previous = word
    if quote:
        out.append("'")
    return "".join(out)


def _double_quoted(value: str, column: int, indent: int, allow_breaks: bool) -> str:
    out = ['"']
    column += 1
    spaces = False
    last = len(value) - 1
    for i, ch in enumerate(value):
        if not _printable(ch) or ch in _BREAKS or ch == '"' or ch == "\\":
            escaped = _escape(ch)
            out.append(escaped)
            column += len(escaped)
            spaces = False
        elif ch == " ":
            if allow_breaks and not spaces and column > WIDTH and 0 < i < last:
                out.append("\n" + " " * indent)
                column = indent
                if value[i + 1] == " ":  # a leading space on the next line must be escaped
                    out.append("\\")
                    column += 1
            else:
                out.append(" ")
                column += 1
            spaces = True
        else:
            out.append(ch)
            column += 1
            spaces = False
    out.append('"')
    return "".join(out)


def _literal(value: str, indent: int) -> str:
    """' |' with libyaml's indentation and chomping hints, then the lines at `indent`; ends
    with a line break."""
    hints = str(INDENT) if value[0] == " " or value[0] == "\n" else ""
    if value[-1] != "\n":
        hints += "-"
    elif len(value) == 1 or value[-2] == "\n":
        hints += "+"
    pad = " " * indent
    body = "\n".join(pad + line if line else "" for line in value.split("\n"))
    return " |" + hints + "\n" + body + ("" if value[-1] == "\n" else "\n")


def _strings(value: object) -> Iterator[str]:
    """Keys and string values in the order they are written."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _ends_open(document: object) -> bool:
    """Whether the last literal block in `document` keeps its trailing breaks ('|+'):
    libyaml then ends the stream with '...', as such a block leaves the document open."""
    literals = [text for text in _strings(document) if "\n" in text and _style(text, False) == _LITERAL]
    return bool(literals) and literals[-1].endswith("\n") and (len(literals[-1]) == 1 or literals[-1][-2] == "\n")


class _Memo:
    """What memoizing cost and saved at one place in the tree (the key a collection sits
    under). A try marshals the subtree, far cheaper per byte than writing it, so a place
    keeps trying while its hits save at least an eighth of the bytes its tries marshal,
    after a warm-up long enough for repeats to show. A flat collection (one line per entry:
    labels, annotations) is written about as fast as it is marshalled and looked up, so a
    place whose collections were all flat in the warm-up stops trying too."""

    __slots__ = ("active", "nested", "saved", "spent", "tries")

    def __init__(self) -> None:
        self.active = True
        self.nested = False  # a collection written here took more lines than it has entries
        self.tries = 0
        self.spent = 0
        self.saved = 0


class BlockEmitter:
    """Writes documents; keeps its caches across calls, so one emitter per render.

    A collection's text depends only on its value and its indentation, so equal subtrees at
    equal depth (the same resource groups in a thousand ClusterQueues) are written once.
    The cache key is the subtree's marshal bytes, which tell True from 1 and "1" from 1;
    a subtree met again as the same object within one call of `documents` (compile shares
    equal resource groups between queues) is found by identity first, without marshalling.
    Every cache changes how fast the text comes, never what it is."""

    def __init__(self) -> None:
        # string -> ' text' as a mapping value or sequence item on one line; None when it
        # needs a literal block
        self._values: dict[str, str | None] = {}
        self._styles: dict[str, str] = {}
        # key -> 'key:'; None when it must be written as an explicit '? key' entry
        self._keys: dict[str, str | None] = {}
        self._memos: dict[str, _Memo] = {}
        self._blocks: dict[tuple[int, bytes], str] = {}
        # (id, indent) -> (the subtree, kept so its id is not reused, its text); one call's
        # worth: nothing says a caller leaves its objects unchanged between calls
        self._same: dict[tuple[int, int], tuple[object, str]] = {}

    def documents(self, documents: Iterable[Any], explicit_start: bool = True) -> str:
        """A YAML stream of `documents` (mappings or sequences), '---' before each one when
        `explicit_start`."""
        try:
            return self._documents(documents, explicit_start)
        finally:
            self._same.clear()

    def _documents(self, documents: Iterable[Any], explicit_start: bool) -> str:
        out: list[str] = []
        last: Any = None
        for document in documents:
            last = document
            start = "---" if explicit_start else ""
            if type(document) is dict or type(document) is list:
                if not document:
                    empty = "{}" if type(document) is dict else "[]"
                    out.append(f"{start} {empty}\n" if start else empty + "\n")
                else:
                    out.append(start + "\n" if start else "")
                    out.append(self._write(document, 0, ""))
            else:
                raise TypeError(f"a YAML document must be a mapping or a sequence, not {type(document).__name__}")
            explicit_start = True
        if last is not None and _ends_open(last):
            out.append("...\n")
        return "".join(out)

    # -- scalars -------------------------------------------------------------------------

    def _string_style(self, value: str) -> str:
        style = self._styles.get(value)
        if style is None:
            style = self._styles[value] = _style(value, False)
        return style

    def _value_text(self, value: str) -> str | None:
        first = value[:1]
        if (first and first not in _RESOLVED_FIRST and first not in "+-.0123456789" and value not in _GO_BOOLS
                and _SIMPLE.fullmatch(value)):
            # _style's common case at a glance: plain, no fold without breaks
            text = self._values[value] = " " + value
            return text
        style = self._string_style(value)
        text = None if style == _LITERAL else " " + _flow_scalar(value, style, 0, 0, False)
        self._values[value] = text
        return text

    def _key_text(self, key: object) -> str | None:
        if type(key) is not str:
            raise TypeError(f"mapping keys must be strings, not {type(key).__name__} ({key!r})")
        text: str | None = None
        if len(key.encode("utf-8")) <= SIMPLE_KEY_BYTES and not _Analysis(key).multiline:
            text = _flow_scalar(key, _style(key, True), 0, 0, False) + ":"
        self._keys[key] = text
        return text

    def _scalar(self, value: object, column: int, indent: int) -> str:
        """' text' of a non-container after an indicator ending at `column`; literal blocks
        end with their own line break, others do not."""
        kind = type(value)
        if kind is str:
            style = self._string_style(value)  # type: ignore[arg-type]
            if style == _LITERAL:
                return _literal(value, indent)  # type: ignore[arg-type]
            return " " + _flow_scalar(value, style, column + 1, indent, True)  # type: ignore[arg-type]
        if kind is bool:
            return " true" if value else " false"
        if kind is int:
            return f" {value}"
        if value is None:
            return " null"
        raise TypeError(f"cannot write {kind.__name__} ({value!r}) as YAML: only str, int, bool, None, dict, list")

    # -- collections ---------------------------------------------------------------------

    def _node(self, value: Any, column: int, indent: int, place: str) -> str:
        """Text after an indicator ('-', ':' or '?') that ends at `column`, through its line
        break, for a node whose nested lines are indented by `indent`: a scalar, an empty
        collection, or a collection that begins on this line (after an explicit ': ')."""
        kind = type(value)
        if kind is dict or kind is list:
            if not value:
                return " {}\n" if kind is dict else " []\n"
            return " " + self._block(value, indent, place)[indent:]
        text = self._scalar(value, column, indent)
        return text if text[-1] == "\n" else text + "\n"

    def _block(self, value: dict[str, Any] | list[Any], indent: int, place: str) -> str:
        """Lines of a non-empty mapping (keys at column `indent`) or sequence (dashes there)."""
        memo = self._memos.get(place)
        if memo is None:
            memo = self._memos[place] = _Memo()
        if memo.active:
            same = self._same.get((id(value), indent))
            if same is not None and same[0] is value:
                memo.tries += 1
                memo.saved += len(same[1])
                return same[1]
            try:
                # marshal (format 4) spells out types and values: equal bytes, equal subtrees
                data = marshal.dumps(value, 4)
            except ValueError:  # a type marshal does not know; the writer names it
                return self._write(value, indent, place)
            key = (indent, data)
            text = self._blocks.get(key)
            if text is None:
                text = self._blocks[key] = self._write(value, indent, place)
                saved = 0
                if not memo.nested and text.count("\n") > len(value):
                    memo.nested = True
            else:
                saved = len(text)
            self._same[(id(value), indent)] = (value, text)
            # counted inline (this runs for most collections): active while hits save an eighth
            memo.tries += 1
            memo.spent += len(data)
            memo.saved += saved
            memo.active = memo.tries < 128 or (memo.nested and memo.saved * 8 >= memo.spent)
            return text
        return self._write(value, indent, place)

    def _write(self, value: dict[str, Any] | list[Any], indent: int, place: str) -> str:
        if type(value) is dict:
            return self._mapping(value, indent)  # type: ignore[arg-type]
        return self._sequence(value, indent, place)  # type: ignore[arg-type]

    def _mapping(self, mapping: dict[str, Any], indent: int) -> str:
        keys, values = self._keys, self._values
        pad = " " * indent
        inner = indent + INDENT
        parts: list[str] = []
        for key, value in mapping.items():
            try:
                key_text = keys[key]
            except KeyError:
                key_text = self._key_text(key)
            if key_text is None:
                parts.append(self._explicit_entry(key, value, indent))
                continue
            if type(value) is str:
                try:
                    text = values[value]
                except KeyError:
                    text = self._value_text(value)
                if text is not None and indent + len(key_text) + len(text) <= WIDTH + 1:
                    parts.append(f"{pad}{key_text}{text}\n")
                    continue
            kind = type(value)
            if (kind is dict or kind is list) and value:
                # nested keys one level in; a sequence under a key is not indented
                parts.append(f"{pad}{key_text}\n")  # the block apart: a memoized one can be long
                parts.append(self._block(value, inner if kind is dict else indent, key))
            else:
                parts.append(pad + key_text + self._node(value, indent + len(key_text), inner, key))
        return "".join(parts)

    def _explicit_entry(self, key: str, value: Any, indent: int) -> str:
        """'? key' then ': value', libyaml's form for long or multi-line keys."""
        pad = " " * indent
        inner = indent + INDENT
        style = _style(key, False)
        if style == _LITERAL:
            key_text = _literal(key, inner)
        else:
            key_text = " " + _flow_scalar(key, style, indent + 2, inner, True) + "\n"
        return pad + "?" + key_text + pad + ":" + self._node(value, indent + 1, inner, key)

    def _sequence(self, sequence: list[Any], indent: int, place: str) -> str:
        """Items are memoized at `place`, their list's, plus a dash."""
        place += "-"
        values = self._values
        pad = " " * indent
        inner = indent + INDENT
        parts: list[str] = []
        for item in sequence:
            if type(item) is str:
                try:
                    text = values[item]
                except KeyError:
                    text = self._value_text(item)
                if text is not None and inner + len(text) <= WIDTH + 2:
                    parts.append(f"{pad}-{text}\n")
                    continue
            kind = type(item)
            if (kind is dict or kind is list) and item:  # begins on the dash's line
                parts.append(f"{pad}- {self._block(item, inner, place)[inner:]}")
            else:
                parts.append(pad + "-" + self._node(item, indent + 1, inner, place))
        return "".join(parts)


def dump_all(documents: Iterable[Any], explicit_start: bool = True) -> str:
    """One YAML stream; see the module docstring for its exact form."""
    return BlockEmitter().documents(documents, explicit_start)
