"""Property tests: for random valid organisations, compile keeps the declared quotas and references."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpugov.compile import compile
from gpugov.declarations.build import build_model
from gpugov.declarations.loader import parse_documents
from gpugov.findings import Level
from gpugov.kube.quantity import parse_quantity
from gpugov.policy import run_policy

API = "gpugov.io/v1alpha1"


def doc(kind: str, name: str, spec: dict) -> dict:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}


@st.composite
def organisations(draw: st.DrawFn) -> list[dict]:
    docs = [doc("PriorityClass", "normal", {"value": 10})]
    pools = []
    for index in range(draw(st.integers(1, 4))):
        name = f"pool{index}"
        if draw(st.booleans()):
            spec = {
                "accelerator": {"model": "H100-80GB"},
                "acceleratorsPerNode": 8,
                "nodes": [{"name": f"{name}-n{i}"} for i in range(20)],
            }
            resources = ["accelerators"]
        else:
            spec = {
                "accelerator": {"model": "A100-80GB"},
                "acceleratorsPerNode": 8,
                "migLayouts": {"small": {"1g.10gb": 7}},
                "nodes": [{"name": f"{name}-n{i}", "migLayout": "small"} for i in range(20)],
            }
            resources = ["1g.10gb"]
        spec["nodeResources"] = {"cpu": 64, "memory": "512Gi"}
        docs.append(doc("GPUPool", name, spec))
        pools.append((name, resources))
    departments: list[str] = []
    for index in range(draw(st.integers(0, 4))):
        spec: dict = {}
        if departments and draw(st.booleans()):
            spec["parent"] = draw(st.sampled_from(departments))
        departments.append(f"dept{index}")
        docs.append(doc("Department", f"dept{index}", spec))
    for index in range(draw(st.integers(1, 8))):
        spec = {"owners": {"users": ["u@example.com"]}, "costCenter": "CC", "namespaces": [f"ns{index}"]}
        department = draw(st.sampled_from([None, *departments]))
        if department:
            spec["department"] = department
        quotas = []
        for pool, resources in draw(st.lists(st.sampled_from(pools), max_size=len(pools), unique_by=lambda p: p[0])):
            nominal = draw(st.integers(0, 8))
            entry: dict = {"nominal": nominal}
            if department and draw(st.booleans()):
                entry["borrowingLimit"] = draw(st.integers(0, 8))
            if department and draw(st.booleans()):
                entry["lendingLimit"] = draw(st.integers(0, nominal))
            quotas.append({"pool": pool, "resources": {resources[0]: entry}})
        if quotas:
            spec["quotas"] = quotas
        docs.append(doc("Tenant", f"tenant{index}", spec))
    return docs


def build(docs: list[dict]):
    text = yaml.safe_dump_all(docs, sort_keys=False)
    model, duplicates = build_model(list(parse_documents(text, "org.yaml")))
    errors = [f for f in duplicates + run_policy(model) if f.level is Level.ERROR]
    assert errors == [], errors
    return model


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(organisations())
def test_kueue_quotas_and_references(docs: list[dict]) -> None:
    model = build(docs)
    objects = compile(model, backend="kueue")
    flavors = {o["metadata"]["name"] for o in objects if o["kind"] == "ResourceFlavor"}
    cohorts = {o["metadata"]["name"]: o["spec"].get("parentName") for o in objects if o["kind"] == "Cohort"}
    for parent in cohorts.values():
        assert parent is None or parent in cohorts
    for start in cohorts:  # no cycle: every chain reaches a root
        seen, current = set(), start
        while current is not None:
            assert current not in seen
            seen.add(current)
            current = cohorts[current]
    for cq in (o for o in objects if o["kind"] == "ClusterQueue"):
        tenant = model.tenants[cq["metadata"]["name"]]
        assert cq["spec"].get("cohortName") == tenant.department
        assert tenant.department is None or tenant.department in cohorts
        declared = {(q.pool, rq.resource): rq for q in tenant.quotas for rq in q.resources}
        compiled = {}
        for group in cq["spec"].get("resourceGroups", []):
            for flavor in group["flavors"]:
                assert flavor["name"] in flavors
                assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
                for r in flavor["resources"]:
                    compiled[(flavor["name"], r["name"])] = r
        for key, rq in declared.items():
            assert parse_quantity(compiled[key]["nominalQuota"]) == rq.nominal
            assert compiled[key].get("borrowingLimit") == (
                None if rq.borrowing_limit is None else str(rq.borrowing_limit)
            )
            assert compiled[key].get("lendingLimit") == (None if rq.lending_limit is None else str(rq.lending_limit))
        extra = [r for k, r in compiled.items() if k not in declared and k[1] not in ("cpu", "memory")]
        assert all(parse_quantity(r["nominalQuota"]) == 0 for r in extra)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(organisations())
def test_volcano_sums(docs: list[dict]) -> None:
    model = build(docs)
    objects = compile(model, backend="volcano")
    queues = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "Queue"}
    declared: dict[str, Decimal] = defaultdict(Decimal)
    for tenant in model.tenants.values():
        for quota in tenant.quotas:
            for rq in quota.resources:
                declared[rq.resource] += rq.nominal
    leaves: dict[str, Decimal] = defaultdict(Decimal)
    children: dict[str, list[dict]] = defaultdict(list)
    for name, spec in queues.items():
        amounts = {k: parse_quantity(v) for k, v in spec.get("deserved", {}).items()}
        for resource, value in spec.get("guarantee", {}).get("resource", {}).items():
            assert parse_quantity(value) <= amounts[resource]
        for resource, value in spec.get("capability", {}).items():
            assert amounts.get(resource, 0) <= parse_quantity(value)
        if name in model.tenants:
            for resource, value in amounts.items():
                leaves[resource] += value
        if spec.get("parent", "root") != "root":  # root is Volcano's own queue, the whole cluster
            children[spec["parent"]].append(spec)
    assert {k: v for k, v in leaves.items() if v} == {k: v for k, v in declared.items() if v}
    for parent, kids in children.items():
        for resource in {r for k in kids for r in k.get("deserved", {})}:
            total = sum(parse_quantity(k.get("deserved", {}).get(resource, 0)) for k in kids)
            assert total <= parse_quantity(queues[parent]["deserved"][resource])
