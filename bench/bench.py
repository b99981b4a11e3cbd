"""Benchmark: gpugov validate and validate+render against bare PyYAML parsing, in one run.

    python bench/bench.py [--tenants 1000 --pools 50 --nodes 5000] [--repeat 5]

Prints each timing (best of --repeat, interleaved so machine noise hits all alike) and the
ratios against CSafeLoader parsing the same files. Targets: validate <= 2.0x,
validate+render <= 2.0x.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.synthetic import generate
from gpugov.compile import compile
from gpugov.declarations.loader import discover
from gpugov.render import manifest_files
from gpugov.validate import validate_repo


def parse_only(root: Path) -> None:
    for path in discover(root):
        list(yaml.load_all(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader))


def validate(root: Path) -> None:
    result = validate_repo(root)
    assert not result.errors, result.errors[:3]


def validate_and_render(root: Path) -> None:
    result = validate_repo(root)
    assert result.model is not None and not result.errors
    manifest_files(compile(result.model))


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
        times = best_of({"parse (CSafeLoader)": parse_only, "validate": validate,
                         "validate+render": validate_and_render}, root, args.repeat)
    base = times["parse (CSafeLoader)"]
    print(f"synthetic org: {args.tenants} tenants, {args.pools} pools, {args.nodes} nodes, {files} files")
    for name, seconds in times.items():
        print(f"{name:<22} {seconds:8.3f} s   {seconds / base:5.2f}x parse")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
