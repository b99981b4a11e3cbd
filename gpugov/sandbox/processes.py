"""Process supervision for the sandbox: spawn a server in its own process group, tell whether it
still runs, end its group, pick loopback ports, and undo a half-finished start-up.

Every sandbox process (the apiserver and each component) is started and stopped through here,
so a server never outlives a test runner killed hard and a stop ends everything it started.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

_LOG_TAIL_LINES = 40


class ProcessError(RuntimeError):
    """A sandbox process failed to start, become ready or stop."""


@contextlib.contextmanager
def all_or_nothing(stop: Callable[[], None], detach: bool) -> Iterator[None]:
    """Run a start-up: on any failure (Ctrl-C included) stop what it started and re-raise, so
    nothing is left half-started; what is not detached is stopped when the interpreter exits."""
    try:
        yield
    except BaseException:
        stop()
        raise
    if not detach:
        atexit.register(stop)


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports (kept bound together so they differ)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def log_tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    """Last lines of a log file, for error messages."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def spawn(argv: Sequence[str], log_path: Path, cwd: Path | None, detach: bool) -> subprocess.Popen[bytes]:
    """Start ``argv`` with stdout and stderr appended to ``log_path``.

    Own session => own process group: ``terminate_group`` can signal the whole group, and a
    Ctrl-C in the terminal does not hit the server directly. Unless detached, the child gets
    SIGTERM when this process dies (Linux, where gRPC is not loaded:
    `_forking_is_unsafe`).
    """
    log: IO[bytes]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=None if detach or sys.platform != "linux" or _forking_is_unsafe() else _set_parent_death_signal,
        )


def _forking_is_unsafe() -> bool:
    """A preexec_fn makes subprocess fork() where it would otherwise vfork(), and fork() runs the
    libraries' at-fork handlers in the child. gRPC's (loaded by Pulumi) restart its poller threads
    there, and the child's closing of inherited descriptors before exec can close their epoll
    descriptor under them: the child aborts (SIGABRT, `epoll_wait error: Bad file descriptor` in the
    server's log). Where gRPC is loaded the server starts without the parent-death signal."""
    return "grpc" in sys.modules


def _set_parent_death_signal() -> None:
    """Runs in the child before exec: get SIGTERM if the parent dies (Linux only).

    A safety net for a test runner that is killed hard (SIGKILL, CI timeout)
    and so never runs its finalizers: the server then stops instead of
    lingering as an orphan that holds ports.
    """
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def process_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    with contextlib.suppress(OSError):
        # Field 3 is the state; "Z" = exited but not yet reaped by its parent.
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def terminate_group(pid: int, timeout: float = 30.0, wait: Any = None) -> None:
    """SIGTERM the process group led by ``pid``; SIGKILL it after ``timeout``.

    ``wait`` (Popen.wait) reaps our own child; for a detached server started
    by an earlier command, liveness is polled instead.
    """
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    if _wait_gone(pid, timeout, wait):
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    if not _wait_gone(pid, 10.0, wait):
        raise ProcessError(f"process {pid} survived SIGKILL")


def _wait_gone(pid: int, timeout: float, wait: Any) -> bool:
    if wait is not None:
        try:
            wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not process_alive(pid):
            return True
        time.sleep(0.1)
    return False
