"""The application layer: the one road from a repository to desired state: a revision read and
validated (revision.py), a cluster's desired state from it (desired.py), the validation pipeline
under both (pipeline.py) and the exit codes of every command (exit.py).

Names are imported lazily (PEP 562): every command imports ExitCode from here, and the CLI's
parser must not pay for the declarations, jsonschema and the compiler to print --help.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpugov.app.exports import lazy_exports

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

__getattr__ = lazy_exports(__name__, _HOMES)
