"""A small reader of the Prometheus text exposition format (what /metrics serves): enough to
ask which series exist and with which labels. Malformed lines are skipped, never fatal."""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: str


def _unescape(text: str) -> str:
    return re.sub(r'\\[\\"n]', lambda m: _ESCAPES[m.group(0)], text)


def parse_samples(text: str) -> list[Sample]:
    samples = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _NAME.match(line)
        if not match:
            continue
        name, rest = match.group(0), line[match.end():]
        labels: dict[str, str] = {}
        if rest.startswith("{"):
            end = _labels_end(rest)
            if end < 0:
                continue
            body, rest = rest[1:end], rest[end + 1:]
            position = 0
            while position < len(body):
                label = _LABEL.match(body, position)
                if not label:
                    break
                labels[label.group(1)] = _unescape(label.group(2))
                position = label.end()
        parts = rest.split()
        if parts:
            samples.append(Sample(name, labels, parts[0]))
    return samples


def _labels_end(text: str) -> int:
    """Index of the `}` closing the label set at text[0], skipping quoted values; -1 if none."""
    quoted = escaped = False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == "}" and not quoted:
            return index
    return -1
