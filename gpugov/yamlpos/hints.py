"""Advice in words for the YAML syntax errors people actually make.

libyaml says *what* it could not parse ("mapping values are not allowed in this context"); the
hint says what to change, for the common traps: a colon inside a plain value
(`description: 自动驾驶: 感知` -> quote the value), full-width punctuation typed by a Chinese input
method (`：` as the key separator, `　` as indentation, `－` as a list dash, curly quotes) and
tabs. A hint names the line and column it is about when that is not the error's own position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpugov.i18n import Text

# What libyaml counts as a line break (\r\n is one).
_BREAKS = re.compile("\r\n|[\n\r\x85\u2028\u2029]")

# Full-width characters an input method types where YAML needs the ASCII one.
FULL_WIDTH = {
    "\uff1a": (":", Text("full-width colon")),
    "\u3000": (" ", Text("full-width space")),
    "\uff0d": ("-", Text("full-width hyphen")),
    "\u201c": ('"', Text("curly double quote")),
    "\u201d": ('"', Text("curly double quote")),
    "\u2018": ("'", Text("curly single quote")),
    "\u2019": ("'", Text("curly single quote")),
    "\uff02": ('"', Text("full-width double quote")),
    "\uff07": ("'", Text("full-width single quote")),
    "\uff03": ("#", Text("full-width number sign")),
}

TAB_HINT = Text("Replace the tab with spaces (two per level is usual): YAML indents only with spaces.")
INDENT_HINT = Text(
    "Check the indentation: the keys of one mapping start in the same column, a nested mapping is indented "
    "further than its key, and a value that goes on over several lines must be quoted."
)
QUOTED_HINT = Text(
    "A quoted value ends at its closing quote: quote the whole value, and put nothing after the quote but a comment."
)
# What YAML needs instead of a full-width character, by the ASCII character it stands for.
NEEDS = {
    ":": Text('YAML needs the ASCII colon ":" followed by a space'),
    " ": Text("YAML indents only with ASCII spaces"),
    "-": Text('a list item starts with the ASCII "-" followed by a space'),
    "#": Text('a comment starts with the ASCII "#"'),
}


@dataclass(frozen=True)
class YamlError:
    """A libyaml syntax error: its problem's words, 0-based line and column, and its context's line."""

    problem: str
    line: int
    column: int
    context_line: int | None = None


def _lines(text: str) -> list[str]:
    return _BREAKS.split(text.removeprefix("\ufeff"))


def syntax_hint(text: str, error: YamlError) -> str:
    """Advice for `error` in `text` (a Text: told in the reader's language), or "" when no common trap
    explains it."""
    if "tab character" in error.problem:
        return TAB_HINT
    lines = _lines(text)
    first = min(error.line, error.context_line if error.context_line is not None else error.line)
    for number in range(max(0, first - 1), min(error.line, len(lines) - 1) + 1):
        found = _full_width(lines[number])
        if found:
            return _full_width_hint(number, lines[number], *found)
    if error.line >= len(lines):
        return ""
    line = lines[error.line]
    if "mapping values are not allowed" in error.problem:
        quoted = _quoted_value(line, error.column)
        if quoted:
            return Text('A plain value cannot contain ": " (a colon and a space). Quote the value: {quoted}',
                        quoted=quoted)
        return INDENT_HINT
    if "could not find expected ':'" in error.problem and error.context_line is not None:
        return Text("Line {line} is neither `key: value` nor a list item (`- ...`): add a colon and a space after "
                    "the key, or start the line with # to make it a comment.", line=error.context_line + 1)
    if "did not find expected key" in error.problem and re.search(r":[ \t]+([\"']).*?\1[ \t]*[^\s#]", line):
        return QUOTED_HINT
    if "did not find expected key" in error.problem or "block sequence entries are not allowed" in error.problem:
        return INDENT_HINT
    return ""


def _full_width(line: str) -> tuple[int, str] | None:
    """(column, character) of a full-width character standing where YAML syntax goes on `line`."""
    body = line.lstrip(" ")
    indent = len(line) - len(body)
    if body[:1] == "\u3000":  # indentation
        return indent, body[0]
    if body[:1] in ("\uff0d",) and body[1:2] in (" ", "\u3000"):  # a list dash
        return indent, body[0]
    separator = re.search(r"\uff1a", body)
    if separator and ":" not in body[: separator.start()] and not body.startswith(("#", '"', "'")):
        return indent + separator.start(), "\uff1a"  # the key's separator: no ASCII colon before it
    value = re.match(r"(?:- )?[^:#]+:[ \t]+(.)", body)
    if value and value.group(1) in FULL_WIDTH and FULL_WIDTH[value.group(1)][0] in "\"'":
        return indent + value.start(1), value.group(1)  # a value opened with a curly quote
    return None


def _full_width_hint(number: int, line: str, column: int, char: str) -> str:
    ascii_, name = FULL_WIDTH[char]
    what = NEEDS.get(ascii_) or Text("YAML quotes only with ASCII {quote}", quote=ascii_)
    if ascii_ in "\"'":  # both quotes of the pair
        fixed = "".join(FULL_WIDTH[c][0] if c in FULL_WIDTH and FULL_WIDTH[c][0] in "\"'" else c for c in line)
    else:
        fixed = line[:column] + ascii_ + line[column + 1 :]
    if ascii_ in ":-" and fixed[column + 1 : column + 2] not in (" ", ""):
        after = fixed[column + 1 :].removeprefix("\u3000")
        fixed = f"{fixed[: column + 1]} {after}"
    return Text("Line {line}, column {column} has a {name} {char} (U+{code}) where {what} "
                "(switch the input method to half-width): {fixed}", line=number + 1, column=column + 1, name=name,
                char=repr(char), code=format(ord(char), "04X"), what=what, fixed=fixed.strip())


def _quoted_value(line: str, column: int) -> str:
    """`key: "value"` for a line whose plain value holds ": " at `column`, or ""."""
    match = re.match(r"(\s*(?:- )?)([^\s:#'\"][^:#]*?):[ \t]+(.*)", line)
    if not match or match.end(2) >= column or line[column : column + 1] != ":":
        return ""
    key, value = match.group(2), match.group(3).rstrip()
    if '"' not in value and "\\" not in value:
        return f'{key}: "{value}"'
    return f"{key}: '{value.replace(chr(39), chr(39) * 2)}'"
