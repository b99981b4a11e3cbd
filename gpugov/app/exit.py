"""The exit codes of every gpugov command, in one place."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FINDINGS = 1  # errors in the declarations, drift, a risky plan, a failed send, a component down
    USAGE = 2  # bad usage, unreadable input, a missing extra
    INCOMPLETE = 3  # could not check: an unreachable or partial source never reads as "all is well"
    INTERRUPTED = 130  # Ctrl-C, as shells report SIGINT
