"""What a policy check is, and the decorators that mark one where it is written.

Marking registers nothing: `gpugov.policy.FAMILIES` names every family module, and a family's checks
are the functions it defines with `@check` or `@change_check`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import ModuleType

from gpugov.declarations.model import Model
from gpugov.findings import Finding

Check = Callable[[Model], Iterable[Finding]]
ChangeCheck = Callable[[Model, Model | None], Iterable[Finding]]

_KIND = "policy_check"  # the attribute the decorators set: "model" or "change"


def check(function: Check) -> Check:
    """A check called with the model."""
    setattr(function, _KIND, "model")
    return function


def change_check(function: ChangeCheck) -> ChangeCheck:
    """A check called with the head's model and the base's (None when no base is known)."""
    setattr(function, _KIND, "change")
    return function


def _marked(family: ModuleType, kind: str) -> list[Callable[..., Iterable[Finding]]]:
    # Only what the family defines: a check imported from another family is that family's.
    return [value for value in vars(family).values()
            if getattr(value, _KIND, None) == kind and getattr(value, "__module__", None) == family.__name__]


def model_checks(family: ModuleType) -> list[Check]:
    """The family's `@check` functions, in the order it defines them."""
    return _marked(family, "model")


def change_checks(family: ModuleType) -> list[ChangeCheck]:
    """The family's `@change_check` functions, in the order it defines them."""
    return _marked(family, "change")
