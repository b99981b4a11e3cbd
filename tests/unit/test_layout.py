"""The shape of the code: a pure core, one rule table, one exit-code enum, extras named on need."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from gpugov.cli import main
from gpugov.findings.registry import all_rules, markdown_table
from tests.helpers.repos import REPO

ROOT = REPO
PACKAGE = ROOT / "gpugov"
CORE = ("declarations", "policy", "compile", "catalog", "plan", "drift", "kube", "findings", "app")
EDGE_LIBRARIES = ("kubernetes", "requests", "pulumi", "pulumi_kubernetes", "urllib3")


def core_modules() -> list[str]:
    names = []
    for package in CORE:
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
    assert families == {"GG", "GD", "GP"}


def test_every_rule_has_a_unique_id_and_name() -> None:
    rules = all_rules()
    assert len({r.id for r in rules}) == len(rules)
    assert len({r.name for r in rules}) == len(rules)


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
