"""The validation pipeline: load -> schema -> model -> policy -> compile conformance, as one pass."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from gpugov.app.exit import ExitCode
from gpugov.compile import compile
from gpugov.declarations.build import build_model
from gpugov.declarations.loader import DECLARATION_DIRS, UNREADABLE, Parsed, SourceFile, load_files, tree_files
from gpugov.declarations.model import Model
from gpugov.declarations.schema import check_document
from gpugov.findings import Finding, Level
from gpugov.kube.objects import Object
from gpugov.policy import run_policy
from gpugov.policy.adoption import check_adoption
from gpugov.policy.conformance import check_objects
from gpugov.policy.repository import check_repository


class InputError(Exception):
    """The repository cannot be read at all (missing folder, not a gpugov repo)."""


@dataclass
class Validation:
    root: Path
    files: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    model: Model | None = None
    # Each cluster's objects for its declared backend, compiled for the conformance checks and
    # handed on to desired_state, so a render compiles once.
    compiled: dict[str, list[Object]] = field(default_factory=dict, repr=False)
    # Each file's text and documents as loaded, for another revision's load to reuse (plan).
    parsed: Parsed = field(default_factory=dict, repr=False)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.level is Level.ERROR]

    @property
    def unreadable(self) -> bool:
        return any(f.rule == UNREADABLE.id for f in self.findings)

    def exit_code(self, strict: bool = False) -> ExitCode:
        if self.unreadable:
            return ExitCode.USAGE
        if self.errors or (strict and self.findings):
            return ExitCode.FINDINGS
        return ExitCode.OK


def check_root(root: Path) -> None:
    if not root.exists():
        raise InputError(f"{root}: no such directory")
    if not root.is_dir():
        raise InputError(f"{root}: not a directory")
    if not any((root / d).is_dir() for d in DECLARATION_DIRS):
        raise InputError(f"{root}: not a gpugov repository (none of {', '.join(f'{d}/' for d in DECLARATION_DIRS)})")


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building large acyclic trees.

    Loading keeps every composed YAML node (the location map); with the collector on,
    CPython re-scans that growing heap again and again, which costs more than parsing
    itself on big repositories. Nothing built here is cyclic, so nothing leaks."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        # Hand what was built to the oldest generation (freeze + unfreeze is a cheap list
        # move), so re-enabling does not make the next young collection scan all of it.
        gc.freeze()
        gc.unfreeze()
        if was_enabled:
            gc.enable()


def validate_repo(root: Path, conformance: bool = True, base: Model | None = None, *,
                  now: datetime | None = None, reuse: Parsed | None = None) -> Validation:
    """Every finding for the repository at `root`; the model when it loaded cleanly. With `base`
    (the model of the revision the tree changes), findings of a change point at what it changed.
    `now`: when the command runs (the CLI reads the clock once); the quota timeline's checks look
    from then on (None: at every instant a grant or window makes). `reuse` as in validate_files."""
    check_root(root)
    result = validate_files(root, tree_files(root), conformance, base, now=now, reuse=reuse)
    if result.model is not None:
        result.findings.extend(check_repository(root, result.model))
        result.findings.sort(key=Finding.sort_key)
    return result


def validate_files(root: Path, files: list[SourceFile], conformance: bool = True,
                   base: Model | None = None, *, now: datetime | None = None, reuse: Parsed | None = None
                   ) -> Validation:
    """Validate declaration files from any source (working tree or a git revision); `base` and `now` as in
    validate_repo. `reuse`: another validation's `parsed`, whose files with the same text are not parsed again."""
    with gc_paused():
        return _validate(root, files, conformance, base, now, reuse)


def _validate(root: Path, files: list[SourceFile], conformance: bool, base: Model | None = None,
              now: datetime | None = None, reuse: Parsed | None = None) -> Validation:
    loaded = load_files(files, reuse)
    result = Validation(root, loaded.files, list(loaded.findings), parsed=loaded.parsed)
    for doc in loaded.documents:
        result.findings.extend(check_document(doc))
    if result.errors:
        result.findings.sort(key=Finding.sort_key)
        return result
    model, duplicates = build_model(loaded.documents)
    model.now = now
    result.findings.extend(duplicates)
    result.findings.extend(run_policy(model, base))
    result.model = model
    if conformance and not result.errors:
        for cluster in model.cluster_names():
            result.compiled[cluster] = compile(model, cluster=cluster)
            result.findings.extend(check_objects(result.compiled[cluster]))
            result.findings.extend(check_adoption(model.cluster(cluster), result.compiled[cluster]))
    result.findings.sort(key=Finding.sort_key)
    return result
