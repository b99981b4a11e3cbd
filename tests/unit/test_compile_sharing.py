"""Compile shares a borrow-only flavor entry between the queues that list it (#42): the render, the
conformance checks and the reserved-namespace checks read each once, with the same bytes and findings."""

from __future__ import annotations

import copy
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
