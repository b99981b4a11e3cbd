"""The real Volcano (v1.14.1) out of cluster, wired into the sandbox apiserver.

What an in-cluster install gets from Volcano's Helm chart, the sandbox sets up by hand:

- Volcano's own CRDs (``tools/build volcano`` keeps the module's ``config/crd/volcano`` and
  ``config/crd/jobflow`` beside the binaries: without every one of them the scheduler's and the
  controller manager's caches never sync);
- the ``volcano-system`` namespace;
- ``vc-controller-manager`` (its queue controller opens Queues and writes ``spec.parent: root``
  onto queues without a parent; its podgroup controller makes a PodGroup for every pod scheduled
  by ``volcano``; its job controller serves ``batch.volcano.sh`` Jobs) and ``vc-scheduler`` with
  the configuration gpugov compiles from the declarations (``gpugov.compile.volcano_scheduler``),
  written to the file the scheduler watches, as the chart mounts its ConfigMap;
- their identities: the users and groups of the chart's ServiceAccounts
  (``system:serviceaccount:volcano-system:volcano-controllers`` and ``...:volcano-scheduler``),
  client certs from the sandbox CA, which gpugov's admission policies trust as controllers.

No webhook manager runs: gpugov's admission policies carry the checks a tenant could otherwise get
around (queue access, the scheduler name, priority classes), and Volcano's own webhook fails
closed on every pod create when it is down (volcano#3734).
"""

from __future__ import annotations

import os
from pathlib import Path

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpugov.sandbox import crds as crd_mod
from gpugov.sandbox.components import Component
from gpugov.sandbox.controlplane import ControlPlane
from gpugov.sandbox.pki import identity_kubeconfig

NAMESPACE = "volcano-system"
CONTROLLERS_USER = f"system:serviceaccount:{NAMESPACE}:volcano-controllers"
SCHEDULER_USER = f"system:serviceaccount:{NAMESPACE}:volcano-scheduler"
# system:masters for their permissions, since the sandbox installs none of the chart's RBAC.
GROUPS = ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:masters"]
CONFIG_ENV = "GPUGOV_VOLCANO_CONFIG"
SCHEDULE_PERIOD = "1s"


def volcano_crd_dir(binary: Path) -> Path:
    """Volcano's own CRDs, kept by tools/build beside the binary in use (or $GPUGOV_VOLCANO_CONFIG)."""
    override = os.environ.get(CONFIG_ENV)
    directory = Path(override) if override else binary.resolve().parent / "config"
    crd_dir = directory / "crd"
    if not crd_dir.is_dir():
        raise crd_mod.CRDError(
            f"Volcano's CRDs are not in {crd_dir} (tools/build volcano puts them beside the binaries; "
            f"or set {CONFIG_ENV} to a folder holding crd/)"
        )
    return crd_dir


class Volcano:
    """Sets up and supervises Volcano's controller manager and scheduler of one sandbox."""

    def __init__(
        self,
        cp: ControlPlane,
        binaries: dict[str, Path],
        ports: dict[str, int],
        scheduler_conf: str,
        version: str,
    ) -> None:
        self._cp = cp
        self._binaries = binaries
        self._scheduler_conf = scheduler_conf
        self.workdir = cp.workdir / "volcano"
        self.conf_path = self.workdir / "volcano-scheduler.conf"
        self.controllers = Component(
            name="vc-controller-manager",
            binary=binaries["vc-controller-manager"],
            args=[
                f"--kubeconfig={self.workdir / 'controllers.kubeconfig'}",
                "--leader-elect=false",
                "--enable-healthz=true",
                f"--healthz-address=127.0.0.1:{ports['controllers-health']}",
                f"--listen-address=127.0.0.1:{ports['controllers-metrics']}",
                "--scheduler-name=volcano",
            ],
            log_path=self.workdir / "vc-controller-manager.log",
            health_url=f"http://127.0.0.1:{ports['controllers-health']}/healthz",
            version=version,
        )
        self.scheduler = Component(
            name="vc-scheduler",
            binary=binaries["vc-scheduler"],
            args=[
                f"--kubeconfig={self.workdir / 'scheduler.kubeconfig'}",
                f"--scheduler-conf={self.conf_path}",
                f"--schedule-period={SCHEDULE_PERIOD}",
                "--scheduler-name=volcano",
                "--leader-elect=false",
                "--enable-healthz=true",
                f"--healthz-address=127.0.0.1:{ports['scheduler-health']}",
                f"--listen-address=127.0.0.1:{ports['scheduler-metrics']}",
                # Its cache dumper writes to /tmp on SIGUSR2 only; keep even that in the sandbox.
                f"--cache-dump-dir={self.workdir}",
            ],
            log_path=self.workdir / "vc-scheduler.log",
            health_url=f"http://127.0.0.1:{ports['scheduler-health']}/healthz",
            version=version,
        )

    @property
    def components(self) -> list[Component]:
        return [self.controllers, self.scheduler]

    def prepare(self) -> list[str]:
        """Namespace, CRDs, identities and the scheduler's configuration file."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        pki_dir = self._cp.pki.ca_cert.parent
        identity_kubeconfig(self._cp.kubeconfig, pki_dir, self.workdir / "controllers.kubeconfig", CONTROLLERS_USER, GROUPS)
        identity_kubeconfig(self._cp.kubeconfig, pki_dir, self.workdir / "scheduler.kubeconfig", SCHEDULER_USER, GROUPS)
        self.write_scheduler_conf(self._scheduler_conf)
        try:
            client.CoreV1Api(self._cp.api_client()).create_namespace({"metadata": {"name": NAMESPACE}})
        except ApiException as exc:
            if exc.status != 409:
                raise
        crds = crd_mod.load_crds([volcano_crd_dir(self._binaries["vc-scheduler"])])
        names = crd_mod.apply_crds(self._cp.dynamic_client(), crds)
        crd_mod.wait_established(self._cp.api_client(), names)
        return names

    def write_scheduler_conf(self, text: str) -> None:
        """Replace the configuration the scheduler watches (atomically, as a ConfigMap volume does)."""
        tmp = self.conf_path.with_name(f".{self.conf_path.name}.{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, self.conf_path)
        self._scheduler_conf = text

    def start(self, timeout: float, detach: bool = False) -> None:
        """The controller manager first: the scheduler allocates only to queues it has opened."""
        for component in self.components:
            component.start(detach=detach)
        for component in self.components:
            component.wait_healthy(timeout)
