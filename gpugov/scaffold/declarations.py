"""The declaration files of a new config repository, as a person would write them: commented, with
the editors' schema modelines, one file per kind.

Names are checked as DNS-1123 labels before they reach a template (they are Kubernetes names, and a
label cannot break the YAML around it); free text (owners, the platform team) is written quoted.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from gpugov import __version__

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def is_label(name: str) -> bool:
    """A DNS-1123 label: what a cluster, pool, tenant and namespace name must be."""
    return len(name) <= 63 and _LABEL.fullmatch(name) is not None


@dataclass(frozen=True)
class Options:
    cluster: str = "default"
    pool: str = "gpu"
    model: str = "H100-80GB"  # a model of the accelerator catalog (`gpugov catalog`)
    accelerators_per_node: int = 8
    nodes: tuple[str, ...] = ()  # default: one node, POOL-01
    node_cpu: str = "96"  # allocatable per node, what the pool's jobs may ask besides accelerators
    node_memory: str = "1Ti"
    tenant: str = "team-a"
    owner: str = "owner@example.com"  # a Kubernetes user name
    platform_team: str = "@example-org/gpu-platform"
    backend: str = "kueue"
    pip_spec: str = f"gpugov=={__version__}"  # what the workflows install

    @property
    def node_names(self) -> tuple[str, ...]:
        return self.nodes or (f"{self.pool}-01",)

    def problems(self) -> list[str]:
        """What makes these options unusable, in words (empty when they are fine)."""
        found = [f"--{what} {name!r} is not a DNS-1123 label (lower-case letters, digits and '-', at most 63)"
                 for what, name in (("cluster", self.cluster), ("pool", self.pool), ("tenant", self.tenant))
                 if not is_label(name)]
        found += [f"--node {name!r} is not a valid node name" for name in self.node_names if not is_label(name)]
        if self.accelerators_per_node < 1:
            found.append("--accelerators-per-node must be 1 or more")
        if not self.owner.strip():
            found.append("--owner must name a user")
        return found


def _quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar


def _modeline(kind: str) -> str:
    return f"# yaml-language-server: $schema=../schemas/{kind}.json\n"


def declaration_files(o: Options) -> dict[str, str]:
    """Relative path -> text of every declaration file."""
    capacity = o.accelerators_per_node * len(o.node_names)
    nodes = "".join(f"    - name: {name}\n" for name in o.node_names)
    return {
        "policies/clusters.yaml": _modeline("cluster") + (
            "# The clusters this repository drives. Each pool names its cluster.\n"
            "apiVersion: gpugov.io/v1alpha1\n"
            "kind: Cluster\n"
            "metadata:\n"
            f"  name: {o.cluster}\n"
            "spec:\n"
            f"  backend: {o.backend}\n"
        ),
        "policies/guardrails.yaml": _modeline("guardrails") + (
            "apiVersion: gpugov.io/v1alpha1\n"
            "kind: Guardrails\n"
            "metadata:\n"
            "  name: default\n"
            "spec:\n"
            "  capacityRatio: 1.0                # guaranteed quota never exceeds physical capacity\n"
            "  requireOwner: true\n"
            "  requireCostCenter: true\n"
            "  platformTeam:                     # code owners of every file (CODEOWNERS' default owner)\n"
            f"    - {_quoted(o.platform_team)}\n"
        ),
        "policies/priorities.yaml": _modeline("priorityclass") + (
            "apiVersion: gpugov.io/v1alpha1\n"
            "kind: PriorityClass\n"
            "metadata:\n"
            "  name: high\n"
            "spec:\n"
            "  value: 1000\n"
            "  description: Deadline-bound work; may preempt batch jobs.\n"
            "---\n"
            "apiVersion: gpugov.io/v1alpha1\n"
            "kind: PriorityClass\n"
            "metadata:\n"
            "  name: batch\n"
            "spec:\n"
            "  value: 100\n"
            "  description: Everything else.\n"
        ),
        f"hardware/{o.pool}.yaml": _modeline("gpupool") + (
            "apiVersion: gpugov.io/v1alpha1\n"
            "kind: GPUPool\n"
            "metadata:\n"
            f"  name: {o.pool}\n"
            "spec:\n"
            f"  cluster: {o.cluster}\n"
            "  accelerator:\n"
            f"    model: {o.model}                # gpugov catalog lists the models\n"
            f"  acceleratorsPerNode: {o.accelerators_per_node}\n"
            f"  nodeResources: {{cpu: {_quoted(o.node_cpu)}, memory: {_quoted(o.node_memory)}}}  # per node\n"
            "  nodes:                             # the Kubernetes node names of this pool\n"
            f"{nodes}"
        ),
        f"tenants/{o.tenant}.yaml": _modeline("tenant") + (
            "apiVersion: gpugov.io/v1alpha1\n"
            "kind: Tenant\n"
            "metadata:\n"
            f"  name: {o.tenant}\n"
            "spec:\n"
            "  owners:\n"
            f"    users: [{_quoted(o.owner)}]\n"
            "  costCenter: CC-0001\n"
            f"  namespaces: [{o.tenant}]\n"
            "  queues:\n"
            "    - name: default\n"
            f"      namespace: {o.tenant}\n"
            "      priorityClasses: [high, batch]\n"
            "  quotas:\n"
            f"    - pool: {o.pool}\n"
            "      resources:\n"
            f"        accelerators: {capacity}       # the whole pool, until a second tenant shares it\n"
        ),
    }
