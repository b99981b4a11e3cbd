"""`gpugov queue` at 100,000 Workloads (issue #29) gives what the direct computation gives: the
indented JSON is json.dumps(indent=2)'s byte for byte, workloads alike are explained once with the
reasons each would get alone, --tenant builds only that tenant's entries, and quantities and times
are parsed once per distinct text without taking True for 1."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from gpugov.i18n import Joined, Text
from gpugov.kube.quantity import QuantityError, parse_quantity
from gpugov.queueing import indented, report
from gpugov.queueing.access import NotShown
from gpugov.queueing.reasons import explain
from gpugov.queueing.view import Gaps, Snapshot, _index, cluster_queue_of, entries, gaps, snapshot
from gpugov.queueing.workload import WorkloadError, from_object, parse_time, quantity
from tests.unit.test_queueing_scale import COHORTS, QUOTA_WAIT, TENANTS
from tests.unit.test_queueing_unit import BORROWING, NOW, raw_cluster_queue, raw_workload, visibility_item

VALUES: list[Any] = [
    {}, [], (), "", 0, -7, 2**70, 1.5, -0.0, True, False, None, "tab\tquote\"back\\slash é 中文 \u2028",
    {"a": {}, "b": [], "c": [{}, [], [[]]], "d": {"e": {"f": [1, None, True]}}},
    [1, "two", [3, [4, {"five": 5}]], (6, 7)],
    {"message": Text("waiting for quota: {parts}", parts=Joined("; or ", ["a", "b"])), "n": Decimal(0) == 0},
]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_indented_is_json_dumps_with_indent_2(value: Any) -> None:
    assert indented.dumps(value) == json.dumps(value, indent=2)
    nested = {"deeper": [{"still": value}]}  # the same value further in
    assert indented.dumps(nested) == json.dumps(nested, indent=2)


@pytest.mark.parametrize("items", [[], [{}], [{"x": 1}, {"y": [1, {}]}, "z"]], ids=["empty", "one", "three"])
def test_pieces_join_to_the_document(items: list[Any]) -> None:
    document = {"cluster": "east", "at": None, "workloads": items, "forbidden": ["a line"], "not_shown": []}
    streamed = {**document, "workloads": iter(items)}  # a generator is read once, item by item
    pieces = list(indented.lines(streamed, "workloads"))
    assert "".join(pieces) == json.dumps(document, indent=2) + "\n"
    assert len(pieces) >= len(items)  # one piece an item at least: never the whole list as one string


def test_what_json_cannot_hold_is_refused() -> None:
    for value in ({1: "a"}, {"a": {1, 2}}, object()):
        with pytest.raises(TypeError):
            indented.dumps(value)


def varied_snapshot() -> Snapshot:
    """Workloads of many kinds, many alike: admitted, waiting for quota or at the borrowing limit, too
    large for any node, on a missing LocalQueue, inactive, finished."""
    from gpugov.app.pipeline import validate_repo
    from tests.helpers.repos import REPO

    model = validate_repo(REPO).model
    assert model is not None
    raws = [raw_workload(f"r{i}", namespace=TENANTS[i % 4], gpus=1 + i % 3, cluster_queue=TENANTS[i % 4],
                         admitted=NOW - timedelta(seconds=10 * i), max_seconds=None if i % 7 == 0 else 900 + 30 * i)
            for i in range(30)]
    raws += [raw_workload(f"p{i}", namespace=TENANTS[i % 4], gpus=(1 + i % 4) * (9 if i % 11 == 0 else 1),
                          message=BORROWING if i % 3 == 0 else QUOTA_WAIT.format(1 + i % 4)) for i in range(40)]
    raws += [raw_workload("lost", namespace="vision", queue="nowhere"),
             {**raw_workload("off", namespace="speech"), "spec": {"active": False, "queueName": "training"}},
             raw_workload("done", namespace="nlp", cluster_queue="nlp", admitted=NOW - timedelta(hours=1), finished=NOW)]
    pending = {t: [visibility_item(f"p{i}", t, n, n) for n, i in enumerate(range(j, 40, 4))]
               for j, t in enumerate(TENANTS)}
    pending["vision"].append(visibility_item("unread", "secret", len(pending["vision"]), 0))
    local_queues = [{"metadata": {"namespace": t, "name": "training"}, "spec": {"clusterQueue": t}} for t in TENANTS]
    queues = [raw_cluster_queue(t, cohort=COHORTS[t], held="12") for t in TENANTS]
    records = [from_object(r) for r in raws[::2]] + raws[1::2]  # records made page by page, and raw objects
    return snapshot(model, NOW, queues, local_queues, records, pending, frozenset(TENANTS[:3]))


def test_workloads_alike_are_explained_as_each_alone() -> None:
    snap = varied_snapshot()
    index = _index(snap)
    assert not index.reasons  # explained when asked
    for w in snap.workloads:
        cq, problem = cluster_queue_of(snap, w)
        assert index.reasons[(w.namespace, w.name)] == (
            cq, explain(w, snap.cluster_queues.get(cq), problem, snap.node_sizes, snap.tree)), w.key
    kinds = {r.why for _, r in index.reasons.values()}
    assert len(kinds) >= 5 and len({id(r) for _, r in index.reasons.values()}) < len(snap.workloads)  # shared


def test_the_json_report_is_the_indented_dump_of_its_entries() -> None:
    snap = varied_snapshot()
    shown = entries(snap)
    missing = Gaps(["forbidden: list workloads (tenant nlp): é"], [NotShown("nlp", "nlp", 2, 3)], ())
    for found in (missing, None, gaps(snap)):
        data: dict[str, Any] = {"cluster": "east", "at": "2026-12-03T09:22:30Z",
                                "workloads": [report.entry_json(e) for e in shown]}
        if found is not None:
            data["not_shown"] = [{"tenant": n.tenant, "cluster_queue": n.cluster_queue, "admitted": n.admitted,
                                  "pending": n.pending} for n in found.not_shown]
            data["forbidden"] = found.lines
        assert report.queue_json(shown, NOW, "east", found) == json.dumps(data, indent=2) + "\n"
    assert {e.state for e in shown} >= {"admitted", "pending", "inactive"} and any(e.hidden for e in shown)


def test_one_tenants_entries_are_those_of_the_whole_report() -> None:
    snap = varied_snapshot()
    everyone = entries(snap)
    for wanted in (["vision"], ["speech", "recsys"], ["nobody"]):
        alone = varied_snapshot()  # a fresh index: only what these tenants' entries ask is computed
        assert entries(alone, wanted) == [e for e in everyone if e.tenant in wanted]
        explained = set(_index(alone).reasons)
        assert explained <= {(w.namespace, w.name) for w in alone.workloads if w.namespace in wanted}
        assert bool(explained) == (wanted != ["nobody"])


def test_quantities_and_times_parsed_once_are_parsed_alike() -> None:
    for text in ("8", "500m", "64Gi", "1e3", " 2 "):
        assert quantity(text) == parse_quantity(text) and quantity(text) is quantity(text)
    assert quantity(3) == 3
    for value in (True, "eight", [1]):
        with pytest.raises(QuantityError):
            quantity(value)
    assert parse_time("2026-12-03T09:22:30Z") == NOW and parse_time("2026-12-03T17:22:30+08:00") == NOW
    with pytest.raises(WorkloadError):
        parse_time("yesterday")


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_an_encoded_value_is_placed_as_dumps_would_write_it(value: Any) -> None:
    nested = {"deeper": [{"still": indented.Encoded(indented.dumps(value))}]}
    assert indented.dumps(nested) == json.dumps({"deeper": [{"still": value}]}, indent=2)
    if isinstance(value, dict) and value:  # spliced among the members of a larger object
        spliced = indented.Encoded("{\n  " + indented.members(value) + ',\n  "z": 1\n}')
        assert indented.dumps([spliced]) == json.dumps([{**value, "z": 1}], indent=2)


def test_queue_quotas_alike_are_shared_and_true_is_no_quota() -> None:
    from gpugov.queueing.clusterqueue import cluster_queue

    def queue(nominal: Any) -> dict[str, Any]:
        return {"metadata": {"name": "q"}, "spec": {"resourceGroups": [{"flavors": [
            {"name": "a", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": nominal}]},
            {"name": "b", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": nominal}]}]}]}}

    one = cluster_queue(queue("1"))
    assert one.quotas[("a", "nvidia.com/gpu")] is one.quotas[("b", "nvidia.com/gpu")]
    assert one.quotas[("a", "nvidia.com/gpu")].nominal == 1 and cluster_queue(queue(1)).quotas == one.quotas
    for value in (True, [1], "eight"):  # refused as each alone would be, though "1" is filed
        with pytest.raises(WorkloadError, match=r"ClusterQueue q flavor a resource nvidia\.com/gpu"):
            cluster_queue(queue(value))


def test_a_workloads_views_are_computed_once_and_alike() -> None:
    raw = raw_workload("r", namespace=TENANTS[0], gpus=2, cluster_queue=TENANTS[0], admitted=NOW)
    workload, again = from_object(raw), from_object(raw)
    assert workload.accelerators is workload.accelerators and workload.accelerators == again.accelerators
    assert workload.state == "admitted" and workload.flavors == again.flavors and workload == again
