"""KWOK as the kubelet of the sandbox's simulated GPU servers.

KWOK (sigs.k8s.io/kwok v0.8.0) manages the Nodes that carry its annotation: it
makes them Ready with the capacity gpugov gave them (what the NVIDIA or Ascend
device plugin would report), renews their Leases, runs the pods bound to them and
completes a pod once the duration in its ``sandbox.gpugov.io/run-for`` annotation
has passed (``kwok-stages.yaml``), so Jobs finish and quota frees up.
"""

from __future__ import annotations

from pathlib import Path

from gpugov.sandbox.components import Component
from gpugov.sandbox.controlplane import ControlPlane

NODE_ANNOTATION = "kwok.x-k8s.io/node"
NODE_ANNOTATION_VALUE = "fake"
# A pod with this annotation (a Go duration such as "45s") succeeds that long after it starts.
RUN_FOR_ANNOTATION = "sandbox.gpugov.io/run-for"
STAGES = Path(__file__).with_name("kwok-stages.yaml")
# Shorter than the controller manager's --node-monitor-grace-period (40s).
LEASE_SECONDS = 20


def kwok(cp: ControlPlane, binary: Path, port: int, version: str) -> Component:
    workdir = cp.workdir / "kwok"
    return Component(
        name="kwok",
        binary=binary,
        args=[
            f"--kubeconfig={cp.kubeconfig}",
            f"--config={STAGES}",
            f"--manage-nodes-with-annotation-selector={NODE_ANNOTATION}={NODE_ANNOTATION_VALUE}",
            f"--server-address=127.0.0.1:{port}",
            f"--node-lease-duration-seconds={LEASE_SECONDS}",
            "--cidr=10.244.0.0/16",
            "--node-ip=10.96.0.1",
        ],
        log_path=workdir / "kwok.log",
        health_url=f"http://127.0.0.1:{port}/healthz",
        version=version,
        cwd=workdir,
    )
