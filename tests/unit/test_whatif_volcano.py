"""The Volcano what-if replay (gpugov.whatif.volcano*) on cluster west of the example organisation.

West: pool ascend-910b, 4 nodes of 8 Ascend 910B (32). Departments research (deserved 24, guarantee 8)
and product (deserved 8); tenants llm-pretrain (research; deserved 16, guarantee 8), speech (research;
deserved 8), recsys (product; deserved 8, capability 16); namespace ResourceQuotas 32, 32, 16.
"""

from __future__ import annotations

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.whatif.goheap import GoHeap
from gpugov.whatif.trace import Job
from gpugov.whatif.volcano import VOutcome, replay_volcano
from gpugov.whatif.volcano_capacity import Capacity, real_capabilities
from gpugov.whatif.volcano_report import VRun, markdown, metrics
from gpugov.whatif.volcano_setup import VolcanoSetup, volcano_setup
from gpugov.whatif.volcano_synthetic import synthesize_volcano
from tests.helpers.repos import REPO
from tests.helpers.volcano_fidelity import fidelity_trace, separated, steps

ASCEND = "huawei.com/Ascend910"


@pytest.fixture(scope="module")
def west() -> VolcanoSetup:
    model = validate_repo(REPO).model
    assert model is not None
    return volcano_setup(model, "west")


def job(name: str, at_s: int, tenant: str, pods: int = 1, duration_s: int = 1000, priority_class: str = "") -> Job:
    return Job(name, at_s * 1000, duration_s * 1000, tenant=tenant, pods=pods, accelerators=8,
               priority_class=priority_class)


def events(outcome: VOutcome, *kinds: str) -> list[tuple[int, str, str]]:
    return [(ms // 1000, what, who) for ms, what, who in outcome.log if what in kinds]


def test_west_reads_as_vc_scheduler_reads_it(west: VolcanoSetup) -> None:
    assert [n.name for n in west.nodes] == ["ascend-01", "ascend-02", "ascend-03", "ascend-04"]
    assert west.total() == {ASCEND: 32}
    assert west.leaves() == ["default", "llm-pretrain", "recsys", "speech"]
    assert west.queues["llm-pretrain"].parent == "research" and west.queues["research"].parent == "root"
    assert west.quotas == {"llm-pretrain": {ASCEND: 32}, "recsys": {ASCEND: 16}, "speech": {ASCEND: 32}}
    assert west.priorities["training-high"] == 10000


def test_real_capability_is_the_parents_less_the_siblings_guarantees(west: VolcanoSetup) -> None:
    real = real_capabilities(west)
    assert {q: real[q][ASCEND] for q in ("research", "product", "llm-pretrain", "speech", "recsys")} == {
        "research": 32, "product": 24, "llm-pretrain": 32, "speech": 24, "recsys": 16}


def test_queue_order_compares_departments_across_them_and_leaves_within(west: VolcanoSetup) -> None:
    capacity = Capacity(west, real_capabilities(west), {"llm-pretrain": {ASCEND: 8}, "recsys": {ASCEND: 8}})
    # research holds 8 of 24 (1/3), product 8 of 8 (1): research's tenants go first
    assert capacity.compare("speech", "recsys") < 0 and capacity.compare("llm-pretrain", "recsys") < 0
    # within research: speech (0 of 8) before llm-pretrain (8 of 16)
    assert capacity.compare("speech", "llm-pretrain") < 0
    capacity.allocate("speech", {ASCEND: 8})  # during a session only the leaf's share follows
    assert capacity.attrs["speech"].share == 1.0 and capacity.attrs["research"].share == pytest.approx(1 / 3)


def test_a_queue_below_its_deserved_reclaims_what_a_sibling_borrowed(west: VolcanoSetup) -> None:
    trace = [job(f"llm{i}", i, "llm-pretrain") for i in range(4)] + [job("speech", 10, "speech", duration_s=50)]
    outcome = replay_volcano(west, trace)
    assert events(outcome, "reclaim", "admit")[4:6] == [(10, "reclaim", "llm0"), (11, "admit", "speech")]
    assert events(outcome, "admit")[-1] == (61, "admit", "llm0")  # back when speech ends


def test_capability_is_a_ceiling_even_on_an_idle_pool(west: VolcanoSetup) -> None:
    outcome = replay_volcano(west, [job(f"r{i}", i, "recsys") for i in range(2)] + [job("r2", 2, "recsys")])
    assert events(outcome, "admit") == [(0, "admit", "r0"), (1, "admit", "r1"), (1000, "admit", "r2")]


def test_a_gang_runs_whole_or_never(west: VolcanoSetup) -> None:
    outcome = replay_volcano(west, [job("four", 0, "speech", pods=4), job("three", 5, "speech", pods=3)])
    assert outcome.never == {0: "larger than the Queue's realCapability or the nodes it may use"}
    assert events(outcome, "admit") == [(5, "admit", "three")]


def test_a_gang_waits_whole_while_smaller_jobs_pass(west: VolcanoSetup) -> None:
    trace = [job("a", 0, "llm-pretrain", pods=2), job("big", 1, "speech", pods=3), job("b", 2, "speech")]
    outcome = replay_volcano(west, trace)
    assert events(outcome, "admit")[:2] == [(0, "admit", "a"), (2, "admit", "b")]


def test_jobs_of_a_queue_go_by_priority(west: VolcanoSetup) -> None:
    """The pool is full (llm-pretrain 24, speech 8 at its deserved: nothing to reclaim); speech's node frees:
    the later training-high job takes it before the earlier batch-low one."""
    trace = [job("fill", 0, "llm-pretrain", pods=3), job("hold", 1, "speech", duration_s=100,
                                                            priority_class="inference-critical"),
             job("low", 2, "speech", priority_class="batch-low"), job("high", 3, "speech", priority_class="training-high")]
    outcome = replay_volcano(west, trace)
    assert events(outcome, "admit") == [(0, "admit", "fill"), (1, "admit", "hold"), (101, "admit", "high"),
                                        (1000, "admit", "low")]


def test_a_job_of_several_pods_yields_one_to_a_job_of_one_in_its_queue(west: VolcanoSetup) -> None:
    """The preempt action's second tier (drf): the borrowing gang, less a pod, keeps a share at least the
    newcomer's, so one of its pods is evicted and the whole gang waits again."""
    trace = [job("gang", 0, "llm-pretrain", pods=2), job("fill", 1, "speech", pods=2), job("one", 2, "llm-pretrain")]
    outcome = replay_volcano(west, trace)
    assert events(outcome, "preempt", "admit")[2:4] == [(2, "preempt", "gang"), (3, "admit", "one")]


def test_pods_past_the_namespace_quota_wait_outside_the_scheduler(west: VolcanoSetup) -> None:
    trace = [job("r0", 0, "recsys", duration_s=10), job("r1", 1, "recsys", duration_s=10), job("r2", 2, "recsys")]
    outcome = replay_volcano(west, trace)
    assert outcome.quota_waits == 1
    assert events(outcome, "admit")[-1] == (10, "admit", "r2")


def test_what_cannot_be_replayed_is_said(west: VolcanoSetup) -> None:
    trace = [Job("ghost", 0, 1000, tenant="nobody"), Job("part", 0, 1000, tenant="speech", share=__import__(
        "decimal").Decimal("0.5")), job("pc", 0, "speech", priority_class="no-such-class")]
    outcome = replay_volcano(west, trace)
    assert outcome.never == {0: "no Volcano Queue of tenant nobody", 1: "a share of a device is not replayed on Volcano",
                             2: "no PriorityClass no-such-class"}


def test_go_heap_pops_in_order() -> None:
    heap: GoHeap[int] = GoHeap(lambda a, b: a < b)
    for value in (5, 3, 9, 1, 7, 3):
        heap.push(value)
    assert [heap.pop() for _ in range(6)] == [1, 3, 3, 5, 7, 9]


def test_the_report_speaks_of_queues_not_flavors(west: VolcanoSetup) -> None:
    trace = synthesize_volcano(west, 200, seed=1)
    assert {j.tenant for j in trace} == {"llm-pretrain", "recsys", "speech"}
    run = VRun("base", west, replay_volcano(west, trace))
    found = metrics(run)
    assert sum(m.jobs for m in found.values()) == 200 and found["recsys"].department == "product"
    text = markdown("t", "west", run, run)
    assert "department" in text and "deserved" in text and "flavor" not in text.lower() and "cohort" not in text


def test_the_fidelity_trace_is_replayed_event_by_event(west: VolcanoSetup) -> None:
    trace = fidelity_trace(2940)
    outcome = replay_volcano(west, trace)
    assert separated(trace, outcome) == [] and outcome.undetermined == 0
    found = steps(trace, outcome)
    assert len(found) == len(trace) * 2 and found[-1].running == frozenset()


def test_whatif_replays_west_and_asks_which_cluster_when_there_are_several(tmp_path, capsys) -> None:
    import json

    from gpugov.cli import main

    trace = tmp_path / "t.csv"
    trace.write_text("id,submit,duration,tenant,pods,accelerators\n"
                     "big,0,600,llm-pretrain,4,8\nclaim,10,60,speech,1,8\n")
    code = main(["whatif", str(REPO), "--base", "HEAD", "--head", "HEAD", "--cluster", "west", "--trace", str(trace),
                 "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    assert report["scheduler"] == "volcano" and report["cluster"] == "west"
    assert report["base"]["tenants"]["llm-pretrain"]["runs_reclaimed"] == 1
    assert report["base"]["tenants"]["speech"]["wait_p50_s"] == 1.0  # the reclaimer runs a period after the reclaim
    code = main(["whatif", str(REPO), "--base", "HEAD", "--head", "HEAD", "--trace", str(trace)])
    _, err = capsys.readouterr()
    assert code == 2 and "choose a cluster with --cluster (clusters in both revisions: east (kueue), west (volcano))" in err


def test_a_free_node_taken_by_the_preempt_actions_within_job_part_lets_reclaim_finish_a_gang(
        west: VolcanoSetup) -> None:
    """Speech holds 16 (above its deserved 8), recsys 8, one node is free; llm-pretrain's gang of two waits.
    Preempt's within-job part pipelines its first pod on the free node, so reclaim needs to take only one
    of speech's pods for the second (speech keeps 8, its deserved)."""
    trace = [job("speech", 0, "speech", pods=2), job("recsys", 1, "recsys"), job("gang", 2, "llm-pretrain", pods=2)]
    outcome = replay_volcano(west, trace)
    assert events(outcome, "reclaim", "admit")[2:4] == [(2, "reclaim", "speech"), (3, "admit", "gang")]


def test_a_pod_nominated_where_it_evicted_does_not_preempt_again(west: VolcanoSetup) -> None:
    """Speech (16), llm-pretrain (8) and recsys (8) fill the pool; llm-pretrain's gang of two arrives: reclaim
    takes a speech pod for its first pod but finds nothing for the second, so nothing is kept, yet the pod
    keeps that node as nominated. When llm-pretrain's own job ends, the gang does not get the freed node
    through preempt's within-job part, so reclaim again finds room for one pod only: the gang waits."""
    trace = [job("speech", 0, "speech", pods=2), job("llm", 1, "llm-pretrain", duration_s=20), job("recsys", 2, "recsys"),
             job("gang", 3, "llm-pretrain", pods=2, duration_s=10)]
    outcome = replay_volcano(west, trace)
    assert events(outcome, "reclaim") == []
    assert [who for _, _, who in events(outcome, "admit")] == ["speech", "llm", "recsys", "gang"]
    assert events(outcome, "admit")[-1][0] == 1000  # when speech ends


def test_trace_synth_draws_from_a_volcano_clusters_queues(capsys) -> None:
    from gpugov.cli import main

    assert main(["trace", "synth", str(REPO), "--cluster", "west", "--jobs", "40", "--seed", "3"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert len(rows) == 41 and {row.split(",")[3] for row in rows[1:]} == {"llm-pretrain", "recsys", "speech"}
