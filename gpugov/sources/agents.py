"""NVML snapshots of the node agents (`gpugov agent`): fetched over HTTP or read from files."""

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
        if data.get("kind") == SNAPSHOT_KIND:
            snapshots[data["node"]] = data
    return snapshots


def fetch_snapshots(url_template: str, nodes: list[str]) -> dict[str, dict[str, Any]]:
    """node -> snapshot from each node's agent, e.g. http://{node}:9402/snapshot.json."""
    snapshots = {}
    with requests.Session() as http:
        for node in nodes:
            url = url_template.format(node=node)
            try:
                response = http.get(url, timeout=TIMEOUT)
                response.raise_for_status()
                snapshots[node] = response.json()
            except (requests.RequestException, ValueError) as exc:
                raise CheckIncomplete(f"agent on {node}: {type(exc).__name__}") from exc
    return snapshots


