"""gpugov.queueing.volcano: the capacity plugin's real capability and what a waiting job lacks.

The same arithmetic is held to the real scheduler's own numbers in tests/e2e/test_volcano_readers.py;
here each rule of capacity.go on its own, on objects shaped as Volcano writes them."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from gpugov.queueing.reasons import Why
from gpugov.queueing.volcano import VolcanoError, capacities, explain, jobs, node_total, queue, refusal

ASCEND = "huawei.com/Ascend910"


def q(name: str, parent: str | None = None, *, deserved: int | None = None, guarantee: int | None = None,
      capability: int | None = None, allocated: int = 0, state: str = "Open") -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parent is not None:
        spec["parent"] = parent
    if deserved is not None:
        spec["deserved"] = {ASCEND: str(deserved)}
    if guarantee is not None:
        spec["guarantee"] = {"resource": {ASCEND: str(guarantee)}}
    if capability is not None:
        spec["capability"] = {ASCEND: str(capability)}
    return {"metadata": {"name": name}, "spec": spec,
            "status": {"state": state, "allocated": {ASCEND: str(allocated), "cpu": "0", "pods": "1"}}}


def node(ascend: int = 8) -> dict[str, Any]:
    return {"status": {"allocatable": {"cpu": "192", "memory": "1536Gi", "pods": "110", ASCEND: str(ascend)}}}


WEST = [q("root"), q("default", "root"), q("research", "root", deserved=24, guarantee=8),
        q("product", "root", deserved=8), q("llm-pretrain", "research", deserved=16, guarantee=8),
        q("speech", "research", deserved=8, allocated=24), q("recsys", "product", deserved=8, capability=16)]


def west(queues: list[dict[str, Any]] = WEST) -> dict[str, Any]:
    return capacities([queue(o) for o in queues], node_total([node()] * 4))


def test_real_capability_follows_the_hierarchy() -> None:
    """Root is every node; a child gets its parent's less all its siblings' guarantees, plus its own; a
    capability caps it; cpu, memory and the device are each computed."""
    c = west()
    real = {name: c[name].real[ASCEND] for name in c}
    assert real == {"root": 32, "default": 24, "research": 32, "product": 24, "llm-pretrain": 32, "speech": 24,
                    "recsys": 16}
    assert c["speech"].real["cpu"] == 768 and c["speech"].real["memory"] == Decimal(4 * 1536 * 2**30)
    assert "pods" not in c["root"].real
    assert c["llm-pretrain"].ancestors == ("root", "research") and not c["research"].leaf


def test_a_child_inherits_its_parents_capability() -> None:
    """product capped at 12: recsys (capability 16 of its own) is held to 12 by the parent, and a queue without
    a capability of its own inherits its parent's."""
    queues = [*WEST[:3], q("product", "root", deserved=8, capability=12), *WEST[4:6],
              q("recsys", "product", capability=16), q("ads", "product")]
    c = west(queues)
    assert (c["product"].real[ASCEND], c["recsys"].real[ASCEND], c["ads"].real[ASCEND]) == (12, 12, 12)
    assert c["ads"].capability[ASCEND] == 12


def test_a_missing_parent_or_a_cycle_is_told_as_volcano_tells_it() -> None:
    with pytest.raises(VolcanoError, match="invalid parent queue nowhere"):
        west([*WEST, q("lost", "nowhere")])
    with pytest.raises(VolcanoError, match="cycle"):
        west([*WEST, q("a", "b"), q("b", "a")])


def pg(name: str, queue_name: str, members: int, each: int, phase: str = "Inqueue") -> dict[str, Any]:
    return {"metadata": {"name": f"pg-{name}", "namespace": "speech",
                         "ownerReferences": [{"kind": "Job", "name": name, "controller": True}]},
            "spec": {"queue": queue_name, "minMember": members,
                     "minResources": {ASCEND: str(members * each), "pods": str(members), "count/pods": str(members),
                                      f"requests.{ASCEND}": str(members * each), "cpu": str(members)}},
            "status": {"phase": phase, "conditions": [{"type": "Unschedulable", "status": "True",
                                                       "message": "1/1 tasks in gang unschedulable"}]}}


def pod(job: str) -> dict[str, Any]:
    return {"metadata": {"name": f"{job}-x", "namespace": "speech",
                         "annotations": {"scheduling.k8s.io/group-name": f"pg-{job}"},
                         "ownerReferences": [{"kind": "Job", "name": job, "controller": True}]},
            "spec": {}, "status": {"phase": "Pending"}}


def test_a_job_past_its_queues_real_capability_is_short_by_the_difference() -> None:
    c = west()
    [j] = jobs([pg("fourth", "speech", 1, 8)], [pod("fourth")])
    v = explain(j, c)
    assert v.why == Why.QUOTA and not v.finding
    assert [(s.queue, s.resource, s.asks, s.held, s.real, s.more) for s in v.shortfalls] == [
        ("speech", ASCEND, 8, 24, 24, 8)]
    assert "queue speech may hold 24 huawei.com/Ascend910 (research's 32 less the 8 guaranteed" in v.text
    assert v.volcano == "1/1 tasks in gang unschedulable"
    [fits] = jobs([pg("small", "llm-pretrain", 1, 8)], [pod("small")])
    assert explain(fits, c).why == Why.OTHER  # the queues have room: it waits on the nodes


def test_a_gang_larger_than_its_queue_can_ever_hold_never_starts() -> None:
    [j] = jobs([pg("gang", "speech", 4, 8)], [pod("gang")] * 4)
    v = explain(j, west())
    assert v.why == Why.NEVER_FITS and v.finding
    assert "queue speech may hold at most 24 huawei.com/Ascend910 (research's 32" in v.text


def test_closed_and_non_leaf_queues() -> None:
    queues = [*WEST[:5], q("speech", "research", state="Closed"), WEST[6]]
    [closed] = jobs([pg("a", "speech", 1, 8)], [pod("a")])
    assert explain(closed, west(queues)).why == Why.INACTIVE
    [parent] = jobs([pg("b", "research", 1, 8)], [pod("b")])
    assert explain(parent, west()).why == Why.MISCONFIGURED


QUOTA_MESSAGE = ('Error creating: pods "r3-qbkxn" is forbidden: exceeded quota: gpugov-accelerators, requested: '
                 'requests.huawei.com/Ascend910=8, used: requests.huawei.com/Ascend910=16, limited: '
                 'requests.huawei.com/Ascend910=16')


def test_a_pod_the_namespace_quota_refused() -> None:
    r = refusal(QUOTA_MESSAGE)
    assert r is not None and (r.quota, r.resource, r.requested, r.used, r.limited, r.more) == (
        "gpugov-accelerators", ASCEND, 8, 16, 16, 8)
    assert refusal("Error creating: something else") is None
    batch = {"metadata": {"name": "r3", "namespace": "speech"},
             "spec": {"parallelism": 1, "template": {"metadata": {"annotations": {
                 "scheduling.volcano.sh/queue-name": "speech"}}, "spec": {"schedulerName": "volcano"}}}}
    [j] = jobs([], [], [batch], {("speech", "r3"): QUOTA_MESSAGE})
    v = explain(j, west())
    assert j.podgroup == "" and v.why == Why.QUOTA and v.refusal is not None and v.refusal.more == 8


def test_drift_reports_a_declared_queue_that_is_not_open() -> None:
    from gpugov.drift.live import LiveState
    from gpugov.drift.volcano import queue_findings
    from gpugov.kube.objects import object_key

    declared = [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": n},
                 "spec": {"parent": "root"}} for n in ("open", "closed", "absent")]
    live = LiveState(objects={object_key(o): {**o, "status": {"state": s}}
                              for o, s in zip(declared[:2], ("Open", "Closed"), strict=True)})
    [found] = queue_findings(declared, live)
    assert found.rule == "GD028" and "Queue closed is Closed" in found.message
    assert dict(found.details)["live"] == "Closed"


def test_a_reader_who_may_not_list_nodes_gets_the_declared_pools_and_is_told() -> None:
    from datetime import UTC, datetime

    from gpugov.queueing.volcano_report import declared_total, view

    total = declared_total([{ASCEND: Decimal(32)}])
    assert total[ASCEND] == 32 and not total["cpu"].is_finite()
    v = view(datetime.now(UTC), {"speech": "speech"}, WEST, None, [pg("fourth", "speech", 1, 8)], [pod("fourth")], [],
             {}, total, ("recsys",))
    [e] = v.entries
    assert [(s.queue, s.more) for s in e.verdict.shortfalls] == [("speech", 8)]  # cpu unbounded, never short
    assert v.notes == ("real capabilities computed from the declared pools: you may not list nodes",
                       "not shown: namespace recsys (you may not list its PodGroups)")
