"""Subcommand parsers built only for the command that runs.

Every command module registers its parsers (`sub.add_parser(...)`, then its options). Building all of
them costs more than the rest of `gpugov --help` (argparse looks up its own message catalogue and the
terminal's width for each parser and option), yet a run needs one: the list of commands in the top
help comes from the names and help texts alone. CommandParsers records every name and help text as
argparse does, and gives the commands not wanted a stand-in that takes their options and keeps none.

gpugov.cli.main parses once with every command a stand-in; argparse itself finds the command word
(abbreviated options, `--lang=...`, `--` and all), and choosing a stand-in raises NotBuilt, after
which main parses again with that command built. `gpugov --help`, `--version` and usage errors
never get that far.
"""

from __future__ import annotations

import argparse
from collections.abc import Collection
from typing import Any


class NotBuilt(Exception):
    """The command chosen on the command line has a stand-in parser: build it and parse again."""

    def __init__(self, command: str) -> None:
        super().__init__(command)
        self.command = command


class StandIn:
    """A parser (or group, action, nested subparsers) that accepts every call and keeps nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> StandIn:
        return self

    def __getattr__(self, name: str) -> StandIn:
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        pass  # e.g. lazy_choices setting an option's choices, `actions.required = True`


class CommandParsers(argparse._SubParsersAction):
    """The root's subparsers: real parsers only for the commands in `built` (every one when None)."""

    def __init__(self, *args: Any, built: Collection[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.built = built

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        if self.built is None or name in self.built:
            return super().add_parser(name, **kwargs)
        # argparse's own bookkeeping (the name, its help line, the choices an error lists), a stand-in parser
        real, self._parser_class = self._parser_class, StandIn
        try:
            return super().add_parser(name, **kwargs)
        finally:
            self._parser_class = real

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if isinstance(self._name_parser_map.get(values[0]), StandIn):
            raise NotBuilt(values[0])
        super().__call__(parser, namespace, values, option_string)


def is_built(parser: Any) -> bool:
    """Whether `parser` is a command's real parser (a register function may skip work for a stand-in)."""
    return not isinstance(parser, StandIn)
