"""The desired state of a revision: the working tree or a git ref, read, validated and compiled
for every cluster in one pass. Every command that reads declarations takes this road (validate,
plan, whatif, trace synth, codeowners --rev, desired_state under render, apply and drift)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from gpugov.app.exit import ExitCode
from gpugov.app.pipeline import InputError, Validation, check_root, validate_files, validate_repo
from gpugov.declarations.loader import Parsed, tree_files
from gpugov.declarations.model import Model
from gpugov.findings import Finding
from gpugov.kube.objects import Object
from gpugov.sources.git import GitError, resolve, revision_files

WORKING_TREE = "working tree"


class InvalidDeclarations(Exception):
    """The declarations have errors (or cannot be read); nothing may be derived from them."""

    def __init__(self, validation: Validation, findings: list[Finding] | None = None,
                 revision: Revision | None = None) -> None:
        self.validation = validation
        self.findings = findings if findings is not None else validation.findings
        self.revision = revision  # the revision refused, when one was read
        super().__init__(f"the declarations in {validation.root} have errors (gpugov validate {validation.root} lists them)")

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.USAGE if self.validation.unreadable else ExitCode.FINDINGS


@dataclass(frozen=True)
class Revision:
    """One revision's declarations: the validation (findings, the model when it loaded) and each
    cluster's objects for its declared backend, compiled and checked once."""

    ref: str | None  # None: the working tree
    commit: str | None
    validation: Validation

    @property
    def label(self) -> str:
        """`working tree`, or the ref and its short commit: `origin/main (1a2b3c4d)`."""
        return WORKING_TREE if self.ref is None or self.commit is None else f"{self.ref} ({self.commit[:8]})"

    @property
    def model(self) -> Model | None:
        return self.validation.model

    @property
    def findings(self) -> list[Finding]:
        return self.validation.findings

    @property
    def compiled(self) -> dict[str, list[Object]]:
        return self.validation.compiled

    @property
    def valid(self) -> bool:
        return not self.validation.errors and self.validation.model is not None


def read_revision(root: Path, ref: str | None = None, *, base: Model | None = None, conformance: bool = True,
                  repository_checks: bool = True, now: datetime | None = None, reuse: Parsed | None = None
                  ) -> Revision:
    """The revision `ref` of the repository at `root` (None: its working tree), validated whatever it
    holds. `base`: the model the revision changes (findings point at the change); `repository_checks`:
    the working tree's own checks (CODEOWNERS, folders gpugov does not read). InputError when there is
    no repository or no such revision. `reuse`: another revision's `validation.parsed`: its files with the
    same text are not parsed again."""
    try:
        if ref is None:
            if repository_checks:
                return Revision(None, None, validate_repo(root, conformance, base, now=now, reuse=reuse))
            check_root(root)
            return Revision(None, None, validate_files(root, tree_files(root), conformance, base, now=now,
                                                    reuse=reuse))
        check_root(root)
        files = revision_files(root, ref)
        commit = resolve(root, ref)
        return Revision(ref, commit, validate_files(root, files, conformance, base, now=now, reuse=reuse))
    except GitError as exc:
        raise InputError(str(exc)) from None


def valid_revision(root: Path, ref: str | None = None, *, base: Model | None = None,
                   repository_checks: bool = True, now: datetime | None = None) -> Revision:
    """As read_revision, but a revision with errors is refused: InvalidDeclarations, which carries it."""
    revision = read_revision(root, ref, base=base, repository_checks=repository_checks, now=now)
    if not revision.valid or revision.validation.unreadable:
        raise InvalidDeclarations(revision.validation, revision=revision)
    return revision


__all__ = ["WORKING_TREE", "InputError", "InvalidDeclarations", "Revision", "read_revision", "valid_revision"]
