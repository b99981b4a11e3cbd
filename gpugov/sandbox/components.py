"""One supervised process of the living sandbox: spawn, wait until healthy, report, stop.

Every component (kube-scheduler, kube-controller-manager, Kueue, KWOK) runs as
its own process group with its log in the sandbox directory, so ``stop()`` can
end it and everything it started, and a component that died is reported with
its exit code and the last lines of its log instead of silently missing.
"""

from __future__ import annotations

import contextlib
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from gpugov.sandbox.controlplane import ControlPlaneError, log_tail, process_alive, terminate_group


class ComponentError(ControlPlaneError):
    """A sandbox component failed to start, became unhealthy or died."""


def _set_parent_death_signal() -> None:
    """In the child before exec: SIGTERM when the parent dies (a test runner killed hard)."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


@dataclass
class Component:
    """A process and the URL that says it is healthy.

    ``health_url`` is polled without client certificates and without verifying
    the server (the components serve self-signed health endpoints on loopback);
    any 2xx answer means healthy.
    """

    name: str
    binary: Path
    args: Sequence[str]
    log_path: Path
    health_url: str
    version: str = ""
    cwd: Path | None = None
    pid: int | None = None
    recorded_pid: int | None = None  # a detached component's pid as recorded, for reports
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self, detach: bool = False) -> None:
        if self._process is not None or self.pid is not None:
            raise ComponentError(f"{self.name} already started")
        log: IO[bytes]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                [str(self.binary), *self.args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                start_new_session=True,
                preexec_fn=None if detach or sys.platform != "linux" else _set_parent_death_signal,
            )
        self.pid = self._process.pid

    def alive(self) -> bool:
        if self._process is not None:
            return self._process.poll() is None
        return self.pid is not None and process_alive(self.pid)

    def exit_code(self) -> int | None:
        """The exit code of a component this process started and that has ended."""
        return None if self._process is None else self._process.poll()

    def healthy(self, timeout: float = 2.0) -> bool:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        try:
            with urllib.request.urlopen(self.health_url, context=context, timeout=timeout) as response:
                return 200 <= int(response.status) < 300
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def wait_healthy(self, timeout: float) -> None:
        """Poll the health URL; fail at once, with the log tail, if the process exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise ComponentError(self.death_report())
            if self.healthy():
                return
            time.sleep(0.25)
        raise ComponentError(
            f"{self.name} not healthy after {timeout:.0f}s ({self.health_url})\n"
            f"--- last lines of {self.log_path} ---\n{log_tail(self.log_path)}"
        )

    def death_report(self) -> str:
        code = self.exit_code()
        how = f"exited with code {code}" if code is not None else "is not running"
        return f"{self.name} (pid {self.pid or self.recorded_pid}) {how}\n--- last lines of {self.log_path} ---\n{log_tail(self.log_path)}"

    def stop(self, timeout: float = 20.0) -> None:
        """End the component's process group. Idempotent."""
        if self.pid is None:
            return
        wait = self._process.wait if self._process is not None else None
        with contextlib.suppress(ProcessLookupError):
            terminate_group(self.pid, timeout=timeout, wait=wait)
        self._process = None
        self.pid = None
