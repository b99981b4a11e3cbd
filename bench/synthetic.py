"""Generate a synthetic organisation: many tenants, pools and nodes, valid by construction."""

from __future__ import annotations

from pathlib import Path

import yaml

API = "gpugov.io/v1alpha1"


def _doc(kind: str, name: str, spec: dict) -> dict:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}


def _dump(path: Path, docs: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")


def generate(root: Path, tenants: int = 1000, pools: int = 50, nodes: int = 5000, departments: int = 20) -> Path:
    """Write the org under `root`. Every tenant holds quota in two pools; quotas fit capacity."""
    nodes_per_pool = nodes // pools
    _dump(root / "policies" / "clusters.yaml", [_doc("Cluster", "synthetic", {"backend": "kueue"})])
    _dump(root / "policies" / "priorities.yaml", [
        _doc("PriorityClass", "critical", {"value": 1000, "preemptible": False}),
        _doc("PriorityClass", "normal", {"value": 100}),
        _doc("PriorityClass", "low", {"value": 10}),
    ])
    _dump(root / "policies" / "guardrails.yaml", [_doc("Guardrails", "default", {"platformTeam": ["@org/platform"]})])
    for p in range(pools):
        mig = p % 5 == 4
        spec: dict = {
            "cluster": "synthetic",
            "accelerator": {"model": "A100-80GB" if mig else "H100-80GB"},
            "acceleratorsPerNode": 8,
            "nodeResources": {"cpu": 128, "memory": "1Ti"},
            "topology": {"levels": ["example.com/block", "example.com/rack"]},
            "nodes": [],
        }
        if mig:
            spec["migLayouts"] = {"small": {"1g.10gb": 7}, "mixed": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}
        for n in range(nodes_per_pool):
            node: dict = {"name": f"p{p}-n{n}", "labels": {"example.com/block": f"b{n // 50}", "example.com/rack": f"r{n // 10}"}}
            if mig:
                node["migLayout"] = "small" if n % 2 else "mixed"
            spec["nodes"].append(node)
        _dump(root / "hardware" / f"pool-{p}.yaml", [_doc("GPUPool", f"pool-{p}", spec)])
    depts = []
    for d in range(departments):
        spec = {"costCenter": f"CC-{d}"}
        if d >= 4:
            spec["parent"] = f"dept-{d % 4}"
        depts.append(_doc("Department", f"dept-{d}", spec))
    _dump(root / "tenants" / "departments.yaml", depts)
    per_pool = max(1, (tenants * 2) // pools)
    capacity = nodes_per_pool * 8
    share = max(1, capacity // per_pool // 2)
    for t in range(tenants):
        quotas = []
        for p in (t % pools, (t * 7 + 3) % pools):
            if any(q["pool"] == f"pool-{p}" for q in quotas):
                continue
            key = "1g.10gb" if p % 5 == 4 else "accelerators"
            quotas.append({"pool": f"pool-{p}", "resources": {
                key: {"nominal": share, "borrowingLimit": share, "lendingLimit": share // 2},
                "cpu": share * 8, "memory": f"{share * 64}Gi"}})
        spec = {
            "department": f"dept-{t % departments}",
            "owners": {"users": [f"user{t}@example.com"], "groups": [f"team-{t}"]},
            "costCenter": f"CC-T{t}",
            "namespaces": [f"team-{t}", f"team-{t}-dev"],
            "queues": [
                {"name": "main", "namespace": f"team-{t}", "priorityClasses": ["normal", "low"]},
                {"name": "dev", "namespace": f"team-{t}-dev", "priorityClasses": ["low"]},
            ],
            "quotas": quotas,
        }
        _dump(root / "tenants" / f"team-{t}.yaml", [_doc("Tenant", f"team-{t}", spec)])
    return root
