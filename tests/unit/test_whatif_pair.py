"""Base and head replayed at once (gpugov.whatif.pair) give what one after the other gives: the same
report, byte for byte, the same decisions; a worker's error is the serial run's error."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.compile import CompileError
from gpugov.declarations.model import Model
from gpugov.whatif import pair
from gpugov.whatif.replay import kueue_setup, replay
from gpugov.whatif.report import compare, markdown, to_json
from gpugov.whatif.simulate import Options
from gpugov.whatif.synthetic import synthesize
from gpugov.whatif.timeline import DEFAULT_START
from gpugov.whatif.trace import Job
from gpugov.whatif.volcano_report import markdown as volcano_markdown
from gpugov.whatif.volcano_report import to_json as volcano_json
from gpugov.whatif.volcano_report import volcano_run
from gpugov.whatif.volcano_setup import volcano_setup
from gpugov.whatif.volcano_synthetic import synthesize_volcano
from tests.helpers.repos import FIXTURES, REPO
from tests.unit.test_whatif_speed import digest


def replay_where(*args: Any, progress: Any = None) -> tuple[int, Any]:
    """replay's result with the process that replayed it."""
    return os.getpid(), replay(*args, progress=progress)


def volcano_where(*args: Any, progress: Any = None) -> tuple[int, Any]:
    return os.getpid(), volcano_run(*args, progress=progress)


def dies_in_a_worker(parent: int, *args: Any, progress: Any = None) -> tuple[int, Any]:
    """replay_where, but a process other than `parent` dies before it replays."""
    if os.getpid() != parent:
        os._exit(3)
    return replay_where(*args, progress=progress)


@pytest.fixture(scope="module")
def revisions(tmp_path_factory: pytest.TempPathFactory) -> tuple[Model, Model]:
    """The what-if org, and the same with 8 H100s moved from nlp to vision."""
    head_repo = tmp_path_factory.mktemp("head") / "org"
    shutil.copytree(FIXTURES / "whatif" / "org", head_repo)
    path = head_repo / "tenants/research.yaml"
    nlp, vision = path.read_text().split("name: vision")
    path.write_text(nlp.replace("accelerators: 16", "accelerators: 8") + "name: vision"
                    + vision.replace("accelerators: 16", "accelerators: 24"))
    base, head = validate_repo(FIXTURES / "whatif" / "org").model, validate_repo(head_repo).model
    assert base is not None and head is not None
    return base, head


@pytest.fixture
def other_hash_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker hashes strings unlike this process: an order that came from hashing would show."""
    monkeypatch.setenv("PYTHONHASHSEED", "4242" if os.environ.get("PYTHONHASHSEED") != "4242" else "4243")
    monkeypatch.delenv(pair.SERIAL_ENV, raising=False)


def backlog(model: Model) -> list[Job]:
    """Three times the tenants' quota: hours of parked work, preemptions."""
    return synthesize(kueue_setup(model, "lab"), 300, seed=3, load=3.0)


def test_base_and_head_at_once_report_byte_for_byte_what_one_after_the_other_reports(
        revisions: tuple[Model, Model], other_hash_seed: None) -> None:
    base, head = revisions
    jobs = backlog(base)
    options = Options()
    sides = ((base, "lab", jobs, "base", options, DEFAULT_START), (head, "lab", jobs, "head", options, DEFAULT_START))
    seen: list[str] = []
    (base_pid, base_run), (head_pid, head_run) = pair.replay_pair(replay_where, *sides, parallel=False)
    assert base_pid == head_pid == os.getpid()
    (pbase_pid, pbase_run), (phead_pid, phead_run) = pair.replay_pair(
        replay_where, *sides, progress=lambda which, *_: seen.append(which), parallel=True)
    assert pbase_pid == os.getpid() != phead_pid  # the head replayed in a second process
    assert "base" in seen
    assert head_run.outcome.preemption_log and digest(head_run.outcome) != digest(base_run.outcome)
    for serial, parallel in ((base_run, pbase_run), (head_run, phead_run)):
        assert digest(parallel.outcome) == digest(serial.outcome)
        assert (parallel.label, parallel.never, parallel.held_as, parallel.runtime_cut, parallel.weights,
                parallel.views) == (serial.label, serial.never, serial.held_as, serial.runtime_cut, serial.weights,
                                    serial.views)
    one = compare("t.csv", "lab", options, base_run, head_run)
    both = compare("t.csv", "lab", options, pbase_run, phead_run)
    assert markdown(both) == markdown(one)
    assert json.dumps(to_json(both), indent=2) == json.dumps(to_json(one), indent=2)


def test_volcano_base_and_head_at_once_report_what_one_after_the_other_reports(other_hash_seed: None) -> None:
    model = validate_repo(REPO).model
    assert model is not None
    west = volcano_setup(model, "west")
    jobs = synthesize_volcano(west, 200, seed=1)
    sides = (("base", west, jobs), ("head", west, jobs))
    (_, base_run), (_, head_run) = pair.replay_pair(volcano_where, *sides, parallel=False)
    (_, pbase_run), (phead_pid, phead_run) = pair.replay_pair(volcano_where, *sides, parallel=True)
    assert phead_pid != os.getpid()
    assert volcano_markdown("t", "west", pbase_run, phead_run) == volcano_markdown("t", "west", base_run, head_run)
    assert volcano_json("t", "west", pbase_run, phead_run) == volcano_json("t", "west", base_run, head_run)


def test_an_error_in_the_heads_worker_is_the_serial_runs_error(revisions: tuple[Model, Model]) -> None:
    """CompileError raised in the worker is raised here, its message as the serial run's (the CLI prints
    it without a traceback); the base's error comes first, as it does one after the other."""
    base, _ = revisions
    jobs = backlog(base)[:20]
    good = (base, "lab", jobs, "base", Options(), DEFAULT_START)
    bad = (base, "nowhere", jobs, "head", Options(), DEFAULT_START)
    messages = []
    for parallel in (False, True):
        with pytest.raises(CompileError) as raised:
            pair.replay_pair(replay, good, bad, parallel=parallel)
        messages.append(str(raised.value))
        with pytest.raises(CompileError) as raised:
            pair.replay_pair(replay, (*bad[:3], "base", *bad[4:]), good, parallel=parallel)
        messages.append(str(raised.value))
    assert messages[0] == messages[2] and messages[1] == messages[3] and "nowhere" in messages[0]


def test_a_worker_that_dies_leaves_the_head_to_this_process(revisions: tuple[Model, Model]) -> None:
    base, head = revisions
    jobs = backlog(base)[:50]
    sides = ((os.getpid(), base, "lab", jobs, "base", Options()), (os.getpid(), head, "lab", jobs, "head", Options()))
    (_, serial_base), (_, serial_head) = pair.replay_pair(dies_in_a_worker, *sides, parallel=False)
    (_, base_run), (head_pid, head_run) = pair.replay_pair(dies_in_a_worker, *sides, parallel=True)
    assert head_pid == os.getpid()
    assert digest(head_run.outcome) == digest(serial_head.outcome)
    assert digest(base_run.outcome) == digest(serial_base.outcome)


def test_one_usable_cpu_or_the_switch_replays_one_after_the_other(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pair.SERIAL_ENV, raising=False)
    monkeypatch.setattr(pair, "usable_cpus", lambda: 2)
    assert pair.parallel_wanted() and not pair.parallel_wanted(serial=True)
    monkeypatch.setenv(pair.SERIAL_ENV, "1")
    assert not pair.parallel_wanted()
    monkeypatch.setenv(pair.SERIAL_ENV, "0")
    assert pair.parallel_wanted()
    monkeypatch.setattr(pair, "usable_cpus", lambda: 1)
    assert not pair.parallel_wanted()


def test_the_what_if_imports_no_pulumi() -> None:
    """The worker imports what a replay needs (spawn: a fresh interpreter), not pulumi or gRPC."""
    import subprocess
    import sys

    code = ("import sys; import gpugov.whatif.pair, gpugov.whatif.replay, gpugov.whatif.volcano_report, "
            "gpugov.cli.whatif; print(sorted(m for m in sys.modules if m.split('.')[0] in ('pulumi', 'grpc')))")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           cwd=Path(__file__).resolve().parents[2])
    assert found.stdout.strip() == "[]"
