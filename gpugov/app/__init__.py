"""The application layer: the one road from a repository to desired state: a revision read and
validated (revision.py), a cluster's desired state from it (desired.py), the validation pipeline
under both (pipeline.py) and the exit codes of every command (exit.py)."""

from __future__ import annotations

from gpugov.app.desired import DesiredState, desired_state, valid_model
from gpugov.app.exit import ExitCode
from gpugov.app.revision import InvalidDeclarations, Revision, read_revision, valid_revision

__all__ = ["DesiredState", "ExitCode", "InvalidDeclarations", "Revision", "desired_state", "read_revision",
           "valid_model", "valid_revision"]
