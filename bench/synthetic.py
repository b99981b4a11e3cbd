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


# A production cluster's shape (issue #12): six accelerator models, 4,100 nodes, 23,200 GPUs, 150 tenants.
# Two pools per model; A100 nodes are half MIG, one A10 pool is shared through HAMi.
PRODUCTION_POOLS = (
    # (pool, model, GPUs per node, nodes, cpu, memory)
    ("a100-mig", "A100-80GB", 8, 300, 128, "1Ti"),
    ("a100", "A100-80GB", 8, 300, 128, "1Ti"),
    ("h800-a", "H800", 8, 450, 192, "2Ti"),
    ("h800-b", "H800", 8, 450, 192, "2Ti"),
    ("a800-a", "A800-80GB", 8, 300, 128, "1Ti"),
    ("a800-b", "A800-80GB", 8, 300, 128, "1Ti"),
    ("a10-hami", "A10", 2, 400, 32, "256Gi"),
    ("a10", "A10", 2, 400, 32, "256Gi"),
    ("l20-a", "L20", 4, 300, 64, "512Gi"),
    ("l20-b", "L20", 4, 300, 64, "512Gi"),
    ("l40s-a", "L40S", 4, 300, 64, "512Gi"),
    ("l40s-b", "L40S", 4, 300, 64, "512Gi"),
)


def generate_production(root: Path, tenants: int = 150, departments: int = 10) -> Path:
    """Write the production-shaped org under `root`; every tenant holds quota in three pools, within capacity."""
    _dump(root / "policies" / "clusters.yaml", [_doc("Cluster", "prod", {"backend": "kueue"})])
    _dump(root / "policies" / "priorities.yaml", [
        _doc("PriorityClass", "critical", {"value": 1000, "preemptible": False}),
        _doc("PriorityClass", "normal", {"value": 100}),
        _doc("PriorityClass", "low", {"value": 10}),
    ])
    _dump(root / "policies" / "guardrails.yaml", [_doc("Guardrails", "default", {"platformTeam": ["@org/platform"]})])
    for name, model, per_node, nodes, cpu, memory in PRODUCTION_POOLS:
        spec: dict = {
            "cluster": "prod",
            "accelerator": {"model": model},
            "acceleratorsPerNode": per_node,
            "nodeResources": {"cpu": cpu, "memory": memory},
            "topology": {"levels": ["example.com/block", "example.com/rack"]},
            "nodes": [],
        }
        if name == "a100-mig":
            spec["migLayouts"] = {"small": {"1g.10gb": 7}, "mixed": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}
        if name == "a10-hami":
            spec["sharing"] = {"hami": {"deviceSplitCount": 10}}
        for n in range(nodes):
            node: dict = {"name": f"{name}-{n:04d}",
                          "labels": {"example.com/block": f"b{n // 50}", "example.com/rack": f"r{n // 10}"}}
            if name == "a100-mig" and n % 2:
                node["migLayout"] = "small" if n % 4 == 1 else "mixed"
            spec["nodes"].append(node)
        _dump(root / "hardware" / f"{name}.yaml", [_doc("GPUPool", name, spec)])
    depts = []
    for d in range(departments):
        spec = {"costCenter": f"CC-{d}"}
        if d >= 4:
            spec["parent"] = f"dept-{d % 4}"
        depts.append(_doc("Department", f"dept-{d}", spec))
    _dump(root / "tenants" / "departments.yaml", depts)
    pools = len(PRODUCTION_POOLS)
    holders = [[t for t in range(tenants) if p in _production_pools_of(t, pools)] for p in range(pools)]
    for t in range(tenants):
        quotas = [{"pool": PRODUCTION_POOLS[p][0], "resources": _production_quota(p, len(holders[p]), t)}
                  for p in _production_pools_of(t, pools)]
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


def _production_pools_of(tenant: int, pools: int) -> list[int]:
    return sorted({tenant % pools, (tenant * 5 + 3) % pools, (tenant * 7 + 1) % pools})


def _production_quota(pool: int, holders: int, tenant: int) -> dict:
    """A quarter of the pool's capacity split evenly: well within capacity whatever the units."""
    name, _, per_node, nodes, cpu, _ = PRODUCTION_POOLS[pool]
    devices = per_node * nodes
    share = max(1, devices // holders // 4)
    limits = {"borrowingLimit": share, "lendingLimit": share // 2}
    if name == "a100-mig":  # 150 whole-GPU nodes, 75 nodes of 7 small slices, 75 of 1+1+2
        return {"accelerators": {"nominal": max(1, 150 * 8 // holders // 4), **limits},
                "1g.10gb": max(1, 75 * 8 * 9 // holders // 4), "cpu": share * 8, "memory": f"{share * 64}Gi"}
    if name == "a10-hami" and tenant % 2:  # fractional: vGPUs with memory and compute of their own
        return {"accelerators": share * 4, "acceleratorMemory": f"{share * 6}Gi", "acceleratorCores": share * 25}
    return {"accelerators": {"nominal": share, **limits}, "cpu": share * cpu // per_node // 2,
            "memory": f"{share * 32}Gi"}
