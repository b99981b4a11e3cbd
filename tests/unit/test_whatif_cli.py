"""The trace format, the importers of public traces, and `gpugov whatif` / `gpugov trace` on
real git repositories, with the golden PR comment of moving 8 GPUs between two tenants."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from gpugov.cli import main
from gpugov.whatif.importers import Mapping, acme, alibaba, helios
from gpugov.whatif.trace import Job, TraceError, dump_trace, parse_trace, read_trace
from tests.helpers.golden import assert_golden_file
from tests.helpers.repos import FIXTURES, GOLDEN

FIXTURES = FIXTURES
ORG = FIXTURES / "whatif" / "org"
TRACES = FIXTURES / "traces"
WHATIF_GOLDEN = GOLDEN / "whatif"
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "gpugov-test", "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "gpugov-test", "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=GIT_ENV)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def move_8_gpus(tmp_path: Path) -> Path:
    """The fixture org in git, then one commit moving 8 H100s from nlp to vision."""
    repo = tmp_path / "org"
    shutil.copytree(ORG, repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    path = repo / "tenants/research.yaml"
    nlp, vision = path.read_text().split("name: vision")
    path.write_text(nlp.replace("accelerators: 16", "accelerators: 8") + "name: vision"
                    + vision.replace("accelerators: 16", "accelerators: 24"))
    git(repo, "commit", "-qam", "move 8 H100s from nlp to vision")
    return repo


# -- the trace format -------------------------------------------------------------------------


def test_csv_and_json_lines_read_the_same_jobs() -> None:
    csv_text = ("id,submit,duration,queue,pods,accelerators,resource,priority_class,cpu,memory\n"
                "a,0.5,60,nlp/train,2,4,nvidia.com/gpu,batch,500m,16Gi\n"
                "b,10,30,vision/train,,,,,,\n")
    jsonl = ('{"id": "a", "submit": 0.5, "duration": 60, "queue": "nlp/train", "pods": 2, "accelerators": 4, '
             '"resource": "nvidia.com/gpu", "priority_class": "batch", "cpu": "500m", "memory": "16Gi"}\n'
             '{"id": "b", "submit": "10", "duration": 30, "queue": "vision/train"}\n')
    jobs = parse_trace(csv_text, "t.csv")
    assert jobs == parse_trace(jsonl, "t.jsonl")
    assert jobs[0] == Job("a", 500, 60_000, queue="nlp/train", pods=2, accelerators=4, resource="nvidia.com/gpu",
                          priority_class="batch", cpu_milli=500, memory_bytes=16 * 2**30)
    assert (jobs[1].pods, jobs[1].accelerators) == (1, 1)
    for fmt in ("csv", "jsonl"):
        assert parse_trace(dump_trace(jobs, fmt)) == jobs


@pytest.mark.parametrize(("text", "message"), [
    ("id,submit\n", "no 'duration' column"),
    ("submit,duration,tenant,color\n1,2,nlp,red\n", "t.csv:2: unknown column 'color'"),
    ("submit,duration,tenant\n1,-2,nlp\n", "t.csv:2: duration must be > 0"),
    ("submit,duration,tenant\n1,ten,nlp\n", "t.csv:2: duration must be a number of seconds"),
    ("submit,duration\n1,2\n", "t.csv:2: a job needs a tenant, a namespace or a queue"),
    ("submit,duration,queue\n1,2,nlp\n", "queue must be namespace/name"),
    ("id,submit,duration,tenant\nx,1,2,a\nx,3,4,b\n", "t.csv:3: job id 'x' repeats line 2"),
    ("submit,duration,tenant,accelerators\n1,2,a,1.5\n", "accelerators must be a whole number"),
    ("submit,duration,tenant,cpu\n1,2,a,lots\n", "cpu:"),
    ("submit,duration,tenant\n1,2\n", "t.csv:2: 2 cells where the header has 3"),
    ('{"submit": 1, "duration": 2, "tenant": "a"}\n[1]\n', "t.csv:2: not a JSON object"),
    ("submit,duration,tenant\n", "no jobs"),
])
def test_a_bad_trace_names_file_line_and_field(text: str, message: str) -> None:
    with pytest.raises(TraceError, match=None) as caught:
        parse_trace(text, "t.csv")
    assert message in str(caught.value)


# -- the importers ----------------------------------------------------------------------------


def test_alibaba_openb_pod_list_becomes_a_trace() -> None:
    text = (TRACES / "openb_pod_list_sample.csv").read_text()
    imported = alibaba(text, "openb.csv", Mapping({"LS": "inference", "*": "research"},
                                                  {"V100M32": "V100-32GB"}, Decimal("0.5")))
    assert imported.skipped == {"CPU-only pod": 1, "never scheduled": 1, "ran for no time": 1}
    by_id = {j.id: j for j in imported.jobs}
    assert list(by_id) == ["openb-pod-0001", "openb-pod-0002", "openb-pod-0003", "openb-pod-0005"]
    first, shared, multi, failed = by_id.values()
    assert (first.submit_ms, first.duration_ms, first.tenant) == (0, 300_000, "inference")
    assert (first.cpu_milli, first.memory_bytes) == (8000, 32768 * 2**20)
    assert (shared.accelerators, shared.share, shared.tenant, shared.duration_ms) == \
        (1, Decimal("0.5"), "research", 149_000)  # 500 milli-GPU: half a device, exactly
    assert (multi.accelerators, multi.share, multi.model, multi.submit_ms) == (4, 1, "V100-32GB", 15_000)
    assert (failed.accelerators, failed.model) == (8, "V100-32GB")  # V100M16|V100M32: the mapped alternative kept
    assert imported.notes["V100M16 dropped (no --model)"] == 1


def test_helios_cluster_log_becomes_a_trace() -> None:
    imported = helios((TRACES / "helios_cluster_log_sample.csv").read_text(), "cluster_log.csv",
                      Mapping({"vcAlpha": "nlp", "vcBeta": "vision"}, with_cpu_memory=True))
    assert imported.skipped == {"CPU-only job": 1, "never started": 1}
    alpha, beta, gamma = imported.jobs
    assert (alpha.id, alpha.tenant, alpha.submit_ms, alpha.duration_ms, alpha.pods, alpha.accelerators) == \
        ("helios-5000001", "nlp", 0, 3_600_000, 1, 1)
    assert (beta.tenant, beta.submit_ms, beta.pods, beta.accelerators, beta.cpu_milli) == ("vision", 59_000, 2, 8, 32_000)
    assert (gamma.tenant, gamma.accelerators) == ("vcGamma", 8)  # unmapped: the vc is the tenant


def alibaba_truth_gpu_seconds(text: str) -> Decimal:
    """GPU-seconds the pods of an openb_pod_list used, counted from the file itself: num_gpu x
    gpu_milli / 1000 x (deletion - scheduled), over the GPU pods that ran."""
    total = Decimal(0)
    for row in csv.DictReader(io.StringIO(text)):
        if int(row["num_gpu"]) and row["scheduled_time"] and row["pod_phase"] != "Pending":
            ran = Decimal(row["deletion_time"]) - Decimal(row["scheduled_time"])
            if ran > 0:
                total += int(row["num_gpu"]) * Decimal(row["gpu_milli"]) / 1000 * ran
    return total


def test_alibaba_import_conserves_fractional_gpu_hours() -> None:
    text = (TRACES / "openb_pod_list_shared_sample.csv").read_text()
    imported = alibaba(text, "openb.csv")
    truth = alibaba_truth_gpu_seconds(text)
    assert sum((j.devices_used * j.duration_ms for j in imported.jobs), Decimal(0)) / 1000 == truth
    # Counting a GPU-sharing pod as a whole device, as the importer did before, inflates the demand.
    assert sum(j.gpu_count * j.duration_ms for j in imported.jobs) / 1000 > truth
    shares = {j.id: j.share for j in imported.jobs}
    assert (shares["share-pod-0001"], shares["share-pod-0004"], shares["share-pod-0007"]) == \
        (Decimal("0.25"), Decimal("0.125"), Decimal("0.33"))
    assert imported.notes["GPU-sharing pod: kept as a share of one device"] == 4
    # The share survives the trace format, exactly, both ways.
    for fmt in ("csv", "jsonl"):
        assert parse_trace(dump_trace(imported.jobs, fmt)) == imported.jobs


def test_alibaba_keeps_every_mapped_alternative_and_counts_every_drop() -> None:
    text = (TRACES / "openb_pod_list_shared_sample.csv").read_text()
    imported = alibaba(text, "openb.csv", Mapping(model_map={"V100M16": "V100-16GB", "V100M32": "V100-32GB",
                                                             "T4": "T4"}))
    models = {j.id: j.model for j in imported.jobs}
    assert models["share-pod-0002"] == "V100-16GB|V100-32GB"
    assert models["share-pod-0004"] == "T4|V100-16GB|V100-32GB"  # A10 and G2 not mapped: dropped, counted
    assert models["share-pod-0005"] == models["share-pod-0007"] == ""  # P100, G3: no mapping, any model
    assert imported.notes == {
        "gpu_spec A10|G2|T4|V100M16|V100M32": 1, "gpu_spec V100M16|V100M32": 2, "gpu_spec V100M32": 1,
        "gpu_spec P100": 1, "gpu_spec G3": 1,
        "gpu_spec P100 dropped: the job may run on any model": 1, "gpu_spec G3 dropped: the job may run on any model": 1,
        "A10 dropped (no --model)": 1, "G2 dropped (no --model)": 1, "P100 dropped (no --model)": 1,
        "G3 dropped (no --model)": 1, "T4 mapped to T4": 1, "V100M16 mapped to V100-16GB": 3,
        "V100M32 mapped to V100-32GB": 4, "GPU-sharing pod: kept as a share of one device": 4,
    }
    with pytest.raises(TraceError, match=r"openb.csv:5: gpu_spec 'A10\|G2\|T4\|V100M16\|V100M32': A10 has no "
                                         r"--model mapping \(--strict\)"):
        alibaba(text, "openb.csv", Mapping(model_map={"V100M16": "V100-16GB", "V100M32": "V100-32GB"}, strict=True))
    # The catalog knows the models the README's example maps to.
    from gpugov.catalog import MODELS
    assert {"V100-16GB", "V100-32GB", "P100-16GB"} <= set(MODELS)
    assert "Tesla-V100-SXM2-32GB" in MODELS["V100-32GB"].product_label.values


def test_alibaba_multigpu_files_without_times_are_refused() -> None:
    with pytest.raises(TraceError, match=r"openb\.csv:1: no submit or start time column"):
        alibaba((TRACES / "openb_pod_list_multigpu_sample.csv").read_text(), "openb.csv")


def test_acme_seren_and_kalos_become_traces() -> None:
    seren = acme((TRACES / "trace_seren_sample.csv").read_text(), "trace_seren.csv", Mapping({"Pretrain": "nlp"}))
    assert seren.skipped == {"CPU-only job": 1, "never started": 1}
    pretrain, sft = seren.jobs
    assert (pretrain.id, pretrain.tenant, pretrain.submit_ms, pretrain.duration_ms, pretrain.pods,
            pretrain.accelerators, pretrain.cpu_milli) == ("acme-9000001", "nlp", 0, 117_000, 1, 8, 128_000)
    assert (sft.tenant, sft.submit_ms, sft.pods, sft.accelerators, sft.cpu_milli) == ("SFT", 336_000, 2, 8, 128_000)
    kalos = acme((TRACES / "trace_kalos_sample.csv").read_text(), "trace_kalos.csv")
    big, small = kalos.jobs
    assert (big.pods, big.accelerators, big.cpu_milli, big.memory_bytes, big.duration_ms) == \
        (8, 8, 120_000, 1000 * 10**9, 8000)
    assert (small.tenant, small.submit_ms, small.accelerators) == ("Evaluation", 1664_000, 2)
    with pytest.raises(TraceError, match="no submit or start time column"):
        acme("job_id,user,gpu_num\n1,u,8\n", "t.csv")
    with pytest.raises(TraceError, match="not this trace's layout: no column 'user'"):
        acme("job_id,submit_time,start_time\n1,2023-03-01 00:18:22+08:00,2023-03-01 00:18:22+08:00\n", "t.csv")


def test_an_importer_refuses_another_layout() -> None:
    with pytest.raises(TraceError, match="not this trace's layout: no column 'job_id'"):
        helios((TRACES / "openb_pod_list_sample.csv").read_text(), "x.csv")


def test_trace_import_command(tmp_path: Path, capsys) -> None:
    out = tmp_path / "t.jsonl"
    code, _, err = run(capsys, "trace", "import", "alibaba", str(TRACES / "openb_pod_list_sample.csv"),
                       "--map", "LS=nlp", "--map", "*=vision", "--format", "jsonl", "-o", str(out))
    assert code == 0, err
    assert "imported 4 jobs of 2 tenants (nlp, vision); left out 1 CPU-only pod" in err
    assert [j.tenant for j in read_trace(out)] == ["nlp", "vision", "vision", "nlp"]
    code, _, err = run(capsys, "trace", "import", "helios", str(TRACES / "openb_pod_list_sample.csv"))
    assert code == 2 and "not this trace's layout" in err
    code, _, err = run(capsys, "trace", "import", "alibaba", str(TRACES / "openb_pod_list_sample.csv"), "--map", "LS")
    assert code == 2 and "--map must be KEY=VALUE" in err
    shared = str(TRACES / "openb_pod_list_shared_sample.csv")
    code, _, err = run(capsys, "trace", "import", "alibaba", shared, "--model", "V100M32=V100-32GB", "-o", str(out))
    assert code == 0, err
    assert "  3 rows: V100M16 dropped (no --model)" in err and "  4 rows: V100M32 mapped to V100-32GB" in err
    code, _, err = run(capsys, "trace", "import", "alibaba", shared, "--model", "V100M32=V100-32GB", "--strict")
    assert code == 2 and "shared_sample.csv:3: gpu_spec 'V100M16|V100M32': V100M16 has no --model mapping (--strict)" in err
    code, _, err = run(capsys, "trace", "import", "alibaba", str(TRACES / "openb_pod_list_multigpu_sample.csv"))
    assert code == 2 and err.startswith("gpugov: ") and "no submit or start time column" in err
    code, _, err = run(capsys, "trace", "import", "acme", str(TRACES / "trace_kalos_sample.csv"), "-o", str(out))
    assert code == 0 and "imported 2 jobs of 2 tenants (Evaluation, Pretrain)" in err


# -- gpugov whatif ----------------------------------------------------------------------------


def test_golden_pr_comment_of_moving_8_gpus(tmp_path: Path, capsys) -> None:
    repo = move_8_gpus(tmp_path)
    code, out, err = run(capsys, "whatif", str(repo), "--base", "HEAD~1", "--head", "HEAD",
                         "--trace", str(TRACES / "two-teams.csv"))
    assert code == 0, err
    assert_golden_file(WHATIF_GOLDEN / "move-8-gpus.md", out)
    # What the move must show, whatever the exact numbers: vision (24 now) waits less and
    # borrows nothing, nlp (8 now) borrows more.
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in out.splitlines()
            if line.startswith("| `")}
    assert set(rows) == {"`nlp`", "`vision`"}
    vision_p95 = rows["`vision`"][2].split(" → ")
    assert len(vision_p95) == 2
    nlp_borrowed = [Decimal(v) for v in rows["`nlp`"][4].split(" → ")]
    assert nlp_borrowed[1] > nlp_borrowed[0]
    assert rows["`vision`"][4].endswith("→ 0.0")


def test_whatif_json_and_a_synthetic_trace(tmp_path: Path, capsys) -> None:
    repo = move_8_gpus(tmp_path)
    code, out, err = run(capsys, "whatif", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "json",
                         "--synthetic-jobs", "300", "--seed", "4")
    assert code == 0, err
    report = json.loads(out)
    assert report["trace"]["name"] == "a synthetic trace (300 jobs, seed 4)"
    assert report["simulation"] == {"kueue": "v0.17", "fair_sharing": True, "seed": 4,
                                    "window_seconds": report["simulation"]["window_seconds"]}
    assert report["base"]["tenants"]["nlp"]["nominal_gpus"] == 16.0
    assert report["head"]["tenants"]["nlp"]["nominal_gpus"] == 8.0
    assert report["head"]["tenants"]["vision"]["nominal_gpus"] == 24.0
    for side in ("base", "head"):
        total = report[side]["total"]
        assert total["jobs"] == 300 and total["finished"] == 300
    code, again, _ = run(capsys, "whatif", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "json",
                         "--synthetic-jobs", "300", "--seed", "4")
    assert again == out
    code, synth, _ = run(capsys, "trace", "synth", str(repo), "--jobs", "300", "--seed", "4")
    assert code == 0 and len(synth.splitlines()) == 301


def test_whatif_refuses_what_it_cannot_replay(tmp_path: Path, capsys) -> None:
    repo = move_8_gpus(tmp_path)
    bad = tmp_path / "bad.csv"
    bad.write_text("submit,duration,tenant\n1,0,nlp\n")
    code, _, err = run(capsys, "whatif", str(repo), "--base", "HEAD~1", "--trace", str(bad))
    assert code == 2 and err.strip() == f"gpugov: {bad}:2: duration must be > 0 seconds, got '0'"
    code, _, err = run(capsys, "whatif", str(repo), "--base", "no-such-ref")
    assert code == 2 and "unknown revision 'no-such-ref'" in err
    code, _, err = run(capsys, "whatif", str(repo), "--base", "HEAD~1", "--cluster", "mars")
    assert code == 2 and "cluster 'mars' is not declared in both revisions" in err
    clusters = repo / "policies/cluster.yaml"
    clusters.write_text(clusters.read_text().replace("backend: kueue", "backend: volcano"))
    code, _, err = run(capsys, "whatif", str(repo), "--base", "HEAD", "--cluster", "lab")
    assert code == 2 and "cluster 'lab' changes its scheduler between the revisions (kueue, volcano)" in err
    assert "Traceback" not in err


def test_unknown_tenants_in_a_trace_are_reported_not_fatal(tmp_path: Path, capsys) -> None:
    repo = move_8_gpus(tmp_path)
    trace = tmp_path / "t.csv"
    trace.write_text("submit,duration,tenant,accelerators\n0,60,nlp,2\n5,60,ghost,1\n")
    code, out, err = run(capsys, "whatif", str(repo), "--base", "HEAD~1", "--trace", str(trace))
    assert code == 0, err
    assert "- base: 1 jobs can never be admitted: no LocalQueue for tenant ghost (1)" in out
    # No row of invented numbers for a tenant neither revision has (issue #23 item 6); its job is in the total.
    assert "| `ghost` |" not in out and "| **all tenants** | 2 |" in out


def test_json_lists_every_job_that_never_started_with_its_reason(tmp_path: Path, capsys) -> None:
    repo = move_8_gpus(tmp_path)
    trace = tmp_path / "t.csv"
    # nlp holds 16 H100s in the base and its cohort 40: a job of 64 GPUs can never fit, and waits to the end.
    trace.write_text("id,submit,duration,tenant,accelerators,pods\nok,0,60,nlp,2,1\nghost-job,5,60,ghost,1,1\n"
                     "huge,6,60,nlp,8,8\n")
    code, out, err = run(capsys, "whatif", str(repo), "--base", "HEAD~1", "--trace", str(trace), "--format", "json")
    assert code == 0, err
    never = json.loads(out)["base"]["never_admitted"]
    assert set(never) == {"ghost-job", "huge"}
    assert never["ghost-job"] == {"outcome": "refused", "reason": "no LocalQueue for tenant ghost"}
    assert never["huge"]["outcome"] == "waiting" and "no flavor" in never["huge"]["reason"]
    code, md, _ = run(capsys, "whatif", str(repo), "--base", "HEAD~1", "--trace", str(trace))
    assert "- base: 1 jobs still wait when the trace ends" in md


def test_a_finished_workload_becomes_a_trace_job() -> None:
    from datetime import datetime

    from gpugov.cluster.workloads import job_of

    workload = {
        "metadata": {"name": "job-train-3f2a1", "namespace": "nlp", "creationTimestamp": "2026-01-01T10:00:05Z",
                     "ownerReferences": [{"kind": "Job", "name": "train", "controller": True}]},
        "spec": {"queueName": "train", "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                                            "name": "batch"},
                 "podSets": [{"name": "main", "count": 2, "template": {"spec": {
                     "nodeSelector": {"gpugov.io/pool": "h100"},
                     "containers": [{"name": "a", "resources": {"requests": {"nvidia.com/gpu": "4", "cpu": "1500m",
                                                                             "memory": "8Gi"}}},
                                    {"name": "b", "resources": {"requests": {"cpu": "500m"}}}]}}}]},
        "status": {"conditions": [
            {"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2026-01-01T10:01:00Z"},
            {"type": "Finished", "status": "True", "lastTransitionTime": "2026-01-01T11:01:30Z"}]},
    }
    origin = datetime.fromisoformat("2026-01-01T10:00:00Z")
    assert job_of(workload, origin) == Job("nlp/train", 5000, 3_630_000, queue="nlp/train", pods=2, accelerators=4,
                                           resource="nvidia.com/gpu", pool="h100", priority_class="batch",
                                           cpu_milli=2000, memory_bytes=8 * 2**30)
    running = {**workload, "status": {"conditions": workload["status"]["conditions"][:1]}}
    assert job_of(running, origin) is None


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_whatif_shows_progress_on_a_terminal_only(tmp_path: Path, capsys, monkeypatch) -> None:
    """On a terminal, stderr gets a progress line, rewritten in place and cleared at the end; the report is
    the same; piped (as above), stderr gets none."""
    import gpugov.cli.whatif as whatif_cli
    import gpugov.whatif.simulate as simulate

    repo = move_8_gpus(tmp_path)
    args = ("whatif", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--trace", str(TRACES / "two-teams.csv"),
            "--serial")
    code, piped, err = run(capsys, *args)
    assert code == 0 and "replaying" not in err
    terminal = _Terminal()
    monkeypatch.setattr(whatif_cli.sys, "stderr", terminal)
    monkeypatch.setattr(simulate, "PROGRESS_EVERY", 1)
    monkeypatch.setattr(whatif_cli.ProgressLine, "REFRESH_S", 0.0)
    code, shown, _ = run(capsys, *args)
    assert code == 0 and shown == piped
    written = terminal.getvalue()
    assert "gpugov whatif: replaying the base: " in written and "replaying the head: " in written
    assert "jobs submitted" in written and "\n" not in written
    assert written.endswith("\r") and written.rsplit("\r", 2)[-2].strip() == ""  # the line is cleared


def test_whatif_replaying_base_and_head_at_once_shows_both_on_one_line(tmp_path: Path, capsys, monkeypatch) -> None:
    """Where base and head replay at once (gpugov.whatif.pair), the terminal's one line names both; it is
    cleared at the end, and the report is the serial one's."""
    import gpugov.cli.whatif as whatif_cli
    import gpugov.whatif.pair as pair
    import gpugov.whatif.simulate as simulate

    repo = move_8_gpus(tmp_path)
    args = ("whatif", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--trace", str(TRACES / "two-teams.csv"))
    code, serial, _ = run(capsys, *args, "--serial")
    assert code == 0
    monkeypatch.setattr(pair, "usable_cpus", lambda: 2)
    monkeypatch.delenv(pair.SERIAL_ENV, raising=False)
    terminal = _Terminal()
    monkeypatch.setattr(whatif_cli.sys, "stderr", terminal)
    monkeypatch.setattr(simulate, "PROGRESS_EVERY", 1)
    monkeypatch.setattr(whatif_cli.ProgressLine, "REFRESH_S", 0.0)
    code, shown, _ = run(capsys, *args)
    assert code == 0 and shown == serial
    written = terminal.getvalue()
    assert "gpugov whatif: replaying the base and the head at once: base " in written and "; head " in written
    assert "\n" not in written and written.endswith("\r") and written.rsplit("\r", 2)[-2].strip() == ""
