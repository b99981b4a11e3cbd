"""Reporters: one per output format, like check-jsonschema's and yamllint's."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable

from gpugov.findings import Finding, Level

FORMATS = ("text", "json", "github", "markdown")


def summary(findings: list[Finding]) -> str:
    counts = Counter(f.level for f in findings)
    errors, warnings = counts[Level.ERROR], counts[Level.WARNING]
    return f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}"


def text(findings: list[Finding], files: int) -> str:
    lines = []
    for f in findings:
        where = f"{f.location}: " if f.location else ""
        lines.append(f"{where}{f.level.value}: {f.message} [{f.rule}]")
        if f.hint:
            lines.append(f"  hint: {f.hint}")
    lines.append(f"{files} file{'s' * (files != 1)} checked: {summary(findings)}")
    return "\n".join(lines) + "\n"


def as_json(findings: list[Finding], files: int) -> str:
    counts = Counter(f.level.value for f in findings)
    data = {
        "files": files,
        "errors": counts.get("error", 0),
        "warnings": counts.get("warning", 0),
        "findings": [f.to_dict() for f in findings],
    }
    return json.dumps(data, indent=2) + "\n"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github(findings: list[Finding], files: int) -> str:
    """GitHub Actions workflow commands: annotations on the lines a pull request changed."""
    lines = []
    for f in findings:
        props = [f"title={_escape_property(f.rule)}"]
        if f.location:
            props.insert(0, f"file={_escape_property(f.location.file)}")
            if f.location.line:
                props.insert(1, f"line={f.location.line}")
                props.insert(2, f"col={f.location.col}")
        message = f.message + (f" (hint: {f.hint})" if f.hint else "")
        lines.append(f"::{f.level.value} {','.join(props)}::{_escape_data(message)}")
    lines.append(f"{files} files checked: {summary(findings)}")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(findings: list[Finding], files: int) -> str:
    if not findings:
        return f"**gpugov validate**: {files} files checked, no findings.\n"
    lines = [
        f"**gpugov validate**: {files} files checked, {summary(findings)}.",
        "",
        "| level | location | rule | message |",
        "|---|---|---|---|",
    ]
    for f in findings:
        location = f"`{f.location}`" if f.location else ""
        lines.append(f"| {f.level.value} | {location} | {f.rule} | {_cell(f.message)} |")
    return "\n".join(lines) + "\n"


REPORTERS: dict[str, Callable[[list[Finding], int], str]] = {
    "text": text,
    "json": as_json,
    "github": github,
    "markdown": markdown,
}
