"""What an alert says, independent of the platform: a title, counts by severity, the first findings."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from gpugov.findings import Finding, Level

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
        if self.resolved:
            return "resolved: no findings any more"
        # "2 errors, 1 warning, 3 info": info is a mass noun, as in gpugov.findings.report.summary
        parts = [f"{n} {level}{'s' * (n != 1 and level != 'info')}" for level, n in self.counts.items() if n]
        return ", ".join(parts)

    @property
    def status(self) -> str:
        return "resolved" if self.resolved else "firing"


def where(finding: Finding) -> str:
    return str(finding.location) if finding.location else ""


def finding_line(finding: Finding, limit: int = LINE_LIMIT) -> str:
    """`[error] GG012 tenants/ml.yaml:4:3: quota exceeds pool` on one line."""
    place = where(finding)
    text = f"[{finding.level.value}] {finding.rule} " + (f"{place}: " if place else "") + finding.message
    return clip(" ".join(text.split()), limit)


def more_line(omitted: int) -> str:
    return f"…and {omitted} more finding{'s' * (omitted != 1)}"


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def clip_bytes(text: str, limit: int) -> str:
    """Cut to at most `limit` UTF-8 bytes without splitting a character."""
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[: max(limit - 3, 0)].decode(errors="ignore") + "…"
