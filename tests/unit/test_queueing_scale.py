"""`gpugov queue` at Kueue's scale (issue #29): the releases a pending workload's estimate reads are
filed in one pass over the running workloads and shared by every ClusterQueue of a cohort tree,
with the very estimates the direct computation (Releases.of over the tree's admitted workloads, for
each ClusterQueue anew) gives."""

from __future__ import annotations

from datetime import timedelta

from gpugov.queueing.estimate import Releases, estimate_start, releases
from gpugov.queueing.view import Snapshot, _cohort, _index, entries, snapshot
from gpugov.queueing.workload import Workload, from_object
from tests.unit.test_queueing_unit import BORROWING, NOW, raw_cluster_queue, raw_workload, visibility_item

QUOTA_WAIT = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, {} more needed"
TENANTS = ("vision", "speech", "nlp", "recsys")  # vision, speech and nlp share the cohort tree "research"
COHORTS = {"vision": "research-vision", "speech": "research", "nlp": "research", "recsys": "product"}


def running(count: int) -> list[Workload]:
    """Admitted workloads over two pools and two resources, some with no known end, some ending together."""
    return [from_object(raw_workload(f"r{i}", gpus=1 + i % 3, flavor=("h100", "a100-mig")[i % 2],
                                     admitted=NOW - timedelta(seconds=10 * i),
                                     max_seconds=None if i % 5 == 0 else 600 + 60 * (i % 4),
                                     cluster_queue=TENANTS[i % len(TENANTS)]))
            for i in range(count)]


def test_one_pass_releases_are_releases_of_each_pool_and_resource() -> None:
    workloads = running(40)
    lookup = releases(iter(workloads))  # an iterator, as the view hands it: read once
    keys = {key for w in workloads for key in w.usage_by_flavor()} | {("l40s", "nvidia.com/gpu")}
    assert len(keys) == 5  # h100 and a100-mig, each nvidia.com/gpu and cpu; and a pool nobody holds
    for pool, resource in sorted(keys):
        assert lookup(pool, resource) == Releases.of(workloads, pool, resource)
    assert lookup("h100", "nvidia.com/gpu").ends and lookup("h100", "nvidia.com/gpu").unknown  # not all trivial


def busy_snapshot() -> Snapshot:
    from gpugov.app.pipeline import validate_repo
    from tests.helpers.repos import REPO

    model = validate_repo(REPO).model
    assert model is not None
    admitted = [raw_workload(f"r{i}", namespace=TENANTS[i % 4], gpus=1 + i % 3, cluster_queue=TENANTS[i % 4],
                             admitted=NOW - timedelta(seconds=10 * i), max_seconds=None if i % 7 == 0 else 900 + 30 * i)
                for i in range(24)]
    waiting = [raw_workload(f"p{i}", namespace=TENANTS[i % 4], gpus=1 + i % 4,
                            message=BORROWING if i % 3 == 0 else QUOTA_WAIT.format(1 + i % 4)) for i in range(16)]
    pending = {t: [visibility_item(f"p{i}", t, n, n) for n, i in enumerate(range(j, 16, 4))]
               for j, t in enumerate(TENANTS)}
    local_queues = [{"metadata": {"namespace": t, "name": "training"}, "spec": {"clusterQueue": t}} for t in TENANTS]
    queues = [raw_cluster_queue(t, cohort=COHORTS[t], held="12") for t in TENANTS]
    return snapshot(model, NOW, queues, local_queues, admitted + waiting, pending, frozenset(TENANTS))


def test_a_cohort_trees_releases_are_shared_with_the_same_estimates() -> None:
    snap = busy_snapshot()
    shown = entries(snap)
    index = _index(snap)
    assert len(index.tree_releases) == 2  # research (vision, speech, nlp) and product (recsys)
    by_key = {(w.namespace, w.name): w for w in snap.workloads}
    estimated = 0
    for e in shown:
        if e.state != "pending":
            continue
        workload = by_key[(e.namespace, e.workload.split("/")[-1])]
        key = (workload.namespace, workload.name)
        tree = [w for name in sorted(_cohort(snap, e.cluster_queue)) for w in index.admitted.get(name, [])]
        own = index.admitted.get(e.cluster_queue, [])
        expected = estimate_start(index.reasons[key][1], workload, index.ahead.get(key, {}),
                                  lambda pool, resource, ws=tree: Releases.of(ws, pool, resource),
                                  lambda pool, resource, ws=own: Releases.of(ws, pool, resource), NOW)
        assert e.estimate == expected, e.workload
        estimated += e.estimate is not None and e.estimate.at is not None
    assert estimated >= 4  # the comparison covers real estimates, not only "no estimate"
    assert sum(len(index.admitted.get(t, [])) for t in TENANTS) == 24
