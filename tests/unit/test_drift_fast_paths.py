"""The shortcuts drift takes at Kubernetes' ceiling change no answer: defaults filled without
copying the live object, equal subtrees skipped, quantities parsed once per spelling, the
collector paused while reading."""

from __future__ import annotations

import copy
import gc

from gpugov.cluster.observe import observe
from gpugov.drift.live import LiveState
from gpugov.drift.objects import compared_part, differences, object_findings
from gpugov.drift.usage import accelerator_requests
from gpugov.kube.canonical import with_defaults
from gpugov.kube.objects import object_key

QUEUE = {
    "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
    "metadata": {"name": "team-a", "labels": {"gpugov.io/managed-by": "gpugov"}},
    "spec": {"cohortName": "research", "preemption": {"withinClusterQueue": "LowerPriority"},
             "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                 {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]},
}


def test_with_defaults_fills_a_copy_and_leaves_the_given_object_as_it_was() -> None:
    live = copy.deepcopy(QUEUE)
    before = copy.deepcopy(live)
    filled = with_defaults(live)
    assert live == before  # nothing written into the caller's maps
    assert filled["spec"]["preemption"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Never",
                                            "borrowWithinCohort": {"policy": "Never"}}
    assert filled["spec"]["queueingStrategy"] == "BestEffortFIFO"
    filled["spec"]["preemption"]["reclaimWithinCohort"] = "Any"
    assert "reclaimWithinCohort" not in live["spec"]["preemption"]


def test_the_compared_part_drops_what_no_owned_field_reaches() -> None:
    live = copy.deepcopy(QUEUE)
    live["metadata"] |= {"uid": "u", "managedFields": [{"manager": "kubectl"}]}
    live["status"] = {"pendingWorkloads": 3}
    part = compared_part(live, {"spec": {}, "metadata": {"labels": {}}})
    assert part == {"kind": "ClusterQueue", "spec": live["spec"], "metadata": {"labels": live["metadata"]["labels"]}}


def test_a_changed_quota_is_found_in_a_live_object_with_managed_fields_and_status() -> None:
    live = copy.deepcopy(QUEUE)
    live["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "16"
    live["metadata"]["managedFields"] = [{"manager": "kubectl-edit", "fieldsV1": {"f:spec": {"f:resourceGroups": {}}}}]
    live["status"] = {"pendingWorkloads": 3}
    findings = object_findings([QUEUE], LiveState(objects={object_key(QUEUE): live}))
    assert [(f.rule, dict(f.details)["field"], dict(f.details)["changed_by"]) for f in findings] == [
        ("GD002", "spec.resourceGroups.0.flavors.h100.resources.nvidia.com/gpu.nominalQuota", "kubectl-edit")]
    live["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "8000m"  # equal, spelt apart
    assert object_findings([QUEUE], LiveState(objects={object_key(QUEUE): live})) == []


def test_equal_subtrees_give_no_differences_and_unequal_ones_still_do() -> None:
    assert list(differences(QUEUE["spec"], copy.deepcopy(QUEUE["spec"]))) == []
    assert list(differences({"a": [1, 2]}, {"a": [1, 3]})) == [(("a", 1), 2, 3)]
    assert list(differences({"a": True}, {"a": 1})) == []  # == in C: True == 1, as _equal said before


def test_quantities_parsed_once_per_spelling_keep_their_types_apart() -> None:
    def pod(amount: object) -> dict:
        return {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": amount}}}]}}

    assert accelerator_requests(pod("1")) == accelerator_requests(pod(1)) == {"nvidia.com/gpu": 1}
    assert accelerator_requests(pod("500m")) == {"nvidia.com/gpu": 0.5}
    assert accelerator_requests(pod(True)) == {}  # a bool is no quantity, even if 1 was parsed before


def test_reading_pauses_the_collector_and_gives_it_back(monkeypatch) -> None:
    seen = []

    def fake(api, desired, page_size, on_progress):
        seen.append(gc.isenabled())
        return LiveState()

    monkeypatch.setattr("gpugov.cluster.observe._observe", fake)
    monkeypatch.setattr("gpugov.cluster.observe.Api", lambda client: client)
    assert gc.isenabled()
    observe(object(), [])
    assert seen == [False] and gc.isenabled()


def test_pods_with_equal_parts_share_them_and_read_the_same() -> None:
    from gpugov.cluster.observe import pod_for_drift

    def pod(name: str, amount: object, node: str = "n1") -> dict:
        return {"metadata": {"name": name, "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
                "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"limits": {
                    "nvidia.com/gpu": amount, "cpu": "4"}}}]},
                "status": {"phase": "Running"}}

    shared: dict = {}
    a, b = pod_for_drift(pod("a", "1"), shared), pod_for_drift(pod("b", "1"), shared)
    assert a["spec"] is b["spec"] and a["status"] is b["status"] and a["metadata"]["labels"] is b["metadata"]["labels"]
    assert a["metadata"]["name"] == "a" and b["metadata"]["name"] == "b"
    for other in (pod("c", "1", node="n2"), pod("d", "2"), pod("e", True), pod("f", 1)):
        slim = pod_for_drift(other, shared)
        assert slim["spec"] is not a["spec"] and slim == pod_for_drift(other)
        assert accelerator_requests(slim) == accelerator_requests(other)
