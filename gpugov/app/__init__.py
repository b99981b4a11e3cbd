"""The application layer: the one road from a repository to desired state (desired.py), the
validation pipeline under it (pipeline.py) and the exit codes of every command (exit.py)."""

from __future__ import annotations

from gpugov.app.desired import DesiredState, InvalidDeclarations, desired_state, valid_model
from gpugov.app.exit import ExitCode

__all__ = ["DesiredState", "ExitCode", "InvalidDeclarations", "desired_state", "valid_model"]
