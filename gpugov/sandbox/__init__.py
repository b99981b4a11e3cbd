"""Throw-away local Kubernetes control plane for tests and ``gpugov sandbox``.

Runs a real kube-apiserver (with embedded etcd) built from Go modules by
``tools/build k8s``, with the Kueue and Volcano CRDs installed.

Names are imported lazily (PEP 562): the kubernetes client takes ~0.3 s to
import, and ``gpugov --help`` should not pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpugov.app.exports import lazy_exports

if TYPE_CHECKING:
    from gpugov.sandbox.controlplane import ControlPlane, ControlPlaneError
    from gpugov.sandbox.nodes import create_nodes
    from gpugov.sandbox.tools import ToolUnavailableError

__all__ = ["ControlPlane", "ControlPlaneError", "ToolUnavailableError", "create_nodes"]

_HOMES = {
    "ControlPlane": "gpugov.sandbox.controlplane",
    "ControlPlaneError": "gpugov.sandbox.controlplane",
    "create_nodes": "gpugov.sandbox.nodes",
    "ToolUnavailableError": "gpugov.sandbox.tools",
}

__getattr__ = lazy_exports(__name__, _HOMES)
