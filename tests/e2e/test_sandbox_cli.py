"""`gpugov sandbox up|status|jobs|down` as a user runs them, in an isolated cache dir.

The example org's GPU servers become KWOK nodes, the org is applied with `gpugov apply`,
sample jobs run to completion; a component killed behind the sandbox's back is reported by
`status`, and `down` leaves no process and no folder behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from gpugov.sandbox.cluster import STATE_FILE
from gpugov.sandbox.processes import process_alive
from gpugov.sandbox.tools import binary_env, repo_root
from tests.helpers.repos import REPO

pytestmark = pytest.mark.e2e


@pytest.fixture
def sandbox_env(tmp_path: Path, sandbox_binaries: dict[str, Path]) -> Iterator[dict[str, str]]:
    env = {
        **os.environ,
        "PYTHONPATH": str(repo_root()),
        "GPUGOV_CACHE": str(tmp_path / "cache"),  # own state dir, never the user's sandbox
        # The session's binaries: no rebuild in the new cache.
        **{binary_env(name): str(path) for name, path in sandbox_binaries.items()},
    }
    yield env
    subprocess.run([sys.executable, "-m", "gpugov", "sandbox", "down"], env=env, check=False, capture_output=True)


def _gpugov(env: dict[str, str], *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpugov", *args], env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO
    )


def _pids(state: Path) -> dict[str, int]:
    return {p["name"]: p["pid"] for p in json.loads((state / STATE_FILE).read_text())["processes"]}


def test_up_apply_jobs_status_down(sandbox_env: dict[str, str], tmp_path: Path) -> None:
    state = Path(sandbox_env["GPUGOV_CACHE"]) / "sandbox"
    kubeconfig = tmp_path / "kube" / "config"

    up = _gpugov(sandbox_env, "sandbox", "up", "--kubeconfig", str(kubeconfig))  # REPO defaults to .
    assert up.returncode == 0, up.stderr
    assert f"export KUBECONFIG={kubeconfig}" in up.stdout
    for line in ("kube-apiserver           v1.36.3", "kube-scheduler           v1.36.3", "kueue                    v0.17.0",
                 "kwok                     v0.8.0", "14 KWOK nodes"):
        assert line in up.stdout
    pids = _pids(state)
    assert set(pids) == {"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kueue"}
    assert all(process_alive(pid) for pid in pids.values())  # detached: they outlive `up`

    api = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    assert len(client.CoreV1Api(api).list_node().items) == 14

    again = _gpugov(sandbox_env, "sandbox", "up")
    assert again.returncode == 1
    assert "already running" in again.stderr and "Traceback" not in again.stderr

    applied = _gpugov(sandbox_env, "apply", ".", "--cluster", "east", "--kubeconfig", str(kubeconfig))
    assert applied.returncode == 0, applied.stderr
    jobs = _gpugov(sandbox_env, "sandbox", "jobs", "--cluster", "east", "--run-for", "2s", "--timeout", "120")
    assert jobs.returncode == 0, jobs.stdout + jobs.stderr
    assert jobs.stdout.count("Succeeded") == 5

    status = _gpugov(sandbox_env, "sandbox", "status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert status.stdout.count(" running ") == 5

    os.kill(pids["kueue"], signal.SIGKILL)
    dead = _gpugov(sandbox_env, "sandbox", "status")
    assert dead.returncode == 1
    assert "kueue                    v0.17.0   DOWN" in dead.stdout
    assert "gpugov sandbox: error: kueue" in dead.stderr and "kueue.log" in dead.stderr

    down = _gpugov(sandbox_env, "sandbox", "down")
    assert down.returncode == 0, down.stderr
    assert not any(process_alive(pid) for pid in pids.values())
    assert not state.exists()
    assert not kubeconfig.exists()  # the copy held credentials of a dead server

    idle = _gpugov(sandbox_env, "sandbox", "down")
    assert idle.returncode == 0 and "no sandbox is running" in idle.stdout
    none = _gpugov(sandbox_env, "sandbox", "status")
    assert none.returncode == 1 and "no sandbox is running" in none.stdout


def test_up_with_missing_repo_dir_fails_cleanly(sandbox_env: dict[str, str], tmp_path: Path) -> None:
    result = _gpugov(sandbox_env, "sandbox", "up", str(tmp_path / "nope"))
    assert result.returncode == 2  # bad input, as for every command
    assert "is not a directory" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (Path(sandbox_env["GPUGOV_CACHE"]) / "sandbox").exists()
