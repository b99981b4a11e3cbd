"""One supervised process of the living sandbox: spawn, wait until healthy, report, stop.

Every component (kube-apiserver, kube-scheduler, kube-controller-manager, Kueue, KWOK) runs as
its own process group with its log in the sandbox directory, so ``stop()`` can
end it and everything it started, and a component that died is reported with
its exit code and the last lines of its log instead of silently missing.
"""

from __future__ import annotations

import contextlib
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpugov.sandbox.processes import ProcessError, log_tail, process_alive, spawn, terminate_group


class ComponentError(ProcessError):
    """A sandbox component failed to start, became unhealthy or died."""


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
        self._process = spawn([str(self.binary), *self.args], self.log_path, self.cwd, detach)
        self.pid = self._process.pid

    def alive(self) -> bool:
        if self._process is not None:
            return self._process.poll() is None
        return self.pid is not None and process_alive(self.pid)

    def exit_code(self) -> int | None:
        """The exit code of a component this process started and that has ended."""
        return None if self._process is None else self._process.poll()

    def healthy(self, timeout: float = 2.0) -> bool:
        return self._probe(timeout) is None

    def _probe(self, timeout: float) -> str | None:
        """None when the health URL answers 2xx, else what it answered instead (for reports)."""
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        try:
            with urllib.request.urlopen(self.health_url, context=context, timeout=timeout) as response:
                return None if 200 <= int(response.status) < 300 else f"HTTP {response.status}"
        except urllib.error.HTTPError as exc:  # e.g. the apiserver's 500 while its post-start hooks run
            return exc.read().decode(errors="replace")[-2000:] or f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            return str(exc)

    def wait_healthy(self, timeout: float) -> None:
        """Poll the health URL; fail at once, with the log tail, if the process exits."""
        deadline = time.monotonic() + timeout
        last = "no response yet"
        while time.monotonic() < deadline:
            if not self.alive():
                raise ComponentError(self.death_report())
            answer = self._probe(timeout=2.0)
            if answer is None:
                return
            last = answer
            time.sleep(0.25)
        raise ComponentError(
            f"{self.name} not healthy after {timeout:.0f}s ({self.health_url}); last answer: {last}\n"
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
