"""What every command shares: one-line failures, the findings format, the desired state.

Import-light on purpose: every command's options are registered through here before any
command runs, so what a command needs (the declarations, the compiler) is imported when it
runs, and choices owned by a heavy module are read from it only when argparse looks at them.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, overload

from gpugov.app.exit import ExitCode

if TYPE_CHECKING:
    from datetime import datetime

    from gpugov.app.desired import DesiredState, InvalidDeclarations
    from gpugov.declarations.model import Model


class LazyChoices(Sequence[str]):
    """An option's choices kept where they are defined ("gpugov.compile:BACKENDS"), imported the
    first time argparse checks a value or prints them (that command's --help or usage, completion)."""

    def __init__(self, target: str) -> None:
        self.target = target

    @cached_property
    def _choices(self) -> tuple[str, ...]:
        module, _, name = self.target.partition(":")
        return tuple(getattr(importlib.import_module(module), name))

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self._choices[index]

    def __len__(self) -> int:
        return len(self._choices)

    def __iter__(self) -> Iterator[str]:
        return iter(self._choices)

    def __contains__(self, value: object) -> bool:
        return value in self._choices


def lazy_choices(action: argparse.Action, target: str) -> None:
    """Give an option the choices `target` names, read when first needed. Set after add_argument,
    which formats the option's metavar, and so reads its choices, to check it."""
    action.choices = LazyChoices(target)


def backend_arg(parser: argparse.ArgumentParser) -> None:
    """--backend, one of the compiler's backends."""
    lazy_choices(parser.add_argument("--backend", help="scheduler (default: the cluster's declared backend)"),
                 "gpugov.compile:BACKENDS")


def format_arg(parser: argparse.ArgumentParser) -> None:
    """--format of a findings report (validate, drift): one of the reporters' formats."""
    lazy_choices(parser.add_argument("--format", help="output format (github inside GitHub Actions, else text)"),
                 "gpugov.findings.report:FORMATS")


class CommandFailed(Exception):
    """A failure the command reports as one `gpugov: ...` line, with its exit code."""

    def __init__(self, message: str, code: ExitCode = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.code = code


def fail(message: str, code: ExitCode = ExitCode.USAGE) -> ExitCode:
    """`gpugov: message` on stderr, in the reader's language when the message is a Text."""
    from gpugov.i18n import localized

    print(f"gpugov: {localized(message)}", file=sys.stderr)
    return code


def default_format() -> str:
    return "github" if os.environ.get("GITHUB_ACTIONS") == "true" else "text"


def _refused(exc: InvalidDeclarations) -> CommandFailed:
    from gpugov.findings.report import REPORTERS

    sys.stderr.write(REPORTERS["text"](exc.findings, len(exc.validation.files)))
    from gpugov.i18n import Text

    return CommandFailed(Text("refusing to continue: the declarations have errors"), exc.exit_code)


def valid(repo: str) -> Model:
    """The model of a repository that validates; CommandFailed (findings on stderr) otherwise."""
    from gpugov.app.desired import InvalidDeclarations, valid_model
    from gpugov.app.pipeline import InputError

    try:
        return valid_model(Path(repo))[0]
    except InputError as exc:
        raise CommandFailed(str(exc)) from None
    except InvalidDeclarations as exc:
        raise _refused(exc) from None


def desired(args: argparse.Namespace) -> DesiredState:
    """The desired state for --cluster/--backend of args.repo; CommandFailed when there is none."""
    from gpugov.app.desired import InvalidDeclarations, desired_state
    from gpugov.app.pipeline import InputError
    from gpugov.compile import CompileError

    try:
        return desired_state(Path(args.repo), cluster=args.cluster, backend=args.backend, at=instant(args))
    except (InputError, CompileError) as exc:
        raise CommandFailed(exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], str) else str(exc)) from None
    except InvalidDeclarations as exc:
        raise _refused(exc) from None


def compile_target_args(parser: argparse.ArgumentParser) -> None:
    """What to compile: shared by render, apply and drift."""
    parser.add_argument("repo", nargs="?", default=".", help="repository root")
    backend_arg(parser)
    parser.add_argument("--cluster", help="cluster to compile for (needed when several are declared)")
    parser.add_argument("--at", type=at_arg, default=None, metavar="INSTANT",
                        help="the instant quotas are compiled for where QuotaGrants or QuotaWindows are declared: "
                        "now (default) or RFC 3339 with a zone, e.g. 2025-03-01T09:00:00+08:00")


def at_arg(text: str) -> datetime:
    """--at: `now` (the clock, read here once per command) or an RFC 3339 instant with a zone."""
    from datetime import UTC, datetime

    if text == "now":
        return datetime.now(UTC)
    from gpugov.declarations.timeline import parse_instant

    parsed = parse_instant(text)
    if parsed is None:
        raise argparse.ArgumentTypeError(f"{text!r}: not an RFC 3339 instant with a zone (e.g. 2025-03-01T09:00:00Z)")
    return parsed


def instant(args: argparse.Namespace) -> datetime:
    """The instant a command compiles for: --at, else the clock, read once (and kept on args)."""
    from datetime import UTC, datetime

    if getattr(args, "at", None) is None:
        args.at = datetime.now(UTC)
    return args.at


def kubeconfig_args(parser: argparse.ArgumentParser, in_cluster: bool = False) -> None:
    where = "in-cluster, $KUBECONFIG or ~/.kube/config" if in_cluster else "$KUBECONFIG or ~/.kube/config"
    parser.add_argument("--kubeconfig", help=f"kubeconfig file (default: {where})")
    parser.add_argument("--context", help="kubeconfig context")
