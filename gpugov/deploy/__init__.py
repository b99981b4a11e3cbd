"""deploy: the organisation as a Pulumi program (pulumi-kubernetes, server-side apply).

A thin layer over compile: every resource is one of compile's objects, grouped into
components by its gpugov.io labels (see layout.py). Needs the `deploy` extra.
"""

from __future__ import annotations

import os

# Before pulumi brings in gRPC: its fork support restarts gRPC's poller threads in every forked
# child, and a child that then closes its inherited descriptors before exec (subprocess does)
# can abort on the closed epoll descriptor. The sandbox forks its servers from this process;
# gpugov never uses gRPC in a forked child. A user's explicit setting wins.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from gpugov.deploy.components import GpuPool, Organisation, Tenant
from gpugov.deploy.program import kubernetes_provider, load_objects, run

__all__ = ["GpuPool", "Organisation", "Tenant", "kubernetes_provider", "load_objects", "run"]
