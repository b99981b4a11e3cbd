"""The `gpugov` command: options in, desired state from gpugov.app, findings out.

declarations.py holds the commands on the repository alone, cluster.py those that read or
write a cluster; agent, notify and sandbox register their own. Every command returns an
ExitCode; expected failures are one `gpugov: ...` line, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gpugov import __version__
from gpugov.agent.cli import register as agent_command
from gpugov.app.exit import ExitCode
from gpugov.cli import cluster, declarations
from gpugov.cli.capacity import register as capacity_command
from gpugov.cli.common import CommandFailed, fail
from gpugov.cli.doctor import register as doctor_command
from gpugov.cli.queue import register as queue_commands
from gpugov.cli.usage import register as usage_command
from gpugov.cli.whatif import register as whatif_commands
from gpugov.notify.cli import register as notify_command
from gpugov.sandbox.cli import register as sandbox_command

# The extra that installs each optional top-level module.
EXTRA_OF_MODULE = {
    "kubernetes": "cluster",
    "cryptography": "cluster",
    "urllib3": "cluster",
    "requests": "notify",
    "pulumi": "deploy",
    "pulumi_kubernetes": "deploy",
    "pynvml": "agent",
    "prometheus_client": "agent",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpugov",
        description="GitOps governance for shared GPU clusters: validate declarations, render scheduler objects.",
        epilog="Exit codes: 0 ok, 1 findings at error level (or drift, a risky plan), 2 bad usage or "
        "unreadable input, 3 could not check.",
    )
    parser.add_argument("--version", action="version", version=f"gpugov {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    declarations.register(sub)
    cluster.register(sub)
    capacity_command(sub)
    queue_commands(sub)
    usage_command(sub)
    doctor_command(sub)
    whatif_commands(sub)
    agent_command(sub)
    notify_command(sub)
    sandbox_command(sub)
    completion_command(sub, parser)
    return parser


def completion_command(sub: argparse._SubParsersAction, root: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or tcsh)",
        description="Print a completion script for gpugov's commands and options, e.g. "
        "`gpugov completion bash > /etc/bash_completion.d/gpugov` or, for zsh, "
        "`gpugov completion zsh > \"${fpath[1]}/_gpugov\"`.",
    )
    p.add_argument("shell", choices=("bash", "zsh", "tcsh"))
    p.set_defaults(func=lambda args: cmd_completion(args, root))


def cmd_completion(args: argparse.Namespace, root: argparse.ArgumentParser) -> ExitCode:
    import shtab

    sys.stdout.write(shtab.complete(root, shell=args.shell))
    return ExitCode.OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except CommandFailed as exc:
        return int(fail(str(exc), exc.code))
    except ModuleNotFoundError as exc:
        extra = EXTRA_OF_MODULE.get((exc.name or "").split(".")[0])
        if extra is None:
            raise  # not an optional dependency: a bug, and its traceback is what we need
        return int(fail(f"{args.command} needs the '{extra}' extra: pip install 'gpugov[{extra}]' "
                        f"(module {exc.name} is not installed)"))
    except KeyboardInterrupt:
        return int(fail("interrupted", ExitCode.INTERRUPTED))
    except BrokenPipeError:
        return int(ExitCode.OK)
