"""The what-if simulator: Kueue's admission semantics on small organisations compiled by
gpugov, and the properties the report rests on."""

from __future__ import annotations

import math
import shutil
from decimal import Decimal
from pathlib import Path

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.compile import compile
from gpugov.declarations.model import Model
from gpugov.whatif.replay import replay
from gpugov.whatif.report import ALL, compare, markdown, tenant_metrics, to_json
from gpugov.whatif.setup import Placement, SetupError, read_setup
from gpugov.whatif.simulate import Options, Outcome, Simulator, simulate
from gpugov.whatif.state import FINISHED, NEVER
from gpugov.whatif.synthetic import synthesize
from gpugov.whatif.trace import Job, read_trace
from tests.helpers.repos import FIXTURES, write

FIXTURES = FIXTURES
ORG = FIXTURES / "whatif" / "org"
TRACE = FIXTURES / "traces" / "two-teams.csv"
GPU = "nvidia.com/gpu"
NO_DELAYS = Options(eviction_delay_ms=0, requeue_delay_ms=0)


def small_org(tmp_path: Path, tenants: str, policy: str = "{reclaimWithinCohort: Any, withinClusterQueue: "
              "LowerPriority, borrowWithinCohort: {policy: Never}}", queueing: str = "BestEffortFIFO",
              nodes: int = 2) -> list[dict]:
    """Compile's Kueue objects for a one-pool organisation with the given Tenant documents."""
    write(tmp_path, "policies/org.yaml", f"""\
apiVersion: gpugov.io/v1alpha1
kind: SchedulingPolicy
metadata: {{name: default}}
spec:
  queueingStrategy: {queueing}
  preemption: {policy}
---
apiVersion: gpugov.io/v1alpha1
kind: PriorityClass
metadata: {{name: low}}
spec: {{value: 10}}
---
apiVersion: gpugov.io/v1alpha1
kind: PriorityClass
metadata: {{name: high}}
spec: {{value: 100}}
""")
    write(tmp_path, "hardware/gpu.yaml", f"""\
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata: {{name: gpu}}
spec:
  accelerator: {{model: H100-80GB}}
  acceleratorsPerNode: 8
  nodeResources: {{cpu: 64, memory: 512Gi}}
  nodes: [{", ".join(f"{{name: n{i}}}" for i in range(nodes))}]
""")
    write(tmp_path, "tenants/all.yaml", tenants)
    result = validate_repo(tmp_path)
    assert result.model is not None and not result.errors, [f.message for f in result.errors]
    return compile(result.model, backend="kueue")


def tenant(name: str, quota: str, department: str | None = "dept", weight: int = 1) -> str:
    dept = f"  department: {department}\n" if department else ""
    return f"""\
---
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata: {{name: {name}}}
spec:
{dept}  owners: {{users: [{name}@example.com]}}
  costCenter: CC-{name}
  namespaces: [{name}]
  queues: [{{name: main, namespace: {name}, priorityClasses: [low, high]}}]
  quotas:
    - pool: gpu
      resources: {{accelerators: {quota}}}
  fairSharing: {{weight: {weight}}}
"""


DEPT = "apiVersion: gpugov.io/v1alpha1\nkind: Department\nmetadata: {name: dept}\nspec: {}\n"


def job(name: str, submit_s: float, duration_s: float, queue: str, gpus: int = 1, priority: str = "") -> Job:
    return Job(name, int(submit_s * 1000), int(duration_s * 1000), queue=f"{queue}/main", accelerators=gpus,
               resource=GPU, priority_class=priority)


def starts(outcome: Outcome) -> dict[str, float]:
    return {w.job.id: w.admitted_ms / 1000 for w in outcome.workloads}


def first_starts(outcome: Outcome) -> dict[str, float]:
    return {w.job.id: w.first_admitted_ms / 1000 for w in outcome.workloads}


# -- the properties ---------------------------------------------------------------------------


def test_a_fifo_toy_trace_gives_exact_start_times(tmp_path: Path) -> None:
    """One queue of 2 GPUs, no cohort, jobs of 1 or 2 GPUs: each starts when the ones before it
    leave room, in submission order (a job never passes an older one of the same size)."""
    objects = small_org(tmp_path, tenant("solo", "2", department=None), queueing="StrictFIFO")
    jobs = [job("a", 0, 10, "solo", 2), job("b", 1, 5, "solo", 1), job("c", 2, 5, "solo", 1),
            job("d", 3, 4, "solo", 2), job("e", 30, 1, "solo", 1)]
    got = starts(simulate(read_setup(objects), jobs, NO_DELAYS))
    assert got == {"a": 0, "b": 10, "c": 10, "d": 15, "e": 30}
    # Kueue retries a parked workload one second (requeueBatchPeriod) after quota frees up.
    delayed = starts(simulate(read_setup(objects), jobs, Options()))
    assert delayed == {"a": 0, "b": 10, "c": 10, "d": 15, "e": 30}  # StrictFIFO heads are never parked
    best_effort = small_org(tmp_path / "be", tenant("solo", "2", department=None))
    assert starts(simulate(read_setup(best_effort), jobs, Options())) == {"a": 0, "b": 11, "c": 11, "d": 17, "e": 30}


def test_infinite_quota_gives_zero_waits(tmp_path: Path) -> None:
    objects = small_org(tmp_path, DEPT + tenant("a", "100000") + tenant("b", "100000"), nodes=25000)
    jobs = synthesize(read_setup(objects), jobs=500, seed=3, load=5.0)
    outcome = simulate(read_setup(objects), jobs, Options())
    assert {w.state for w in outcome.workloads} == {FINISHED}
    assert all(w.waited_ms == 0 for w in outcome.workloads)
    assert not outcome.preemption_log


def test_gpu_hours_are_conserved() -> None:
    """What the queues' usage integrates to is exactly the jobs' runs (finished ones and the
    part of preempted ones that ran), and both revisions complete the same work."""
    model = validate_repo(ORG).model
    assert model is not None
    jobs = read_trace(TRACE)
    run = replay(model, "lab", jobs, "base", Options())
    outcome = run.outcome
    assert outcome.preemption_log  # the fixture trace exercises preemption
    integrated: dict[tuple[str, str], int] = {}
    for cq in outcome.cluster_queues.values():
        for fr, value in cq.used_units_ms.items():
            integrated[fr] = integrated.get(fr, 0) + value
    from_runs: dict[tuple[str, str], int] = {}
    for wl in outcome.workloads:
        assert wl.state == FINISHED
        for fr, value in wl.usage.items():
            from_runs[fr] = from_runs.get(fr, 0) + value * wl.job.duration_ms
        for fr, value in wl.lost_units_ms.items():
            from_runs[fr] = from_runs.get(fr, 0) + value
    assert integrated == from_runs
    demanded = sum(j.gpu_count * j.duration_ms for j in jobs)
    finished = sum(v * w.job.duration_ms for w in outcome.workloads for (f, r), v in w.usage.items() if r == GPU)
    assert finished == demanded
    metrics = tenant_metrics(run)
    assert sum(m.used_gpu_ms for t, m in metrics.items() if t != ALL) == metrics[ALL].used_gpu_ms


def test_the_same_seed_gives_a_byte_identical_report() -> None:
    model = validate_repo(ORG).model
    assert model is not None
    jobs = read_trace(TRACE)

    def report(seed: int) -> str:
        options = Options(seed=seed)
        return markdown(compare("t.csv", "lab", options, replay(model, "lab", jobs, "a", options),
                                replay(model, "lab", jobs, "b", options)))

    assert report(5) == report(5)
    assert "seed 5" in report(5)


# -- Kueue's semantics ------------------------------------------------------------------------


def test_borrowing_is_bounded_by_the_cohort_and_the_borrowing_limit(tmp_path: Path) -> None:
    objects = small_org(tmp_path, DEPT + tenant("a", "{nominal: 4, borrowingLimit: 2}") + tenant("b", "4"), nodes=1)
    jobs = [job(f"a{i}", 0, 100, "a") for i in range(8)]
    outcome = simulate(read_setup(objects), jobs, NO_DELAYS)
    assert sorted(first_starts(outcome).values()) == [0] * 6 + [100, 100]  # 4 own + 2 borrowed
    borrowed = next(cq for cq in outcome.cluster_queues.values() if cq.name == "a").borrowed_units_ms
    assert sum(borrowed.values()) == 2 * 100_000


def test_a_lending_limit_keeps_quota_from_borrowers(tmp_path: Path) -> None:
    objects = small_org(tmp_path, DEPT + tenant("a", "4") + tenant("b", "{nominal: 4, lendingLimit: 1}"), nodes=1)
    outcome = simulate(read_setup(objects), [job(f"a{i}", 0, 100, "a") for i in range(8)], NO_DELAYS)
    assert sorted(first_starts(outcome).values()) == [0] * 5 + [100] * 3


def test_a_tenant_reclaims_its_nominal_quota_from_a_borrower(tmp_path: Path) -> None:
    objects = small_org(tmp_path, DEPT + tenant("a", "4") + tenant("b", "4"), nodes=1)
    jobs = [job(f"a{i}", 0, 100, "a") for i in range(8)] + [job("b0", 10, 5, "b", gpus=2)]
    outcome = simulate(read_setup(objects), jobs, Options(eviction_delay_ms=1000))
    assert first_starts(outcome)["b0"] == 11  # after one of a's borrowed jobs left
    victims = [(v, reason) for _, v, p, reason in outcome.preemption_log if p == "b0"]
    assert len(victims) == 2 and all(v.startswith("a") and reason == "InCohortReclamation" for v, reason in victims)


def test_no_reclaim_without_preemption(tmp_path: Path) -> None:
    objects = small_org(tmp_path, DEPT + tenant("a", "4") + tenant("b", "4"), nodes=1,
                        policy="{reclaimWithinCohort: Never, withinClusterQueue: Never, borrowWithinCohort: {policy: Never}}")
    jobs = [job(f"a{i}", 0, 100, "a") for i in range(8)] + [job("b0", 10, 5, "b", gpus=2)]
    outcome = simulate(read_setup(objects), jobs, NO_DELAYS)
    assert not outcome.preemption_log
    assert first_starts(outcome)["b0"] == 100


def test_priority_orders_a_queue_and_preempts_within_it(tmp_path: Path) -> None:
    objects = small_org(tmp_path, tenant("a", "2", department=None), nodes=1)
    jobs = [job("low1", 0, 100, "a", 2, "low"), job("low2", 1, 10, "a", 2, "low"), job("high", 2, 10, "a", 2, "high")]
    outcome = simulate(read_setup(objects), jobs, NO_DELAYS)
    got = first_starts(outcome)
    assert got["high"] == 2  # preempted low1 at once
    assert [(v, p) for _, v, p, _ in outcome.preemption_log] == [("low1", "high")]
    # Then the queue by priority, then creation time: the preempted low1 is older than low2, so it goes first.
    assert starts(outcome)["low1"] == 12 and got["low2"] == 112


def test_best_effort_fifo_lets_a_small_job_pass_a_big_one_and_strict_fifo_does_not(tmp_path: Path) -> None:
    tenants = tenant("a", "4", department=None)
    jobs = [job("running", 0, 10, "a", 3), job("big", 1, 5, "a", 4), job("small", 2, 5, "a", 1)]
    best = first_starts(simulate(read_setup(small_org(tmp_path / "be", tenants)), jobs, NO_DELAYS))
    strict = first_starts(simulate(read_setup(small_org(tmp_path / "s", tenants, queueing="StrictFIFO")), jobs,
                                   NO_DELAYS))
    assert best == {"running": 0, "big": 10, "small": 2}
    assert strict == {"running": 0, "big": 10, "small": 15}


def test_fair_sharing_weights_split_a_contended_cohort(tmp_path: Path) -> None:
    """As the living sandbox shows for real Kueue (tests/e2e/test_fair_sharing.py): weights 3 and 1
    sharing a department's 8 GPUs end at 6 and 2."""
    tenants = ("apiVersion: gpugov.io/v1alpha1\nkind: Department\nmetadata: {name: dept}\nspec:\n"
               "  quotas: [{pool: gpu, resources: {accelerators: 8}}]\n"
               + tenant("heavy", "0", weight=3) + tenant("light", "0", weight=1))
    objects = small_org(tmp_path, tenants, nodes=1)
    jobs = [job(f"l{i}", 0, 1000, "light") for i in range(8)] + [job(f"h{i}", 10, 1000, "heavy") for i in range(8)]
    outcome = simulate(read_setup(objects), jobs, Options())
    running_at_60 = {name: sum(1 for w in outcome.workloads if w.job.queue == f"{name}/main" and
                               w.admitted_ms <= 60_000 < w.admitted_ms + w.job.duration_ms) for name in ("heavy", "light")}
    assert running_at_60 == {"heavy": 6, "light": 2}


def test_a_job_pinned_to_a_pool_it_cannot_use_is_never_admitted(tmp_path: Path) -> None:
    objects = small_org(tmp_path, tenant("a", "2", department=None), nodes=1)
    jobs = [Job("x", 0, 1000, queue="a/main", pool="nowhere"), Job("y", 0, 1000, tenant="ghost"),
            Job("z", 0, 1000, queue="a/main", priority_class="missing")]
    outcome = simulate(read_setup(objects), jobs, Options())
    assert {w.job.id: w.state for w in outcome.workloads} == {"x": NEVER, "y": NEVER, "z": NEVER}


def test_a_cluster_queue_naming_a_missing_flavor_is_refused() -> None:
    objects = [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"},
                "spec": {"resourceGroups": [{"coveredResources": [GPU], "flavors": [
                    {"name": "ghost", "resources": [{"name": GPU, "nominalQuota": 1}]}]}]}}]
    with pytest.raises(SetupError, match="ResourceFlavor ghost"):
        read_setup(objects)


def test_classical_preemption_respects_borrow_within_cohort(tmp_path: Path) -> None:
    """Without fair sharing a borrower may preempt lower-priority borrowers only when
    borrowWithinCohort allows it."""
    tenants = DEPT + tenant("a", "2") + tenant("b", "2") + tenant("c", "4")
    jobs = [job("b-low", 0, 100, "b", 4, "low"), job("a-high", 5, 10, "a", 4, "high")]
    never = small_org(tmp_path / "n", tenants, nodes=1)
    allowed = small_org(tmp_path / "l", tenants, nodes=1, policy="{reclaimWithinCohort: Any, withinClusterQueue: "
                        "LowerPriority, borrowWithinCohort: {policy: LowerPriority}}")
    classical = Options(fair_sharing=False, eviction_delay_ms=0, requeue_delay_ms=0)
    assert first_starts(simulate(read_setup(never), jobs, classical))["a-high"] == 5  # 2 own + 2 of c, no victim
    jobs = [*jobs, job("c-low", 0, 100, "c", 4, "low")]
    blocked = simulate(read_setup(never), jobs, classical)
    assert first_starts(blocked)["a-high"] == 100 and not blocked.preemption_log
    preempting = simulate(read_setup(allowed), jobs, classical)
    assert first_starts(preempting)["a-high"] == 5
    assert [reason for *_, reason in preempting.preemption_log] == ["InCohortReclaimWhileBorrowing"]


def test_model_alternatives_allow_the_pools_of_each(tmp_path: Path) -> None:
    objects = small_org(tmp_path, tenant("a", "2", department=None), nodes=1)
    placement = Placement({"gpu": GPU}, {"h100-80gb": ("gpu",)}, {"h100-80gb": GPU})
    jobs = [Job("either", 0, 1000, queue="a/main", model="V100-32GB|H100-80GB"),
            Job("v100", 0, 1000, queue="a/main", model="V100-32GB")]
    simulator = Simulator(read_setup(objects), jobs, Options(), placement)
    outcome = simulator.run()
    assert outcome.workloads[0].state == FINISHED and outcome.workloads[0].flavors == ("gpu",)
    assert simulator.never == {1: "no ResourceFlavor for model V100-32GB"}


def test_a_share_of_a_device_is_the_work_kueue_holds_whole_devices(tmp_path: Path) -> None:
    """A job that uses a quarter of a GPU counts a quarter in the work; the quota holds a whole
    GPU for it (a whole-device resource cannot hold less), and the report says both."""
    model = validate_repo(ORG).model
    assert model is not None
    jobs = [Job("quarter", 0, 3_600_000, tenant="nlp", share=Decimal("0.25")),
            Job("whole", 0, 3_600_000, tenant="nlp", accelerators=2)]
    base = replay(model, "lab", jobs, "base", Options())
    comparison = compare("t", "lab", Options(), base, base)
    assert comparison.work_gpu_ms == Decimal("2.25") * 3_600_000
    assert comparison.held_gpu_ms == 3 * 3_600_000 and comparison.shared_jobs == 1
    text = markdown(comparison)
    assert "1 jobs use a share of a device" in text and "(3.0 GPU-hours held for 2.3 of work)" in text
    assert "(3.0 GPU-hours of work)" not in text and "(2.3 GPU-hours of work)" in text


SHARED_POOLS = {
    "hardware/a10.yaml": """\
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata: {name: a10}
spec:
  cluster: lab
  accelerator: {model: A10}
  acceleratorsPerNode: 4
  nodeResources: {cpu: 64, memory: 512Gi}
  sharing:
    hami: {deviceSplitCount: 10, deviceMemoryScaling: 2}
  nodes: [{name: a10-1}]
""",
    "hardware/a100-mig.yaml": """\
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata: {name: a100-mig}
spec:
  cluster: lab
  accelerator: {model: A100-80GB}
  acceleratorsPerNode: 8
  nodeResources: {cpu: 128, memory: 1Ti}
  migLayouts:
    small: {1g.10gb: 7}
    balanced: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}
  nodes: [{name: mig-1, migLayout: small}, {name: mig-2, migLayout: balanced}]
""",
}
SHARED_QUOTAS = """\
    - pool: a10
      resources: {accelerators: 20, acceleratorMemory: 40Gi, acceleratorCores: 200}
    - pool: a100-mig
      resources: {1g.10gb: 14, 2g.20gb: 4, 3g.40gb: 4}
"""


def shared_org(tmp_path: Path) -> Model:
    root = tmp_path / "org"
    shutil.copytree(ORG, root)
    for path, text in SHARED_POOLS.items():
        write(root, path, text)
    tenants = root / "tenants" / "research.yaml"
    tenants.write_text(tenants.read_text().replace("        accelerators: 16\n---", "        accelerators: 16\n"
                                                   + SHARED_QUOTAS + "---", 1))
    result = validate_repo(root)
    assert result.model is not None and not result.errors, [f.message for f in result.errors]
    return result.model


def test_a_share_is_held_as_its_pools_hami_units_or_smallest_mig_device(tmp_path: Path) -> None:
    """Where every pool a job may use shares devices the same way, a share of a device asks what
    that sharing holds: HAMi's vGPU with the share of the physical device's memory and compute, or
    the smallest MIG device that covers it; whole devices where the pools differ or none covers it.
    GPU-hours of work stay the share's truth; held ones are what the quota holds."""
    model = shared_org(tmp_path)
    hour = 3_600_000
    jobs = [Job("hami", 0, hour, tenant="nlp", accelerators=2, share=Decimal("0.25"), model="A10"),
            Job("mig-tenth", 0, hour, tenant="nlp", share=Decimal("0.1"), model="A100-80GB"),
            Job("mig-quarter", 0, hour, tenant="nlp", share=Decimal("0.25"), model="A100-80GB"),
            Job("mig-three-sevenths", 0, hour, tenant="nlp", share=Decimal(3) / Decimal(7), model="A100-80GB"),
            Job("mig-half", 0, hour, tenant="nlp", share=Decimal("0.5"), model="A100-80GB"),
            Job("either", 0, hour, tenant="nlp", share=Decimal("0.25"), model="A10|A100-80GB"),
            Job("h100", 0, hour, tenant="nlp", share=Decimal("0.25"), model="H100-80GB"),
            Job("named", 0, hour, tenant="nlp", share=Decimal("0.5"), resource="nvidia.com/mig-1g.10gb")]
    run = replay(model, "lab", jobs, "base", Options())
    by_id = {wl.job.id: wl for wl in run.outcome.workloads}
    a10_memory = math.floor(model.pools["a10"].model.memory / 2**20)  # MiB of one physical card, before scaling
    assert by_id["hami"].requests == {GPU: 2, "nvidia.com/gpumem": 2 * math.ceil(a10_memory / 4),
                                      "nvidia.com/gpucores": 2 * 25}
    assert by_id["mig-tenth"].requests == {"nvidia.com/mig-1g.10gb": 1}  # 1/7 covers 0.1
    assert by_id["mig-quarter"].requests == {"nvidia.com/mig-2g.20gb": 1}  # 1/7 does not, 2/7 does
    assert by_id["mig-three-sevenths"].requests == {"nvidia.com/mig-3g.40gb": 1}  # exactly 3/7 covers it
    assert by_id["mig-half"].requests == {GPU: 1}  # no layout of the pool offers 4/7 or more
    assert by_id["either"].requests == {GPU: 1}  # A10 would hold HAMi units, A100 a MIG device
    assert by_id["h100"].requests == {GPU: 1}
    assert by_id["named"].requests == {"nvidia.com/mig-1g.10gb": 1}  # a resource the trace names is asked as named
    assert run.held_as == {0: "hami", 1: "nvidia.com/mig-1g.10gb", 2: "nvidia.com/mig-2g.20gb",
                           3: "nvidia.com/mig-3g.40gb", 4: "whole", 5: "mixed", 6: "whole"}
    for name, flavor in (("hami", "a10"), ("mig-tenth", "a100-mig"), ("mig-quarter", "a100-mig"),
                         ("mig-three-sevenths", "a100-mig"), ("h100", "h100"), ("named", "a100-mig")):
        assert by_id[name].state == FINISHED and by_id[name].flavors == (flavor,), name
    assert by_id["mig-half"].state != FINISHED  # every A100 of the pool is cut into MIG devices
    # Whole devices asked where HAMi shares them: Kueue sees one vGPU slot (HAMi gives it the card's memory).
    assert by_id["either"].state == FINISHED and by_id["either"].flavors == ("a10",)
    comparison = compare("t", "lab", Options(), run, run)
    shares = sum(j.devices_used for j in jobs if j.id != "named")
    assert comparison.work_gpu_ms == (shares + Decimal("0.5") / 7) * hour
    hami_held = max(Decimal(2) / 10, Decimal(2 * math.ceil(a10_memory / 4)) / (2 * a10_memory), Decimal(50) / 100)
    # HAMi's largest view; 4 MIG devices (named's too); mig-half and h100 whole; either one vGPU slot of 10
    held = hami_held + Decimal(1 + 2 + 3 + 1) / 7 + 2 + Decimal("0.1")
    assert comparison.held_gpu_ms == held * hour
    assert to_json(comparison)["base"]["shares_held_as"] == {
        "hami": 1, "mixed": 1, "nvidia.com/mig-1g.10gb": 1, "nvidia.com/mig-2g.20gb": 1, "nvidia.com/mig-3g.40gb": 1,
        "whole": 2}
    text = markdown(comparison)
    assert "1 as HAMi units (a vGPU with that share of the device's memory and compute)" in text
    assert "1 as the MIG device 2g.20gb, the smallest that covers the share" in text
    assert "1 as whole devices, because the pools they may use hold a share differently" in text


def test_hami_units_count_once_in_used_and_nominal_gpu_hours(tmp_path: Path) -> None:
    """A HAMi pool's count, memory and compute are views of the same cards: a tenant's nominal
    quota and its used GPU-hours count their largest, never their sum (40Gi of gpumem is not
    40,960 GPUs)."""
    model = shared_org(tmp_path)
    hour = 3_600_000
    run = replay(model, "lab", [Job("hami", 0, hour, tenant="nlp", accelerators=2, share=Decimal("0.5"),
                                    model="A10")], "base", Options())
    assert run.outcome.workloads[0].state == FINISHED
    metrics = tenant_metrics(run)["nlp"]
    per_device = model.pools["a10"].hami_device_units
    memory, cores = "nvidia.com/gpumem", "nvidia.com/gpucores"
    hami_nominal = max(Decimal(20) / per_device[GPU], Decimal(40 * 1024) / per_device[memory],
                       Decimal(200) / per_device[cores])
    assert hami_nominal == 2  # 200 of 100 cores per card; 40Gi of 2 x 22,731 MiB (scaling 2) is less
    assert metrics.nominal_gpus.quantize(Decimal("1e-9")) == (16 + hami_nominal + Decimal(14 + 2 * 4 + 3 * 4) / 7
                                                              ).quantize(Decimal("1e-9"))
    # Two half cards: 2 of 10 vGPU slots, a quarter of the scaled memory, 100 cores: one card's worth.
    assert metrics.used_gpu_ms == 1 * hour
