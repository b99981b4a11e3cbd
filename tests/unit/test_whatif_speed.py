"""The simulator's shortcuts for deep backlogs decide exactly what the plain event loop decided.

tests/fixtures/whatif/backlog-decisions.json was written by `digest` below from the simulator as it
was before any shortcut (regenerate only for a deliberate change of semantics:
`python -m tests.unit.test_whatif_speed`). Each case replays a seeded synthetic trace at three
times the tenants' quota, so queues hold hours of parked work that is retried at every finish.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from typing import Any

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.whatif.replay import kueue_setup, placement_of
from gpugov.whatif.setup import Setup
from gpugov.whatif.simulate import Options, Outcome, Simulator
from gpugov.whatif.synthetic import synthesize
from tests.helpers.repos import EXAMPLES, FIXTURES

DECISIONS = FIXTURES / "whatif" / "backlog-decisions.json"
# (org, cluster, jobs, seed, strict): the example org's two tenants, and the what-if org's cohort of
# two; `strict` makes the first ClusterQueue StrictFIFO and every one reclaim only from lower
# priorities (heads that hold quota without candidates) and preempt within by age too.
ORGS = {
    "base": (EXAMPLES / "base", "lab", 400, 2, False),
    "base-strict": (EXAMPLES / "base", "lab", 400, 2, True),
    "whatif-org": (FIXTURES / "whatif" / "org", "lab", 300, 3, False),
    "whatif-org-strict": (FIXTURES / "whatif" / "org", "lab", 300, 3, True),
}
VARIANTS = {
    "fair": Options(),
    "classical": Options(fair_sharing=False),
    "status-write": Options(status_write_ms=5),
    "no-delays": Options(eviction_delay_ms=0, requeue_delay_ms=0),
}
# The what-if org without delays livelocks on preemptions (hundreds of thousands of them): too slow here.
CASES = [(org, variant) for org in ORGS for variant in VARIANTS
         if not (org.startswith("whatif-org") and variant == "no-delays")]


def strict(setup: Setup) -> Setup:
    queues = {}
    for index, (name, spec) in enumerate(sorted(setup.cluster_queues.items())):
        preemption = replace(spec.preemption, reclaim_within_cohort="LowerPriority",
                             within_cluster_queue="LowerOrNewerEqualPriority")
        queues[name] = replace(spec, preemption=preemption,
                               queueing_strategy="StrictFIFO" if index == 0 else spec.queueing_strategy)
    return replace(setup, cluster_queues=queues)


def digest(outcome: Outcome) -> dict[str, Any]:
    """Everything a replay decided: when each job was admitted (and in which cycle), who preempted
    whom, each workload's history and why it last waited, and each queue's usage integrals
    (jobs by their index in the trace, reasons by theirs in `reasons`, to keep the record small)."""
    index = {w.job.id: w.index for w in outcome.workloads}
    reasons = sorted({w.waiting_for for w in outcome.workloads} | {r for *_, r in outcome.preemption_log})
    reason = {text: n for n, text in enumerate(reasons)}
    return {
        "reasons": reasons,
        "end_ms": outcome.end_ms,
        "cycles": outcome.cycles,
        "unconverged": outcome.unconverged_instants,
        "admissions": [[ms, cycle, index[job]] for ms, cycle, job in outcome.admission_log],
        "preemptions": [[ms, index[victim], index[preemptor], reason[why]]
                        for ms, victim, preemptor, why in outcome.preemption_log],
        "workloads": [[w.state, w.first_admitted_ms, w.admitted_ms, w.waited_ms, w.preemptions, w.admissions,
                       reason[w.waiting_for], sorted([*k, v] for k, v in w.lost_units_ms.items())]
                      for w in outcome.workloads],
        "queues": {name: [sorted([*k, v] for k, v in cq.used_units_ms.items()),
                          sorted([*k, v] for k, v in cq.borrowed_units_ms.items())]
                   for name, cq in sorted(outcome.cluster_queues.items())},
    }


def simulator(org: str, variant: str) -> Simulator:
    path, cluster, jobs, seed, strict_queues = ORGS[org]
    model = validate_repo(path).model
    assert model is not None
    setup = kueue_setup(model, cluster)
    trace = synthesize(setup, jobs, seed=seed, load=3.0)
    return Simulator(strict(setup) if strict_queues else setup, trace, VARIANTS[variant], placement_of(model))


def replay_case(org: str, variant: str) -> dict[str, Any]:
    return digest(simulator(org, variant).run())


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    return json.loads(DECISIONS.read_text())


@pytest.mark.parametrize(("org", "variant"), CASES)
def test_a_deep_backlog_replays_with_the_recorded_decisions(recorded: dict[str, Any], org: str, variant: str) -> None:
    expected = recorded[f"{org}/{variant}"]
    assert expected["cycles"] > 10 * len(expected["workloads"])  # parked work is retried many times over
    actual = replay_case(org, variant)
    for key in ("admissions", "preemptions", "workloads", "queues"):
        assert actual[key] == expected[key], key
    assert actual == expected


def test_the_backlog_cases_take_the_shortcut() -> None:
    """Most of a deep backlog's cycles are run in bulk, so the comparison above tests the shortcut."""
    sim = simulator("base", "fair")
    one_by_one = 0
    cycle = sim._cycle

    def counted(now: int) -> tuple[bool, int]:
        nonlocal one_by_one
        one_by_one += 1
        return cycle(now)

    sim._cycle = counted  # type: ignore[method-assign]
    outcome = sim.run()
    assert outcome.cycles > 10 * one_by_one


def test_a_hopeless_nomination_without_candidates_is_kept_until_its_resources_change(
        recorded: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Kinds of jobs that found no preemption candidate are not assigned again at every change of usage
    in their cohort tree, only when the usage of what they ask for changes (and the decisions stay)."""
    import gpugov.whatif.simulate as simulate_module

    def assignments(quiet: bool) -> tuple[int, dict[str, Any]]:
        sim = simulator("base", "fair")
        if not quiet:
            fresh = itertools.count()
            sim._marks = lambda cq, frs: (next(fresh),)  # type: ignore[method-assign]  # never as recorded
        calls = 0
        assign = simulate_module.assign

        def counted(*args: Any) -> Any:
            nonlocal calls
            calls += 1
            return assign(*args)

        monkeypatch.setattr(simulate_module, "assign", counted)
        outcome = sim.run()
        monkeypatch.setattr(simulate_module, "assign", assign)
        return calls, digest(outcome)

    kept, kept_digest = assignments(quiet=True)
    every, every_digest = assignments(quiet=False)
    assert kept_digest == every_digest == recorded["base/fair"]
    assert kept < 0.8 * every


@pytest.mark.parametrize("org", ["base", "whatif-org"])
def test_a_search_the_preemptor_outshares_ends_before_its_tournament(
        recorded: dict[str, Any], org: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the preemptor borrows and its share is above every candidate queue's, no victim can be
    taken: the search ends there (each such proof saves one tournament), with the decisions of the
    full tournament. With trees tracked (treestates), answers kept by state stand for some proofs:
    fewer proofs, the same tournaments and decisions; so the proofs are counted with none tracked."""
    from gpugov.whatif.preemption import Preemptor
    from gpugov.whatif.treestates import TreeStates

    def tournaments(shortcut: bool, tracked: bool = False) -> tuple[int, int, dict[str, Any]]:
        outshared = Preemptor._outshared
        proofs = 0

        def proved(*args: Any) -> bool:
            nonlocal proofs
            found = shortcut and outshared(*args)
            proofs += found
            return found

        calls = 0
        first_strategy = Preemptor._first_strategy

        def counted(self: Preemptor, *args: Any) -> Any:
            nonlocal calls
            calls += 1
            return first_strategy(self, *args)

        monkeypatch.setattr(Preemptor, "_outshared", proved)
        monkeypatch.setattr(Preemptor, "_first_strategy", counted)
        if not tracked:
            monkeypatch.setattr(TreeStates, "track", lambda *_: None)
        outcome = simulator(org, "fair").run()
        monkeypatch.undo()
        return calls, proofs, digest(outcome)

    short, proofs, short_digest = tournaments(shortcut=True)
    full, none, full_digest = tournaments(shortcut=False)
    kept, kept_proofs, kept_digest = tournaments(shortcut=True, tracked=True)
    assert short_digest == full_digest == kept_digest == recorded[f"{org}/fair"]
    assert none == 0 and proofs > 0.15 * full
    assert full - short == proofs
    # a kept answer is one that ran no tournament (Preemptor.ordered unset): it stands for a proof
    assert kept == short and kept_proofs < proofs


@pytest.mark.parametrize("org", ["base", "whatif-org"])
def test_queues_of_more_kinds_than_a_byte_names_decide_the_same(
        recorded: dict[str, Any], org: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A queue's kinds past the first MANY_KINDS share one byte and are looked at one by one."""
    import gpugov.whatif.simulate as simulate_module

    monkeypatch.setattr(simulate_module, "MANY_KINDS", 2)
    sim = simulator(org, "fair")
    assert all(len(cq.kinds) == 3 for cq in sim.queue_order)  # two named, the rest share the third byte
    assert digest(sim.run()) == recorded[f"{org}/fair"]


def test_requeueing_a_backlog_does_no_work_per_parked_workload() -> None:
    """A cohort tree's requeue only moves each queue's boundary between parked and requeued: the parked
    stay in their list, in queue order, and the heap holds none of them."""
    sim = simulator("base", "fair")
    seen = 0
    requeue = sim._requeue_inadmissible

    def checked(cq: Any) -> None:
        nonlocal seen
        heaps = {queue.name: len(queue.heap) for queue in sim.queue_order}
        requeue(cq)
        assert {queue.name: len(queue.heap) for queue in sim.queue_order} == heaps
        for queue in sim.queue_order:
            if queue.root is cq.root:
                assert queue.pending_from == 0
                seen += len(queue.parked)
            assert [w.order for w in queue.parked] == sorted(w.order for w in queue.parked)

    sim._requeue_inadmissible = checked  # type: ignore[method-assign]
    sim.run()
    assert seen > 10 * len(sim.workloads)  # deep: each parked workload was requeued many times


if __name__ == "__main__":  # regenerate the recorded decisions
    record = {f"{o}/{v}": replay_case(o, v) for o, v in CASES}
    DECISIONS.write_text(json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n")
