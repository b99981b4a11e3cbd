"""kube-scheduler and kube-controller-manager for the living sandbox.

Both are upstream's commands (built by ``tools/build k8s`` from the same
Kubernetes release as the apiserver), run out of cluster with the admin
kubeconfig, on loopback, without leader election. The controller manager runs
its default controller set, which includes the ones gpugov's objects rely on:
garbage collector, job, resourcequota, daemonset, namespace, serviceaccount
and serviceaccount-token, node lifecycle.
"""

from __future__ import annotations

from pathlib import Path

from gpugov.sandbox.components import Component
from gpugov.sandbox.controlplane import ControlPlane


def _common_args(cp: ControlPlane, port: int, cert_dir: Path) -> list[str]:
    kubeconfig = str(cp.kubeconfig)
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
    return Component(
        name="kube-controller-manager",
        binary=binary,
        args=[
            *_common_args(cp, port, workdir / "certs"),
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
