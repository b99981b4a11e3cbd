"""deploy: the organisation as a Pulumi program (pulumi-kubernetes, server-side apply).

A thin layer over compile: every resource is one of compile's objects, grouped into
components by its gpugov.io labels (see layout.py). Needs the `deploy` extra.
"""

from __future__ import annotations

from gpugov.deploy.components import GpuPool, Organisation, Tenant
from gpugov.deploy.program import kubernetes_provider, load_objects, run

__all__ = ["GpuPool", "Organisation", "Tenant", "kubernetes_provider", "load_objects", "run"]
