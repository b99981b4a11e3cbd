"""Compile shares a borrow-only flavor entry between the queues that list it, and a queue's whole
resourceGroups between queues whose groups come out equal (#42): the render, the conformance checks and
the reserved-namespace checks read each once, with the same bytes and findings."""

from __future__ import annotations

import copy
import json
from fnmatch import fnmatchcase
from pathlib import Path

from bench.synthetic import generate
from gpugov.app.desired import desired_state
from gpugov.manifests import manifest_files
from gpugov.policy.conformance import check_objects
from gpugov.policy.naming import any_pattern


def test_borrow_only_flavors_are_shared_and_render_as_fresh_copies(tmp_path: Path) -> None:
    state = desired_state(generate(tmp_path, tenants=12, pools=6, nodes=12, departments=2))
    queues = [o for o in state.objects if o["kind"] == "ClusterQueue"]
    entries: dict[tuple[str, tuple[str, ...]], list[dict]] = {}
    for queue in queues:
        (group,) = queue["spec"]["resourceGroups"]
        for flavor in group["flavors"]:
            if all(r == {"name": r["name"], "nominalQuota": "0"} for r in flavor["resources"]):
                entries.setdefault((flavor["name"], tuple(group["coveredResources"])), []).append(flavor)
    shared = [found for found in entries.values() if len(found) > 1]
    assert shared and all(all(f is found[0] for f in found) for found in shared)
    fresh = copy.deepcopy(state.objects)  # no entry shared: what compile made before
    for queue in (o for o in fresh if o["kind"] == "ClusterQueue"):
        for group in queue["spec"]["resourceGroups"]:
            group["flavors"] = [copy.deepcopy(f) for f in group["flavors"]]
    assert manifest_files(state.objects) == manifest_files(fresh)
    assert check_objects(state.objects) == check_objects(fresh) == []


def test_equal_resource_groups_are_one_object_and_render_as_unshared_copies(tmp_path: Path) -> None:
    state = desired_state(generate(tmp_path, tenants=40, pools=6, nodes=12, departments=3))
    queues = [o for o in state.objects if o["kind"] == "ClusterQueue"]
    by_text: dict[str, list[list[dict]]] = {}
    for queue in queues:
        groups = queue["spec"]["resourceGroups"]
        by_text.setdefault(json.dumps(groups, sort_keys=True), []).append(groups)
    assert len(by_text) < len(queues), "the org must have queues with equal groups"
    for equal in by_text.values():  # equal groups are one list, unequal ones never
        assert all(groups is equal[0] for groups in equal)
    assert len({id(g) for g in (q["spec"]["resourceGroups"] for q in queues)}) == len(by_text)
    unshared = json.loads(json.dumps(state.objects))  # nothing shared at any depth
    assert manifest_files(state.objects) == manifest_files(unshared)
    assert check_objects(state.objects) == check_objects(unshared) == []


def test_quotas_equal_in_value_but_written_apart_are_not_one_key() -> None:
    from decimal import Decimal

    from gpugov.compile.kueue import _resource_groups_key
    from gpugov.declarations.model import PoolQuota, ResourceQuota

    def key(nominal: str, borrowing: str | None = None, never_borrow: bool = False) -> tuple:
        quota = PoolQuota("a", 0, (ResourceQuota("accelerators", "nvidia.com/gpu", Decimal(nominal),
                                                 None if borrowing is None else Decimal(borrowing)),))
        return _resource_groups_key(["a", "b"], ["nvidia.com/gpu"], (quota,), {"a": {"cpu": Decimal(1)}}, never_borrow)

    assert key("8") == key("8")
    assert key("8") != key("8.0") and key("8") != key("16") and key("8", "0") != key("8")
    assert key("8") != key("8", never_borrow=True)


def test_a_shared_group_list_with_a_finding_is_reported_for_each_queue() -> None:
    groups = [{"coveredResources": ["nvidia.com/gpu", "cpu"],
               "flavors": [{"name": "a", "resources": [{"name": "cpu", "nominalQuota": "0"},
                                                       {"name": "nvidia.com/gpu", "nominalQuota": "0"}]}]}]
    queues = [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
               "metadata": {"name": name, "annotations": {"gpugov.io/source": f"tenants/{name}.yaml:1"}},
               "spec": {"resourceGroups": groups}} for name in ("one", "two", "three")]
    findings = check_objects(queues)
    assert [(f.rule, str(f.location)) for f in findings] == [
        ("GG081", "tenants/one.yaml:1:1"), ("GG081", "tenants/two.yaml:1:1"), ("GG081", "tenants/three.yaml:1:1")]
    assert [str(f.message) for f in findings] == [str(f.message) for f in check_objects(json.loads(json.dumps(queues)))]


def test_a_shared_flavor_entry_is_checked_against_each_queues_covered_resources() -> None:
    resources = [{"name": "nvidia.com/gpu", "nominalQuota": "0"}, {"name": "cpu", "nominalQuota": "0"}]
    entry = {"name": "a", "resources": resources}

    def queue(name: str, covered: list[str]) -> dict:
        return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                "metadata": {"name": name, "annotations": {"gpugov.io/source": f"tenants/{name}.yaml:1"}},
                "spec": {"resourceGroups": [{"coveredResources": covered, "flavors": [entry]}]}}

    good, bad = queue("good", ["nvidia.com/gpu", "cpu"]), queue("bad", ["cpu", "nvidia.com/gpu"])
    also_good = queue("also-good", ["nvidia.com/gpu", "cpu"])
    assert check_objects([good, also_good]) == []
    for objects in ([good, bad], [bad, good], [good, bad, also_good]):
        (finding,) = check_objects(objects)
        assert finding.rule == "GG081" and str(finding.location) == "tenants/bad.yaml:1:1"


def test_any_pattern_matches_where_fnmatchcase_does() -> None:
    patterns = ["kube-*", "*-system", "a*b*c", "x?y", "[ab]*", "gpu-operator", "*a*a*", "[!k]z", ""]
    names = ["kube-x", "kube", "foo-system", "abc", "aXbYc", "xzy", "a", "b", "gpu-operator", "gpu-operatorx",
             "aa", "", "c", "x\ny", "\n", "qz", "kz", "kube-\n"]
    for chosen in ([], patterns[:1], patterns):
        matches = any_pattern(chosen)
        for name in names:
            assert bool(matches(name)) == any(fnmatchcase(name, p) for p in chosen), (chosen, name)
