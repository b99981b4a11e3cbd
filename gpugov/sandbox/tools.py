"""Locate (or build) the Go-built tool binaries the sandbox runs.

The binaries are built by ``tools/build`` from Go modules and cached outside
the repository; ``tools/bin/<binary>`` links to the cached copy.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

# subprocess (with signal, threading, selectors) is imported where used: gpugov's parser reads this module's names.

CONTROLPLANE_BINARY = "gpugov-controlplane"
# Set to an executable to skip tools/build entirely (e.g. a binary built elsewhere).
BINARY_ENV = "GPUGOV_CONTROLPLANE_BIN"

# The living sandbox's other components: binary -> the tools/build tool that makes it.
SCHEDULER_BINARY = "kube-scheduler"
CONTROLLER_MANAGER_BINARY = "kube-controller-manager"
KUEUE_BINARY = "kueue"
KWOK_BINARY = "kwok"
VOLCANO_SCHEDULER_BINARY = "vc-scheduler"
VOLCANO_CONTROLLERS_BINARY = "vc-controller-manager"
TOOL_OF = {
    CONTROLPLANE_BINARY: "k8s",
    SCHEDULER_BINARY: "k8s",
    CONTROLLER_MANAGER_BINARY: "k8s",
    KUEUE_BINARY: "kueue",
    KWOK_BINARY: "kwok",
    VOLCANO_SCHEDULER_BINARY: "volcano",
    VOLCANO_CONTROLLERS_BINARY: "volcano",
}
# Kueue runs against its own CRDs and webhook manifests, kept by tools/build beside the binary.
KUEUE_CONFIG_ENV = "GPUGOV_KUEUE_CONFIG"


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


_BUILT: set[tuple[Path, str]] = set()  # tools already checked by this process


def _run_build(root: Path, tool: str) -> None:
    """Run tools/build once per tool and process; it is quick (hash + symlink) when cached."""
    if (root, tool) in _BUILT:
        return
    # Output is passed through: a cold build runs for many minutes and its
    # progress/errors are what the user needs to see.
    import subprocess

    result = subprocess.run([str(root / "tools" / "build"), tool], check=False)
    if result.returncode != 0:
        raise ToolUnavailableError(f"tools/build {tool} failed with exit code {result.returncode}")
    _BUILT.add((root, tool))


def binary_env(binary: str) -> str:
    """The variable that points at a prebuilt ``binary``: GPUGOV_KUBE_SCHEDULER_BIN, ..."""
    if binary == CONTROLPLANE_BINARY:
        return BINARY_ENV
    return "GPUGOV_" + binary.upper().replace("-", "_") + "_BIN"


def tool_binary(binary: str, build: bool = True) -> Path:
    """Any of the sandbox's binaries (see ``TOOL_OF``), built if needed and possible.

    Order: $GPUGOV_<BINARY>_BIN; ``tools/build <tool>`` when Go is installed (so a changed
    wrapper go.mod is never served by a stale binary); an existing ``tools/bin`` link when
    Go is not installed.
    """
    env = binary_env(binary)
    override = os.environ.get(env)
    if override:
        path = Path(override)
        if not os.access(path, os.X_OK):
            raise ToolUnavailableError(f"{env}={override} is not an executable file")
        return path
    root = repo_root()
    link = root / "tools" / "bin" / binary
    if build and shutil.which("go"):
        _run_build(root, TOOL_OF[binary])
    if link.exists() and os.access(link, os.X_OK):
        return link
    raise ToolUnavailableError(
        f"{binary} is not built and cannot be: 'go' is not on PATH. "
        f"Install Go >= 1.26 and run tools/build {TOOL_OF[binary]} (or set {env})"
    )


def tool_version(tool: str, module: str) -> str:
    """The release of ``module`` that tools/<tool>/go.mod pins ("unknown" outside a checkout)."""
    try:
        lines = (repo_root() / "tools" / tool / "go.mod").read_text().splitlines()
    except (OSError, ToolUnavailableError):
        return "unknown"
    for line in lines:
        words = line.split()
        if len(words) >= 2 and words[0] in (module, "require") and module in words:
            return words[words.index(module) + 1]
    return "unknown"


def kueue_config_dir(kueue: Path) -> Path:
    """Kueue's own ``crd/`` and ``webhook/`` manifests for the ``kueue`` binary in use."""
    override = os.environ.get(KUEUE_CONFIG_ENV)
    directory = Path(override) if override else kueue.resolve().parent / "config"
    if not (directory / "crd").is_dir() or not (directory / "webhook" / "manifests.yaml").is_file():
        raise ToolUnavailableError(
            f"Kueue's CRDs and webhook manifests are not in {directory} "
            f"(tools/build kueue puts them beside the binary; or set {KUEUE_CONFIG_ENV})"
        )
    return directory


def controlplane_binary(build: bool = True) -> Path:
    """The gpugov-controlplane binary (kube-apiserver + etcd), see ``tool_binary``."""
    return tool_binary(CONTROLPLANE_BINARY, build)
