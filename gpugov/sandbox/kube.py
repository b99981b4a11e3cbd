"""kube-scheduler and kube-controller-manager for the living sandbox.

Both are upstream's commands (built by ``tools/build k8s`` from the same
Kubernetes release as the apiserver), run out of cluster with the admin
kubeconfig, on loopback, without leader election; the controller manager as the user a
kubeadm cluster's runs as (system:kube-controller-manager), so that admission can tell it from
the admin. The controller manager runs its default controller set, which includes the ones gpugov's objects rely on:
garbage collector, job, resourcequota, daemonset, namespace, serviceaccount
and serviceaccount-token, node lifecycle.
"""

from __future__ import annotations

from pathlib import Path

from gpugov.sandbox.components import Component
from gpugov.sandbox.controlplane import ControlPlane
from gpugov.sandbox.pki import identity_kubeconfig

# The user a kubeadm cluster's controller manager authenticates as (without
# --use-service-account-credentials): gpugov's admission policies trust it as a controller
# (Guardrails.isolation.trustedControllers), while the sandbox's admin is checked like a tenant.
CONTROLLER_MANAGER_USER = "system:kube-controller-manager"


def _common_args(cp: ControlPlane, port: int, cert_dir: Path, kubeconfig_path: Path | None = None) -> list[str]:
    kubeconfig = str(kubeconfig_path or cp.kubeconfig)
    return [
        f"--kubeconfig={kubeconfig}",
        # Delegated authn/authz of their own /metrics etc.; /healthz is always allowed.
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
        "--leader-elect=false",
    ]


def scheduler(cp: ControlPlane, binary: Path, port: int, version: str) -> Component:
    workdir = cp.workdir / "kube-scheduler"
    return Component(
        name="kube-scheduler",
        binary=binary,
        args=_common_args(cp, port, workdir / "certs"),
        log_path=workdir / "kube-scheduler.log",
        health_url=f"https://127.0.0.1:{port}/healthz",
        version=version,
    )


def controller_manager(cp: ControlPlane, binary: Path, port: int, version: str) -> Component:
    workdir = cp.workdir / "kube-controller-manager"
    # Its own identity (system:masters for its permissions; no RBAC bootstrap to set up).
    kubeconfig = identity_kubeconfig(cp.kubeconfig, cp.pki.ca_cert.parent, workdir / "kubeconfig",
                                     CONTROLLER_MANAGER_USER, ["system:masters"])
    return Component(
        name="kube-controller-manager",
        binary=binary,
        args=[
            *_common_args(cp, port, workdir / "certs", kubeconfig),
            "--controllers=*",
            # Signs the ServiceAccount token Secrets; the apiserver verifies with sa.pub.
            f"--service-account-private-key-file={cp.pki.sa_private_key}",
            f"--root-ca-file={cp.pki.ca_cert}",
            "--cluster-name=gpugov-sandbox",
            # The sandbox's KWOK nodes renew their leases; a node that stops is NotReady after 40s.
            "--node-monitor-grace-period=40s",
        ],
        log_path=workdir / "kube-controller-manager.log",
        health_url=f"https://127.0.0.1:{port}/healthz",
        version=version,
    )
