"""The command-line contract: formats, exit codes, --strict, render, schema, rules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpugov.cli import main
from gpugov.declarations.schema import schema_files
from tests.helpers.repos import REPO, write

OVER_CAPACITY = """\
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata:
  name: gamma
spec:
  department: rnd
  owners: {users: [g@example.com]}
  costCenter: CC-3
  namespaces: [gamma]
  quotas:
    - pool: h100
      resources: {accelerators: 1}
"""
UNUSED_LAYOUT = """\
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata:
  name: a100
spec:
  cluster: lab
  accelerator: {model: A100-80GB}
  acceleratorsPerNode: 4
  nodeResources: {cpu: 64, memory: 512Gi}
  migLayouts:
    small: {1g.10gb: 7}
    spare: {7g.80gb: 1}
  nodes:
    - {name: a100-a, migLayout: small}
    - {name: a100-b}
"""


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_clean_repo_exits_zero_in_every_format(base_repo: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    assert run(capsys, "validate", str(base_repo))[:2] == (0, "8 files checked: 0 errors, 0 warnings\n")
    code, out, _ = run(capsys, "validate", str(base_repo), "--format", "json")
    assert code == 0 and json.loads(out) == {"files": 8, "errors": 0, "warnings": 0, "findings": []}
    assert run(capsys, "validate", str(base_repo), "--format", "markdown")[1].startswith("**gpugov validate**")
    assert run(capsys, "validate", str(base_repo), "--format", "github")[1] == "8 files checked: 0 errors, 0 warnings\n"


def test_error_findings_exit_one_in_each_format(base_repo: Path, capsys) -> None:
    write(base_repo, "tenants/gamma.yaml", OVER_CAPACITY)
    code, out, _ = run(capsys, "validate", str(base_repo), "--format", "text")
    assert code == 1
    # GG030 is reported on each contributing quota (the one a pull request raised among them)
    assert out.splitlines()[0].startswith("tenants/alpha.yaml:15:23: error: tenant 'alpha' holds 8 of pool 'h100'")
    assert "tenants/gamma.yaml:12:33: error: tenant 'gamma' holds 1 of pool 'h100' nvidia.com/gpu" in out
    assert out.endswith("9 files checked: 3 errors, 0 warnings\n")

    code, out, _ = run(capsys, "validate", str(base_repo), "--format", "json")
    data = json.loads(out)
    assert code == 1 and data["errors"] == 3
    assert data["findings"][2]["rule"] == "GG030" and data["findings"][2]["line"] == 12
    assert data["findings"][2]["related"] == ["hardware/h100.yaml:4:9"]

    code, out, _ = run(capsys, "validate", str(base_repo), "--format", "github")
    assert code == 1
    assert "::error file=tenants/gamma.yaml,line=12,col=33,title=GG030::tenant 'gamma'" in out

    code, out, _ = run(capsys, "validate", str(base_repo), "--format", "markdown")
    assert code == 1 and "| error | `tenants/gamma.yaml:12:33` | GG030 |" in out


def test_github_format_is_picked_inside_actions(base_repo: Path, capsys, monkeypatch) -> None:
    write(base_repo, "tenants/gamma.yaml", OVER_CAPACITY)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert run(capsys, "validate", str(base_repo))[1].startswith("::error file=tenants/alpha.yaml")


def test_warnings_pass_unless_strict(base_repo: Path, capsys) -> None:
    write(base_repo, "hardware/a100.yaml", UNUSED_LAYOUT)
    code, out, _ = run(capsys, "validate", str(base_repo))
    assert code == 0 and "warning: layout 'spare'" in out and "[GG043]" in out
    assert run(capsys, "validate", str(base_repo), "--strict")[0] == 1


def test_render_writes_manifests_and_kustomization_byte_identically(base_repo: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    code, stdout, _ = run(capsys, "render", str(base_repo), "--out", str(out))
    assert code == 0 and stdout.startswith("rendered ")
    first = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    kustomization = yaml.safe_load(first["kustomization.yaml"])
    assert kustomization["kind"] == "Kustomization"
    assert set(kustomization["resources"]) == {n for n in first if "/" not in n and n != "kustomization.yaml"}
    assert "nodes/node-patches.yaml" in first
    assert run(capsys, "render", str(base_repo), "--out", str(out))[0] == 0
    second = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert first == second
    assert [p.name for p in tmp_path.iterdir()] == ["repo", "out"] or sorted(p.name for p in tmp_path.iterdir()) == [
        "out",
        "repo",
    ], "no staging folders are left behind"


def test_render_refuses_invalid_repo_and_leaves_output_untouched(base_repo: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert run(capsys, "render", str(base_repo), "--out", str(out))[0] == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    write(base_repo, "tenants/gamma.yaml", OVER_CAPACITY)
    code, _, err = run(capsys, "render", str(base_repo), "--out", str(out))
    assert code == 1 and "[GG030]" in err and "refusing" in err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_render_refuses_to_replace_a_foreign_folder(base_repo: Path, tmp_path: Path, capsys) -> None:
    foreign = tmp_path / "mine"
    write(foreign, "notes.txt", "keep me")
    code, _, err = run(capsys, "render", str(base_repo), "--out", str(foreign))
    assert code == 2 and "refusing to replace" in err
    assert (foreign / "notes.txt").read_text() == "keep me"


def test_render_needs_a_target_and_a_known_cluster(base_repo: Path, capsys) -> None:
    assert run(capsys, "render", str(base_repo))[0] == 2
    code, _, err = run(capsys, "render", str(REPO), "--stdout")
    assert code == 2 and "several clusters (east, west)" in err
    code, _, err = run(capsys, "render", str(REPO), "--stdout", "--cluster", "north")
    assert code == 2 and "unknown cluster 'north'" in err


def test_render_stdout_is_a_yaml_stream(base_repo: Path, capsys) -> None:
    code, out, _ = run(capsys, "render", str(base_repo), "--stdout", "--backend", "volcano")
    docs = list(yaml.safe_load_all(out))
    assert code == 0 and {d["kind"] for d in docs} >= {"Queue", "PriorityClass", "Namespace"}


def test_schema_command_prints_and_writes(tmp_path: Path, capsys) -> None:
    code, out, _ = run(capsys, "schema", "--kind", "Tenant")
    assert code == 0 and json.loads(out)["properties"]["kind"] == {"const": "Tenant"}
    assert run(capsys, "schema", "--out", str(tmp_path / "s"))[0] == 0
    assert {p.name for p in (tmp_path / "s").iterdir()} == set(schema_files())
    assert run(capsys, "schema", "--kind", "Nope")[0] == 2


def test_committed_schemas_are_current() -> None:
    """The repo's schemas/ (used by the yaml-language-server lines) match the package."""
    for name, text in schema_files().items():
        assert (REPO / "schemas" / name).read_text() == text, f"run: gpugov schema --out schemas ({name} is stale)"


def test_example_files_point_editors_at_their_schema() -> None:
    for folder in ("tenants", "policies", "hardware"):
        for path in (REPO / folder).glob("*.yaml"):
            first = path.read_text().splitlines()[0]
            kind = yaml.safe_load(path.read_text().split("---")[0])["kind"]
            assert first == f"# yaml-language-server: $schema=../schemas/{kind.lower()}.json", path


def test_rules_lists_every_rule(capsys) -> None:
    code, out, _ = run(capsys, "rules")
    assert code == 0 and "GG030" in out and "GG084" in out


def test_console_entry_point_and_module_agree() -> None:
    proc = subprocess.run([sys.executable, "-m", "gpugov", "--version"], capture_output=True, text=True, check=True)
    assert proc.stdout.startswith("gpugov ")


@pytest.mark.parametrize("command", [
    ["apply", str(REPO), "--cluster", "east"],
    ["drift", str(REPO), "--cluster", "east"],
    ["doctor", str(REPO), "--cluster", "east"],
    ["queue", str(REPO), "--cluster", "east"],
    ["capacity", str(REPO), "--cluster", "east"],
])
def test_a_missing_kubeconfig_file_is_bad_usage_not_an_unreachable_cluster(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "kubeconfig"
    assert main([*command, "--kubeconfig", str(missing)]) == 2
    assert f"gpugov: --kubeconfig {missing}: no such file" in capsys.readouterr().err
