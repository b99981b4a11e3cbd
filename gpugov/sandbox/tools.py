"""Locate (or build) the Go-built tool binaries the sandbox runs.

The binaries are built by ``tools/build`` from Go modules and cached outside
the repository; ``tools/bin/<binary>`` links to the cached copy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

CONTROLPLANE_BINARY = "gpugov-controlplane"
# Set to an executable to skip tools/build entirely (e.g. a binary built elsewhere).
BINARY_ENV = "GPUGOV_CONTROLPLANE_BIN"


class ToolUnavailableError(RuntimeError):
    """A tool binary is neither present nor buildable (typically: no Go)."""


def repo_root() -> Path:
    """The gpugov source checkout this package runs from (it holds tools/build)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "tools" / "build").is_file():
        raise ToolUnavailableError(
            f"gpugov is not running from a source checkout ({root} has no tools/build); "
            f"set {BINARY_ENV} to a {CONTROLPLANE_BINARY} binary"
        )
    return root


def _run_build(root: Path, tool: str) -> None:
    """Run tools/build; it is quick (hash + symlink) when the binary is cached."""
    # Output is passed through: a cold build runs for many minutes and its
    # progress/errors are what the user needs to see.
    result = subprocess.run([str(root / "tools" / "build"), tool], check=False)
    if result.returncode != 0:
        raise ToolUnavailableError(f"tools/build {tool} failed with exit code {result.returncode}")


def controlplane_binary(build: bool = True) -> Path:
    """Return the gpugov-controlplane binary, building it if needed and possible.

    Order: $GPUGOV_CONTROLPLANE_BIN; ``tools/build k8s`` when Go is installed
    (so a changed tools/k8s/go.mod is never served by a stale binary); an
    existing ``tools/bin`` link when Go is not installed.
    """
    override = os.environ.get(BINARY_ENV)
    if override:
        path = Path(override)
        if not os.access(path, os.X_OK):
            raise ToolUnavailableError(f"{BINARY_ENV}={override} is not an executable file")
        return path
    root = repo_root()
    link = root / "tools" / "bin" / CONTROLPLANE_BINARY
    if build and shutil.which("go"):
        _run_build(root, "k8s")
    if link.exists() and os.access(link, os.X_OK):
        return link
    raise ToolUnavailableError(
        f"{CONTROLPLANE_BINARY} is not built and cannot be: 'go' is not on PATH. "
        "Install Go >= 1.26 and run tools/build k8s"
    )
