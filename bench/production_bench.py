"""Benchmark on a production cluster's shape: six accelerator models, 4,100 nodes, 23,200 GPUs, 150 tenants.

    python bench/production_bench.py [--tenants 150] [--repeat 7]

Prints validate and validate+render as ratios against parsing the same files with CSafeLoader
(best of --repeat, interleaved so machine noise hits all alike). The shape: bench/synthetic.py
generate_production (A100 half MIG, H800, A800, A10 with a HAMi-shared pool, L20, L40S).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# The same steps and timing as bench.py, so the two benchmarks' ratios compare.
from bench.bench import best_of, parse_only, validate, validate_and_render
from bench.synthetic import generate_production
from gpugov.app.pipeline import validate_repo
from gpugov.declarations.loader import discover


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=150)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = generate_production(Path(tmp), args.tenants)
        model = validate_repo(root).model
        assert model is not None
        nodes = sum(len(pool.nodes) for pool in model.pools.values())
        gpus = sum(len(pool.nodes) * pool.per_node for pool in model.pools.values())
        models = sorted({pool.model_name for pool in model.pools.values()})
        files = len(discover(root))
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
