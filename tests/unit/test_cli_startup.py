"""The CLI starts at once: building gpugov's parser (every command's options, what `gpugov --help`
and the completion scripts need) imports no command's heavy modules; each command imports
them when it runs; and a run builds the parser of its own command only, with every help text
as the whole parser has it (issue #29)."""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from gpugov.cli import build_parser, parse
from gpugov.cli.lazy import StandIn
from tests.helpers.repos import REPO

# What the parser must not import: the cluster client, YAML and schema libraries, and the modules
# of the commands themselves (the compiler, the simulators, the readers of a cluster).
HEAVY = (
    "kubernetes", "urllib3", "requests", "yaml", "jsonschema", "jsonschema_rs", "shtab", "pynvml",
    "prometheus_client", "pulumi",
    "gpugov.app.desired", "gpugov.app.revision", "gpugov.app.pipeline", "gpugov.declarations",
    "gpugov.compile", "gpugov.compile.admission", "gpugov.policy", "gpugov.manifests", "gpugov.plan",
    "gpugov.drift", "gpugov.queueing", "gpugov.whatif", "gpugov.capacity", "gpugov.usage", "gpugov.doctor",
    "gpugov.cluster", "gpugov.sources", "gpugov.adopt", "gpugov.rules", "gpugov.catalog", "gpugov.agent.nvml",
    "gpugov.agent.server", "gpugov.sandbox.cluster", "gpugov.sandbox.controlplane",
    # the sinks (HTTP, signing, e-mail dates, logging) and the deduplication store behind --notify,
    # the findings behind --format, and the standard library they pulled in
    "gpugov.findings", "gpugov.notify.config", "gpugov.notify.sinks", "gpugov.notify.transport",
    "gpugov.notify.dispatch", "gpugov.notify.dedup", "gpugov.notify.redact", "gpugov.kube",
    "email", "logging", "tempfile", "hashlib", "socket", "subprocess", "threading",
)
# Not built when only the list of commands is printed, nor for another command than init: init's
# defaults come from the scaffold, a dataclass (dataclasses imports inspect, ast, tokenize...).
HEAVY_FOR_ONE_COMMAND = ("gpugov.scaffold", "dataclasses", "inspect")


def loaded_after(code: str) -> set[str]:
    """The modules (and their packages' submodules) in sys.modules after `code`, in a fresh interpreter."""
    program = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True, cwd=REPO)
    return set(json.loads(done.stdout.splitlines()[-1]))


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(h for h in HEAVY if any(m == h or m.startswith(h + ".") for m in modules))


def test_building_the_parser_imports_no_heavy_module() -> None:
    modules = loaded_after("from gpugov.cli import build_parser\nbuild_parser()")
    assert "gpugov.cli.whatif" in modules and "gpugov.sandbox.cli" in modules  # every command registered
    assert heavy_in(modules) == []


def test_help_reads_only_its_own_commands_choices() -> None:
    top = loaded_after("from gpugov.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n")
    assert heavy_in(top) == []
    assert {m for m in HEAVY_FOR_ONE_COMMAND if m in top} == set()
    queue = loaded_after("from gpugov.cli import main\ntry:\n    main(['queue', '--help'])\nexcept SystemExit:\n"
                         "    pass\n")
    # queue's own help lists its --format and --backend choices, read from where they are defined...
    assert {"gpugov.queueing", "gpugov.compile"} <= set(heavy_in(queue))
    # ...and nothing of the other commands, nor the cluster client
    assert {"kubernetes", "urllib3", "gpugov.whatif", "gpugov.capacity", "gpugov.cluster", "gpugov.doctor",
            "gpugov.agent.nvml"}.isdisjoint(heavy_in(queue))


def test_the_check_can_fail() -> None:
    # A command that imports its modules at registration is caught: the parser loads the simulator.
    modules = loaded_after("from gpugov.cli import build_parser\nbuild_parser()\nimport gpugov.whatif.replay")
    assert "gpugov.whatif" in heavy_in(modules)


def test_validate_does_not_import_the_cluster_client_nor_other_commands() -> None:
    modules = loaded_after(
        "from gpugov.cli import main\n"
        f"main(['validate', {str(REPO)!r}, '--format', 'json'])\n"
    )
    assert "gpugov.declarations" in modules  # it did validate
    assert {"kubernetes", "urllib3", "jsonschema", "gpugov.whatif", "gpugov.queueing", "gpugov.capacity",
            "gpugov.cluster", "gpugov.agent.nvml"}.isdisjoint(heavy_in(modules))


def test_the_start_of_validate_imports_nothing_of_it() -> None:
    # what runs before validate's own work: the parser with validate's options, the options parsed
    modules = loaded_after(f"from gpugov.cli import parse\nparse(['validate', {str(REPO)!r}])")
    assert heavy_in(modules) == []
    assert {m for m in HEAVY_FOR_ONE_COMMAND if m in modules} == set()
    init = loaded_after("from gpugov.cli import parse\nparse(['init', 'out'])")
    assert {"gpugov.scaffold", "dataclasses"} <= init  # the check can fail: init's own parser reads them


def parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every (sub)command's parser, by its words: ("sandbox", "up")."""
    yield path, parser
    if isinstance(parser, StandIn):
        return
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, (*path, name))


WHOLE = dict(parsers(build_parser()))
COMMANDS = sorted({path[0] for path in WHOLE if path})


def test_the_list_of_commands_is_the_whole_parsers() -> None:
    alone = build_parser(built=())
    assert alone.format_help() == WHOLE[()].format_help()
    assert all(isinstance(p, StandIn) for path, p in parsers(alone) if path)  # and nothing else was built


@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_built_alone_has_the_whole_parsers_help(command: str) -> None:
    alone = dict(parsers(build_parser(built=(command,))))
    mine = {path: p for path, p in alone.items() if path[:1] == (command,)}
    assert sorted(mine) == sorted(path for path in WHOLE if path[:1] == (command,))
    for path, p in mine.items():
        assert p.format_help() == WHOLE[path].format_help(), path
    assert all(isinstance(p, StandIn) for path, p in alone.items() if path and path[0] != command)


@pytest.mark.parametrize("argv", [
    ["validate", "repo", "--strict"],
    ["--lang", "zh_CN", "validate", "repo"],
    ["--lang=en", "validate", "repo"],
    ["--la", "zh", "drift", "--notify", "slack", "--notify-window", "2h"],
    ["sandbox", "jobs", "--until", "admitted"],
    ["trace", "synth", "--jobs", "5"],
    ["queue", "--tenant", "a", "--tenant", "b", "--page-size", "7"],
])
def test_parse_finds_the_command_as_the_whole_parser_does(argv: list[str]) -> None:
    def plain(args: argparse.Namespace) -> dict[str, Any]:  # a partial (sandbox's commands) by what it calls
        return {k: (v.func, v.args) if isinstance(v, functools.partial) else v for k, v in vars(args).items()}

    assert plain(parse(argv)) == plain(build_parser().parse_args(argv))


@pytest.mark.parametrize("argv", [["--help"], ["--version"], [], ["no-such-command"], ["validate", "--help"],
                                  ["validate", "--no-such-option"], ["--lang", "xx", "validate"]])
def test_parse_prints_and_exits_as_the_whole_parser_does(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as whole:
        build_parser().parse_args(argv)
    expected = capsys.readouterr()
    with pytest.raises(SystemExit) as lazy:
        parse(argv)
    assert (lazy.value.code, capsys.readouterr()) == (whole.value.code, expected)


def test_the_notify_options_keep_the_librarys_window_and_sinks() -> None:
    from gpugov.notify.config import spec_help
    from gpugov.notify.dispatch import DEFAULT_WINDOW

    args = parse(["drift"])
    assert args.notify_window == DEFAULT_WINDOW  # the "24h" default, parsed
    notify = next(a for a in WHOLE[("drift",)]._actions if a.dest == "notify")
    assert notify.help.endswith(f"; {spec_help()}") and "$GPUGOV_NOTIFY" in notify.help
