"""Check that a change to the CLI's start-up left every command's help as it was.

    python bench/cli_help_diff.py BASELINE_DIR

Runs, as processes (each the way a user runs it, through `python -m gpugov`), `--help` of gpugov and
of every command and nested command, plus a few usage errors, in this checkout and in BASELINE_DIR
(another checkout, e.g. `git worktree add /tmp/base HEAD`), with a fixed terminal width, and prints
a unified diff of each output that differs. Exit 0 when all are identical.
"""

from __future__ import annotations

import argparse
import difflib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Usage errors: what argparse prints from the root parser and from a command's.
ERRORS = ([], ["no-such-command"], ["validate", "--no-such-option"], ["drift", "--format", "yaml"],
          ["--lang", "xx", "validate"], ["queue", "--page-size", "0"])


def run(tree: Path, argv: list[str]) -> str:
    env = {**os.environ, "PYTHONPATH": str(tree), "COLUMNS": "100", "LANG": "C.UTF-8"}
    env.pop("LC_ALL", None)
    done = subprocess.run([sys.executable, "-m", "gpugov", *argv], cwd=tree, env=env, capture_output=True, text=True)
    return f"exit {done.returncode}\n--- stdout\n{done.stdout}--- stderr\n{done.stderr}"


def command_paths(tree: Path) -> list[list[str]]:
    """Every command and nested command of the parser in `tree`, read from the parser itself."""
    program = (
        "import argparse, json\nfrom gpugov.cli import build_parser\n"
        "def walk(p, path):\n    yield path\n    for a in p._actions:\n"
        "        if isinstance(a, argparse._SubParsersAction):\n"
        "            for name, sub in a.choices.items():\n                yield from walk(sub, path + [name])\n"
        "print(json.dumps(list(walk(build_parser(), []))))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", program], cwd=tree, env=env, capture_output=True, text=True, check=True)
    import json

    return json.loads(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("baseline", type=Path, help="another gpugov checkout")
    args = parser.parse_args()
    baseline = args.baseline.resolve()
    paths = command_paths(ROOT)
    if paths != command_paths(baseline):
        print("the commands differ between the trees")
        return 1
    cases = [[*path, "--help"] for path in paths] + [list(e) for e in ERRORS]
    differing = 0
    for argv in cases:
        before, after = run(baseline, argv), run(ROOT, argv)
        if before != after:
            differing += 1
            name = " ".join(["gpugov", *argv])
            sys.stdout.writelines(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                                       f"{name} (baseline)", f"{name} (this tree)"))
    print(f"{len(cases)} outputs compared ({len(paths)} commands' --help, {len(ERRORS)} usage errors): "
          f"{differing} differ")
    return 1 if differing else 0


if __name__ == "__main__":
    raise SystemExit(main())
