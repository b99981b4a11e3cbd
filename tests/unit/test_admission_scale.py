"""The queue-access policy at Kubernetes' scale: the API server refuses a CEL expression over 100,000
code points, and the queue maps grow with the tenants, so compile splits them over several policies,
each bound to its own tenant namespaces, with gpugov-queue-access (no queue at all) bound to every
other namespace. Behaviour is checked on the example org with a tiny budget (cel-python is slow on
large literals); the size at 1,200 tenants on a synthetic org. tests/e2e/test_controlplane.py applies
the split policies of a large org to a real API server and sends it requests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.synthetic import generate
from gpugov.app.pipeline import validate_repo
from gpugov.compile import compile
from gpugov.compile.admission import QUEUE_ACCESS, allowed_classes
from gpugov.compile.admission import common as admission  # where the shards are cut
from gpugov.compile.common import select
from tests.helpers.repos import REPO
from tests.helpers.vap_eval import Request, evaluate

CEL_LIMIT = 100_000  # the API server's limit on one expression's code points
ALICE = ("alice@example.com", ("nlp-team", "system:authenticated"))


def queue_access(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["metadata"]["name"].startswith(QUEUE_ACCESS)]


def expressions(policy: dict[str, Any]) -> list[str]:
    spec = policy["spec"]
    return [e["expression"] for part in ("matchConditions", "variables", "validations") for e in spec.get(part, [])]


def job(namespace: str, queue: str) -> dict[str, Any]:
    pod = {"containers": [{"name": "main", "image": "pause", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
           "restartPolicy": "Never"}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": queue}},
            "spec": {"suspend": True, "template": {"spec": pod}}}


def refusals(objects: list[dict[str, Any]], namespace: str, queue: str) -> list[str]:
    request = Request("CREATE", "batch", "jobs", namespace, *ALICE)
    return [m for m in evaluate(objects, request, job(namespace, queue)) if m.startswith(QUEUE_ACCESS)]


def test_a_small_org_keeps_one_policy_bound_everywhere() -> None:
    model = validate_repo(REPO).model
    assert model is not None
    policies = queue_access(compile(model, backend="kueue", cluster="east"))
    assert [(p["kind"], p["metadata"]["name"]) for p in policies] == [
        ("ValidatingAdmissionPolicy", QUEUE_ACCESS), ("ValidatingAdmissionPolicyBinding", QUEUE_ACCESS)]
    assert "matchResources" not in policies[1]["spec"]


def test_split_policies_admit_and_refuse_as_the_single_one(monkeypatch: pytest.MonkeyPatch) -> None:
    model = validate_repo(REPO).model
    assert model is not None
    single = compile(model, backend="kueue", cluster="east")
    monkeypatch.setattr(admission, "CEL_BUDGET", 1)  # one namespace a shard
    split = compile(model, backend="kueue", cluster="east")
    names = [p["metadata"]["name"] for p in queue_access(split) if p["kind"] == "ValidatingAdmissionPolicy"]
    assert len(names) >= 4 and names[0] == QUEUE_ACCESS, names
    allowed = allowed_classes(select(model, cluster="east", backend="kueue"))
    cases = [(key.split("/")[0], key.split("/")[1]) for key in allowed]  # every declared queue, honestly
    cases += [(ns, "not-declared") for ns, _ in cases]  # a queue the namespace does not declare
    cases += [(ns, queue) for ns, _ in cases[:3] for other, queue in cases[-3:] if other != ns]  # a neighbour's
    cases += [("default", "training"), ("somebody-else", "serving")]  # namespaces no tenant declares
    for namespace, queue in cases:
        one, many = refusals(single, namespace, queue), refusals(split, namespace, queue)
        assert bool(one) == bool(many), (namespace, queue, one, many)
        assert [m.split(": ", 1)[1] for m in one] == [m.split(": ", 1)[1] for m in many], (namespace, queue)
    assert any(refusals(split, ns, q) == [] for ns, q in cases)  # the honest ones pass
    assert refusals(split, "default", "training")[0].startswith(QUEUE_ACCESS + ": ")  # the catch-all policy


def test_every_expression_fits_the_api_servers_limit_at_1200_tenants(tmp_path: Path) -> None:
    model = validate_repo(generate(tmp_path / "org", tenants=1200, pools=4, nodes=40, departments=10)).model
    assert model is not None
    objects = compile(model, backend="kueue")
    policies = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"]
    sizes = {p["metadata"]["name"]: max(len(e) for e in expressions(p)) for p in policies}
    assert max(sizes.values()) < CEL_LIMIT, sizes
    shards = [p for p in queue_access(policies) if p["metadata"]["name"] != QUEUE_ACCESS]
    assert len(shards) >= 2
    # the shards' queues are exactly the declared ones, each in one shard, bound to its namespace
    scope = select(model)
    covered: list[str] = []
    bindings = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"}
    for shard in shards:
        allowed = next(v for v in shard["spec"]["variables"] if v["name"] == "allowed")["expression"]
        keys = [k for k in allowed_classes(scope) if f'"{k}"' in allowed]
        selected = bindings[shard["metadata"]["name"]]["spec"]["matchResources"]["namespaceSelector"]
        namespaces = selected["matchExpressions"][0]["values"]
        assert {k.split("/")[0] for k in keys} == set(namespaces)
        covered += keys
    assert sorted(covered) == sorted(allowed_classes(scope))
