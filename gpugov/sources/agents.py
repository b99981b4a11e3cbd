"""NVML snapshots of the node agents (`gpugov agent`): fetched over HTTP or read from files.

The URL template names a node by `{node}` (its name) or `{node_ip}` (its InternalIP, from the
Node's status): inside a cluster node names rarely resolve, while the agent DaemonSet that
compile emits listens on the node's own address (hostPort 9402). An answer that is not a
snapshot of that node is an incomplete read, like an unreachable agent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import requests

from gpugov.sources import CheckIncomplete

SNAPSHOT_KIND = "gpugov.agent.snapshot"
TIMEOUT = (3, 10)


def load_snapshots(folder: Path) -> dict[str, dict[str, Any]]:
    """node -> snapshot, from `gpugov agent --once` outputs saved as *.json."""
    snapshots = {}
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CheckIncomplete(f"agent snapshot {path}: {exc}") from exc
        if isinstance(data, dict) and data.get("kind") == SNAPSHOT_KIND and isinstance(data.get("node"), str):
            snapshots[data["node"]] = data
    return snapshots


def internal_ip(node: dict[str, Any]) -> str:
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP" and address.get("address"):
            return str(address["address"])
    return ""


def fetch_snapshots(url_template: str, nodes: list[str],
                    live_nodes: dict[str, dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """node -> snapshot from each node's agent, e.g. http://{node_ip}:9402/snapshot.json."""
    snapshots = {}
    live_nodes = live_nodes or {}
    with requests.Session() as http:
        for node in nodes:
            address = internal_ip(live_nodes.get(node, {}))
            if "{node_ip}" in url_template and not address:
                raise CheckIncomplete(f"agent on {node}: the Node has no InternalIP address for {{node_ip}}")
            url = url_template.format(node=node, node_ip=address)
            try:
                response = http.get(url, timeout=TIMEOUT)
                response.raise_for_status()
                data = response.json()
            except (requests.RequestException, ValueError) as exc:
                raise CheckIncomplete(f"agent on {node}: GET {url}: {type(exc).__name__}") from exc
            if not isinstance(data, dict) or data.get("kind") != SNAPSHOT_KIND or data.get("node") != node:
                raise CheckIncomplete(f"agent on {node}: GET {url}: not a gpugov agent snapshot of node {node}")
            snapshots[node] = data
    return snapshots


def _ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def agent_nodes(declared: list[str], live_nodes: dict[str, dict[str, Any]], selector: dict[str, str]) -> list[str]:
    """The declared nodes whose agent should answer: in the cluster, Ready (drift reports the
    others as GD010/GD011) and matched by the agent DaemonSet's nodeSelector."""
    chosen = []
    for name in declared:
        node = live_nodes.get(name)
        labels = (node or {}).get("metadata", {}).get("labels") or {}
        if node is not None and _ready(node) and all(labels.get(k) == v for k, v in selector.items()):
            chosen.append(name)
    return chosen
