"""The `gpugov` command: options in, desired state from gpugov.app, findings out.

declarations.py holds the commands on the repository alone, cluster.py those that read or
write a cluster; agent, notify and sandbox register their own. Every command returns an
ExitCode; expected failures are one `gpugov: ...` line, never a traceback.

Start-up is part of every command's time: registering a command imports no more than its options
need (each command imports what it runs on when it runs), and only the command that runs gets a
real parser (gpugov.cli.lazy). tests/unit/test_cli_startup.py keeps it so.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from gpugov import __version__, i18n
from gpugov.agent.cli import register as agent_command
from gpugov.app.exit import ExitCode
from gpugov.cli import cluster, declarations
from gpugov.cli.adopt import register as import_command
from gpugov.cli.budget import register as budget_command
from gpugov.cli.capacity import register as capacity_command
from gpugov.cli.common import CommandFailed, fail
from gpugov.cli.doctor import register as doctor_command
from gpugov.cli.guide import register as guide_command
from gpugov.cli.history import register as history_command
from gpugov.cli.init import register as init_command
from gpugov.cli.lazy import CommandParsers, NotBuilt
from gpugov.cli.monitoring import register as monitoring_command
from gpugov.cli.profile import register as profile_command
from gpugov.cli.queue import register as queue_commands
from gpugov.cli.reclaim import register as reclaim_command
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


def build_parser(built: Collection[str] | None = None) -> argparse.ArgumentParser:
    """gpugov's parser; with `built`, only those commands get a real parser (the others parse nothing
    but still show in the help and in the choices of an error)."""
    parser = Parser(
        prog="gpugov",
        description="GitOps governance for shared GPU clusters: validate declarations, render scheduler objects.",
        epilog="Exit codes: 0 ok, 1 findings at error level (or drift, a risky plan), 2 bad usage or "
        "unreadable input, 3 could not check.",
        top=True,
    )
    parser.add_argument("--version", action="version", version=f"gpugov {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", action=CommandParsers, built=built)
    sub.required = True
    declarations.register(sub)
    cluster.register(sub)
    capacity_command(sub)
    queue_commands(sub)
    usage_command(sub)
    budget_command(sub)
    doctor_command(sub)
    whatif_commands(sub)
    reclaim_command(sub)
    monitoring_command(sub)
    profile_command(sub)
    history_command(sub)
    import_command(sub)
    init_command(sub)
    guide_command(sub)
    agent_command(sub)
    notify_command(sub)
    sandbox_command(sub)
    completion_command(sub)
    return parser


class Parser(argparse.ArgumentParser):
    """gpugov's parsers: every one, the top and each command's (nested ones too: argparse makes them
    of the class of their parent), takes --lang, so it may come before or after the command."""

    def __init__(self, *args: Any, top: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument("--lang", dest="ui_language", metavar="LANG", type=language,
                          default=None if top else argparse.SUPPRESS,  # a command's leaves the top's value
                          help="language of the messages for people: en or zh_CN (default: from LC_ALL, "
                          "LC_MESSAGES or LANG); rule ids, locations and JSON stay English")


def language(text: str) -> str:
    """An argparse type: a locale name gpugov has messages in (zh, zh_CN.UTF-8, en, C)."""
    found = i18n.normalize(text)
    if found is None:
        raise argparse.ArgumentTypeError(f"no messages in {text!r}: choose {' or '.join(i18n.LANGUAGES)}")
    return found


def completion_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or tcsh)",
        description="Print a completion script for gpugov's commands and options, e.g. "
        "`gpugov completion bash > /etc/bash_completion.d/gpugov` or, for zsh, "
        "`gpugov completion zsh > \"${fpath[1]}/_gpugov\"`.",
    )
    p.add_argument("shell", nargs="?", choices=("bash", "zsh", "tcsh"))
    p.add_argument("--names", choices=("clusters", "tenants"),
                   help="print the declared clusters or tenants of REPO, one a line (what the scripts complete "
                   "--cluster and --tenant with; silent when REPO does not validate)")
    p.add_argument("--repo", default=".", help="repository root for --names (default: .)")
    p.set_defaults(func=cmd_completion)


# Shell functions the scripts call to complete --cluster and --tenant from the repository in the
# current directory: `gpugov completion --names ...` reads the declarations (bash prints candidates
# for the word being completed, zsh adds them).
NAME_FUNCTIONS = {
    "bash": "_gpugov_{what}() {{ compgen -W \"$(gpugov completion --names {what} 2>/dev/null)\" -- \"$1\"; }}\n",
    "zsh": "_gpugov_{what}() {{ compadd -- $(gpugov completion --names {what} 2>/dev/null) }}\n",
}
NAMED_OPTIONS = {"--cluster": "clusters", "--tenant": "tenants"}


def _complete_names(parser: argparse.ArgumentParser) -> None:
    """Point every --cluster and --tenant option, in every subcommand, at the name functions."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _complete_names(sub)
        for option in action.option_strings:
            if option in NAMED_OPTIONS:
                what = NAMED_OPTIONS[option]
                action.complete = {"bash": f"_gpugov_{what}", "zsh": f"_gpugov_{what}"}  # type: ignore[attr-defined]


def cmd_completion(args: argparse.Namespace) -> ExitCode:
    if args.names:
        return _print_names(args.names, args.repo)
    if args.shell is None:
        return fail("completion: name a shell (bash, zsh or tcsh), or --names clusters|tenants")
    import shtab

    root = build_parser()  # every command's options: the script completes them all
    _complete_names(root)
    preamble = "".join(NAME_FUNCTIONS[args.shell].format(what=w) for w in ("clusters", "tenants")) \
        if args.shell in NAME_FUNCTIONS else ""
    sys.stdout.write(shtab.complete(root, shell=args.shell, preamble=preamble or None))
    return ExitCode.OK


def _print_names(what: str, repo: str) -> ExitCode:
    from gpugov.app.pipeline import InputError
    from gpugov.app.revision import read_revision

    try:
        model = read_revision(Path(repo)).model
    except InputError:
        return ExitCode.OK  # completion stays silent
    if model is not None:
        names = model.cluster_names() if what == "clusters" else sorted(model.tenants)
        sys.stdout.write("".join(f"{name}\n" for name in names))
    return ExitCode.OK


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The options of the command on the command line. The first parse builds no command's parser:
    --help, --version and a missing or unknown command end there; otherwise it finds the command
    and the second builds just that one."""
    try:
        return build_parser(built=()).parse_args(argv)
    except NotBuilt as chosen:
        return build_parser(built=(chosen.command,)).parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    i18n.use(args.ui_language or i18n.from_environment(os.environ))
    try:
        return int(args.func(args))
    except CommandFailed as exc:
        return int(fail(exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc), exc.code))
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
