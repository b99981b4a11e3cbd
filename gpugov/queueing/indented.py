"""`json.dumps(value, indent=2)`, byte for byte, at the speed of the C string encoder.

Python's json encodes with its C encoder only without `indent`; with it, every value goes
through the pure-Python generator encoder, which made the indented report of 100,000 queued
workloads cost more than reading them. This encoder builds the same text (ASCII escapes, `": "`
and `","` separators, two spaces a level, `{}`/`[]` when empty) by joining strings, one call per
value, and `lines` hands a top-level list on item by item so a large report is never one string.
Only what JSON holds is accepted (str keys; str, int, float, bool, None, dict, list, tuple).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from json.encoder import encode_basestring_ascii as _string  # the C function where _json is built
from typing import Any


class Encoded(str):
    """A value already encoded as `dumps(value)` writes it at indentation "" (a caller that encodes
    many values of one shape faster than the general walk): `dumps` places it at its own `pad`."""


def dumps(value: Any, pad: str = "") -> str:
    """`json.dumps(value, indent=2)` of a value that starts at indentation `pad`."""
    if type(value) is Encoded:
        return value.replace("\n", "\n" + pad) if pad else str(value)  # JSON strings hold no raw newline
    if isinstance(value, str):
        return _string(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = pad + "  "
        parts = []
        for key, item in value.items():  # the common leaves inline: a call less per value
            kind = type(item)
            text = (_string(item) if kind is str else "null" if item is None else int.__repr__(item) if kind is int
                    else dumps(item, inner))
            parts.append((_KEYS.get(key) or _key(key)) + text)
        return "{\n" + inner + (",\n" + inner).join(parts) + "\n" + pad + "}"
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        inner = pad + "  "
        return "[\n" + inner + (",\n" + inner).join([dumps(v, inner) for v in value]) + "\n" + pad + "]"
    if isinstance(value, float):
        return json.dumps(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def members(value: dict[str, Any]) -> str:
    """The members of a non-empty object as `dumps` writes them at indentation "", without its
    braces: to be spliced among the members of a larger object at that indentation."""
    if not value:
        raise ValueError("an empty object has no members to splice")
    return dumps(value)[len("{\n  "):-len("\n}")]


_KEYS: dict[str, str] = {}  # key -> its encoding and separator: a report repeats a few keys 100,000 times


def _key(key: Any) -> str:
    if not isinstance(key, str):
        raise TypeError(f"keys must be str, not {type(key).__name__}")
    text = _string(key) + ": "
    if len(_KEYS) < 4096 and type(key) is str:
        _KEYS[key] = text
    return text


def lines(document: dict[str, Any], streamed: str) -> Iterator[str]:
    """`json.dumps(document, indent=2) + "\\n"` in pieces; the value under key `streamed` may be any
    iterable (a generator: its items are encoded as they come, never all held), one item a piece."""
    items = iter(document[streamed])
    first_item = next(items, _NONE)
    yield "{"
    for index, (key, value) in enumerate(document.items()):
        yield ("\n  " if index == 0 else ",\n  ") + _key(key)
        if key != streamed:
            yield dumps(value, "  ")
        elif first_item is _NONE:
            yield "[]"
        else:
            yield "[\n    " + dumps(first_item, "    ")
            for item in items:
                yield ",\n    " + dumps(item, "    ")
            yield "\n  ]"
    yield "\n}\n"


_NONE = object()  # an iterable's end, told from any item it holds
