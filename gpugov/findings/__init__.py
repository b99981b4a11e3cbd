"""Findings: what validation, policy checks and drift report, with a stable rule id.

The ground floor: it imports no other gpugov package."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol


class Level(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"  # reported, never fails a run (e.g. pending workloads)


@dataclass(frozen=True, order=True)
class Location:
    file: str
    line: int = 0
    col: int = 0

    def __str__(self) -> str:
        if not self.line:
            return self.file
        return f"{self.file}:{self.line}:{self.col}"


class Locator(Protocol):
    """Where a declaration was written: its file, its own origin (file:line) and each field's location.

    The loader's SourceDoc is one; the model and the checks see only this."""

    file: str

    @property
    def origin(self) -> str: ...

    def locate(self, path: tuple[Any, ...] = (), key: bool = False) -> Location: ...


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    level: Level
    summary: str
    hint: str = ""


@dataclass(frozen=True)
class Finding:
    rule: str
    level: Level
    message: str
    location: Location | None = None
    hint: str = ""
    related: tuple[Location, ...] = field(default_factory=tuple)
    details: tuple[tuple[str, str], ...] = ()  # e.g. object, declared and live values (drift)

    def sort_key(self) -> tuple:
        loc = self.location or Location("")
        return (loc.file, loc.line, loc.col, self.rule, self.message)

    def to_dict(self) -> dict:
        data: dict = {"rule": self.rule, "level": self.level.value, "message": self.message}
        if self.location:
            data.update(file=self.location.file, line=self.location.line, col=self.location.col)
        if self.hint:
            data["hint"] = self.hint
        if self.related:
            data["related"] = [str(loc) for loc in self.related]
        data.update(self.details)
        return data


def rule(id: str, name: str, level: Level, summary: str, hint: str = "") -> Rule:
    """Declare a rule beside the check that reports it. Declaring registers nothing: the one rule
    table (gpugov.rules) imports every module that declares rules and lists their Rule constants."""
    return Rule(id, name, level, summary, hint)


def make(r: Rule, message: str, location: Location | None, *related: Location, level: Level | None = None,
         **details: str) -> Finding:
    return Finding(r.id, level or r.level, message, location, r.hint, tuple(related), tuple(details.items()))
