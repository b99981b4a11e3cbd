"""What an alert says, independent of the platform: a title, counts by severity, the first findings.

The fixed words (counts, levels, "…and N more") are told in the sink's language (a gpugov.i18n
Translator); a finding's message and rule id stay as gpugov wrote them."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from gpugov.findings import Finding, Level
from gpugov.i18n import Translator, _, localized, ngettext

TITLE_LIMIT = 100
LINE_LIMIT = 300  # one finding; a long message must not crowd out the others


@dataclass(frozen=True)
class Alert:
    title: str
    findings: tuple[Finding, ...]  # most severe first
    fingerprint: str
    resolved: bool = False  # the findings of the last message are gone

    @classmethod
    def of(cls, title: str, findings: list[Finding], fingerprint: str) -> Alert:
        rank = {level: i for i, level in enumerate(Level)}  # declaration order: error, warning, ...
        ordered = sorted(findings, key=lambda f: (rank[f.level], f.sort_key()))
        return cls(clip(" ".join(title.split()) or "gpugov", TITLE_LIMIT), tuple(ordered), fingerprint, not findings)

    @property
    def counts(self) -> dict[str, int]:
        counts = Counter(f.level.value for f in self.findings)
        return {level.value: counts.get(level.value, 0) for level in Level}

    @property
    def summary(self) -> str:
        return summary(self, ENGLISH)

    @property
    def status(self) -> str:
        return "resolved" if self.resolved else "firing"


ENGLISH = Translator()


def summary(alert: Alert, tr: Translator) -> str:
    """"2 errors, 1 warning, 3 info" (info is a mass noun, as in gpugov.findings.report.summary)."""
    if alert.resolved:
        return _("resolved: no findings any more", tr)
    counted = {
        "error": lambda n: ngettext("{n} error", "{n} errors", n, tr),
        "warning": lambda n: ngettext("{n} warning", "{n} warnings", n, tr),
        "info": lambda n: ngettext("{n} info", "{n} info", n, tr),
    }
    parts = [counted[level](n).format(n=n) for level, n in alert.counts.items() if n]
    return _(", ", tr).join(parts)


def level_word(level: Level, tr: Translator) -> str:
    words = {Level.ERROR: _("error", tr), Level.WARNING: _("warning", tr), Level.INFO: _("info", tr)}
    return words[level]


def where(finding: Finding) -> str:
    return str(finding.location) if finding.location else ""


def finding_line(finding: Finding, limit: int = LINE_LIMIT, tr: Translator = ENGLISH) -> str:
    """`[error] GG012 tenants/ml.yaml:4:3: quota exceeds pool` on one line."""
    place = where(finding)
    message = localized(finding.message, tr)  # a finding read back from a JSON report is English already
    text = f"[{level_word(finding.level, tr)}] {finding.rule} " + (f"{place}: " if place else "") + message
    return clip(" ".join(text.split()), limit)


def more_line(omitted: int, tr: Translator = ENGLISH) -> str:
    return ngettext("…and {n} more finding", "…and {n} more findings", omitted, tr).format(n=omitted)


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def clip_bytes(text: str, limit: int) -> str:
    """Cut to at most `limit` UTF-8 bytes without splitting a character."""
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[: max(limit - 3, 0)].decode(errors="ignore") + "…"
