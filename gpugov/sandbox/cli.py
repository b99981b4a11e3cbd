"""``gpugov sandbox up|down``: a local control plane that outlives the command.

``up`` starts a detached ControlPlane whose state (PKI, etcd data, log,
kubeconfig, pid file) lives in ``${GPUGOV_CACHE:-~/.cache/gpugov}/sandbox/``;
``down`` stops it and removes that directory. Only one sandbox runs at a time.

Wiring (in gpugov/cli.py)::

    from gpugov.sandbox import cli as sandbox_cli
    sandbox_cli.register(subparsers, nodes_from_repo=my_nodes_function)
    ...
    args = parser.parse_args(argv)
    return args.func(args)        # every sandbox command sets `func`

Expected failures print one ``gpugov sandbox: error: ...`` line (plus a log
tail where useful) and return 1; they never print a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from gpugov.sandbox.tools import CONTROLPLANE_BINARY

# Kept import-light on purpose: register() must not pull in the kubernetes
# client (slow to import); the commands import what they need when they run.
if TYPE_CHECKING:
    from gpugov.sandbox.controlplane import ControlPlane

# Turns the org repo (REPO_DIR) into Node manifests, one per GPU server.
GPU_OPERATOR_NAMESPACE = "gpu-operator"
NodesFromRepo = Callable[[Path], list[dict[str, Any]]]

PID_FILE = "pid"
COPIES_FILE = "kubeconfig-copies"  # user-requested --kubeconfig paths, removed by `down`


class SandboxError(Exception):
    """An expected failure, reported as a one-line message."""


def _expected_errors() -> tuple[type[BaseException], ...]:
    """Failures reported as one line instead of a traceback."""
    from kubernetes.client.exceptions import ApiException

    from gpugov.sandbox.controlplane import ControlPlaneError
    from gpugov.sandbox.crds import CRDError
    from gpugov.sandbox.tools import ToolUnavailableError

    return (SandboxError, ControlPlaneError, ToolUnavailableError, CRDError, ApiException, OSError, ValueError)


def state_dir() -> Path:
    cache = os.environ.get("GPUGOV_CACHE") or Path.home() / ".cache" / "gpugov"
    return Path(cache) / "sandbox"


def register(subparsers: Any, nodes_from_repo: NodesFromRepo | None = None) -> argparse.ArgumentParser:
    """Add ``sandbox up`` / ``sandbox down`` to an argparse subparsers object."""
    parser = subparsers.add_parser(
        "sandbox",
        help="run a local Kubernetes API server with the Kueue/Volcano CRDs",
        description="Run a local, throw-away kube-apiserver (with etcd, Kueue and Volcano CRDs) in the background.",
    )
    commands = parser.add_subparsers(dest="sandbox_command", metavar="{up,down}", required=True)

    up = commands.add_parser("up", help="start the sandbox in the background")
    up.add_argument("--kubeconfig", type=Path, metavar="PATH", help="also write the admin kubeconfig to PATH")
    up.add_argument(
        "repo_dir", nargs="?", type=Path, metavar="REPO_DIR", help="org repository whose GPU servers become Nodes"
    )
    up.set_defaults(func=functools.partial(_run, functools.partial(cmd_up, nodes_from_repo=nodes_from_repo)))

    down = commands.add_parser("down", help="stop the sandbox and delete its state")
    down.set_defaults(func=functools.partial(_run, cmd_down))
    return cast(argparse.ArgumentParser, parser)


def _run(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a command, turning expected errors into a message and exit code 1."""
    try:
        return command(args)
    except KeyboardInterrupt:
        print("gpugov sandbox: interrupted", file=sys.stderr)
    except Exception as exc:
        if not isinstance(exc, _expected_errors()):
            raise  # a bug: the traceback is what we need
        print(f"gpugov sandbox: error: {exc}", file=sys.stderr)
    return 1


# -- pid bookkeeping ---------------------------------------------------------


def _is_controlplane(pid: int) -> bool:
    """Whether ``pid`` is alive and (where /proc tells) really our server.

    Guards against killing an unrelated process that reused a stale pid.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # not ours, whatever it is
    cmdline = Path(f"/proc/{pid}/cmdline")
    if cmdline.exists():
        with contextlib.suppress(OSError):
            return CONTROLPLANE_BINARY.encode() in cmdline.read_bytes()
    return True


def running_pid(directory: Path) -> int | None:
    """Pid of the running sandbox in ``directory``, or None."""
    try:
        pid = int((directory / PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _is_controlplane(pid) else None


# -- up ------------------------------------------------------------------------


def cmd_up(args: argparse.Namespace, nodes_from_repo: NodesFromRepo | None = None) -> int:
    from gpugov.sandbox.controlplane import KUBECONFIG_NAME, ControlPlane

    directory = state_dir()
    pid = running_pid(directory)
    if pid is not None:
        raise SandboxError(
            f"a sandbox is already running (pid {pid}); use it with\n"
            f"  export KUBECONFIG={directory / KUBECONFIG_NAME}\n"
            "or stop it first: gpugov sandbox down"
        )
    if args.repo_dir is not None and not args.repo_dir.is_dir():
        raise SandboxError(f"REPO_DIR {args.repo_dir} is not a directory")
    if directory.exists():
        print(f"removing stale sandbox state in {directory}", file=sys.stderr)
        shutil.rmtree(directory)

    cp = ControlPlane(workdir=directory, detach=True)
    try:
        cp.start()
        (directory / PID_FILE).write_text(f"{cp.pid}\n")
        node_count = _create_repo_nodes(cp, args.repo_dir, nodes_from_repo)
        copies = _copy_kubeconfig(cp, args.kubeconfig)
    except BaseException:
        cp.stop()
        shutil.rmtree(directory, ignore_errors=True)
        raise
    _print_usage(cp, node_count, copies)
    return 0


def _create_repo_nodes(cp: ControlPlane, repo_dir: Path | None, nodes_from_repo: NodesFromRepo | None) -> int:
    if repo_dir is None:
        return 0
    if nodes_from_repo is None:
        print("note: creating Nodes from REPO_DIR is not available in this build", file=sys.stderr)
        return 0
    from gpugov.sandbox.nodes import create_nodes

    count = len(create_nodes(cp.api_client(), nodes_from_repo(repo_dir)))
    _create_operator_namespace(cp)
    return count


def _create_operator_namespace(cp: ControlPlane) -> None:
    """The simulated GPU servers come with the NVIDIA GPU Operator installed: its namespace
    is where gpugov's mig-parted ConfigMap goes."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        client.CoreV1Api(cp.api_client()).create_namespace({"metadata": {"name": GPU_OPERATOR_NAMESPACE}})
    except ApiException as exc:
        if exc.status != 409:
            raise


def _copy_kubeconfig(cp: ControlPlane, target: Path | None) -> list[Path]:
    if target is None:
        return []
    target = target.expanduser().resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cp.kubeconfig, target)
    target.chmod(0o600)
    (cp.workdir / COPIES_FILE).write_text(f"{target}\n")
    return [target]


def _print_usage(cp: ControlPlane, node_count: int, copies: list[Path]) -> None:
    version = cp.version().get("gitVersion", "?")
    kubeconfig = copies[0] if copies else cp.kubeconfig
    print(f"sandbox running: kube-apiserver {version} at {cp.server} (pid {cp.pid})")
    print(f"  {len(cp.installed_crds)} CRDs installed (Kueue, Volcano), {node_count} Nodes created")
    print(f"  log: {cp.log_path}")
    print("use it with:")
    print(f"  export KUBECONFIG={kubeconfig}")
    print("  kubectl get clusterqueues,resourceflavors")
    print("stop it with: gpugov sandbox down")


# -- down ----------------------------------------------------------------------


def cmd_down(args: argparse.Namespace) -> int:
    directory = state_dir()
    if not directory.exists():
        print("no sandbox is running")
        return 0
    pid = running_pid(directory)
    if pid is not None:
        from gpugov.sandbox.controlplane import terminate_group

        terminate_group(pid)
    _remove_kubeconfig_copies(directory)
    shutil.rmtree(directory)
    print(f"sandbox stopped (pid {pid})" if pid is not None else "removed stale sandbox state (it was not running)")
    return 0


def _remove_kubeconfig_copies(directory: Path) -> None:
    """Delete --kubeconfig copies that still hold our (now useless) credentials."""
    from gpugov.sandbox.controlplane import KUBECONFIG_NAME

    try:
        paths = (directory / COPIES_FILE).read_text().split()
        ours = (directory / KUBECONFIG_NAME).read_bytes()
    except OSError:
        return
    for path in map(Path, paths):
        with contextlib.suppress(OSError):
            if path.read_bytes() == ours:  # never delete a file the user has since changed
                path.unlink()


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point: ``python -m gpugov.sandbox.cli sandbox up``."""
    parser = argparse.ArgumentParser(prog="gpugov")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
