"""A Babel extraction method (babel.cfg) for gpugov's sources: the usual gettext calls (`_`,
`ngettext`, and `Text`/`Joined` for messages told later: -k Text -k Joined), plus the summary and hint of every rule
declared with `rule(ID, NAME, LEVEL, SUMMARY, HINT)` (and of each readiness check), which are plain strings where they are
written and are translated where they are shown. Babel is a development tool: imported on use."""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterator, Mapping
from typing import IO, Any

# The declarations whose texts are shown translated: field -> position (None: keyword only).
DECLARATIONS: dict[str, dict[str, int | None]] = {
    "rule": {"summary": 3, "hint": 4},  # gpugov.findings.rule: the rule table and every finding's hint
    "check": {"summary": None},  # gpugov.doctor.checks.check: the readiness checks in the rule table
}

Extracted = tuple[int, str | None, str | tuple[str, ...], list[str]]


def messages(fileobj: IO[bytes], keywords: Collection[str], comment_tags: Collection[str],
             options: Mapping[str, Any]) -> Iterator[Extracted]:
    from babel.messages.extract import extract_python

    source = fileobj.read()
    fileobj.seek(0)
    # `rule` is a keyword for Babel (-k rule) but not for the Python extractor: it would take the rule's id.
    yield from extract_python(fileobj, [k for k in keywords if k != "rule"], comment_tags, options)
    yield from rule_texts(source.decode("utf-8"))


def rule_texts(source: str) -> Iterator[Extracted]:
    """(line, "rule", text, comments) for each constant summary and hint of a rule(...) or check(...)."""
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in DECLARATIONS):
            continue
        given = {k.arg: k.value for k in node.keywords if k.arg}
        for field, position in DECLARATIONS[node.func.id].items():
            value = node.args[position] if position is not None and len(node.args) > position else given.get(field)
            if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value:
                rule_id = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else "?"
                yield value.lineno, "rule", value.value, [f"{rule_id} {field}"]
