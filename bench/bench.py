"""Benchmark: gpugov validate, render and plan against their baselines, in one run.

    python bench/bench.py [--tenants 1000 --pools 50 --nodes 5000] [--repeat 5]

Prints each timing (best of --repeat, interleaved so machine noise hits all alike) and the
ratios against CSafeLoader parsing the same files: validate (target <= 2.0x) and
validate+render, the road `gpugov render` takes (desired_state, then the manifest files;
target <= 3.0x); and plan of a one-quota change between two git commits against one
render (target <= 2.3x).
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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
    head = read_revision(root, "HEAD", base=base.model, repository_checks=False, reuse=base.validation.parsed)
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--pools", type=int, default=50)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = generate(Path(tmp), args.tenants, args.pools, args.nodes)
        files = len(discover(root))
        commit_a_quota_change(root)
        times = best_of({"parse (CSafeLoader)": parse_only, "validate": validate,
                         "validate+render": validate_and_render, "plan": plan}, root, args.repeat)
    base = times["parse (CSafeLoader)"]
    print(f"synthetic org: {args.tenants} tenants, {args.pools} pools, {args.nodes} nodes, {files} files")
    for name, seconds in times.items():
        print(f"{name:<22} {seconds:8.3f} s   {seconds / base:5.2f}x parse")
    print(f"plan / render          {times['plan'] / times['validate+render']:5.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
