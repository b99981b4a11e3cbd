"""The shape of the code: floors without a cycle, a pure core, one rule table, one exit-code enum, extras
named on need."""

from __future__ import annotations

import ast
import graphlib
import itertools
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from gpugov.cli import main
from gpugov.rules import all_rules, finding_rules, markdown_table
from tests.helpers.repos import REPO

ROOT = REPO
PACKAGE = ROOT / "gpugov"
# The packages whose job is the world outside (a cluster, HTTP, Pulumi, NVML, the terminal); every
# other package is the core and must not load a cluster, HTTP or Pulumi library.
EDGES = ("adopt", "agent", "cli", "cluster", "deploy", "notify", "sandbox", "sources")
EDGE_LIBRARIES = ("kubernetes", "requests", "pulumi", "pulumi_kubernetes", "urllib3")


def core_packages() -> list[str]:
    packages = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    assert set(EDGES) <= set(packages), "an edge that no longer exists"
    return [p for p in packages if p not in EDGES]


def core_modules() -> list[str]:
    names = []
    for package in core_packages():
        for path in sorted((PACKAGE / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_the_core_imports_no_cluster_http_or_pulumi_library() -> None:
    modules = core_modules()
    assert len(modules) > 30  # the glob found the core
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        f"loaded = sorted({{m.split('.')[0] for m in sys.modules}} & set({EDGE_LIBRARIES!r}))\n"
        "print(','.join(loaded))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"the core loaded {out}"


def test_no_flat_modules_at_the_package_root() -> None:
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py", "__main__.py"]


def test_rules_command_and_readme_list_the_same_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "--format", "markdown"]) == 0
    printed = capsys.readouterr().out
    assert printed == markdown_table()
    assert printed in (ROOT / "README.md").read_text(encoding="utf-8")
    families = {rule.id[:2] for rule in all_rules()}
    assert families == {"GG", "GD", "GP", "DR"}


def test_every_rule_has_a_unique_id_and_name() -> None:
    rules = all_rules()
    assert len({r.id for r in rules}) == len(rules)
    assert len({r.name for r in rules}) == len(rules)


def test_the_rule_table_holds_every_declared_rule() -> None:
    # A module that declares rules but is missing from gpugov.rules.RULE_MODULES fails here.
    declared = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "rule" and node.args:
                declared.add(ast.literal_eval(node.args[0]))
    assert len(declared) > 100
    assert declared == {r.id for r in finding_rules()}


# The floors of the house, ground first: a package imports only packages on lower floors, so no
# arrow runs up and none runs sideways (issue #24). A new package gets its floor here.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("i18n",),  # messages in the reader's language: below findings, whose reports translate hints
    ("findings", "kube"),
    ("yamlpos",),
    ("catalog",),
    ("declarations",),
    ("reach",),  # what a queue can reach, as Kueue computes it: read by queueing, what-if, capacity, guide, doctor
    ("compile", "queueing", "sources"),
    ("drift", "manifests", "plan", "policy", "profile", "reclaim", "usage", "whatif"),
    ("app", "monitoring"),
    ("agent", "capacity", "guide", "notify", "sandbox", "scaffold"),
    ("doctor",),
    ("cluster", "rules"),
    ("adopt", "deploy"),
    ("cli",),
)
Edges = dict[str, dict[str, list[str]]]


def _imported(module: str, is_package: bool, tree: ast.AST) -> list[tuple[str, int]]:
    """(imported module, line) for every import in `tree`, at any depth (a function's too)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
            # `from gpugov import cli` imports the package named after `import`.
            found += [(f"{base}.{alias.name}" if base == "gpugov" else base, node.lineno) for alias in node.names]
    return found


def package_imports() -> Edges:
    """package -> the other packages it imports -> where (file:line)."""
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    edges: Edges = {name: defaultdict(list) for name in packages}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if len(parts) < 3:  # gpugov/__init__.py and the entry point, __main__.py, stand above every floor
            continue
        is_package = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_package else parts)
        for name, line in _imported(module, is_package, ast.parse(path.read_text(encoding="utf-8"))):
            target = name.split(".")
            if target[0] == "gpugov" and len(target) > 1 and target[1] in packages and target[1] != parts[1]:
                edges[parts[1]][target[1]].append(f"{path.relative_to(ROOT)}:{line}")
    return edges


def upward_imports(edges: Edges, floors: tuple[tuple[str, ...], ...]) -> list[str]:
    """Every import of a package on the same floor or higher, with where it is."""
    floor = {package: level for level, names in enumerate(floors) for package in names}
    return [f"{a} (floor {floor[a]}) imports {b} (floor {floor[b]}) at {', '.join(where)}"
            for a, targets in sorted(edges.items()) for b, where in sorted(targets.items()) if floor[b] >= floor[a]]


def import_cycle(edges: Edges) -> list[str]:
    """One cycle of imports between packages ("a -> b at file:line" each), or []."""
    try:
        graphlib.TopologicalSorter({a: set(b) for a, b in edges.items()}).prepare()
    except graphlib.CycleError as cycle:
        path = cycle.args[1][::-1]  # graphlib lists each package before the one that imports it
        return [f"{a} -> {b} at {edges[a][b][0]}" for a, b in itertools.pairwise(path)]
    return []


def test_no_cycle_between_packages() -> None:
    edges = package_imports()
    assert "rules" in edges["cli"]  # imported inside cmd_rules only: function-level imports count
    assert import_cycle(edges) == []
    assert import_cycle({"kube": {"findings": ["k.py:1"]}, "findings": {"kube": ["f.py:2"]}}) in (
        ["kube -> findings at k.py:1", "findings -> kube at f.py:2"],
        ["findings -> kube at f.py:2", "kube -> findings at k.py:1"],
    )


def test_every_import_runs_down_the_floors() -> None:
    edges = package_imports()
    declared = [package for names in FLOORS for package in names]
    assert sorted(declared) == sorted(edges), "every package on exactly one floor"
    assert upward_imports(edges, FLOORS) == []
    # The check can fail: kube importing findings (floor 1 to floor 1) is an arrow sideways.
    assert upward_imports({"kube": {"findings": ["x.py:1"]}, "findings": {}}, FLOORS) == [
        "kube (floor 1) imports findings (floor 1) at x.py:1"]


def _returns_int_literal(function: ast.FunctionDef) -> list[int]:
    return [
        node.lineno
        for node in ast.walk(function)
        if isinstance(node, ast.Return)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, int)
        and not isinstance(node.value.value, bool)
    ]


def test_every_command_returns_an_exit_code_from_the_enum() -> None:
    commands = 0
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("cmd_"):
                commands += 1
                where = f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
                assert node.returns is not None and ast.unparse(node.returns) == "ExitCode", where
                assert not _returns_int_literal(node), f"{where} returns a bare number"
    assert commands >= 12


def test_a_missing_extra_is_named_not_a_traceback() -> None:
    # Block the cluster extra's modules the way a plain `pip install gpugov` leaves them: absent.
    code = (
        "import sys\n"
        "for name in ('kubernetes', 'cryptography', 'urllib3'): sys.modules[name] = None\n"
        "from gpugov.cli import main\n"
        "raise SystemExit(main(sys.argv[1:]))\n"
    )
    for argv in (["apply", str(ROOT)], ["drift", str(ROOT), "--cluster", "east"], ["sandbox", "status"]):
        done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
        assert done.returncode == 2, (argv, done.stderr)
        assert "Traceback" not in done.stderr
        assert "needs the 'cluster' extra: pip install 'gpugov[cluster]'" in done.stderr, done.stderr


def _bash_complete(script: Path, words: list[str]) -> list[str]:
    """What bash offers after `words` (the last one being typed), with gpugov's script sourced."""
    quoted = " ".join(f"'{w}'" for w in words)
    line = " ".join(words)
    program = (
        f"source {script}; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; "
        f"COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; "
        f"_shtab_gpugov gpugov '{words[-1]}' '{words[-2]}'; printf '%s\\n' \"${{COMPREPLY[@]}}\""
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_bash_completion_completes_commands_subcommands_and_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["completion", "bash"]) == 0
    script = tmp_path / "gpugov.bash"
    script.write_text(capsys.readouterr().out)
    assert _bash_complete(script, ["gpugov", "va"]) == ["validate"]
    assert _bash_complete(script, ["gpugov", "sandbox", ""]) == ["up", "status", "jobs", "down"]
    assert "--backend" in _bash_complete(script, ["gpugov", "render", "--b"])
