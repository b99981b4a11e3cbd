"""The one road from a repository to a cluster's desired state: validate, refuse on errors,
compile. Every command and the Pulumi program take it; none repeats its steps."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpugov.app.exit import ExitCode
from gpugov.app.pipeline import InputError, Validation, gc_paused, validate_repo
from gpugov.compile import CompileError, compile, select
from gpugov.declarations.model import Model
from gpugov.findings import Finding, Level
from gpugov.kube.objects import Object
from gpugov.policy.conformance import check_objects


class InvalidDeclarations(Exception):
    """The declarations have errors (or cannot be read); nothing may be derived from them."""

    def __init__(self, validation: Validation, findings: list[Finding] | None = None) -> None:
        self.validation = validation
        self.findings = findings if findings is not None else validation.findings
        super().__init__(f"the declarations in {validation.root} have errors (gpugov validate {validation.root} lists them)")

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.USAGE if self.validation.unreadable else ExitCode.FINDINGS


@dataclass(frozen=True)
class DesiredState:
    model: Model
    cluster: str
    backend: str
    objects: list[Object]
    validation: Validation

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.validation.findings if f.level is Level.WARNING]


def valid_model(root: Path) -> tuple[Model, Validation]:
    """The model of a repository that validates; InputError or InvalidDeclarations otherwise."""
    validation = validate_repo(root)
    if validation.errors or validation.unreadable or validation.model is None:
        raise InvalidDeclarations(validation)
    return validation.model, validation


def desired_state(root: Path, cluster: str | None = None, backend: str | None = None) -> DesiredState:
    """Compile's objects for one cluster of a valid repository.

    Raises InputError (no readable repository), InvalidDeclarations (findings at error level,
    or objects that break a conformance rule under another backend) or CompileError (an
    unknown cluster or backend)."""
    model, validation = valid_model(root)
    scope = select(model, cluster, backend)
    if scope.backend == scope.cluster.backend and scope.cluster.name in validation.compiled:
        objects = validation.compiled.pop(scope.cluster.name)  # validate compiled and checked them
    else:
        with gc_paused():  # a large acyclic tree, built while the model is alive: see gc_paused
            objects = compile(model, backend, cluster)
        problems = check_objects(objects)
        if problems:
            raise InvalidDeclarations(validation, problems)
    return DesiredState(model, scope.cluster.name, scope.backend, objects, validation)


__all__ = ["CompileError", "DesiredState", "InputError", "InvalidDeclarations", "desired_state", "valid_model"]
