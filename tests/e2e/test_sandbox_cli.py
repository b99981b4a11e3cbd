"""`gpugov sandbox up` / `down` against the real binary, in an isolated cache dir."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from gpugov.sandbox.cli import PID_FILE
from gpugov.sandbox.controlplane import process_alive
from gpugov.sandbox.tools import BINARY_ENV, repo_root


@pytest.fixture
def sandbox_env(tmp_path: Path, controlplane_binary_path: Path) -> Iterator[dict[str, str]]:
    env = {
        **os.environ,
        "PYTHONPATH": str(repo_root()),
        "GPUGOV_CACHE": str(tmp_path / "cache"),  # own state dir, never the user's sandbox
        BINARY_ENV: str(controlplane_binary_path),  # the session's binary: no rebuild in the new cache
    }
    yield env
    subprocess.run([sys.executable, "-m", "gpugov.sandbox.cli", "sandbox", "down"], env=env, check=False)


def _sandbox(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpugov.sandbox.cli", "sandbox", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_up_twice_then_down(sandbox_env: dict[str, str], tmp_path: Path) -> None:
    state = Path(sandbox_env["GPUGOV_CACHE"]) / "sandbox"
    kubeconfig = tmp_path / "kube" / "config"

    up = _sandbox(sandbox_env, "up", "--kubeconfig", str(kubeconfig))
    assert up.returncode == 0, up.stderr
    assert f"export KUBECONFIG={kubeconfig}" in up.stdout
    pid = int((state / PID_FILE).read_text())
    assert process_alive(pid)  # detached: it outlives the `up` command

    api_client = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    crds = api_client.sanitize_for_serialization(
        client.ApiextensionsV1Api(api_client).list_custom_resource_definition()
    )
    names = {c["metadata"]["name"] for c in crds["items"]}
    assert "clusterqueues.kueue.x-k8s.io" in names

    again = _sandbox(sandbox_env, "up")
    assert again.returncode == 1
    assert "already running" in again.stderr
    assert "Traceback" not in again.stderr

    down = _sandbox(sandbox_env, "down")
    assert down.returncode == 0, down.stderr
    assert not process_alive(pid)
    assert not state.exists()
    assert not kubeconfig.exists()  # the copy held credentials of a dead server

    idle = _sandbox(sandbox_env, "down")
    assert idle.returncode == 0
    assert "no sandbox is running" in idle.stdout


def test_up_with_missing_repo_dir_fails_cleanly(sandbox_env: dict[str, str], tmp_path: Path) -> None:
    result = _sandbox(sandbox_env, "up", str(tmp_path / "nope"))
    assert result.returncode == 1
    assert "is not a directory" in result.stderr
    assert "Traceback" not in result.stderr
