"""The doctor's results as text, JSON or Markdown, its exit code, and the table of its checks."""

from __future__ import annotations

import json
from collections import Counter

from gpugov.app.exit import ExitCode
from gpugov.doctor.checks import CHECKS, Result, Status
from gpugov.doctor.facts import SOURCES
from gpugov.findings.markdown import table
from gpugov.i18n import _, localized
from gpugov.i18n.width import ljust

FORMATS = ("text", "json", "markdown")


def exit_code(results: list[Result]) -> ExitCode:
    """1 when a check fails; else 3 when one could not read what it needs; else 0."""
    if any(r.status is Status.FAIL for r in results):
        return ExitCode.FINDINGS
    if any(r.incomplete for r in results):
        return ExitCode.INCOMPLETE
    return ExitCode.OK


def _status(status: Status) -> str:
    """A check's result in the reader's language (JSON keeps `status.value`)."""
    return {Status.PASS: _("pass"), Status.WARN: _("warn"), Status.FAIL: _("fail"), Status.SKIP: _("skip")}[status]


def summary(results: list[Result], where: str) -> str:
    counts = Counter(r.status for r in results)
    incomplete = sum(r.incomplete for r in results)
    words = {Status.PASS: _("{count} pass"), Status.WARN: _("{count} warn"), Status.FAIL: _("{count} fail"),
             Status.SKIP: _("{count} skip")}
    parts = [words[s].format(count=counts[s]) for s in Status]
    tail = _(" ({count} could not check)").format(count=incomplete) if incomplete else ""
    return _("{where}: {count} checks: {results}{incomplete}").format(
        where=where, count=len(results), results=_(", ").join(parts), incomplete=tail)


def text(results: list[Result], where: str) -> str:
    width = max((len(r.name) for r in results), default=0)
    lines, hint = [], _("hint")
    for r in results:
        lines.append(f"{r.id} {ljust(_status(r.status), 4)}  {r.name:<{width}}  {localized(r.message)}")
        if r.hint and r.status is not Status.PASS:
            lines.append(f"{'':<12}{'':<{width}}  {hint}: {localized(r.hint)}")
    lines.append(summary(results, where))
    return "\n".join(lines) + "\n"


def to_json(results: list[Result], cluster: str, backend: str) -> str:
    body = {
        "cluster": cluster,
        "backend": backend,
        "exit_code": int(exit_code(results)),
        "checks": [
            {"id": r.id, "name": r.name, "status": r.status.value, "message": r.message, "hint": r.hint,
             "incomplete": r.incomplete}
            for r in results
        ],
        "summary": {s.value: sum(r.status is s for r in results) for s in Status},
    }
    return json.dumps(body, indent=2) + "\n"


def markdown(results: list[Result], where: str) -> str:
    icons = {Status.PASS: "✅", Status.WARN: "⚠️", Status.FAIL: "❌", Status.SKIP: "⏭️"}
    icons = {status: f"{icon} {_status(status)}" for status, icon in icons.items()}
    lines = [_("## gpugov doctor: {where}").format(where=where), ""]
    lines += table((_("id"), _("check"), _("result"), _("detail"), _("hint")),
                   ((r.id, r.name, icons[r.status], localized(r.message), localized(r.hint)) for r in results))
    lines += ["", summary(results, where)]
    return "\n".join(lines) + "\n"


def checks_table() -> str:
    """Every check with what it reads: the README's table (a test keeps the two in step)."""
    rows = ((c.id, f"`{c.name}`", c.summary, "; ".join(SOURCES[s] for s in c.sources)) for c in CHECKS)
    return "\n".join(table(("id", "check", "what it verifies", "reads"), rows)) + "\n"
