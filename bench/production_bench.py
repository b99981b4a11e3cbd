"""Benchmark on a production cluster's shape: six accelerator models, 4,100 nodes, 23,200 GPUs, 150 tenants.

    python bench/production_bench.py [--tenants 150] [--repeat 7]
    python bench/production_bench.py --process [--tenants 150] [--repeat 7] [--baseline DIR]

Prints validate and validate+render as ratios against parsing the same files with CSafeLoader
(best of --repeat, interleaved so machine noise hits all alike). The shape: bench/synthetic.py
generate_production (A100 half MIG, H800, A800, A10 with a HAMi-shared pool, L20, L40S).

--process (issue #42's row, start-up included): `gpugov render ORG --out DIR` as a fresh process
against a fresh process that only parses the same files with CSafeLoader (its imports included),
median wall and CPU time of --repeat, interleaved; --baseline DIR times the same render with
another checkout of gpugov (e.g. `git worktree add /tmp/base HEAD~1`) in the same run. Goal: 3.0x.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# The same steps and timing as bench.py, so the two benchmarks' ratios compare.
from bench.bench import best_of, parse_only, validate, validate_and_render
from bench.synthetic import generate_production
from gpugov.app.pipeline import validate_repo
from gpugov.declarations.loader import discover

ROOT = Path(__file__).resolve().parents[1]

# What a process that only parses the org does: discover its files as gpugov does, load each with CSafeLoader.
PARSE_PROCESS = """import sys
from pathlib import Path
import yaml
from gpugov.declarations.loader import discover
for path in discover(Path(sys.argv[1])):
    list(yaml.load_all(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader))
"""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_timed(argv: list[str], tree: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one process, this tree's gpugov first on its path, bytecode as installed."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    start, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(argv, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start, _children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} in {tree} exited {done.returncode}: {done.stderr.strip()}")
    return elapsed


def process_bench(root: Path, out: Path, repeat: int, baseline: Path | None) -> None:
    runs: dict[str, tuple[list[str], Path]] = {
        "parse (process)": ([sys.executable, "-c", PARSE_PROCESS, str(root)], ROOT),
        "gpugov render": ([sys.executable, "-m", "gpugov", "render", str(root), "--out", str(out / "a")], ROOT),
    }
    if baseline is not None:
        runs["gpugov render (baseline)"] = (
            [sys.executable, "-m", "gpugov", "render", str(root), "--out", str(out / "b")], baseline.resolve())
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for argv, tree in runs.values():  # untimed: writes the bytecode
        run_timed(argv, tree)
    for _ in range(repeat):
        for name, (argv, tree) in runs.items():
            times[name].append(run_timed(argv, tree))
    medians = {name: [statistics.median(column) for column in zip(*t, strict=True)] for name, t in times.items()}
    parse_wall, parse_cpu = medians["parse (process)"]
    print(f"processes, median of {repeat} (start-up included):")
    for name, (wall, cpu) in medians.items():
        print(f"  {name:<26} wall {wall:.3f} s ({wall / parse_wall:.2f}x parse), "
              f"CPU {cpu:.3f} s ({cpu / parse_cpu:.2f}x parse)")
    if baseline is not None and (out / "a").is_dir() and (out / "b").is_dir():
        def tree(d: Path) -> dict[str, bytes]:
            return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}
        same = tree(out / "a") == tree(out / "b")
        print(f"  rendered files byte-identical to the baseline's: {same}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=150)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--process", action="store_true",
                        help="time `gpugov render` as a process against a process that only parses")
    parser.add_argument("--baseline", type=Path, help="(--process) another gpugov checkout to render with too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = generate_production(Path(tmp), args.tenants)
        model = validate_repo(root).model
        assert model is not None
        nodes = sum(len(pool.nodes) for pool in model.pools.values())
        gpus = sum(len(pool.nodes) * pool.per_node for pool in model.pools.values())
        models = sorted({pool.model_name for pool in model.pools.values()})
        files = len(discover(root))
        if args.process:
            print(f"production org: {len(model.tenants)} tenants, {nodes} nodes, {gpus} GPUs, {files} files")
            process_bench(root, Path(tmp), args.repeat, args.baseline)
            return 0
        times = best_of({"parse (CSafeLoader)": parse_only, "validate": validate,
                         "validate+render": validate_and_render}, root, args.repeat)
    base = times["parse (CSafeLoader)"]
    print(f"production org: {len(model.tenants)} tenants, {len(model.pools)} pools of {len(models)} models "
          f"({', '.join(models)}), {nodes} nodes, {gpus} GPUs, {files} files")
    for name, seconds in times.items():
        print(f"{name:<22} {seconds:8.3f} s   {seconds / base:5.2f}x parse")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
