"""Queue transparency, pure: Workload records, Kueue's reasons in plain words, positions,
estimates, RBAC-aware hiding and the output formats.

The messages below were written by the real Kueue v0.17.0 controller in the living sandbox
(tests/e2e/test_queueing.py produces them again and checks the parser on them live); the
flavorassigner and scheduler sources they come from are named in gpugov/queueing/reasons.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from gpugov.queueing import report
from gpugov.queueing.clusterqueue import cluster_queue
from gpugov.queueing.estimate import estimate_start, releases
from gpugov.queueing.positions import ahead_of, positions
from gpugov.queueing.reasons import Why, explain, parse_message
from gpugov.queueing.view import HIDDEN, Snapshot, entries, explain_job, snapshot
from gpugov.queueing.workload import WorkloadError, from_object, pod_requests
from gpugov.reach import Tree

# Recorded from Kueue v0.17.0 (vision at its borrowing limit, a job larger than vision may ever hold).
BORROWING = ("couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor a100-mig, "
             "previously considered podsets requests (0) + current podset request (1) > maximum capacity (0), "
             "insufficient unused quota for nvidia.com/gpu in flavor h100, 1 more needed")
TOO_BIG = ("couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor a100-mig, "
           "previously considered podsets requests (0) + current podset request (24) > maximum capacity (0), "
           "insufficient quota for nvidia.com/gpu in flavor h100, previously considered podsets requests (0) + "
           "current podset request (24) > maximum capacity (16)")
NOW = datetime(2026, 12, 3, 9, 22, 30, tzinfo=UTC)


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def raw_workload(name: str, namespace: str = "vision", *, pods: int = 1, gpus: int = 1, resource: str = "nvidia.com/gpu",
                 admitted: datetime | None = None, flavor: str = "h100", message: str | None = None,
                 reason: str = "Pending", finished: datetime | None = None, max_seconds: int | None = None,
                 priority: int = 10000, queue: str = "training", cluster_queue: str = "vision",
                 past: int = 0, owner: str = "Job") -> dict[str, Any]:
    """A Workload as Kueue v0.17.0 writes it for a batch/v1 Job."""
    created = (admitted or NOW) - timedelta(seconds=5)
    template = {"spec": {"containers": [{"name": "main", "resources": {
        "requests": {resource: str(gpus), "cpu": "1"}, "limits": {resource: str(gpus), "cpu": "1"}}}]}}
    obj: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": f"job-{name}-abcde", "namespace": namespace, "uid": f"uid-{name}",
                     "creationTimestamp": stamp(created),
                     "ownerReferences": [{"apiVersion": "batch/v1" if owner == "Job" else "v1", "kind": owner,
                                          "name": name, "controller": True, "uid": "x"}]},
        "spec": {"active": True, "queueName": queue, "priority": priority,
                 "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                      "name": "training-high"},
                 "podSets": [{"name": "main", "count": pods, "template": template}]},
        "status": {"conditions": []},
    }
    if max_seconds is not None:
        obj["spec"]["maximumExecutionTimeSeconds"] = max_seconds
    conditions = obj["status"]["conditions"]
    if admitted is not None:
        obj["status"]["admission"] = {"clusterQueue": cluster_queue, "podSetAssignments": [{
            "name": "main", "count": pods, "flavors": {resource: flavor, "cpu": flavor},
            "resourceUsage": {resource: str(pods * gpus), "cpu": str(pods)}}]}
        conditions += [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                        "message": f"Quota reserved in ClusterQueue {cluster_queue}", "lastTransitionTime": stamp(admitted)},
                       {"type": "Admitted", "status": "True", "reason": "Admitted",
                        "message": "The workload is admitted", "lastTransitionTime": stamp(admitted)}]
    elif message is not None:
        conditions.append({"type": "QuotaReserved", "status": "False", "reason": reason, "message": message,
                           "lastTransitionTime": stamp(NOW)})
    if finished is not None:
        conditions.append({"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done",
                           "lastTransitionTime": stamp(finished)})
    if past:
        obj["status"]["accumulatedPastExecutionTimeSeconds"] = past
    return obj


def raw_cluster_queue(name: str = "vision", *, nominal: str = "8", borrowing: str | None = "8", held: str = "16",
                      cohort: str = "research-vision", strategy: str = "BestEffortFIFO",
                      lending: str | None = None) -> dict[str, Any]:
    gpu: dict[str, Any] = {"name": "nvidia.com/gpu", "nominalQuota": nominal}
    if borrowing is not None:
        gpu["borrowingLimit"] = borrowing
    if lending is not None:
        gpu["lendingLimit"] = lending
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {"gpugov.io/tenant": name}},
        "spec": {"cohortName": cohort, "queueingStrategy": strategy, "resourceGroups": [{
            "coveredResources": ["nvidia.com/gpu", "cpu"],
            "flavors": [{"name": "h100", "resources": [gpu, {"name": "cpu", "nominalQuota": "192"}]},
                        {"name": "a100-mig", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "0"},
                                                           {"name": "cpu", "nominalQuota": "45714m"}]}]}]},
        "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Ready", "message": "Can admit"}],
                   "flavorsReservation": [{"name": "h100", "resources": [
                       {"name": "nvidia.com/gpu", "total": held, "borrowed": "8"}]}]},
    }


def org_tree(*queues: dict[str, Any]) -> Tree:
    """What each ClusterQueue of the example org's cluster east can reach, `queues` in place of
    compile's ClusterQueues of the same name (with what their status says they hold)."""
    from gpugov.app.pipeline import validate_repo
    from gpugov.compile import compile
    from tests.helpers.repos import REPO

    model = validate_repo(REPO).model
    assert model is not None
    names = {q["metadata"]["name"] for q in queues}
    compiled = [o for o in compile(model, backend="kueue", cluster="east")
                if o["kind"] == "Cohort" or (o["kind"] == "ClusterQueue" and o["metadata"]["name"] not in names)]
    return Tree([*compiled, *queues])


def test_parser_reads_every_fact_of_a_real_message() -> None:
    parsed = parse_message(BORROWING)
    assert [(f.kind, f.flavor, f.resource, f.amount, f.maximum) for f in parsed.facts] == [
        ("maximum", "a100-mig", "nvidia.com/gpu", Decimal(1), Decimal(0)),
        ("unused", "h100", "nvidia.com/gpu", Decimal(1), None),
    ]
    assert parsed.preempting is None and parsed.misconfigured == ""


def test_parser_reads_quantities_previous_pod_sets_and_other_shapes() -> None:
    message = ("couldn't assign flavors to pod set workers: insufficient quota for cpu in flavor h100, previously "
               "considered podsets requests (1500m) + current podset request (2) > maximum capacity (3), "
               "untolerated taint {gpugov.io/pool h100 NoSchedule} in flavor h100, flavor a100-mig doesn't match node "
               'affinity, Flavor "ascend" supports only TopologyAwareScheduling; couldn\'t assign flavors to pod set '
               "driver: resource nvidia.com/mig-7g.80gb unavailable in ClusterQueue")
    facts = parse_message(message).facts
    assert [(f.kind, f.flavor) for f in facts] == [("maximum", "h100"), ("taint", "h100"), ("affinity", "a100-mig"),
                                                    ("tas", "ascend"), ("unavailable", "")]
    assert facts[0].amount == Decimal("3.5") and facts[0].maximum == Decimal(3)
    assert facts[4].resource == "nvidia.com/mig-7g.80gb"
    topology = parse_message('couldn\'t assign flavors to pod set main: topology "h100" allows to fit only 3 out of 4 '
                             "pod(s)").facts[0]
    assert (topology.kind, topology.flavor, topology.amount, topology.maximum) == ("topology", "h100", 3, 4)


def test_borrowing_limit_is_told_from_the_queues_own_limit() -> None:
    """vision holds 16 (nominal 8 + borrowing limit 8) and the research tree has 4 to spare: its own
    limit, not the cohort, keeps the 17th out."""
    workload = from_object(raw_workload("one-more", message=BORROWING))
    reason = explain(workload, cluster_queue(raw_cluster_queue()), tree=org_tree(raw_cluster_queue()))
    assert reason.why == Why.BORROWING_LIMIT and not reason.finding
    [deficit] = reason.deficits
    assert (deficit.pool, deficit.resource, deficit.more, deficit.held, deficit.limit) == (
        "h100", "nvidia.com/gpu", Decimal(1), Decimal(16), Decimal(16))
    assert "vision holds 16 nvidia.com/gpu in pool h100" in reason.text
    assert reason.kueue == BORROWING


def test_the_same_message_under_the_limit_is_a_wait_for_the_cohorts_quota() -> None:
    workload = from_object(raw_workload("one-more", message=BORROWING))
    for queue in (raw_cluster_queue(held="10"), raw_cluster_queue(borrowing=None)):
        reason = explain(workload, cluster_queue(queue))  # without the tree: Kueue's own number
        assert reason.why == Why.QUOTA
        assert [(d.pool, d.resource, d.more) for d in reason.deficits] == [("h100", "nvidia.com/gpu", Decimal(1))]
        assert reason.text == "waiting for quota: 1 more nvidia.com/gpu needed in pool h100"


def test_a_wait_for_the_cohorts_quota_is_not_told_as_the_tenants_borrowing_limit() -> None:
    """Issue #39: nlp (nominal 16, borrowing limit 16, lending limit 8) holds 25 GPUs of h100 and asks
    8 more. Kueue: the research tree lends nlp at most 28 (20 + its own 8 kept local), 3 of them are
    free: "5 more needed". Told as a borrowing limit 1 over 32, a tenant that frees one GPU still waits."""
    nlp = raw_cluster_queue("nlp", nominal="16", borrowing="16", lending="8", held="25", cohort="research")
    message = ("couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor a100-mig, "
               "previously considered podsets requests (0) + current podset request (8) > maximum capacity (0), "
               "insufficient unused quota for nvidia.com/gpu in flavor h100, 5 more needed")
    workload = from_object(raw_workload("eight-4", "nlp-train", gpus=8, message=message, cluster_queue="nlp"))
    reason = explain(workload, cluster_queue(nlp), tree=org_tree(nlp))
    assert reason.why == Why.QUOTA
    assert [(d.pool, d.resource, d.more) for d in reason.deficits] == [("h100", "nvidia.com/gpu", Decimal(5))]
    assert reason.text == "waiting for quota: 5 more nvidia.com/gpu needed in pool h100"


def test_a_job_larger_than_the_tenant_may_hold_is_a_finding() -> None:
    reason = explain(from_object(raw_workload("too-big", pods=3, gpus=8, message=TOO_BIG)),
                     cluster_queue(raw_cluster_queue()))
    assert reason.why == Why.NEVER_FITS and reason.finding
    assert [(d.pool, d.more) for d in reason.deficits] == [("h100", Decimal(8))]  # pools where it can hold none left out
    assert "it asks 24 nvidia.com/gpu, at most 16 in pool h100" in reason.text


@pytest.mark.parametrize(("message", "reason", "why", "words"), [
    ("couldn't assign flavors to pod set main: untolerated taint {gpugov.io/pool h100 NoSchedule} in flavor h100",
     "Pending", Why.NO_FLAVOR, "pool h100: it does not tolerate the taint {gpugov.io/pool h100 NoSchedule}"),
    ("couldn't assign flavors to pod set main: resource nvidia.com/mig-7g.80gb unavailable in ClusterQueue",
     "Pending", Why.NO_FLAVOR, "vision's queue offers no nvidia.com/mig-7g.80gb"),
    ('couldn\'t assign flavors to pod set main: topology "h100" doesn\'t allow to fit any of 4 pod(s)', "Pending",
     Why.TOPOLOGY, "pool h100 fits 0 of its 4 pods"),
    (BORROWING + ". Pending the preemption of 2 workload(s)", "Pending", Why.PREEMPTION, "preemption of 2 workload(s)"),
    ("Workload no longer fits after processing another workload", "Pending", Why.QUOTA, "same scheduling cycle"),
    ("LocalQueue training doesn't exist", "Inadmissible", Why.MISCONFIGURED, "LocalQueue training doesn't exist"),
    ("Workload namespace doesn't match ClusterQueue selector", "Pending", Why.MISCONFIGURED, "selector"),
    ("something Kueue says in a later release", "Pending", Why.OTHER, "Kueue says: something Kueue says"),
])
def test_each_reason_in_plain_words(message: str, reason: str, why: Why, words: str) -> None:
    found = explain(from_object(raw_workload("j", message=message, reason=reason)), cluster_queue(raw_cluster_queue()))
    assert found.why == why and words in found.text, found
    assert found.finding == (why in (Why.NO_FLAVOR, Why.MISCONFIGURED))


def test_states_that_are_not_waits() -> None:
    queue = cluster_queue(raw_cluster_queue())
    admitted = from_object(raw_workload("a", admitted=NOW))
    assert explain(admitted, queue).why == Why.ADMITTED
    new = from_object(raw_workload("new"))
    assert explain(new, queue).why == Why.NOT_CONSIDERED
    assert "StrictFIFO" in explain(new, cluster_queue(raw_cluster_queue(strategy="StrictFIFO"))).text
    inactive = raw_workload("off", message=BORROWING)
    inactive["spec"]["active"] = False
    assert explain(from_object(inactive), queue).why == Why.INACTIVE
    gone = explain(from_object(raw_workload("x", message=BORROWING)), None, "LocalQueue vision/training does not exist")
    assert gone.why == Why.MISCONFIGURED and gone.finding


def test_workload_sizes_come_from_admission_requests_or_templates() -> None:
    admitted = from_object(raw_workload("a", pods=2, gpus=8, admitted=NOW, max_seconds=300))
    assert admitted.accelerators == {"nvidia.com/gpu": Decimal(16)}
    assert admitted.usage_by_flavor() == {("h100", "cpu"): Decimal(2), ("h100", "nvidia.com/gpu"): Decimal(16)}
    assert admitted.expected_end == NOW + timedelta(seconds=300) and admitted.job == "a"
    pending = raw_workload("p", pods=3, gpus=2, message=BORROWING)
    assert from_object(pending).accelerators == {"nvidia.com/gpu": Decimal(6)}
    pending["status"]["resourceRequests"] = [{"name": "main", "resources": {"nvidia.com/gpu": "5", "cpu": "3"}}]
    assert from_object(pending).accelerators == {"nvidia.com/gpu": Decimal(5)}
    # initContainers: the larger of their maximum and the containers' sum; limits stand in for requests
    spec = {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}, {"resources": {"requests": {"cpu": "1"}}}],
            "initContainers": [{"resources": {"requests": {"cpu": "4"}}}], "overhead": {"cpu": "250m"}}
    assert pod_requests(spec) == {"nvidia.com/gpu": Decimal(2), "cpu": Decimal("4.25")}


def test_a_workload_kueue_would_not_write_is_an_error_not_a_guess() -> None:
    bad = raw_workload("bad", admitted=NOW)
    bad["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]["nvidia.com/gpu"] = "eight"
    with pytest.raises(WorkloadError, match=r"vision/job-bad-abcde.*nvidia\.com/gpu"):
        from_object(bad)
    late = raw_workload("late", message=BORROWING)
    late["status"]["conditions"][0]["lastTransitionTime"] = "yesterday"
    with pytest.raises(WorkloadError, match="RFC 3339"):
        from_object(late)


def visibility_item(name: str, namespace: str, cq: int, lq: int, priority: int = 10000) -> dict[str, Any]:
    return {"metadata": {"name": f"job-{name}-abcde", "namespace": namespace,
                         "ownerReferences": [{"kind": "Job", "name": name}]},
            "priority": priority, "localQueueName": "training", "positionInClusterQueue": cq, "positionInLocalQueue": lq}


def test_positions_and_what_is_ahead() -> None:
    table = positions([("vision", [visibility_item("b", "vision", 1, 1), visibility_item("a", "vision", 0, 0)]),
                       ("speech", [visibility_item("c", "speech", 0, 0)])])
    assert table[("vision", "job-b-abcde")].in_cluster_queue == 1
    assert ahead_of(("vision", "job-b-abcde"), table) == [("vision", "job-a-abcde")]
    assert ahead_of(("speech", "job-c-abcde"), table) == []


def test_estimate_from_the_running_workloads_expected_ends() -> None:
    waiting = from_object(raw_workload("w", gpus=4, message=BORROWING))
    reason = explain(waiting, cluster_queue(raw_cluster_queue(held="10", borrowing=None)))  # a wait for 1 more
    first = from_object(raw_workload("first", gpus=1, admitted=NOW - timedelta(seconds=60), max_seconds=120))
    second = from_object(raw_workload("second", gpus=8, admitted=NOW - timedelta(seconds=30), max_seconds=600))
    ahead = from_object(raw_workload("ahead", gpus=4, message=BORROWING))
    # needs 1 + the 4 of the job ahead of it: the first end frees 1, the second 8 more
    estimate = estimate_start(reason, waiting, ahead.requests, releases([first, second]), releases([]), NOW)
    assert estimate.at == NOW + timedelta(seconds=570)
    assert estimate.relies_on == ("vision/first", "vision/second")
    assert estimate_start(reason, waiting, {}, releases([first, second]), releases([]), NOW).at == NOW + timedelta(seconds=60)
    unknown = from_object(raw_workload("forever", gpus=8, admitted=NOW))
    no = estimate_start(reason, waiting, ahead.requests, releases([first, unknown]), releases([]), NOW)
    assert no.at is None and "no expected end" in no.text
    # a borrowing limit waits for the tenant's own workloads only
    limited = explain(waiting, cluster_queue(raw_cluster_queue()), tree=org_tree(raw_cluster_queue()))
    assert limited.why == Why.BORROWING_LIMIT
    assert estimate_start(limited, waiting, {}, releases([first, second]), releases([second]), NOW).at == NOW + timedelta(seconds=570)


def org_snapshot(readable: frozenset[str]) -> Snapshot:
    from gpugov.app.pipeline import validate_repo
    from gpugov.compile import compile
    from tests.helpers.repos import REPO

    model = validate_repo(REPO).model
    assert model is not None
    workloads = [raw_workload("full", pods=2, gpus=8, admitted=NOW - timedelta(seconds=100), max_seconds=300),
                 raw_workload("one-more", message=BORROWING),
                 raw_workload("too-big", pods=3, gpus=8, message=TOO_BIG),
                 raw_workload("done", admitted=NOW - timedelta(seconds=900), finished=NOW - timedelta(seconds=800))]
    pending = {"vision": [visibility_item("one-more", "vision", 0, 0), visibility_item("too-big", "vision", 1, 1)],
               "speech": [visibility_item("secret", "speech", 0, 0, 100)]}
    local_queues = [{"metadata": {"namespace": "vision", "name": "training"}, "spec": {"clusterQueue": "vision"}},
                    {"metadata": {"namespace": "speech", "name": "default"}, "spec": {"clusterQueue": "speech"}}]
    queues = [raw_cluster_queue(), raw_cluster_queue("speech", nominal="0", borrowing=None, held="0", cohort="research"),
              *(o for o in compile(model, backend="kueue", cluster="east")
                if o["kind"] == "ClusterQueue" and o["metadata"]["name"] not in ("vision", "speech"))]
    cohorts = [o for o in compile(model, backend="kueue", cluster="east") if o["kind"] == "Cohort"]
    visible = [w for w in workloads if w["metadata"]["namespace"] in readable]
    return snapshot(model, NOW, queues, local_queues, visible, pending, readable, cohorts=cohorts)


def test_queue_entries_per_tenant_with_hidden_names() -> None:
    snap = org_snapshot(frozenset({"vision"}))
    shown = entries(snap)
    assert [(e.tenant, e.state, e.job) for e in shown] == [
        ("speech", "pending", HIDDEN), ("vision", "admitted", "full"), ("vision", "pending", "one-more"),
        ("vision", "pending", "too-big")]  # the finished one is left out
    secret = shown[0]
    assert secret.hidden and secret.position is not None and secret.position.in_cluster_queue == 0
    text = report.queue_text(shown, NOW, "east")
    assert "secret" not in text and "speech" in text
    data = json.loads(report.queue_json(shown, NOW, "east"))
    assert data["workloads"][0] == {**data["workloads"][0], "job": None, "namespace": None, "hidden": True}
    assert "secret" not in json.dumps(data)
    one_more = data["workloads"][2]
    assert one_more["reason"] == "borrowing-limit" and one_more["position"] == {"cluster_queue": 1, "local_queue": 1}
    assert one_more["estimated_start"] == stamp(NOW + timedelta(seconds=200))
    assert [e.tenant for e in entries(snap, ["vision"])] == ["vision"] * 3
    assert report.queue_text(shown, NOW, "east") == text  # deterministic


def test_why_names_what_is_ahead_and_what_it_waits_on() -> None:
    snap = org_snapshot(frozenset({"vision", "speech"}))
    too_big = next(w for w in snap.workloads if w.job == "too-big")
    explanation = explain_job(snap, too_big)
    assert [e.job for e in explanation.ahead] == ["one-more"]
    assert [e.job for e in explanation.holding] == ["full"]
    text = report.why_text(explanation, NOW)
    assert "exceeds vision's maximum" in text and "estimated start: never, as declared" in text
    one_more = next(w for w in snap.workloads if w.job == "one-more")
    text = report.why_text(explain_job(snap, one_more), NOW)
    assert "estimated start: 2026-12-03T09:25:50Z (in 3m 20s)" in text
    assert "ends by 2026-12-03T09:25:50Z" in text


# -- issue #23 item 5: a pod larger than any node of its pool can never start -----------------------

QUOTA_WAIT = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 8 more needed"
NODES = {"h100": {"nvidia.com/gpu": Decimal(8), "cpu": Decimal(192)}, "a100-mig": {"nvidia.com/gpu": Decimal(0)}}


@pytest.mark.parametrize("gpus", [16, 12])
def test_a_pod_larger_than_any_node_of_its_pools_never_fits(gpus: int) -> None:
    """Kueue reads it as a wait for quota (it counts quota, not nodes) and names another tenant's
    usage; gpugov knows the pools' node sizes: it can never start, a finding."""
    workload = from_object(raw_workload("too-wide", gpus=gpus, message=QUOTA_WAIT))
    queue = cluster_queue(raw_cluster_queue(held="0"))
    assert explain(workload, queue).why == Why.QUOTA  # without the node sizes: Kueue's own view
    reason = explain(workload, queue, node_sizes=NODES)
    assert reason.why == Why.NEVER_FITS and reason.finding
    assert reason.text == (f"can never start: a pod of pod set main asks {gpus} nvidia.com/gpu, more than any node "
                           "offers (pool h100: 8 per node; pool a100-mig: 0 per node); split it into pods of at most "
                           "8 nvidia.com/gpu")
    assert reason.kueue == QUOTA_WAIT
    (deficit,) = reason.deficits
    assert (deficit.pool, deficit.resource, deficit.more) == ("h100", "nvidia.com/gpu", Decimal(gpus - 8))


def test_pods_that_each_fit_a_node_still_wait_for_quota() -> None:
    workload = from_object(raw_workload("wide", pods=2, gpus=8, message=QUOTA_WAIT))
    reason = explain(workload, cluster_queue(raw_cluster_queue(held="0")), node_sizes=NODES)
    assert reason.why == Why.QUOTA


def test_the_snapshot_knows_the_pools_node_sizes() -> None:
    """What `gpugov queue` and `queue why` show (a never-fits reason is a finding: exit 1)."""
    from gpugov.app.pipeline import validate_repo
    from gpugov.queueing.view import node_sizes
    from tests.helpers.repos import REPO

    model = validate_repo(REPO).model
    sizes = node_sizes(model)
    assert sizes["h100"]["nvidia.com/gpu"] == Decimal(8)
    assert sizes["a100-mig"]["nvidia.com/mig-1g.10gb"] == Decimal(56)  # its small layout: 7 x 8 GPUs
    assert sizes["ascend-910b"]["huawei.com/Ascend910"] == Decimal(8)
    training = {"metadata": {"name": "training", "namespace": "vision"}, "spec": {"clusterQueue": "vision"}}
    made = snapshot(model, NOW, [raw_cluster_queue(held="0")], [training],
                    [raw_workload("too-wide", gpus=16, message=QUOTA_WAIT)], {}, frozenset({"vision"}))
    (shown,) = entries(made)
    assert shown.reason.why == Why.NEVER_FITS and "split it into pods of at most 8" in shown.reason.text


def test_kueues_own_never_fits_reason_is_kept() -> None:
    workload = from_object(raw_workload("giant", gpus=24, message=TOO_BIG))
    reason = explain(workload, cluster_queue(raw_cluster_queue()), node_sizes=NODES)
    assert reason.why == Why.NEVER_FITS and reason.text.startswith("exceeds vision's maximum, can never fit as declared")


def test_an_admitted_pod_larger_than_any_node_of_its_pool_is_a_finding() -> None:
    """With free quota Kueue admits it (it counts quota, not nodes); its pod can never be scheduled."""
    workload = from_object(raw_workload("too-wide", gpus=16, admitted=NOW - timedelta(minutes=5)))
    assert explain(workload, cluster_queue(raw_cluster_queue())).why == Why.ADMITTED
    reason = explain(workload, cluster_queue(raw_cluster_queue()), node_sizes=NODES)
    assert reason.why == Why.NEVER_FITS and reason.finding
    assert reason.text == ("admitted to pool h100, but can never start: a pod of pod set main asks 16 nvidia.com/gpu, "
                           "more than any node of pool h100 offers (8 per node); it holds that quota meanwhile: split "
                           "it into pods of at most 8 nvidia.com/gpu")
    fits = from_object(raw_workload("fits", pods=2, gpus=8, admitted=NOW - timedelta(minutes=5)))
    assert explain(fits, cluster_queue(raw_cluster_queue()), node_sizes=NODES).why == Why.ADMITTED
