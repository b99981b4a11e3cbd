"""A cluster's desired state: the working tree's revision (app/revision.py), refused on errors,
and the objects of one resolved scope. Every command and the Pulumi program take it; none
repeats its steps."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from gpugov.app.pipeline import InputError, Validation, gc_paused
from gpugov.app.revision import InvalidDeclarations, valid_revision
from gpugov.compile import Backend, CompileError, Scope, compile_scope, select
from gpugov.declarations.model import Model
from gpugov.declarations.timeline import model_at
from gpugov.findings import Finding, Level
from gpugov.kube.objects import Object
from gpugov.policy.conformance import check_objects


@dataclass(frozen=True)
class DesiredState:
    model: Model
    scope: Scope  # the cluster and backend, resolved once
    objects: list[Object]
    validation: Validation

    @property
    def cluster(self) -> str:
        return self.scope.cluster.name

    @property
    def backend(self) -> Backend:
        return self.scope.backend

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.validation.findings if f.level is Level.WARNING]


def valid_model(root: Path, now: datetime | None = None) -> tuple[Model, Validation]:
    """The model of a working tree that validates; InputError or InvalidDeclarations otherwise."""
    revision = valid_revision(root, now=now)
    assert revision.model is not None  # valid_revision refuses a revision without one
    return revision.model, revision.validation


def desired_state(root: Path, *, cluster: str | None = None, backend: str | None = None,
                  at: datetime | None = None) -> DesiredState:
    """Compile's objects for one cluster of a valid working tree, at the instant `at` where quotas
    change with time (QuotaGrant, QuotaWindow; None: as declared, no grant or window applied).

    Raises InputError (no readable repository), InvalidDeclarations (findings at error level,
    or objects that break a conformance rule under another backend) or CompileError (an
    unknown cluster or backend)."""
    model, validation = valid_model(root, at)
    if at is not None and model.has_timeline:
        model = model_at(model, at)
    scope = select(model, cluster=cluster, backend=backend)
    if (scope.backend == scope.cluster.backend and scope.cluster.name in validation.compiled
            and model.instant is None):
        objects = validation.compiled.pop(scope.cluster.name)  # validate compiled and checked them
    else:
        with gc_paused():  # a large acyclic tree, built while the model is alive: see gc_paused
            objects = compile_scope(scope)
        problems = check_objects(objects)
        if problems:
            raise InvalidDeclarations(validation, problems)
    return DesiredState(model, scope, objects, validation)


__all__ = ["CompileError", "DesiredState", "InputError", "InvalidDeclarations", "desired_state", "valid_model"]
