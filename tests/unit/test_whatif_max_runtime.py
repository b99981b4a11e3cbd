"""What-if models the maximum runtime (issue #26): a job of a queue whose reclaim policy declares a
maxRuntime is ended by Kueue at that limit, so the replay ends it there too, and the report says
how many jobs were cut. The limits are read from compile's gpugov-max-runtime admission policy."""

from __future__ import annotations

import json
from pathlib import Path

from gpugov.compile import compile
from gpugov.whatif.replay import replay
from gpugov.whatif.report import compare, markdown, to_json
from gpugov.whatif.setup import cap_runtimes, read_setup
from gpugov.whatif.simulate import Options
from gpugov.whatif.state import FINISHED
from gpugov.whatif.trace import Job
from tests.unit.test_reclaim_policy import ALPHA_RECLAIM, _model, _repo

HOUR_MS = 3_600_000
JOBS = [
    Job("long-batch", 0, 2 * HOUR_MS, queue="alpha/main", priority_class="batch", accelerators=2),  # over 90m
    Job("short-batch", 1000, HOUR_MS, queue="alpha/main", priority_class="batch", accelerators=2),
    Job("week-serve", 2000, 7 * 24 * HOUR_MS, queue="beta/serve", priority_class="serving"),  # over the 3d default
    Job("day-serve", 3000, 24 * HOUR_MS, queue="beta/serve", priority_class="serving"),
]


def test_jobs_past_their_queues_limit_end_at_it(tmp_path: Path) -> None:
    model = _model(_repo(tmp_path, alpha=ALPHA_RECLAIM))
    setup = read_setup(compile(model, backend="kueue", cluster="lab"))
    assert setup.max_runtime_s["alpha"] == {"batch": 5400, "*": 3 * 86400}  # alpha's own batch limit over the default
    capped, cut = cap_runtimes(setup, JOBS)
    assert cut == 2
    assert [job.duration_ms for job in capped] == [5400 * 1000, HOUR_MS, 3 * 24 * HOUR_MS, 24 * HOUR_MS]

    run = replay(model, "lab", JOBS, "head", Options())
    assert run.runtime_cut == 2
    by_id = {wl.job.id: wl for wl in run.outcome.workloads}
    assert all(wl.state == FINISHED for wl in by_id.values())
    assert by_id["long-batch"].job.duration_ms == 5400 * 1000  # the simulation ran the capped job
    report = markdown(compare("t.csv", "lab", Options(), run, run))
    assert "- head: 2 jobs run longer than their queue's maximum runtime (reclaim.maxRuntime)" in report
    assert json.loads(json.dumps(to_json(compare("t.csv", "lab", Options(), run, run))))["head"][
        "cut_at_max_runtime"] == 2


def test_without_a_declared_maximum_nothing_is_cut(tmp_path: Path) -> None:
    model = _model(_repo(tmp_path, guardrails=None))
    setup = read_setup(compile(model, backend="kueue", cluster="lab"))
    assert setup.max_runtime_s == {}
    capped, cut = cap_runtimes(setup, JOBS)
    assert (capped, cut) == (JOBS, 0)
    run = replay(model, "lab", JOBS, "base", Options())
    assert run.runtime_cut == 0 and "maximum runtime" not in markdown(compare("t.csv", "lab", Options(), run, run))
