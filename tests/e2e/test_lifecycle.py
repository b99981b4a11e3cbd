"""Starting and stopping a ControlPlane leaves no process and no files behind.

Each case runs the ControlPlane in a separate Python process, so the checks
see exactly what that process leaves behind after it exits.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpugov.sandbox.processes import process_alive
from gpugov.sandbox.tools import repo_root

# Started in a child interpreter: argv = MODE BINARY. Prints {"pid", "workdir"}
# once the server is ready. crd_dirs=[] keeps it quick: CRDs are not the point.
_CHILD = """
import json, sys, time
from pathlib import Path
from gpugov.sandbox import ControlPlane

mode, binary = sys.argv[1], Path(sys.argv[2])
cp = ControlPlane(binary=binary, crd_dirs=[])
with cp:
    print(json.dumps({"pid": cp.pid, "workdir": str(cp.workdir)}), flush=True)
    if mode == "fail":
        raise RuntimeError("simulated test failure")
    if mode == "hang":
        time.sleep(600)
"""


def _start_child(mode: str, binary: Path) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(repo_root())}
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, mode, str(binary)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    if not line:
        child.wait(timeout=30)
        pytest.fail(f"child did not start a control plane:\n{child.stderr.read() if child.stderr else ''}")
    return child, json.loads(line)


def _wait_gone(pid: int, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not process_alive(pid):
            return True
        time.sleep(0.1)
    return False


def _kill_if_alive(pid: int) -> None:
    if process_alive(pid):
        os.killpg(pid, signal.SIGKILL)


@pytest.mark.parametrize("mode", ["clean", "fail"])
def test_stop_leaves_no_process_and_no_workdir(controlplane_binary_path: Path, mode: str) -> None:
    child, info = _start_child(mode, controlplane_binary_path)
    try:
        _, stderr = child.communicate(timeout=60)
        assert child.returncode == (0 if mode == "clean" else 1), stderr
        if mode == "fail":
            assert "simulated test failure" in stderr
        assert _wait_gone(info["pid"], timeout=5), f"server pid {info['pid']} still alive"
        assert not Path(info["workdir"]).exists(), f"{info['workdir']} left behind"
    finally:
        _kill_if_alive(info["pid"])
        shutil.rmtree(info["workdir"], ignore_errors=True)


@pytest.mark.skipif(sys.platform != "linux", reason="parent-death signal is Linux-only")
def test_server_stops_when_its_python_parent_is_killed(controlplane_binary_path: Path) -> None:
    # SIGKILL skips every finalizer: only the parent-death signal can stop the server.
    child, info = _start_child("hang", controlplane_binary_path)
    try:
        child.kill()
        child.communicate(timeout=30)
        assert _wait_gone(info["pid"]), f"orphaned server pid {info['pid']} still alive"
    finally:
        _kill_if_alive(info["pid"])
        # A SIGKILLed owner cannot remove its temp dir; that is the one leftover.
        shutil.rmtree(info["workdir"], ignore_errors=True)
