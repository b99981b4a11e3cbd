"""Benchmark: gpugov validate, render and plan against their baselines, in one run.

    python bench/bench.py [--tenants 1000 --pools 50 --nodes 5000] [--repeat 5] [--markdown]

Prints each timing (best of --repeat, interleaved so machine noise hits all alike) and the
ratios against CSafeLoader parsing the same files: validate (target <= 2.0x) and
validate+render, the road `gpugov render` takes (desired_state, then the manifest files;
target <= 2.0x); and plan of a one-quota change between two git commits (`gpugov plan`'s road)
against one render (target <= 2.3x). `--markdown` (what `make bench` runs, and what the README's
table is pasted from): the same as a Markdown table, under the date, the machine and the command.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.synthetic import generate
from gpugov.app.desired import desired_state
from gpugov.app.pipeline import validate_repo
from gpugov.app.revision import read_revision
from gpugov.declarations.loader import discover
from gpugov.manifests import manifest_files
from gpugov.plan import make_plan
from gpugov.plan.report import markdown
from gpugov.sources.git import changed_paths

REUSES_PARSE = "reuse" in inspect.signature(read_revision).parameters


def parse_only(root: Path) -> None:
    for path in discover(root):
        list(yaml.load_all(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader))


def validate(root: Path) -> None:
    result = validate_repo(root)
    assert not result.errors, result.errors[:3]


def validate_and_render(root: Path) -> None:
    manifest_files(desired_state(root).objects)


def plan(root: Path) -> None:
    """`gpugov plan --base HEAD~1 --head HEAD`'s road (cli/declarations.py cmd_plan), without the CLI."""
    base = read_revision(root, "HEAD~1")
    reuse = {"reuse": base.validation.parsed} if REUSES_PARSE else {}  # absent in code before #42: the bench runs on it
    head = read_revision(root, "HEAD", base=base.model, repository_checks=False, **reuse)
    assert base.model is not None and head.model is not None
    result = make_plan(base.model, head.model, base.label, head.label, None, changed_paths(root, "HEAD~1", "HEAD"),
                       base_objects=base.compiled, head_objects=head.compiled)
    assert result.quotas, "the benchmark change must show"
    markdown(result)


def commit_a_quota_change(root: Path) -> None:
    env = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@example.com", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "b@example.com", "PATH": os.environ.get("PATH", "")}

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env=env)

    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "base")
    tenant = root / "tenants" / "team-0.yaml"
    text = tenant.read_text(encoding="utf-8")
    tenant.write_text(text.replace("nominal: ", "nominal: 1", 1), encoding="utf-8")
    git("commit", "-qam", "raise team-0")


def best_of(functions: dict[str, Callable[[Path], None]], root: Path, repeat: int) -> dict[str, float]:
    best = dict.fromkeys(functions, float("inf"))
    for _ in range(repeat):
        for name, function in functions.items():
            gc.collect()
            started = time.perf_counter()
            function(root)
            best[name] = min(best[name], time.perf_counter() - started)
    return best


def cpu_model() -> str:
    """The CPU's model name as /proc/cpuinfo gives it (platform's guess elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def machine() -> str:
    """nproc, the CPU model, Python, and the load when measured (the bench is meant for shared machines)."""
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    return (f"{os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else '?'}),"
            f" {cpu_model()}, Python {platform.python_version()}, load average {load}")


def markdown_report(times: dict[str, float], args: argparse.Namespace, files: int) -> str:
    """The README's table: each step's best time and its ratio, with the goal, under where and when."""
    parse, render = times["parse (CSafeLoader)"], times["validate+render"]
    command = "python bench/bench.py --markdown"
    defaults = {"tenants": 1000, "pools": 50, "nodes": 5000, "repeat": 5}
    command += "".join(f" --{k} {getattr(args, k)}" for k, v in defaults.items() if getattr(args, k) != v)
    rows = [
        ("parse (CSafeLoader), the baseline", parse, "1.00x parse", ""),
        ("validate (compiles every cluster for the conformance checks)", times["validate"],
         f"{times['validate'] / parse:.2f}x parse", "2.0x parse"),
        ("validate + render (`gpugov render`'s road)", render, f"{render / parse:.2f}x parse", "2.0x parse"),
        ("plan of a one-quota change between two commits", times["plan"],
         f"{times['plan'] / render:.2f}x render ({times['plan'] / parse:.2f}x parse)", "2.3x render"),
    ]
    by_make = " (`make bench`)" if command == "python bench/bench.py --markdown" else ""
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"Measured {when} on {machine()}, by `{command}`{by_make}: a synthetic org of {args.tenants} tenants, "
        f"{args.pools} pools, {args.nodes} nodes ({files} files), best of {args.repeat}.",
        "",
        "| step | best time | ratio | goal |",
        "|---|---|---|---|",
        *(f"| {step} | {seconds:.3f} s | {ratio} | {goal} |" for step, seconds, ratio, goal in rows),
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--pools", type=int, default=50)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--markdown", action="store_true",
                        help="print a Markdown table under the date, the machine and the command (for the README)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = generate(Path(tmp), args.tenants, args.pools, args.nodes)
        files = len(discover(root))
        commit_a_quota_change(root)
        times = best_of({"parse (CSafeLoader)": parse_only, "validate": validate,
                         "validate+render": validate_and_render, "plan": plan}, root, args.repeat)
    base = times["parse (CSafeLoader)"]
    if args.markdown:
        print(markdown_report(times, args, files))
        return 0
    print(f"synthetic org: {args.tenants} tenants, {args.pools} pools, {args.nodes} nodes, {files} files")
    for name, seconds in times.items():
        print(f"{name:<22} {seconds:8.3f} s   {seconds / base:5.2f}x parse")
    print(f"plan / render          {times['plan'] / times['validate+render']:5.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
