"""What every command shares: one-line failures, the findings format, the desired state."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gpugov.app.desired import DesiredState, InvalidDeclarations, desired_state, valid_model
from gpugov.app.exit import ExitCode
from gpugov.app.pipeline import InputError
from gpugov.compile import BACKENDS, CompileError
from gpugov.declarations.model import Model
from gpugov.findings.report import REPORTERS


class CommandFailed(Exception):
    """A failure the command reports as one `gpugov: ...` line, with its exit code."""

    def __init__(self, message: str, code: ExitCode = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.code = code


def fail(message: str, code: ExitCode = ExitCode.USAGE) -> ExitCode:
    print(f"gpugov: {message}", file=sys.stderr)
    return code


def default_format() -> str:
    return "github" if os.environ.get("GITHUB_ACTIONS") == "true" else "text"


def _refused(exc: InvalidDeclarations) -> CommandFailed:
    sys.stderr.write(REPORTERS["text"](exc.findings, len(exc.validation.files)))
    return CommandFailed("refusing to continue: the declarations have errors", exc.exit_code)


def valid(repo: str) -> Model:
    """The model of a repository that validates; CommandFailed (findings on stderr) otherwise."""
    try:
        return valid_model(Path(repo))[0]
    except InputError as exc:
        raise CommandFailed(str(exc)) from None
    except InvalidDeclarations as exc:
        raise _refused(exc) from None


def desired(args: argparse.Namespace) -> DesiredState:
    """The desired state for --cluster/--backend of args.repo; CommandFailed when there is none."""
    try:
        return desired_state(Path(args.repo), cluster=args.cluster, backend=args.backend)
    except (InputError, CompileError) as exc:
        raise CommandFailed(str(exc)) from None
    except InvalidDeclarations as exc:
        raise _refused(exc) from None


def compile_target_args(parser: argparse.ArgumentParser) -> None:
    """What to compile: shared by render, apply and drift."""
    parser.add_argument("repo", nargs="?", default=".", help="repository root")
    parser.add_argument("--backend", choices=BACKENDS, help="scheduler (default: the cluster's declared backend)")
    parser.add_argument("--cluster", help="cluster to compile for (needed when several are declared)")


def kubeconfig_args(parser: argparse.ArgumentParser, in_cluster: bool = False) -> None:
    where = "in-cluster, $KUBECONFIG or ~/.kube/config" if in_cluster else "$KUBECONFIG or ~/.kube/config"
    parser.add_argument("--kubeconfig", help=f"kubeconfig file (default: {where})")
    parser.add_argument("--context", help="kubeconfig context")
