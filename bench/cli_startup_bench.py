"""Benchmark: how long `gpugov` takes to start, as a process, against bare Python.

    python bench/cli_startup_bench.py [--repeat 15] [--repo .] [--baseline DIR]

Times, interleaved so machine noise hits all alike, the median wall time and CPU time (user + system,
steadier than wall time on a shared machine) of `python -c pass`, `gpugov --help`, the start of
`gpugov validate REPO` (the process up to the moment validate's own work begins: the interpreter,
gpugov's parser, the options parsed) and the whole of `gpugov validate REPO` (the example
organisation at the repository root by default), each a fresh process. --baseline DIR runs the same
commands on another checkout of gpugov (e.g. `git worktree add /tmp/base HEAD~1`) for a
before/after in one run.

Bytecode is written and used as after `pip install` (PYTHONDONTWRITEBYTECODE is dropped for the
runs, and one untimed round writes it first): otherwise every changed module would be compiled
anew at each start, which no installed gpugov does.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# The start of validate: what `gpugov validate REPO` runs before cmd_validate (a tree from before
# gpugov.cli.parse builds the whole parser, as its main did).
VALIDATE_START = """import sys
try:
    from gpugov.cli import parse
except ImportError:
    from gpugov.cli import build_parser
    parse = build_parser().parse_args
from gpugov import i18n
import os
args = parse(["validate", sys.argv[1]])
i18n.use(args.ui_language or i18n.from_environment(os.environ))
"""


def commands(repo: Path) -> dict[str, list[str]]:
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "gpugov --help": [sys.executable, "-m", "gpugov", "--help"],
        "validate start": [sys.executable, "-c", VALIDATE_START, str(repo)],
        "gpugov validate": [sys.executable, "-m", "gpugov", "validate", str(repo)],
    }


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], tree: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one run."""
    env = {**os.environ, "PYTHONPATH": str(tree)}  # ahead of the editable install: this tree's gpugov
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    start, cpu = time.perf_counter(), _cpu()
    done = subprocess.run(argv, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start, _cpu() - cpu
    if done.returncode not in (0, 1):  # validate exits 1 on findings: still a full run
        raise SystemExit(f"{' '.join(argv)} in {tree} exited {done.returncode}: {done.stderr.strip()}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--repo", type=Path, default=ROOT, help="organisation to validate (default: this checkout)")
    parser.add_argument("--baseline", type=Path, help="another gpugov checkout to time the same way")
    args = parser.parse_args()
    trees = {"this tree": ROOT, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    runs: dict[tuple[str, str], list[tuple[float, float]]] = {
        (tree, name): [] for tree in trees for name in commands(args.repo.resolve())}
    for tree, name in runs:  # untimed: writes the bytecode
        timed(commands(args.repo.resolve())[name], trees[tree])
    for _ in range(args.repeat):
        for (tree, name), times in runs.items():
            times.append(timed(commands(args.repo.resolve())[name], trees[tree]))
    medians = {key: [statistics.median(column) for column in zip(*times, strict=True)] for key, times in runs.items()}
    for tree in trees:
        bare_wall, bare_cpu = medians[(tree, "python -c pass")]
        print(f"{tree} ({trees[tree]}), median of {args.repeat}:")
        for name in commands(args.repo):
            wall, cpu = medians[(tree, name)]
            print(f"  {name:<16} wall {wall:.3f} s ({wall - bare_wall:+.3f} s over bare Python, "
                  f"{wall / bare_wall:.1f}x), CPU {cpu:.3f} s ({cpu - bare_cpu:+.3f} s, {cpu / bare_cpu:.1f}x)")
        (start, start_cpu), (whole, whole_cpu) = medians[(tree, "validate start")], medians[(tree, "gpugov validate")]
        print(f"  validate's start-up is {start / whole:.0%} of its wall time ({start_cpu / whole_cpu:.0%} of its CPU)")
    if args.baseline:
        for name in list(commands(args.repo))[1:]:
            (after, after_cpu), (before, before_cpu) = (medians[(t, name)] for t in trees)
            print(f"{name}: wall {after:.3f} s against {before:.3f} s ({before / after:.1f}x faster), "
                  f"CPU {after_cpu:.3f} s against {before_cpu:.3f} s ({before_cpu / after_cpu:.1f}x)")


if __name__ == "__main__":
    main()
