"""The simulator's shortcuts for deep backlogs decide exactly what the plain event loop decided.

tests/fixtures/whatif/backlog-decisions.json was written by `digest` below from the simulator as it
was before any shortcut (regenerate only for a deliberate change of semantics:
`python -m tests.unit.test_whatif_speed`). Each case replays a seeded synthetic trace at three
times the tenants' quota, so queues hold hours of parked work that is retried at every finish.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.whatif.replay import kueue_setup, placement_of
from gpugov.whatif.simulate import Options, Outcome, Simulator
from gpugov.whatif.synthetic import synthesize
from tests.helpers.repos import EXAMPLES, FIXTURES

DECISIONS = FIXTURES / "whatif" / "backlog-decisions.json"
# (org, cluster, jobs, seed): the example org's two tenants, and the what-if org's cohort of two.
ORGS = {"base": (EXAMPLES / "base", "lab", 400, 2), "whatif-org": (FIXTURES / "whatif" / "org", "lab", 300, 3)}
VARIANTS = {
    "fair": Options(),
    "classical": Options(fair_sharing=False),
    "status-write": Options(status_write_ms=5),
    "no-delays": Options(eviction_delay_ms=0, requeue_delay_ms=0),
}
# The what-if org without delays livelocks on preemptions (hundreds of thousands of them): too slow here.
CASES = [(org, variant) for org in ORGS for variant in VARIANTS if (org, variant) != ("whatif-org", "no-delays")]


def digest(outcome: Outcome) -> dict[str, Any]:
    """Everything a replay decided: when each job was admitted (and in which cycle), who preempted
    whom, each workload's history and why it last waited, and each queue's usage integrals."""
    return {
        "end_ms": outcome.end_ms,
        "cycles": outcome.cycles,
        "unconverged": outcome.unconverged_instants,
        "admissions": [list(a) for a in outcome.admission_log],
        "preemptions": [list(p) for p in outcome.preemption_log],
        "workloads": [[w.job.id, w.state, w.first_admitted_ms, w.admitted_ms, w.waited_ms, w.preemptions,
                       w.admissions, w.waiting_for, sorted([*k, v] for k, v in w.lost_units_ms.items())]
                      for w in outcome.workloads],
        "queues": {name: [sorted([*k, v] for k, v in cq.used_units_ms.items()),
                          sorted([*k, v] for k, v in cq.borrowed_units_ms.items())]
                   for name, cq in sorted(outcome.cluster_queues.items())},
    }


def replay_case(org: str, variant: str) -> dict[str, Any]:
    path, cluster, jobs, seed = ORGS[org]
    model = validate_repo(path).model
    assert model is not None
    setup = kueue_setup(model, cluster)
    trace = synthesize(setup, jobs, seed=seed, load=3.0)
    return digest(Simulator(setup, trace, VARIANTS[variant], placement_of(model)).run())


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


if __name__ == "__main__":  # regenerate the recorded decisions
    DECISIONS.write_text(json.dumps({f"{o}/{v}": replay_case(o, v) for o, v in CASES}, sort_keys=True) + "\n")
