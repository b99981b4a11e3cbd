"""The living sandbox: a small but real cluster on loopback.

``Sandbox`` starts, in order:

1. kube-apiserver with embedded etcd (``ControlPlane``);
2. kube-controller-manager, kube-scheduler and KWOK (the simulated GPU servers'
   kubelet), together;
3. the cluster's scheduler backend: the Kueue controller v0.17.0 with its own CRDs, webhooks and
   visibility API, or Volcano v1.14.1 (its controller manager and scheduler, with its own CRDs
   and the scheduler configuration compiled from the declarations).

Each component is a process group of its own with a log in the work directory.
``problems()`` names every component that has died or stopped answering its
health check, with its log tail; ``stop()`` ends them all in reverse order.

``gpugov sandbox up`` runs it detached and keeps ``state.json`` so that a later
``status`` or ``down`` finds every process again.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from gpugov.sandbox.components import Component, ComponentError
from gpugov.sandbox.controlplane import ControlPlane
from gpugov.sandbox.kube import controller_manager, scheduler
from gpugov.sandbox.kueue import Kueue
from gpugov.sandbox.kwok import kwok
from gpugov.sandbox.processes import all_or_nothing, free_ports
from gpugov.sandbox.tools import (
    CONTROLLER_MANAGER_BINARY,
    KUEUE_BINARY,
    KWOK_BINARY,
    SCHEDULER_BINARY,
    VOLCANO_CONTROLLERS_BINARY,
    VOLCANO_SCHEDULER_BINARY,
    kueue_config_dir,
    tool_binary,
    tool_version,
)
from gpugov.sandbox.volcano import Volcano

STATE_FILE = "state.json"


@dataclass(frozen=True)
class Started:
    """What runs, for the user: name, version, pid and how long it took to become ready."""

    name: str
    version: str
    pid: int
    seconds: float
    log: Path


BACKENDS = ("kueue", "volcano")


class Sandbox:
    """kube-apiserver + controller manager + scheduler + KWOK + Kueue or Volcano, as a context manager.

    Args:
        workdir: where every component keeps its files; default a temporary
            directory that ``stop()`` removes (a given one is left to its owner).
        detach: the processes outlive this Python process (``gpugov sandbox up``).
        startup_timeout: seconds each step may take to become ready.
        backend: the cluster's scheduler: ``kueue`` (default) or ``volcano``.
        volcano_conf: Volcano's scheduler configuration (``volcano-scheduler.conf``), as gpugov
            compiles it for the cluster (``gpugov.compile.volcano_scheduler``); default: the one
            for the capacity plugin.
        kueue_config: top-level fields added to Kueue's Configuration (a fleet's manager: multiKueue).
        with_nodes: start the controller manager, scheduler and KWOK; False for a cluster that runs no
            pod itself (a fleet's MultiKueue manager: apiserver and Kueue only).
    """

    def __init__(
        self,
        workdir: Path | None = None,
        *,
        detach: bool = False,
        startup_timeout: float = 120.0,
        backend: str = "kueue",
        volcano_conf: str | None = None,
        kueue_config: dict[str, Any] | None = None,
        with_nodes: bool = True,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"unknown sandbox backend {backend!r} (known: {', '.join(BACKENDS)})")
        self._given_workdir = workdir
        self._detach = detach
        self._timeout = startup_timeout
        self.backend = backend
        self._volcano_conf = volcano_conf
        self._kueue_config = kueue_config
        self._with_nodes = with_nodes
        self.controlplane: ControlPlane | None = None
        self.components: list[Component] = []
        self.started: list[Started] = []
        self.backend_crds: list[str] = []
        self.volcano: Volcano | None = None

    @property
    def cp(self) -> ControlPlane:
        if self.controlplane is None:
            raise ComponentError("sandbox not started")
        return self.controlplane

    def start(self) -> Sandbox:
        """Start every component and wait until each is ready. Stops them all on failure."""
        with all_or_nothing(self.stop, self._detach):
            backend_binaries = (
                (KUEUE_BINARY,) if self.backend == "kueue" else (VOLCANO_SCHEDULER_BINARY, VOLCANO_CONTROLLERS_BINARY)
            )
            binaries = {
                name: tool_binary(name)
                for name in (SCHEDULER_BINARY, CONTROLLER_MANAGER_BINARY, KWOK_BINARY, *backend_binaries)
            }
            begin = time.monotonic()
            self.controlplane = ControlPlane(
                workdir=self._given_workdir,  # None: a temporary one that ControlPlane.stop() removes
                crd_dirs=[],  # each backend installs its own below
                detach=True,  # this class supervises it; its own atexit would race ours
                startup_timeout=self._timeout,
                with_controllers=True,
            )
            self.controlplane.start()
            k8s_version = str(self.controlplane.version().get("gitVersion", "unknown"))
            self._record(self.controlplane.apiserver.name, k8s_version, self.controlplane.pid, begin, self.controlplane.log_path)

            kcm_port, scheduler_port, kwok_port, *kueue_ports = free_ports(7)
            group = [
                controller_manager(self.cp, binaries[CONTROLLER_MANAGER_BINARY], kcm_port, k8s_version),
                scheduler(self.cp, binaries[SCHEDULER_BINARY], scheduler_port, k8s_version),
                kwok(self.cp, binaries[KWOK_BINARY], kwok_port, tool_version("kwok", "sigs.k8s.io/kwok")),
            ] if self._with_nodes else []
            begin = time.monotonic()
            for component in group:
                self.components.append(component)
                component.start(detach=self._detach)
            for component in group:
                component.wait_healthy(self._timeout)
                self._record(component.name, component.version, component.pid or 0, begin, component.log_path)

            if self.backend == "kueue":
                self._start_kueue(binaries, kueue_ports)
            else:
                self._start_volcano(binaries, kueue_ports)
        return self

    def _start_kueue(self, binaries: dict[str, Path], free: list[int]) -> None:
        config_dir = kueue_config_dir(binaries[KUEUE_BINARY])
        ports = dict(zip(("webhook", "health", "metrics", "visibility"), free, strict=True))
        kueue = Kueue(self.cp, binaries[KUEUE_BINARY], config_dir, ports, tool_version("kueue", "sigs.k8s.io/kueue"),
                      self._kueue_config)
        begin = time.monotonic()
        self.backend_crds = kueue.prepare()
        self.components.append(kueue.component)
        kueue.start(self._timeout, detach=self._detach)
        self._record("kueue", kueue.component.version, kueue.component.pid or 0, begin, kueue.component.log_path)

    def _start_volcano(self, binaries: dict[str, Path], free: list[int]) -> None:
        from gpugov.compile.volcano_scheduler import scheduler_conf_text

        ports = dict(zip(("controllers-health", "controllers-metrics", "scheduler-health", "scheduler-metrics"), free,
                         strict=True))
        volcano = Volcano(self.cp, binaries, ports, self._volcano_conf or scheduler_conf_text("capacity"),
                          tool_version("volcano", "volcano.sh/volcano"))
        self.volcano = volcano
        begin = time.monotonic()
        self.backend_crds = volcano.prepare()
        self.components.extend(volcano.components)
        volcano.start(self._timeout, detach=self._detach)
        for component in volcano.components:
            self._record(component.name, component.version, component.pid or 0, begin, component.log_path)

    def _record(self, name: str, version: str, pid: int, begin: float, log: Path) -> None:
        self.started.append(Started(name, version, pid, time.monotonic() - begin, log))

    def problems(self) -> list[str]:
        """One report per component that is not running or not healthy (empty: all fine)."""
        reports = []
        for component in self.supervised():
            if not component.alive():
                reports.append(component.death_report())
            elif not component.healthy(timeout=5.0):
                reports.append(f"{component.name} (pid {component.pid}) does not answer {component.health_url}")
        return reports

    def supervised(self) -> list[Component]:
        """Every process of the sandbox, the apiserver first."""
        return ([self.controlplane.apiserver] if self.controlplane is not None else []) + self.components

    def stop(self) -> None:
        """Stop every component (newest first) and the control plane. Idempotent."""
        atexit.unregister(self.stop)
        for component in reversed(self.components):
            with contextlib.suppress(Exception):
                component.stop()
        self.components = []
        if self.controlplane is not None:
            self.controlplane.stop()  # after the components, whose logs live in its work directory
            self.controlplane = None

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- detached state, for `gpugov sandbox status|down` ---------------------

    def state(self) -> dict[str, Any]:
        return {
            "server": self.cp.server,
            "kubeconfig": str(self.cp.kubeconfig),
            "processes": [
                {"name": s.name, "version": s.version, "pid": s.pid, "log": str(s.log), "health": _health(self, s.name)}
                for s in self.started
            ],
        }

    def write_state(self) -> Path:
        path = self.cp.workdir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state(), indent=2) + "\n")
        tmp.replace(path)
        return path


def _health(sandbox: Sandbox, name: str) -> str:
    return next(c.health_url for c in sandbox.supervised() if c.name == name)


def read_state(directory: Path) -> dict[str, Any] | None:
    try:
        return dict(json.loads((directory / STATE_FILE).read_text()))
    except (OSError, ValueError):
        return None


def detached_components(state: dict[str, Any], is_ours: Callable[[int, str], bool]) -> list[Component]:
    """Components of a detached sandbox, rebuilt from its state file (pid, log, health URL).

    ``is_ours(pid, name)`` guards against a pid that another process has since reused.
    """
    components = []
    for proc in state.get("processes", []):
        pid = int(proc["pid"])
        component = Component(
            name=str(proc["name"]),
            binary=Path(),
            args=(),
            log_path=Path(proc["log"]),
            health_url=str(proc["health"]),
            version=str(proc.get("version", "")),
        )
        component.recorded_pid = pid
        component.pid = pid if is_ours(pid, component.name) else None
        components.append(component)
    return components
