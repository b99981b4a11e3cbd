"""What-if over the quota timeline (issue #27): QuotaGrants and QuotaWindows change the simulated
cluster's quotas at their boundaries, as the gpugov-timeline CronJob applies them; what runs keeps
running and counts as borrowing; the report lists the boundaries it applied."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.cli import main
from gpugov.declarations.model import Model
from gpugov.whatif.replay import replay
from gpugov.whatif.report import Run, compare, markdown, to_json
from gpugov.whatif.simulate import Options
from gpugov.whatif.state import FINISHED
from gpugov.whatif.timeline import DEFAULT_START, Boundary, default_start
from gpugov.whatif.trace import Job, dump_trace
from tests.helpers.repos import write

GPU = "nvidia.com/gpu"
START = datetime(2030, 3, 4, 12, tzinfo=UTC)  # a Monday, noon UTC: the trace's second 0 unless said otherwise
POLICY = """\
apiVersion: gpugov.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: default}
spec:
  queueingStrategy: BestEffortFIFO
  preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority, borrowWithinCohort: {policy: Never}}
---
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata: {name: gpu}
spec:
  accelerator: {model: H100-80GB}
  acceleratorsPerNode: 8
  nodeResources: {cpu: 64, memory: 512Gi}
  nodes: [{name: n0}, {name: n1}]
"""
DEPT = "---\napiVersion: gpugov.io/v1alpha1\nkind: Department\nmetadata: {name: dept}\nspec: {}\n"


def tenant(name: str, gpus: int, department: str | None = None) -> str:
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
  queues: [{{name: main, namespace: {name}}}]
  quotas:
    - pool: gpu
      resources: {{accelerators: {gpus}}}
"""


def grant(name: str, who: str, gpus: int, starts: datetime, ends: datetime) -> str:
    return f"""\
---
apiVersion: gpugov.io/v1alpha1
kind: QuotaGrant
metadata: {{name: {name}}}
spec:
  tenant: {who}
  pool: gpu
  resources: {{accelerators: {gpus}}}
  from: "{starts.isoformat()}"
  until: "{ends.isoformat()}"
  reason: release
  approvedBy: [cto@example.com]
"""


def window(name: str, donor: str, recipient: str, gpus: int, start: str, end: str) -> str:
    return f"""\
---
apiVersion: gpugov.io/v1alpha1
kind: QuotaWindow
metadata: {{name: {name}}}
spec:
  pool: gpu
  donor: {{tenant: {donor}}}
  recipient: {{tenant: {recipient}}}
  resources: {{accelerators: {gpus}}}
  weekdays: [Mon, Tue, Wed, Thu, Fri, Sat, Sun]
  start: "{start}"
  end: "{end}"
  timeZone: UTC
  reason: quiet at night
  approvedBy: [ops@example.com]
"""


def org(root: Path, tenants: str, timeline: str = "") -> Path:
    write(root, "policies/org.yaml", POLICY)
    write(root, "tenants/all.yaml", tenants)
    if timeline:
        write(root, "tenants/timeline.yaml", timeline)
    return root


def model_of(root: Path) -> Model:
    result = validate_repo(root, now=START - timedelta(days=1))
    assert result.model is not None and not result.errors, [f.message for f in result.errors]
    return result.model


def job(name: str, submit_s: int, duration_s: int, queue: str, gpus: int) -> Job:
    return Job(name, submit_s * 1000, duration_s * 1000, queue=f"{queue}/main", accelerators=gpus, resource=GPU)


def hours(n: float) -> timedelta:
    return timedelta(hours=n)


def admitted_s(run: Run, name: str) -> float:
    workload = next(w for w in run.outcome.workloads if w.job.id == name)
    return workload.first_admitted_ms / 1000


def applied(run: Run) -> list[Boundary]:
    assert run.timeline is not None
    return list(run.timeline.boundaries[: run.outcome.boundaries_applied])


def test_a_grant_that_starts_mid_trace_admits_the_pending_job_at_its_start_not_before(tmp_path: Path) -> None:
    model = model_of(org(tmp_path, tenant("solo", 2), grant("boost", "solo", 2, START + hours(1), START + hours(5))))
    jobs = [job("big", 0, 600, "solo", 4), job("small", 10, 60, "solo", 1)]
    run = replay(model, "default", jobs, "head", Options(), START)
    assert admitted_s(run, "small") == 10
    assert admitted_s(run, "big") == 3600  # at the grant's start, at once (a spec update requeues the parked)
    assert all(w.state == FINISHED for w in run.outcome.workloads)
    # The boundary is listed with what it changed; the grant's end (after the last job left) is not applied.
    reached = applied(run)
    assert [(b.at_ms, b.declarations) for b in reached] == [(3_600_000, (("QuotaGrant", "boost", "starts"),))]
    assert {(c.tenant, c.flavor, c.resource, c.before.nominal, c.after.nominal)
            for c in reached[0].changes if c.resource == GPU} == {("solo", "gpu", GPU, 2, 4)}
    assert run.outcome.end_ms == 4_201_000  # big's finish (and the requeue batch after it), not the grant's end


def test_without_the_grant_the_same_job_never_fits(tmp_path: Path) -> None:
    """The control for the test above: the admission at 3600 s is the grant's doing."""
    model = model_of(org(tmp_path, tenant("solo", 2)))
    run = replay(model, "default", [job("big", 0, 600, "solo", 4)], "base", Options(), START)
    assert run.timeline is None
    assert run.outcome.workloads[0].state != FINISHED


def test_a_grant_that_ends_leaves_the_running_job_running_and_delays_the_next(tmp_path: Path) -> None:
    ends = START + timedelta(seconds=100)
    model = model_of(org(tmp_path, tenant("solo", 2), grant("boost", "solo", 4, START, ends)))
    jobs = [job("a", 0, 300, "solo", 4), job("b", 150, 60, "solo", 2)]
    run = replay(model, "default", jobs, "head", Options(), START)
    a = next(w for w in run.outcome.workloads if w.job.id == "a")
    assert (a.first_admitted_ms, a.admissions, a.preemptions) == (0, 1, 0)  # never evicted by the quota drop
    assert admitted_s(run, "b") == 301  # after a leaves (plus Kueue's one-second requeue batch), not at 150
    # From the grant's end a holds 4 of a nominal 2: it borrows 2 GPUs for 200 s.
    cq = run.outcome.cluster_queues["solo"]
    assert sum(cq.borrowed_units_ms.values()) == 2 * 200_000
    # Had the grant lasted, b would have started at once.
    lasting = model_of(org(tmp_path / "lasting", tenant("solo", 2), grant("boost", "solo", 4, START, START + hours(1))))
    assert admitted_s(replay(lasting, "default", jobs, "head", Options(), START), "b") == 150


def test_a_running_job_over_its_ended_grant_is_reclaimed_by_its_cohort(tmp_path: Path) -> None:
    """After the drop the job borrows from the cohort, so a tenant reclaiming its nominal quota preempts it."""
    ends = START + timedelta(seconds=100)
    tenants = DEPT + tenant("a", 4, "dept") + tenant("b", 4, "dept")
    model = model_of(org(tmp_path, tenants, grant("boost", "a", 4, START, ends)))
    jobs = [job("wide", 0, 1000, "a", 8), job("claim", 150, 60, "b", 4)]
    run = replay(model, "default", jobs, "head", Options(), START)
    assert run.outcome.preemption_log[0][:3] == (150_000, "wide", "claim")
    assert admitted_s(run, "claim") == 151  # once the victim's pods are gone (1 s)
    running = next(w for w in run.outcome.workloads if w.job.id == "wide")
    assert running.preemptions == 1
    # While the grant holds, a's 8 GPUs are its own: nothing to reclaim.
    during = replay(model, "default", [job("wide", 0, 1000, "a", 8), job("claim", 50, 60, "b", 4)], "head", Options(),
                    START)
    assert not during.outcome.preemption_log


def test_a_night_window_moves_quota_between_two_tenants(tmp_path: Path) -> None:
    tenants = tenant("day", 4) + tenant("night", 4)
    model = model_of(org(tmp_path, tenants, window("nightly", "day", "night", 4, "20:00", "08:00")))
    jobs = [job("n", 0, 3600, "night", 8), job("d", 9 * 3600, 600, "day", 2)]  # noon; 21:00
    run = replay(model, "default", jobs, "head", Options(), START)
    assert admitted_s(run, "n") == 8 * 3600  # 20:00: night holds 8
    assert admitted_s(run, "d") == 20 * 3600  # 08:00 the next morning: day holds nothing at night
    reached = applied(run)
    assert [(b.instant, b.declarations[0][2]) for b in reached] == [
        (START + hours(8), "opens"), (START + hours(20), "closes")]
    moved = {(c.tenant, c.before.nominal, c.after.nominal)
             for c in reached[0].changes if c.resource == GPU}
    assert moved == {("day", 4, 0), ("night", 4, 8)}
    # Anchored on another hour, the same trace waits differently: the calendar matters.
    evening = replay(model, "default", jobs, "head", Options(), START + hours(9))  # second 0 at 21:00
    assert admitted_s(evening, "n") == 0


def pr_adding_a_grant(tmp_path: Path) -> tuple[Model, Model, list[Job]]:
    tenants = DEPT + tenant("nlp", 4, "dept") + tenant("vision", 4, "dept")
    base = model_of(org(tmp_path / "base", tenants))
    head = model_of(org(tmp_path / "head", tenants, grant("vision-release", "vision", 8, START, START + hours(24))))
    jobs = [job(f"v{i}", i * 60, 1800, "vision", 4) for i in range(8)]
    jobs += [job(f"n{i}", i * 60, 1800, "nlp", 4) for i in range(4)]
    return base, head, jobs


def test_base_and_head_of_a_pr_that_adds_a_grant_show_the_recipients_waits_fall(tmp_path: Path) -> None:
    base, head, jobs = pr_adding_a_grant(tmp_path)
    start = default_start([base, head])
    assert start == START  # the earliest grant's start
    options = Options()
    comparison = compare("t.csv", "default", options, replay(base, "default", jobs, "base", options, start),
                         replay(head, "default", jobs, "head", options, start))
    before, after = comparison.base_metrics["vision"], comparison.head_metrics["vision"]
    assert after.wait_p50_ms is not None and before.wait_p50_ms is not None
    assert after.wait_p50_ms < before.wait_p50_ms and after.wait_p95_ms < before.wait_p95_ms
    assert after.nominal_gpus == 12  # 4 + 8 throughout the replay
    text = markdown(comparison)
    assert "Quota timeline of the head" in text and "QuotaGrant `vision-release`" in text
    assert "Quota timeline of the base" not in text
    report = json.loads(json.dumps(to_json(comparison)))
    assert "quota_timeline" not in report["base"]
    timeline = report["head"]["quota_timeline"]
    assert timeline["start"] == "2030-03-04T12:00:00Z"
    assert timeline["in_force"] == [{"kind": "QuotaGrant", "name": "vision-release"}]
    assert timeline["boundaries"] == []  # it ends long after the last job
    assert markdown(comparison) == text  # deterministic


def test_without_grants_or_windows_the_start_changes_nothing(tmp_path: Path) -> None:
    model = model_of(org(tmp_path, DEPT + tenant("a", 4, "dept") + tenant("b", 4, "dept")))
    jobs = [job(f"j{i}", i * 30, 900, "a" if i % 2 else "b", 3) for i in range(20)]
    options = Options()
    one, other = replay(model, "default", jobs, "x", options), replay(model, "default", jobs, "x", options, START)
    assert markdown(compare("t", "default", options, one, one)) == markdown(compare("t", "default", options, other, other))
    assert default_start([model]) == DEFAULT_START


# -- the command ------------------------------------------------------------------------------

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=GIT_ENV)


def test_the_command_replays_the_grant_of_the_head_from_start(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    repo = org(tmp_path / "repo", DEPT + tenant("nlp", 4, "dept") + tenant("vision", 4, "dept"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    write(repo, "tenants/timeline.yaml", grant("vision-release", "vision", 8, START + hours(1), START + hours(1.25)))
    jobs = [job(f"v{i}", i * 60, 1800, "vision", 4) for i in range(6)]
    write(tmp_path, "trace.csv", dump_trace(jobs))
    args = ["whatif", str(repo), "--base", "main", "--trace", str(tmp_path / "trace.csv"), "--format", "json"]
    assert main([*args, "--start", "2030-03-04T12:00:00Z"]) == 0
    report = json.loads(capsys.readouterr().out)
    boundaries = report["head"]["quota_timeline"]["boundaries"]
    assert [(b["at"], b["trace_seconds"]) for b in boundaries] == [
        ("2030-03-04T13:00:00Z", 3600.0), ("2030-03-04T13:15:00Z", 4500.0)]  # the second while two run
    assert boundaries[0]["admitted"] == {"vision": 2}  # the two that waited for it
    assert [q["after"]["nominal"] for q in boundaries[0]["quotas"] if q["resource"] == GPU] == [12]
    # Without --start the trace begins at the grant's start, so it holds from the first job.
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["head"]["quota_timeline"]["in_force"] == [
        {"kind": "QuotaGrant", "name": "vision-release"}]
    assert main([*args, "--start", "2030-03-04 12:00"]) == 2
    assert "--start must be an RFC 3339 instant" in capsys.readouterr().err
    shutil.rmtree(repo)
