"""A YAML syntax error comes with advice in words for the common traps (issue #30)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpugov.cli import main
from gpugov.yamlpos import SYNTAX, LoadError, parse_documents
from tests.helpers.repos import write


def hint_of(text: str) -> tuple[str, str]:
    """(file:line:col, hint) of the syntax error `text` raises."""
    with pytest.raises(LoadError) as raised:
        list(parse_documents(text, "t.yaml"))
    finding = raised.value.finding
    assert finding.rule == SYNTAX.id
    return str(finding.location), finding.hint


@pytest.mark.parametrize(
    ("text", "where", "hint"),
    [
        ("description: 自动驾驶: 感知\n", "t.yaml:1:18",
         'A plain value cannot contain ": " (a colon and a space). Quote the value: description: "自动驾驶: 感知"'),
        ("spec:\n  costCenter: CC-1\n  description: ratio: 3:1\n", "t.yaml:3:21",
         'A plain value cannot contain ": " (a colon and a space). Quote the value: description: "ratio: 3:1"'),
        ("- name: a: b\n", "t.yaml:1:10",
         'A plain value cannot contain ": " (a colon and a space). Quote the value: name: "a: b"'),
        ('title: say "hi": now\n', "t.yaml:1:16",
         "A plain value cannot contain \": \" (a colon and a space). Quote the value: title: 'say \"hi\": now'"),
    ],
    ids=["chinese", "nested", "list-item", "has-double-quotes"],
)
def test_a_colon_in_a_plain_value_says_quote_it(text: str, where: str, hint: str) -> None:
    assert hint_of(text) == (where, hint)
    # The advice is right: the suggested line loads, as the text it was.
    fixed = hint.split("Quote the value: ", 1)[1]
    line = next(n for n, ln in enumerate(text.splitlines()) if fixed.split(":")[0].strip() in ln)
    lines = text.splitlines()
    lines[line] = lines[line][: len(lines[line]) - len(lines[line].lstrip(" -"))] + fixed
    assert list(parse_documents("\n".join(lines) + "\n", "t.yaml"))


FULL_WIDTH_COLON = "Line {line}, column {col} has a full-width colon '：' (U+FF1A) where YAML needs the ASCII colon"


@pytest.mark.parametrize(
    ("text", "line", "col", "fixed"),
    [
        ("a:\n  b: 1\n  c：2\n  d: 3\n", 3, 4, "c: 2"),  # libyaml reports line 4
        ("a:\n  b：1\n  c: 2\n", 2, 4, "b: 1"),  # libyaml reports line 3
        ("name：x\nkind: Tenant\n", 1, 5, "name: x"),
        ("a:\n  - x\n  c： 2\n", 3, 4, "c: 2"),  # already followed by a space: none added
    ],
)
def test_a_full_width_colon_as_key_separator_is_named(text: str, line: int, col: int, fixed: str) -> None:
    _, hint = hint_of(text)
    assert hint.startswith(FULL_WIDTH_COLON.format(line=line, col=col))
    assert hint.endswith(f"(switch the input method to half-width): {fixed}")


def test_other_full_width_punctuation_is_named() -> None:
    _, dash = hint_of("a:\n  - 1\n  －\u30002\n  d: 1\n")
    assert dash.startswith("Line 3, column 3 has a full-width hyphen '－' (U+FF0D)")
    assert dash.endswith(": - 2")
    _, quote = hint_of("a: “b: c”\n")
    assert quote.startswith("Line 1, column 4 has a curly double quote '“' (U+201C)")
    assert quote.endswith(': a: "b: c"')


def test_a_full_width_colon_inside_a_value_is_not_blamed() -> None:
    # `：` after the key's ASCII colon is text, and valid: the error is elsewhere.
    _, hint = hint_of("note: 感知：规划\nsummary: a: b\n")
    assert "full-width" not in hint
    assert hint.endswith('Quote the value: summary: "a: b"')


@pytest.mark.parametrize(
    ("text", "start"),
    [
        ("a:\n\tb: 1\n", "Replace the tab with spaces"),
        ("a: b\n c: d\n", "Check the indentation"),
        ("a: 1\n  b: 2\n", "Check the indentation"),
        ('a: "b" c: d\n', "A quoted value ends at its closing quote"),
        ("a:\n  b: 1\n  oops\n  c: 2\n", "Line 3 is neither `key: value` nor a list item"),
    ],
    ids=["tab", "indented-key", "continued-value", "after-quote", "no-colon"],
)
def test_other_traps_get_advice(text: str, start: str) -> None:
    assert hint_of(text)[1].startswith(start)


def test_an_error_no_trap_explains_keeps_the_rule_hint() -> None:
    assert hint_of("x: [a, b\n")[1] == SYNTAX.hint


def test_validate_prints_the_hint(base_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tenant = (
        "apiVersion: gpugov.io/v1alpha1\nkind: Tenant\nmetadata:\n  name: adas\n  description: 自动驾驶: 感知\n"
        "spec:\n  namespaces: [adas]\n"
    )
    write(base_repo, "tenants/adas.yaml", tenant)
    assert main(["validate", str(base_repo)]) == 1
    out = capsys.readouterr().out
    assert "tenants/adas.yaml:5:20: error: mapping values are not allowed in this context [GG001]" in out
    assert '  hint: A plain value cannot contain ": " (a colon and a space). Quote the value: description: ' \
        '"自动驾驶: 感知"' in out
