"""A real, throw-away Kubernetes control plane (kube-apiserver + etcd) on loopback.

``ControlPlane`` runs the ``gpugov-controlplane`` binary (built by
``tools/build k8s``) the way envtest runs kube-apiserver: loopback only, own
PKI, RBAC with an admin client certificate, no controllers, no kubelets. It is
real enough to enforce CRD schemas and CEL rules, server-side apply and RBAC,
which is what gpugov's end-to-end tests and ``gpugov sandbox`` need.

Usage::

    with ControlPlane() as cp:
        core = kubernetes.client.CoreV1Api(cp.api_client())

The server is one more ``Component`` (its own process group, its log, /readyz as its health
URL), supervised like the sandbox's other processes (``gpugov.sandbox.processes``).
Everything lives in one work directory (PKI, etcd data, log, kubeconfig).
``stop()`` ends the whole process group and, for a temporary work directory,
removes it, so nothing is left behind even when a test fails.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import shutil
import ssl
import tempfile
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from gpugov.sandbox import crds as crd_mod
from gpugov.sandbox.components import Component, ComponentError
from gpugov.sandbox.pki import ADMIN_USER, FRONT_PROXY_CLIENT, PKIFiles, generate_pki
from gpugov.sandbox.processes import ProcessError, all_or_nothing, free_ports, log_tail
from gpugov.sandbox.tools import controlplane_binary

LOG_NAME = "controlplane.log"
KUBECONFIG_NAME = "kubeconfig"
CONTEXT_NAME = "gpugov-sandbox"
APISERVER = "kube-apiserver"  # its component's name, as `gpugov sandbox status` shows it
_PORT_IN_USE = "address already in use"
_START_ATTEMPTS = 3  # retries only for the (rare) race on a just-picked free port
_STOP_TIMEOUT = 30.0

_T = TypeVar("_T")


class ControlPlaneError(ProcessError):
    """The control plane failed to start, become ready or stop."""


class _PortRaceError(ControlPlaneError):
    """Another process grabbed one of our picked ports before the server bound it."""


@dataclass(frozen=True)
class Ports:
    """Loopback ports of one control plane instance."""

    apiserver: int
    etcd_client: int
    etcd_peer: int


def pick_free_ports() -> Ports:
    """Three distinct free loopback ports for the apiserver and etcd."""
    api, etcd_client, etcd_peer = free_ports(3)
    return Ports(api, etcd_client, etcd_peer)


class ControlPlane:
    """kube-apiserver + embedded etcd on 127.0.0.1, as a context manager.

    Args:
        binary: the gpugov-controlplane executable; default: found/built via tools/build.
        workdir: where PKI, etcd data, log and kubeconfig go. Default: a new
            temporary directory that ``stop()`` removes. A given directory is
            left in place (its owner, e.g. ``gpugov sandbox``, removes it).
        crd_dirs: directories of CRD YAMLs to install; default: Kueue's and Volcano's own,
            from the Go modules tools/build builds them from (see ``crds.crd_dirs``); ``[]``: none.
        detach: for ``gpugov sandbox up``: the server outlives this Python
            process (no parent-death signal, no stop at interpreter exit).
        startup_timeout: seconds to wait for /readyz.
        extra_args: additional kube-apiserver flags.
        with_controllers: a controller manager will run (``gpugov.sandbox.cluster``):
            keep the ServiceAccount admission plugin, whose service accounts it creates.
    """

    def __init__(
        self,
        binary: Path | None = None,
        workdir: Path | None = None,
        *,
        crd_dirs: Sequence[Path] | None = None,
        detach: bool = False,
        startup_timeout: float = 120.0,
        extra_args: Sequence[str] = (),
        with_controllers: bool = False,
    ) -> None:
        self._binary = binary
        self._given_workdir = workdir
        self._crd_dirs = crd_dirs
        self._detach = detach
        self._startup_timeout = startup_timeout
        self._extra_args = list(extra_args)
        self._with_controllers = with_controllers
        self._apiserver: Component | None = None
        self._workdir: Path | None = None
        self._pki: PKIFiles | None = None
        self._ports: Ports | None = None
        self._clients: list[client.ApiClient] = []
        self.installed_crds: list[str] = []

    # -- public API -------------------------------------------------------

    @property
    def binary(self) -> Path:
        """The gpugov-controlplane executable in use."""
        return self._require(self._binary, "binary")

    @property
    def workdir(self) -> Path:
        return self._require(self._workdir, "workdir")

    @property
    def server(self) -> str:
        """The apiserver URL, e.g. https://127.0.0.1:40123."""
        return f"https://127.0.0.1:{self._require(self._ports, 'ports').apiserver}"

    @property
    def pid(self) -> int:
        """Pid of the server (also its process group id)."""
        return self._require(self.apiserver.pid, "process")

    @property
    def apiserver(self) -> Component:
        """The server's process, as the sandbox supervises each of its components."""
        return self._require(self._apiserver, "process")

    @property
    def pki(self) -> PKIFiles:
        return self._require(self._pki, "pki")

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / KUBECONFIG_NAME

    @property
    def log_path(self) -> Path:
        return self.workdir / LOG_NAME

    def start(self) -> ControlPlane:
        """Start the server, wait for readiness, install CRDs. Cleans up on failure."""
        if self._apiserver is not None:
            raise ControlPlaneError("control plane already started")
        with all_or_nothing(self.stop, self._detach):
            self._binary = self._binary or controlplane_binary()
            self._workdir = self._make_workdir()
            self._pki = generate_pki(self.workdir / "pki")
            self._start_server(self._binary)
            self._write_kubeconfig()
            self._install_crds()
        return self

    def stop(self) -> None:
        """Stop the process group and remove a temporary work directory. Idempotent."""
        atexit.unregister(self.stop)
        for api_client in self._clients:
            with contextlib.suppress(Exception):
                api_client.close()
        self._clients.clear()
        if self._apiserver is not None:
            self._apiserver.stop(timeout=_STOP_TIMEOUT)
            self._apiserver = None
        if self._workdir is not None and self._given_workdir is None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def api_client(self) -> client.ApiClient:
        """A kubernetes ApiClient authenticated as the admin (system:masters)."""
        pki = self._require(self._pki, "pki")
        config = client.Configuration()
        config.host = self.server
        config.ssl_ca_cert = str(pki.ca_cert)
        config.cert_file = str(pki.admin_cert)
        config.key_file = str(pki.admin_key)
        api_client = client.ApiClient(config)
        self._clients.append(api_client)
        return api_client

    def dynamic_client(self) -> DynamicClient:
        """A DynamicClient whose discovery cache lives in the work directory.

        (Its default cache file is in /tmp, keyed by URL only: it would outlive
        the server and could be served stale to a later one on the same port.)
        """
        return DynamicClient(self.api_client(), cache_file=str(self.workdir / "discovery-cache.json"))

    def get(self, path: str) -> bytes:
        """GET a raw API path (e.g. /readyz?verbose) as the admin; raises on HTTP errors."""
        with self._open(path) as response:
            return bytes(response.read())

    def version(self) -> dict[str, Any]:
        """The server's /version document (gitVersion etc.)."""
        return dict(json.loads(self.get("/version")))

    # -- startup steps ----------------------------------------------------

    def _make_workdir(self) -> Path:
        if self._given_workdir is None:
            return Path(tempfile.mkdtemp(prefix="gpugov-controlplane-"))
        self._given_workdir.mkdir(parents=True, exist_ok=True)
        return self._given_workdir

    def _start_server(self, binary: Path) -> None:
        for attempt in range(1, _START_ATTEMPTS + 1):
            self._ports = pick_free_ports()
            self._apiserver = Component(
                name=APISERVER,
                binary=binary,
                args=self._args(self._ports),
                log_path=self.log_path,
                # Readiness, not liveness: /readyz answers 200 once every post-start hook (RBAC
                # bootstrap, CRD informers) has run; anonymous clients may read it.
                health_url=f"{self.server}/readyz",
                cwd=self.workdir,
            )
            self._apiserver.start(detach=self._detach)
            try:
                self._wait_ready(self._apiserver)
                return
            except _PortRaceError:
                self._apiserver.stop(timeout=_STOP_TIMEOUT)
                self._apiserver = None
                if attempt == _START_ATTEMPTS:
                    raise

    def _args(self, ports: Ports) -> list[str]:
        pki = self._require(self._pki, "pki")
        # envtest's defaults (controller-runtime pkg/internal/testing/controlplane),
        # plus our own serving cert so clients can verify the server.
        return [
            f"--embedded-etcd-data-dir={self.workdir / 'etcd'}",
            f"--embedded-etcd-client-port={ports.etcd_client}",
            f"--embedded-etcd-peer-port={ports.etcd_peer}",
            "--embedded-etcd-unsafe-no-fsync",  # throw-away data; fsync only slows CI
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # No `kubernetes` Service endpoints to maintain; and Kubernetes >= 1.37
            # refuses a loopback advertise address with the default (lease) reconciler.
            "--endpoint-reconciler-type=none",
            f"--secure-port={ports.apiserver}",
            f"--cert-dir={self.workdir / 'certs'}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            # Without a controller manager nobody creates ServiceAccounts, so that plugin would reject pods.
            *(() if self._with_controllers else ("--disable-admission-plugins=ServiceAccount",)),
            "--authorization-mode=Node,RBAC",
            # The aggregation layer, for extension API servers such as Kueue's visibility API.
            f"--requestheader-client-ca-file={pki.front_proxy_ca_cert}",
            f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki.front_proxy_client_cert}",
            f"--proxy-client-key-file={pki.front_proxy_client_key}",
            f"--service-account-issuer=https://127.0.0.1:{ports.apiserver}",
            f"--service-account-key-file={pki.sa_public_key}",
            f"--service-account-signing-key-file={pki.sa_private_key}",
            *self._extra_args,
        ]

    def _ssl_context(self) -> ssl.SSLContext:
        pki = self._require(self._pki, "pki")
        context = ssl.create_default_context(cafile=str(pki.ca_cert))
        context.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
        return context

    def _open(self, path: str, timeout: float = 5.0) -> Any:
        return urllib.request.urlopen(self.server + path, context=self._ssl_context(), timeout=timeout)

    def _wait_ready(self, apiserver: Component) -> None:
        """Wait for /readyz; a port taken between picking and binding is a race to retry."""
        try:
            apiserver.wait_healthy(self._startup_timeout)
        except ComponentError as exc:
            code = apiserver.exit_code()
            if code is not None and _PORT_IN_USE in log_tail(self.log_path):
                raise _PortRaceError(log_tail(self.log_path)) from exc
            raise ControlPlaneError(str(exc)) from exc

    def _write_kubeconfig(self) -> None:
        """Self-contained admin kubeconfig (certs inlined, so it can be copied)."""
        pki = self._require(self._pki, "pki")

        def b64(path: Path) -> str:
            return base64.b64encode(path.read_bytes()).decode()

        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": CONTEXT_NAME,
                    "cluster": {"server": self.server, "certificate-authority-data": b64(pki.ca_cert)},
                }
            ],
            "users": [
                {
                    "name": ADMIN_USER,
                    "user": {
                        "client-certificate-data": b64(pki.admin_cert),
                        "client-key-data": b64(pki.admin_key),
                    },
                }
            ],
            "contexts": [{"name": CONTEXT_NAME, "context": {"cluster": CONTEXT_NAME, "user": ADMIN_USER}}],
            "current-context": CONTEXT_NAME,
        }
        self.kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))
        self.kubeconfig.chmod(0o600)

    def _install_crds(self) -> None:
        dirs = self._crd_dirs
        if dirs is None:
            dirs = crd_mod.crd_dirs()
        if dirs:
            self.installed_crds = crd_mod.install_crds(self.api_client(), self.dynamic_client(), dirs)

    @staticmethod
    def _require(value: _T | None, what: str) -> _T:
        if value is None:
            raise ControlPlaneError(f"control plane not started ({what} unknown)")
        return value

