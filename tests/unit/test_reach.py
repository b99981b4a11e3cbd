"""What a ClusterQueue can reach (gpugov.reach): Kueue v0.17.0's available / potentialAvailable over
ClusterQueues and Cohorts, worked out by hand from pkg/cache/scheduler/resource_node.go for each case
(tests/e2e/test_reach_kueue.py checks the same computation against the real Kueue's messages)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from gpugov.reach import Tree

GPU = "nvidia.com/gpu"


def quota(nominal: str, borrowing: str | None = None, lending: str | None = None,
          resource: str = GPU) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": resource, "nominalQuota": nominal}
    if borrowing is not None:
        entry["borrowingLimit"] = borrowing
    if lending is not None:
        entry["lendingLimit"] = lending
    return entry


def queue(name: str, cohort: str | None, *resources: dict[str, Any], flavor: str = "f",
          held: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceGroups": [{"coveredResources": [r["name"] for r in resources],
                                                "flavors": [{"name": flavor, "resources": list(resources)}]}]}
    if cohort:
        spec["cohortName"] = cohort
    status = {"flavorsReservation": [{"name": flavor, "resources": [
        {"name": r, "total": amount, "borrowed": "0"} for r, amount in (held or {}).items()]}]}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": spec, "status": status}


def cohort(name: str, parent: str | None, *resources: dict[str, Any], flavor: str = "f") -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parent:
        spec["parentName"] = parent
    if resources:
        spec["resourceGroups"] = [{"coveredResources": [r["name"] for r in resources],
                                   "flavors": [{"name": flavor, "resources": list(resources)}]}]
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def test_the_issue_example_a_wait_for_the_trees_unused_quota() -> None:
    """The example org's research tree on h100: research's own 4, nlp 16 (lends at most 8, so 8 stay
    local), vision 8 under research-vision. research's subtree quota is 4 + 8 + 8 = 20. nlp holds 25:
    8 in its local quota, 17 stored in research, 3 left there. Its own cap (8 stored - 17 used + 16)
    is 7, above those 3: the tree's unused quota decides, 8 asked - 3 = 5 more needed."""
    objects = [cohort("research", None, quota("4")), cohort("research-vision", "research"),
               queue("nlp", "research", quota("16", "16", "8"), held={GPU: "25"}),
               queue("vision", "research-vision", quota("8", "8")), queue("speech", "research", quota("0"))]
    room = Tree(objects).room("nlp", "f", GPU)
    assert room is not None
    assert (room.available, room.maximum, room.held) == (Decimal(3), Decimal(28), Decimal(25))
    assert room.deficit(Decimal(8)) == Decimal(5)
    assert room.limited_by == "" and not room.limited_by_own
    assert room.may_borrow == Decimal(12)  # 28 - 16, not the declared borrowing limit of 16
    # vision: 8 of its own + at most 8 borrowed; with nlp's 25 held only 3 of the tree are left
    vision = Tree(objects).room("vision", "f", GPU)
    assert vision is not None and (vision.available, vision.maximum) == (Decimal(3), Decimal(16))


def test_the_queues_own_borrowing_limit() -> None:
    """vision holds 16 = nominal 8 + borrowing limit 8; research has 4 to spare: its own cap (0) decides."""
    objects = [cohort("research", None, quota("4")), cohort("research-vision", "research"),
               queue("nlp", "research", quota("16", "16", "8")),
               queue("vision", "research-vision", quota("8", "8"), held={GPU: "16"})]
    room = Tree(objects).room("vision", "f", GPU)
    assert room is not None and room.available == 0 and room.deficit(Decimal(1)) == 1
    assert room.limited_by_own and room.limited_by == "ClusterQueue vision"


def test_a_cohorts_borrowing_limit_up_the_tree() -> None:
    """org (10 of its own) > dept (borrowing limit 2) > a (4). a holds 5: 1 borrowed through dept, whose
    cap is 4 stored - 5 used + 2 = 1, below org's 14 - 5 = 9: dept's limit decides."""
    objects = [cohort("org", None, quota("10")), cohort("dept", "org", quota("0", "2")),
               queue("a", "dept", quota("4"), held={GPU: "5"}), queue("b", "org", quota("0"))]
    tree = Tree(objects)
    room = tree.room("a", "f", GPU)
    assert room is not None
    assert (room.available, room.maximum, room.deficit(Decimal(3))) == (Decimal(1), Decimal(6), Decimal(2))
    assert room.limited_by == "Cohort dept" and not room.limited_by_own
    other = tree.room("b", "f", GPU)
    assert other is not None and (other.available, other.maximum) == (Decimal(9), Decimal(14))


def test_a_lending_limit_keeps_quota_local() -> None:
    """x (10, lends at most 4) keeps 6 local; y (0) can reach only the 4 lent. x holds 8: 6 local, 2 in
    the cohort, so y has 2 left: 3 asked is 1 more, 5 asked can never fit (maximum capacity 4)."""
    tree = Tree([queue("x", "c", quota("10", lending="4"), held={GPU: "8"}), queue("y", "c", quota("0"))])
    y = tree.room("y", "f", GPU)
    assert y is not None and (y.available, y.maximum) == (Decimal(2), Decimal(4))
    assert y.deficit(Decimal(3)) == 1 and not y.never_fits(Decimal(4)) and y.never_fits(Decimal(5))
    x = tree.room("x", "f", GPU)
    assert x is not None and (x.available, x.maximum) == (Decimal(2), Decimal(10))
    assert tree.lends("x", "f", GPU) == Decimal(4) and tree.lends("y", "f", GPU) == 0


def test_cpu_in_millicores_and_a_queue_without_cohort() -> None:
    tree = Tree([queue("solo", None, quota("1500m", resource="cpu"), held={"cpu": "500m"})])
    room = tree.room("solo", "f", "cpu")
    assert room is not None and (room.available, room.maximum) == (Decimal(1), Decimal("1.5"))
    assert room.deficit(Decimal("1.25")) == Decimal("0.25")
    assert tree.room("solo", "f", GPU) is None and tree.room("other", "f", "cpu") is None


def test_over_admission_is_never_negative_room() -> None:
    """Capacity taken away under running work: Kueue's Available is at least 0."""
    tree = Tree([queue("p", "c", quota("2"), held={GPU: "5"})])
    room = tree.room("p", "f", GPU)
    assert room is not None and room.available == 0 and room.deficit(Decimal(1)) == 1


def test_compiled_objects_hold_nothing_and_usage_may_be_given() -> None:
    objects = [queue("x", "c", quota("10", lending="4")), queue("y", "c", quota("0"))]
    for obj in objects:
        del obj["status"]
    assert Tree(objects).room("y", "f", GPU).available == 4  # type: ignore[union-attr]
    assert Tree(objects, {"x": {("f", GPU): 8}}).room("y", "f", GPU).available == 2  # type: ignore[union-attr]


def test_why_tells_every_pool_kueue_tried_whatever_limits_each() -> None:
    """a may not borrow on f1 (its own borrowing limit 0, while the tree has 3 free there) and finds f2 taken
    by b: Kueue names both pools, and so does `gpugov why`, each with what limits it."""
    from gpugov.queueing.clusterqueue import cluster_queue
    from gpugov.queueing.reasons import Why, explain
    from gpugov.queueing.workload import from_object

    def two_flavors(name: str, f1: dict[str, Any], f2: dict[str, Any], held: dict[str, str]) -> dict[str, Any]:
        obj = queue(name, "c", f1, flavor="f1")
        obj["spec"]["resourceGroups"][0]["flavors"].append({"name": "f2", "resources": [f2]})
        obj["status"]["flavorsReservation"] = [{"name": f, "resources": [{"name": GPU, "total": amount}]}
                                               for f, amount in held.items()]
        return obj

    a = two_flavors("a", quota("2", "0"), quota("0"), {"f1": "2"})
    b = two_flavors("b", quota("3"), quota("3"), {"f2": "3"})
    message = ("couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor f1, "
               "1 more needed, insufficient unused quota for nvidia.com/gpu in flavor f2, 1 more needed")
    workload = from_object({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns", "creationTimestamp": "2026-12-03T09:00:00Z"},
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
            {"name": "main", "resources": {"requests": {GPU: "1"}}}]}}}]},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                   "message": message, "lastTransitionTime": "2026-12-03T09:00:00Z"}]}})
    tree = Tree([a, b])
    assert tree.room("a", "f1", GPU).limited_by_own  # type: ignore[union-attr]
    reason = explain(workload, cluster_queue(a), tree=tree)
    assert reason.why == Why.QUOTA
    assert [(d.pool, d.more) for d in reason.deficits] == [("f1", 1), ("f2", 1)]
    assert reason.text == ("waiting for quota: 1 more nvidia.com/gpu needed in pool f1 (ClusterQueue a's borrowing "
                           "limit); or 1 more nvidia.com/gpu needed in pool f2")
