"""Reporters: one per output format, like check-jsonschema's and yamllint's."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable

from gpugov.findings import Finding, Level
from gpugov.findings.markdown import table
from gpugov.i18n import Joined, Text, _, localized, ngettext

FORMATS = ("text", "json", "github", "markdown")


def summary(findings: list[Finding]) -> str:
    counts = Counter(f.level for f in findings)
    errors, warnings, infos = counts[Level.ERROR], counts[Level.WARNING], counts[Level.INFO]
    # the words of the chat messages' summary (gpugov.notify.message): one catalogue entry each
    text = ngettext("{n} error", "{n} errors", errors).format(n=errors) + _(", ") + \
        ngettext("{n} warning", "{n} warnings", warnings).format(n=warnings)
    return text + (_(", ") + ngettext("{n} info", "{n} info", infos).format(n=infos) if infos else "")


def _checked(files: int, checked: str | None) -> str:
    """What was checked (a Text from drift: told in the reader's language; JSON keeps the English)."""
    return localized(checked) if checked else ngettext("{n} file checked", "{n} files checked", files).format(n=files)


def told_hint(hint: str) -> str:
    """A finding's hint in the reader's language: a rule's (a catalogue entry) or a Text made for this
    finding (a YAML syntax trap); JSON keeps the English."""
    return localized(hint) if isinstance(hint, Text | Joined) else _(hint)


def level_word(level: Level) -> str:
    """The level as the reader reads it: error, warning, info (错误, 警告, 信息 in Chinese)."""
    return {Level.ERROR: _("error"), Level.WARNING: _("warning"), Level.INFO: _("info")}[level]


def text(findings: list[Finding], files: int, checked: str | None = None, title: str = "gpugov validate") -> str:
    lines, hint = [], _("hint")
    for f in findings:
        where = f"{f.location}: " if f.location else ""
        lines.append(f"{where}{level_word(f.level)}: {localized(f.message)} [{f.rule}]")  # JSON keeps the English
        if f.hint:  # a rule's hint, in the reader's language (JSON keeps the English)
            lines.append(f"  {hint}: {told_hint(f.hint)}")
    lines.append(f"{_checked(files, checked)}: {summary(findings)}")
    return "\n".join(lines) + "\n"


def as_json(findings: list[Finding], files: int, checked: str | None = None, title: str = "gpugov validate") -> str:
    counts = Counter(f.level.value for f in findings)
    data: dict = {"checked": checked} if checked else {}
    data |= {
        "files": files,
        "errors": counts.get("error", 0),
        "warnings": counts.get("warning", 0),
        **({"infos": counts["info"]} if counts.get("info") else {}),
        "findings": [f.to_dict() for f in findings],
    }
    return json.dumps(data, indent=2) + "\n"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github(findings: list[Finding], files: int, checked: str | None = None, title: str = "gpugov validate") -> str:
    """GitHub Actions workflow commands: annotations on the lines a pull request changed."""
    lines, hint = [], _("hint")
    for f in findings:
        props = [f"title={_escape_property(f.rule)}"]
        if f.location:
            props.insert(0, f"file={_escape_property(f.location.file)}")
            if f.location.line:
                props.insert(1, f"line={f.location.line}")
                props.insert(2, f"col={f.location.col}")
        message = localized(f.message) + (f" ({hint}: {told_hint(f.hint)})" if f.hint else "")
        command = "notice" if f.level is Level.INFO else f.level.value
        lines.append(f"::{command} {','.join(props)}::{_escape_data(message)}")
    lines.append(f"{_checked(files, checked)}: {summary(findings)}")
    return "\n".join(lines) + "\n"


def markdown(findings: list[Finding], files: int, checked: str | None = None, title: str = "gpugov validate") -> str:
    if not findings:
        return _("**{title}**: {checked}, no findings.").format(title=title, checked=_checked(files, checked)) + "\n"
    lines = [
        _("**{title}**: {checked}, {summary}.").format(title=title, checked=_checked(files, checked),
                                                      summary=summary(findings)),
        "",
        *table((_("level"), _("location"), _("rule"), _("message")),
               ((level_word(f.level), f"`{f.location}`" if f.location else "", f.rule, localized(f.message))
                for f in findings)),
    ]
    return "\n".join(lines) + "\n"


REPORTERS: dict[str, Callable[..., str]] = {
    "text": text,
    "json": as_json,
    "github": github,
    "markdown": markdown,
}
