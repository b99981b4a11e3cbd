"""``gpugov sandbox up|status|jobs|down``: a living local cluster that outlives the command.

``up`` starts a detached ``Sandbox`` (kube-apiserver + etcd, kube-controller-manager,
kube-scheduler, KWOK and the Kueue controller, or Volcano's scheduler and controller manager for
a declared cluster whose backend is Volcano) whose state (PKI, etcd data, logs, kubeconfig,
``state.json``) lives in ``${GPUGOV_CACHE:-~/.cache/gpugov}/sandbox/``, or ``sandbox-<cluster>/``
for ``up --cluster NAME``; ``status`` says which components run and reports a dead one with its log
tail; ``down`` stops every process and removes that directory. One sandbox per cluster name.

Expected failures print one ``gpugov sandbox: error: ...`` line (plus a log
tail where useful) and never a traceback; they exit as every gpugov command does
(``ExitCode``): 2 for bad input, 1 for a sandbox that fails or is not in the state asked for.
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

from gpugov.app.exit import ExitCode
from gpugov.sandbox.tools import (
    CONTROLLER_MANAGER_BINARY,
    CONTROLPLANE_BINARY,
    KUEUE_BINARY,
    KWOK_BINARY,
    SCHEDULER_BINARY,
    VOLCANO_CONTROLLERS_BINARY,
    VOLCANO_SCHEDULER_BINARY,
)

# Kept import-light on purpose: register() must not pull in the kubernetes
# client (slow to import); the commands import what they need when they run.
if TYPE_CHECKING:
    from gpugov.sandbox.cluster import Sandbox
    from gpugov.sandbox.controlplane import ControlPlane

# The binary behind each process name in state.json, to recognise our own pids.
BINARY_OF = {
    "kube-apiserver": CONTROLPLANE_BINARY,
    "kube-controller-manager": CONTROLLER_MANAGER_BINARY,
    "kube-scheduler": SCHEDULER_BINARY,
    "kwok": KWOK_BINARY,
    "kueue": KUEUE_BINARY,
    "vc-controller-manager": VOLCANO_CONTROLLERS_BINARY,
    "vc-scheduler": VOLCANO_SCHEDULER_BINARY,
}
COPIES_FILE = "kubeconfig-copies"  # user-requested --kubeconfig paths, removed by `down`


class SandboxError(Exception):
    """An expected failure, reported as a one-line message, with its exit code."""

    def __init__(self, message: str, code: ExitCode = ExitCode.FINDINGS) -> None:
        super().__init__(message)
        self.code = code


def _expected_errors() -> tuple[type[BaseException], ...]:
    """Failures reported as one line instead of a traceback."""
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config import ConfigException
    from urllib3.exceptions import HTTPError

    from gpugov.app.desired import CompileError, InputError, InvalidDeclarations
    from gpugov.sandbox.crds import CRDError
    from gpugov.sandbox.processes import ProcessError
    from gpugov.sandbox.tools import ToolUnavailableError

    return (
        SandboxError,
        ProcessError,
        ToolUnavailableError,
        CRDError,
        InputError,
        InvalidDeclarations,
        CompileError,
        ApiException,
        ConfigException,
        HTTPError,
        OSError,
        ValueError,
    )


def _exit_code(exc: BaseException) -> ExitCode:
    """What an expected failure exits with: bad input (an unreadable repository, a REPO that
    is no directory, an unknown cluster) is usage, as for every other command."""
    from gpugov.app.desired import CompileError, InputError, InvalidDeclarations

    if isinstance(exc, SandboxError):
        return exc.code
    if isinstance(exc, InvalidDeclarations):
        return exc.exit_code
    if isinstance(exc, (InputError, CompileError)):
        return ExitCode.USAGE
    return ExitCode.FINDINGS


def _cache() -> Path:
    return Path(os.environ.get("GPUGOV_CACHE") or Path.home() / ".cache" / "gpugov")


def state_dir(cluster: str | None = None) -> Path:
    """Where the sandbox keeps its state: ``sandbox/``, or ``sandbox-<cluster>/`` for a named cluster."""
    return _cache() / ("sandbox" if cluster is None else f"sandbox-{cluster}")


def state_dirs() -> list[Path]:
    """Every sandbox's directory that exists, the unnamed one first."""
    named = sorted(p for p in _cache().glob("sandbox-*") if p.is_dir())
    return [d for d in (state_dir(), *named) if d.is_dir()]


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``sandbox up|status|jobs|down`` to an argparse subparsers object."""
    parser = subparsers.add_parser(
        "sandbox",
        help="run a living local cluster: Kueue, scheduler, controllers and simulated GPU nodes",
        description=(
            "Run a local, throw-away cluster in the background: kube-apiserver with etcd, "
            "kube-controller-manager, kube-scheduler, the Kueue controller and KWOK as the kubelet of "
            "the repository's GPU servers. Binaries are built from Go modules by tools/build."
        ),
    )
    commands = parser.add_subparsers(dest="sandbox_command", metavar="{up,status,jobs,down}", required=True)

    up = commands.add_parser("up", help="start the sandbox in the background")
    up.add_argument("--kubeconfig", type=Path, metavar="PATH", help="also write the admin kubeconfig to PATH")
    up.add_argument(
        "--cluster",
        metavar="NAME",
        help="simulate this declared cluster: its GPU servers only, and its backend's scheduler (Kueue, or "
        "Volcano with the scheduler configuration gpugov compiles); state in sandbox-NAME/, so several run side "
        "by side (default: one Kueue sandbox with every pool's servers)",
    )
    up.add_argument(
        "repo_dir",
        nargs="?",
        type=Path,
        default=Path("."),
        metavar="REPO",
        help="org repository whose GPU servers become KWOK nodes (default: .)",
    )
    up.set_defaults(func=functools.partial(_run, cmd_up))

    status = commands.add_parser("status", help="say which components run; exit 1 if one is down")
    status.add_argument("--cluster", metavar="NAME", help="only the sandbox of this cluster (default: every sandbox)")
    status.set_defaults(func=functools.partial(_run, cmd_status))

    jobs = commands.add_parser(
        "jobs",
        help="submit a sample Job per tenant and show where Kueue or Volcano admits it",
        description=(
            "Submit one sample Job per tenant (its first queue, one accelerator of its first pool) to the "
            "running sandbox, wait, and show what the scheduler made of them: on Kueue the Workload's admitted "
            "flavor, on Volcano the PodGroup's queue and the pool's node group; the node and the state. Run "
            "`gpugov apply REPO --cluster C --kubeconfig ...` first. With --cluster, the sandbox started "
            "with `up --cluster C` is used when one runs."
        ),
    )
    jobs.add_argument("repo_dir", nargs="?", type=Path, default=Path("."), metavar="REPO", help="org repository (default: .)")
    jobs.add_argument("--cluster", help="the declared cluster whose queues to use (default: the only one)")
    jobs.add_argument("--run-for", default="20s", metavar="DURATION", help="how long each job runs once started (default: 20s)")
    jobs.add_argument(
        "--until",
        choices=("admitted", "finished"),
        default="finished",
        help="wait until every job is admitted or finished (default: finished)",
    )
    jobs.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS", help="how long to wait (default: 120)")
    jobs.set_defaults(func=functools.partial(_run, cmd_jobs))

    down = commands.add_parser("down", help="stop every component and delete the sandbox's state")
    down.add_argument("--cluster", metavar="NAME", help="only the sandbox of this cluster (default: every sandbox)")
    down.set_defaults(func=functools.partial(_run, cmd_down))
    return cast(argparse.ArgumentParser, parser)


def _run(command: Callable[[argparse.Namespace], ExitCode], args: argparse.Namespace) -> ExitCode:
    """Run a command, turning expected errors into a message and their exit code."""
    try:
        return command(args)
    except KeyboardInterrupt:
        print("gpugov sandbox: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except Exception as exc:
        if not isinstance(exc, _expected_errors()):
            raise  # a bug: the traceback is what we need
        print(f"gpugov sandbox: error: {exc}", file=sys.stderr)
        return _exit_code(exc)


# -- pid bookkeeping ---------------------------------------------------------


def _is_ours(pid: int, name: str) -> bool:
    """Whether ``pid`` is alive and (where /proc tells) really that component's binary.

    Guards against signalling an unrelated process that reused a stale pid.
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
            return BINARY_OF.get(name, name).encode() in cmdline.read_bytes()
    return True


def running_pids(directory: Path) -> dict[str, int]:
    """The components of the sandbox in ``directory`` that still run: name -> pid."""
    from gpugov.sandbox.cluster import read_state

    state = read_state(directory) or {}
    return {
        str(proc["name"]): int(proc["pid"])
        for proc in state.get("processes", [])
        if _is_ours(int(proc["pid"]), str(proc["name"]))
    }


# -- up ------------------------------------------------------------------------


def cmd_up(args: argparse.Namespace) -> ExitCode:
    from gpugov.app.desired import valid_model
    from gpugov.sandbox.cluster import Sandbox
    from gpugov.sandbox.controlplane import KUBECONFIG_NAME
    from gpugov.sandbox.simulated import simulated_nodes

    cluster = getattr(args, "cluster", None)
    directory = state_dir(cluster)
    running = running_pids(directory)
    if running:
        down = "gpugov sandbox down" + (f" --cluster {cluster}" if cluster else "")
        raise SandboxError(
            f"a sandbox is already running ({', '.join(f'{n} pid {p}' for n, p in running.items())}); use it with\n"
            f"  export KUBECONFIG={directory / KUBECONFIG_NAME}\n"
            f"or stop it first: {down}"
        )
    if not args.repo_dir.is_dir():
        raise SandboxError(f"REPO {args.repo_dir} is not a directory", ExitCode.USAGE)
    model = valid_model(args.repo_dir)[0]
    backend, volcano_conf = _backend_of(model, cluster, args.repo_dir)
    nodes = simulated_nodes(model, cluster) if cluster else simulated_nodes(model)
    if directory.exists():
        print(f"removing stale sandbox state in {directory}", file=sys.stderr)
        shutil.rmtree(directory)

    scheduler = "Kueue" if backend == "kueue" else "Volcano"
    print(f"starting the sandbox (kube-apiserver, controllers, scheduler, KWOK, {scheduler}) ...", file=sys.stderr)
    sandbox = Sandbox(workdir=directory, detach=True, backend=backend, volcano_conf=volcano_conf)
    try:
        sandbox.start()
        sandbox.write_state()
        node_count = _create_nodes(sandbox.cp, nodes)
        copies = _copy_kubeconfig(sandbox.cp, args.kubeconfig)
    except BaseException:
        sandbox.stop()
        shutil.rmtree(directory, ignore_errors=True)
        raise
    _print_usage(sandbox, node_count, copies)
    return ExitCode.OK


def _backend_of(model: Any, cluster: str | None, repo: Path) -> tuple[str, str | None]:
    """The declared cluster's backend and, on Volcano, the scheduler configuration compiled for it."""
    if cluster is None:
        return "kueue", None
    from gpugov.compile import compile
    from gpugov.compile.volcano_scheduler import CONFIG_KEY

    declared = model.clusters.get(cluster)
    if declared is None:
        known = ", ".join(sorted(model.clusters)) or "none"
        raise SandboxError(f"{repo}: no cluster '{cluster}' is declared (declared: {known})", ExitCode.USAGE)
    if declared.backend != "volcano":
        return declared.backend, None
    conf = next(o["data"][CONFIG_KEY] for o in compile(model, cluster=cluster) if CONFIG_KEY in o.get("data", {}))
    return "volcano", conf


def _create_nodes(cp: ControlPlane, nodes: list[dict[str, Any]]) -> int:
    from gpugov.sandbox.nodes import create_gpu_operator_footprint, create_nodes

    count = len(create_nodes(cp.api_client(), nodes, kwok=True))
    create_gpu_operator_footprint(cp.api_client())
    return count


def _copy_kubeconfig(cp: ControlPlane, target: Path | None) -> list[Path]:
    if target is None:
        return []
    target = target.expanduser().resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cp.kubeconfig, target)
    target.chmod(0o600)
    (cp.workdir / COPIES_FILE).write_text(f"{target}\n")
    return [target]


def _print_usage(sandbox: Sandbox, node_count: int, copies: list[Path]) -> None:
    cp = sandbox.cp
    kubeconfig = copies[0] if copies else cp.kubeconfig
    print(f"sandbox running at {cp.server}:")
    for started in sandbox.started:
        print(f"  {started.name:<24} {started.version:<9} pid {started.pid:<8} ready in {started.seconds:5.1f}s")
    origin = "Kueue v0.17.0's own" if sandbox.backend == "kueue" else "Volcano v1.14.1's own"
    print(f"  {len(cp.installed_crds) + len(sandbox.backend_crds)} CRDs ({origin}), {node_count} KWOK nodes")
    print(f"  logs: {cp.workdir}/*.log, {cp.workdir}/*/*.log")
    print("use it with:")
    print(f"  export KUBECONFIG={kubeconfig}")
    print("  kubectl get nodes,clusterqueues,workloads -A")
    print("check it with: gpugov sandbox status    stop it with: gpugov sandbox down")


# -- status --------------------------------------------------------------------


def _chosen_dirs(args: argparse.Namespace) -> list[Path]:
    cluster = getattr(args, "cluster", None)
    return [state_dir(cluster)] if cluster else state_dirs()


def cmd_status(args: argparse.Namespace) -> ExitCode:
    from gpugov.sandbox.cluster import detached_components, read_state

    states = [(d, read_state(d)) for d in _chosen_dirs(args)]
    states = [(d, state) for d, state in states if state is not None]
    if not states:
        print("no sandbox is running")
        return ExitCode.FINDINGS
    problems = []
    for _, state in states:
        print(f"sandbox at {state.get('server', '?')}  (KUBECONFIG={state.get('kubeconfig', '?')})")
        for component in detached_components(state, _is_ours):
            if not component.alive():
                word, problems = "DOWN", [*problems, component.death_report()]
            elif not component.healthy(timeout=5.0):
                word, problems = "UNHEALTHY", [*problems, f"{component.name} does not answer {component.health_url}"]
            else:
                word = "running"
            print(f"  {component.name:<24} {component.version:<9} {word:<9} pid {component.recorded_pid}")
    for problem in problems:
        print(f"gpugov sandbox: error: {problem}", file=sys.stderr)
    return ExitCode.FINDINGS if problems else ExitCode.OK


# -- jobs ----------------------------------------------------------------------


def cmd_jobs(args: argparse.Namespace) -> ExitCode:
    from kubernetes import config as kube_config

    from gpugov.app.desired import desired_state
    from gpugov.sandbox import samples
    from gpugov.sandbox.cluster import read_state

    directory = state_dir(args.cluster) if args.cluster and state_dir(args.cluster).is_dir() else state_dir()
    state = read_state(directory)
    if state is None or not running_pids(directory):
        raise SandboxError("no sandbox is running; start one with: gpugov sandbox up")
    if not args.repo_dir.is_dir():
        raise SandboxError(f"REPO {args.repo_dir} is not a directory", ExitCode.USAGE)
    desired = desired_state(args.repo_dir, cluster=args.cluster)
    volcano = any(o["kind"] == "Queue" for o in desired.objects)
    jobs = samples.volcano_sample_jobs(desired.objects) if volcano else samples.sample_jobs(desired.objects)
    if not jobs:
        raise SandboxError(f"{args.repo_dir}: no tenant has a queue and an accelerator quota on this cluster")
    api = kube_config.new_client_from_config(config_file=state["kubeconfig"])
    samples.submit(api, jobs, args.run_for)
    print(f"submitted {len(jobs)} sample Jobs (each runs {args.run_for}); waiting until {args.until} ...", file=sys.stderr)
    seen = samples.wait(api, jobs, args.until, args.timeout)
    print(samples.table(seen))
    done = all(o.finished if args.until == "finished" else o.admitted for o in seen)
    if not done:
        print(f"gpugov sandbox: not every job is {args.until} after {args.timeout:.0f}s", file=sys.stderr)
    return ExitCode.OK if done else ExitCode.FINDINGS


# -- down ----------------------------------------------------------------------


def cmd_down(args: argparse.Namespace) -> ExitCode:
    directories = _chosen_dirs(args)
    directories = [d for d in directories if d.exists()]
    if not directories:
        print("no sandbox is running")
        return ExitCode.OK
    for directory in directories:
        _down(directory)
    return ExitCode.OK


def _down(directory: Path) -> None:
    from gpugov.sandbox.cluster import detached_components, read_state

    state = read_state(directory) or {}
    components = detached_components(state, _is_ours)
    stopped = [c.name for c in components if c.pid is not None]
    for component in reversed(components):  # the scheduler backend first, the apiserver last
        component.stop()
    _remove_kubeconfig_copies(directory)
    shutil.rmtree(directory)
    named = directory.name.removeprefix("sandbox-") if directory.name != state_dir().name else ""
    what = f"sandbox of cluster {named}" if named else "sandbox"
    print(f"{what} stopped ({', '.join(stopped)})" if stopped else f"removed stale {what} state (it was not running)")


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
