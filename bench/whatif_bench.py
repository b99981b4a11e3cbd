"""Benchmark: `gpugov whatif`'s simulator on a 100,000-job synthetic trace.

    python bench/whatif_bench.py [--jobs 100000] [--load 0.7] [--repeat 1] [--repo .] [--cluster east]

Synthesizes a seeded trace over the organisation's Kueue objects (compile's output for the
cluster), writes it as CSV, and times in the same run:
  - reading and parsing that CSV (the baseline: the least any replay must do),
  - replaying it through the Kueue simulation (fair sharing on, as gpugov's weights need),
and prints jobs/s of each and their ratio, with the scheduling cycles the replay ran.

The deep-backlog case (`--backlog-jobs`, default 6,000, at `--backlog-load` 3.0: every tenant
asks three times its quota, so queues hold days of parked work) is timed the same way and
printed as a ratio to parse (goal: 3x); so is the one-tenant backlog (the shape of issue #28's
real trace): every tenant at `--load` but the first, which asks three times its quota over the
same hours, so only its queue holds days of parked work. Every parked workload is retried whenever
quota frees up in its cohort tree, as Kueue does, so a backlog costs a cycle per parked job per
finish; the cycles in which nothing changes but which jobs are parked run in bulk
(Simulator._skip_hopeless: same decisions, same cycle count), requeueing a tree's parked costs
nothing per job (ClusterQueue.parked), so what is left is, per kind of job per change of usage, a
look at the grades its flavor assignment was made of (made again only when one of them changed;
Simulator._grader), and a look at each parked job's kind per retry.

The floor (`--floor-load`, default 0.02) is the same number of jobs at a load where none waits: one
cycle and one admission per job, no backlog at all. Its ratio to parse is what any replay of that
many jobs costs here before a single one queues, so the backlog cases are also printed against it.

The trace-shaped case (`--trace-pods`, default 8,150) is a pod list in the layout and shape of
Alibaba's cluster-trace-gpu-v2023 `openb_pod_list_default.csv` (bench/alibaba_shape.py: 149 days,
99% of the GPU pods one GPU, 44% of those a share, median run 10 minutes), imported as `gpugov trace
import alibaba --map LS=inference --map BE=nlp --map '*=vision'` does, and replayed as `gpugov whatif`
does: base and head (here the same revision), each compiled for the cluster and replayed (goal: under
5 s for both). Against the example organisation's cluster east it is a backlog of weeks for inference
and vision. Its floor is the same jobs, each lasting one second, so that none waits: what replaying
them costs without a backlog (goal: the trace at most 10x that). Base and head are timed twice: as
`gpugov whatif` replays them (gpugov.whatif.pair: at once, the head in a second process, where more
than one CPU is usable and neither --serial nor GPUGOV_WHATIF_SERIAL=1 says otherwise; its CPU time
counts the second process's), and one after the other in this process, against which the floor's
ratio is taken (the floor, also one after the other, is replay cost, not process start-up). The
trace's outcome digest (sha256 of its decisions, tests/unit/test_whatif_speed.py's `digest`) is printed
for both, and they must be the same.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.alibaba_shape import openb_pod_list
from gpugov.app.pipeline import validate_repo
from gpugov.declarations.model import Model
from gpugov.whatif.importers import Mapping, alibaba
from gpugov.whatif.pair import parallel_wanted, replay_pair
from gpugov.whatif.replay import kueue_setup, placement_of, replay
from gpugov.whatif.setup import Placement, Setup
from gpugov.whatif.simulate import Options, Outcome, Simulator
from gpugov.whatif.state import FINISHED
from gpugov.whatif.synthetic import synthesize
from gpugov.whatif.trace import Job, dump_trace, read_trace

T = TypeVar("T")


def best_of(repeat: int, work: Callable[[], T]) -> tuple[float, T]:
    """The shortest of `repeat` (at least one) timings of `work`, with its last result."""
    best = float("inf")
    for _ in range(max(1, repeat)):
        started = time.perf_counter()
        result = work()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--load", type=float, default=0.7, help="offered load per tenant, share of its quota")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--cluster", default="east")
    parser.add_argument("--backlog-jobs", type=int, default=6000)
    parser.add_argument("--backlog-load", type=float, default=3.0)
    parser.add_argument("--floor-load", type=float, default=0.02,
                        help="offered load of the case where no job waits (the floor)")
    parser.add_argument("--trace-pods", type=int, default=8150,
                        help="pods of the pod list shaped like Alibaba's openb_pod_list_default.csv")
    args = parser.parse_args()

    model = validate_repo(Path(args.repo)).model
    assert model is not None, "the repository does not validate"
    setup = kueue_setup(model, args.cluster)
    jobs = synthesize(setup, args.jobs, seed=1, load=args.load)
    placement = placement_of(model)
    parse_s, replay_s, outcome = timed_case("trace", jobs, setup, placement, args)
    span_h = jobs[-1].submit_ms / 3_600_000
    print(f"trace: {len(jobs):,} jobs over {span_h:,.0f} h on cluster {args.cluster} "
          f"({len(setup.cluster_queues)} ClusterQueues, load {args.load})")
    print(f"parse the CSV  : {parse_s:6.2f} s  {len(jobs) / parse_s:>10,.0f} jobs/s")
    print(f"replay (Kueue) : {replay_s:6.2f} s  {len(jobs) / replay_s:>10,.0f} jobs/s  "
          f"({outcome.cycles:,} scheduling cycles, {len(outcome.preemption_log):,} preemptions)")
    print(f"replay / parse : {replay_s / parse_s:.1f}x")
    floor_s = floor(setup, placement, args)
    deep_backlog(setup, placement, args, floor_s)
    one_tenant_backlog(setup, placement, args, floor_s)
    trace_shaped(model, args)
    return 0


def timed_case(name: str, jobs: list[Job], setup: Setup, placement: Placement,
               args: argparse.Namespace) -> tuple[float, float, Outcome]:
    """(parse seconds, replay seconds, outcome) of `jobs` written as CSV, best of --repeat each."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.csv"
        path.write_text(dump_trace(jobs))
        parse_s, parsed = best_of(args.repeat, lambda: read_trace(path))
    assert parsed == jobs
    replay_s, outcome = best_of(args.repeat, lambda: Simulator(setup, jobs, Options(), placement).run())
    return parse_s, replay_s, outcome


def floor(setup: Setup, placement: Placement, args: argparse.Namespace) -> float:
    """The backlog cases' job count at a load where no job waits; its replay per job (seconds)."""
    jobs = synthesize(setup, args.backlog_jobs, seed=2, load=args.floor_load)
    parse_s, replay_s, outcome = timed_case("floor", jobs, setup, placement, args)
    longest_s = max(w.waited_ms for w in outcome.workloads) / 1000
    print(f"floor (no backlog): {len(jobs):,} jobs at load {args.floor_load}; parse {parse_s:.3f} s")
    print(f"  replay {replay_s:7.2f} s  ({outcome.cycles:,} scheduling cycles, "
          f"{len(outcome.admission_log):,} admissions, longest wait {longest_s:,.0f} s)")
    print(f"  replay / parse : {replay_s / parse_s:.1f}x")
    return replay_s / len(jobs)


def deep_backlog(setup: Setup, placement: Placement, args: argparse.Namespace, floor_s: float) -> None:
    jobs = synthesize(setup, args.backlog_jobs, seed=2, load=args.backlog_load)
    parse_s, replay_s, outcome = timed_case("backlog", jobs, setup, placement, args)
    print(f"deep backlog: {len(jobs):,} jobs at load {args.backlog_load}; parse {parse_s:.3f} s")
    print(f"  replay {replay_s:7.2f} s  ({outcome.cycles:,} scheduling cycles)")
    print(f"  replay / parse : {replay_s / parse_s:.1f}x   per job / floor's : {replay_s / len(jobs) / floor_s:.1f}x")


def one_tenant_backlog(setup: Setup, placement: Placement, args: argparse.Namespace, floor_s: float) -> None:
    """Every tenant at the normal load but the first, which asks `--backlog-load` times its quota
    over the same span: one queue holds days of parked work, retried at every finish in its tree."""
    normal = synthesize(setup, args.backlog_jobs, seed=2, load=args.load)
    queue = min(job.queue for job in normal)
    end = normal[-1].submit_ms
    heavy = [job for job in synthesize(setup, round(args.backlog_jobs * args.backlog_load / args.load), seed=3,
                                       load=args.backlog_load) if job.queue == queue and job.submit_ms <= end]
    jobs = sorted([job for job in normal if job.queue != queue] + heavy, key=lambda job: (job.submit_ms, job.id))
    parse_s, replay_s, outcome = timed_case("one-tenant", jobs, setup, placement, args)
    print(f"one-tenant backlog: {len(jobs):,} jobs, {len(heavy):,} of them on {queue} at load "
          f"{args.backlog_load}; parse {parse_s:.3f} s")
    longest_h = max(w.waited_ms for w in outcome.workloads) / 3_600_000
    print(f"  replay {replay_s:7.2f} s  ({outcome.cycles:,} scheduling cycles, longest wait {longest_h:,.0f} h)")
    print(f"  replay / parse : {replay_s / parse_s:.1f}x   per job / floor's : {replay_s / len(jobs) / floor_s:.1f}x")


def trace_shaped(model: Model, args: argparse.Namespace) -> None:
    """The Alibaba-shaped pod list, base and head replayed as `gpugov whatif` replays them, against
    the same jobs lasting a second each (none waits: the floor)."""
    imported = alibaba(openb_pod_list(pods=args.trace_pods), "openb_pod_list_shaped.csv",
                       Mapping({"LS": "inference", "BE": "nlp", "*": "vision"}))
    jobs = imported.jobs
    quick = [replace(job, duration_ms=1000) for job in jobs]

    def whatif(trace: list[Job]) -> Outcome:
        replay(model, args.cluster, trace, "base", Options())
        return replay(model, args.cluster, trace, "head", Options()).outcome

    def as_gpugov_whatif() -> Outcome:
        sides = [(model, args.cluster, jobs, label, Options()) for label in ("base", "head")]
        return replay_pair(replay, *sides, parallel=parallel)[1].outcome

    trace_cpu, quick_cpu, pair_cpu = float("inf"), float("inf"), float("inf")

    def timed(trace: list[Job]) -> Outcome:
        nonlocal trace_cpu, quick_cpu
        started = time.process_time()
        outcome = whatif(trace)
        if trace is jobs:
            trace_cpu = min(trace_cpu, time.process_time() - started)
        else:
            quick_cpu = min(quick_cpu, time.process_time() - started)
        return outcome

    def timed_pair() -> Outcome:
        nonlocal pair_cpu
        started = time.process_time() + children_cpu()
        outcome = as_gpugov_whatif()
        pair_cpu = min(pair_cpu, time.process_time() + children_cpu() - started)
        return outcome

    parallel = parallel_wanted()
    pair_s, pair_outcome = best_of(args.repeat, timed_pair)
    trace_s, outcome = best_of(args.repeat, lambda: timed(jobs))
    floor_s, quick_outcome = best_of(args.repeat, lambda: timed(quick))
    waits = sorted(w.waited_ms for w in outcome.workloads if w.state == FINISHED)
    print(f"trace-shaped (Alibaba openb_pod_list_default, bench/alibaba_shape.py): {args.trace_pods:,} pods, "
          f"{len(jobs):,} GPU jobs over {jobs[-1].submit_ms / 86_400_000:,.0f} days on cluster {args.cluster}")
    how = "at once, 2 processes" if parallel else "one after the other: one usable CPU or told so"
    print(f"  base + head as gpugov whatif ({how})  {pair_s:7.2f} s, CPU {pair_cpu:.2f} s  "
          f"(digest {outcome_digest(pair_outcome)})  goal < 5 s")
    print(f"  base + head one after the other  {trace_s:7.2f} s, CPU {trace_cpu:.2f} s  ({outcome.cycles:,} scheduling "
          f"cycles each, median wait {waits[len(waits) // 2] / 3_600_000:,.0f} h, longest "
          f"{waits[-1] / 3_600_000:,.0f} h; digest {outcome_digest(outcome)})")
    longest_s = max(w.waited_ms for w in quick_outcome.workloads if w.state == FINISHED) / 1000
    print(f"  floor (the same jobs, 1 s each, one after the other) {floor_s:7.2f} s, CPU {quick_cpu:.2f} s  "
          f"({quick_outcome.cycles:,} cycles, longest wait {longest_s:,.0f} s)")
    print(f"  trace / floor : {trace_s / floor_s:.1f}x (CPU {trace_cpu / quick_cpu:.1f}x)  goal 10x")


def children_cpu() -> float:
    """CPU seconds of this process's ended children (a replay's second process, once it is joined)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def outcome_digest(outcome: Outcome) -> str:
    """The first 16 hex digits of the sha256 of a replay's decisions (tests/unit/test_whatif_speed.py)."""
    from tests.unit.test_whatif_speed import digest

    return hashlib.sha256(json.dumps(digest(outcome), sort_keys=True).encode()).hexdigest()[:16]


if __name__ == "__main__":
    raise SystemExit(main())
