"""The application layer: the one road from a repository to desired state: a revision read and
validated (revision.py), a cluster's desired state from it (desired.py), the validation pipeline
under both (pipeline.py) and the exit codes of every command (exit.py).

Names are imported lazily (PEP 562): every command imports ExitCode from here, and the CLI's
parser must not pay for the declarations, jsonschema and the compiler to print --help.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpugov.app.desired import DesiredState, desired_state, valid_model
    from gpugov.app.exit import ExitCode
    from gpugov.app.revision import InvalidDeclarations, Revision, read_revision, valid_revision

__all__ = ["DesiredState", "ExitCode", "InvalidDeclarations", "Revision", "desired_state", "read_revision",
           "valid_model", "valid_revision"]
_HOMES = {
    "DesiredState": "gpugov.app.desired",
    "desired_state": "gpugov.app.desired",
    "valid_model": "gpugov.app.desired",
    "ExitCode": "gpugov.app.exit",
    "InvalidDeclarations": "gpugov.app.revision",
    "Revision": "gpugov.app.revision",
    "read_revision": "gpugov.app.revision",
    "valid_revision": "gpugov.app.revision",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
