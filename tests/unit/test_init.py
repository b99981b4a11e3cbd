"""`gpugov init` (issue #30): a new config repository that validates as written, with the CI workflows and
CODEOWNERS, all or nothing; --from-cluster hands over to `gpugov import`."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import pytest
import yaml

from gpugov.cli import main
from gpugov.scaffold.workflows import kubeconfig_secret
from tests.helpers.repos import REPO
from tests.unit.test_workflows import actionlint, gpugov_calls


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_the_new_repository_validates_as_written(tmp_path: Path, capsys) -> None:
    out = tmp_path / "org"
    code, printed, _ = run(["init", str(out), "--cluster", "lab-1", "--pool", "a100", "--model", "A100-80GB",
                            "--node", "a100-01", "--node", "a100-02", "--tenant", "vision",
                            "--owner", "bob@example.com", "--platform-team", "@acme/gpu"], capsys)
    assert code == 0, printed
    assert "  tenants/vision.yaml\n" in printed and "  .github/CODEOWNERS\n" in printed
    assert run(["validate", str(out)], capsys)[0] == 0
    assert run(["codeowners", str(out), "--check"], capsys)[0] == 0
    files = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert {"policies/clusters.yaml", "policies/guardrails.yaml", "policies/priorities.yaml", "hardware/a100.yaml",
            "tenants/vision.yaml", ".github/CODEOWNERS", ".github/workflows/pull-request.yml",
            ".github/workflows/drift.yml", "README.md", "schemas/tenant.json"} <= files
    pool = yaml.safe_load((out / "hardware" / "a100.yaml").read_text())
    assert pool["spec"]["cluster"] == "lab-1" and [n["name"] for n in pool["spec"]["nodes"]] == ["a100-01", "a100-02"]
    tenant = yaml.safe_load((out / "tenants" / "vision.yaml").read_text())
    assert tenant["spec"]["quotas"] == [{"pool": "a100", "resources": {"accelerators": 16}}]  # 2 nodes x 8
    assert tenant["spec"]["owners"] == {"users": ["bob@example.com"]}
    owners = (out / ".github" / "CODEOWNERS").read_text()
    assert "* @acme/gpu\n" in owners and "/tenants/vision.yaml @acme/gpu bob@example.com\n" in owners
    assert leftovers(tmp_path) == []  # no staging folder left beside it
    # The files carry their schema modelines, pointing at the written schemas.
    assert (out / "tenants" / "vision.yaml").read_text().startswith("# yaml-language-server: $schema=../schemas/tenant.json")


def test_volcano_and_defaults_validate_too(tmp_path: Path, capsys) -> None:
    assert run(["init", str(tmp_path / "v"), "--backend", "volcano"], capsys)[0] == 0
    assert run(["validate", str(tmp_path / "v")], capsys)[0] == 0
    assert run(["render", str(tmp_path / "v"), "--out", str(tmp_path / "rendered")], capsys)[0] == 0


def test_a_non_empty_folder_is_refused_unless_forced(tmp_path: Path, capsys) -> None:
    out = tmp_path / "org"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    code, _, err = run(["init", str(out)], capsys)
    assert code == 2
    assert err == f"gpugov: init: {out.absolute()}: not empty (use --force to replace it)\n"
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    assert run(["init", str(out), "--force", "--tenant", "nlp"], capsys)[0] == 0
    assert not (out / "keep.txt").exists() and (out / "tenants" / "nlp.yaml").is_file()
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tenant", "Bad_Name"], "gpugov: init: --tenant 'Bad_Name' is not a DNS-1123 label"),
        (["--node", "n 1"], "gpugov: init: --node 'n 1' is not a valid node name"),
        (["--accelerators-per-node", "0"], "gpugov: init: --accelerators-per-node must be 1 or more"),
        (["--model", "NO-SUCH-GPU"], "gpugov: init: the options give declarations that do not validate"),
    ],
)
def test_bad_options_write_nothing(tmp_path: Path, capsys, argv: list[str], message: str) -> None:
    code, _, err = run(["init", str(tmp_path / "org"), *argv], capsys)
    assert code == 2
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "org").exists() and leftovers(tmp_path) == []


def test_findings_of_options_that_do_not_validate_are_shown(tmp_path: Path, capsys) -> None:
    _, _, err = run(["init", str(tmp_path / "org"), "--model", "NO-SUCH-GPU"], capsys)
    assert "hardware/gpu.yaml:" in err and "[GG046]" in err


# -- the workflows: gpugov's own gate and drift job, for one cluster and a pinned gpugov --


def workflows(tmp_path: Path, capsys, *argv: str) -> tuple[Path, dict, dict]:
    out = tmp_path / "org"
    assert run(["init", str(out), *argv], capsys)[0] == 0
    folder = out / ".github" / "workflows"
    return folder, yaml.safe_load((folder / "pull-request.yml").read_text()), \
        yaml.safe_load((folder / "drift.yml").read_text())


def own(name: str) -> dict:
    return yaml.safe_load((REPO / ".github" / "workflows" / name).read_text())


def test_the_gate_is_gpugovs_own_without_the_pulumi_preview(tmp_path: Path, capsys) -> None:
    _, gate, _ = workflows(tmp_path, capsys, "--pip-spec", "gpugov==9.9.9")
    mine = own("pull-request.yml")
    assert sorted(gate["jobs"]) == ["platform-approval", "validate-and-plan"]
    for job in gate["jobs"]:
        assert gate["jobs"][job] == mine["jobs"][job], f"{job} differs from .github/workflows/pull-request.yml"
    assert gate["env"] == {**mine["env"], "GPUGOV_PIP_SPEC": "${{ vars.GPUGOV_PIP_SPEC || 'gpugov==9.9.9' }}"}
    assert gate[True] == mine[True] and gate["permissions"] == mine["permissions"]  # `on:` reads as True


def test_the_drift_check_runs_for_the_declared_cluster(tmp_path: Path, capsys) -> None:
    _, _, drift = workflows(tmp_path, capsys, "--cluster", "gpu-east")
    mine = own("drift.yml")
    job, theirs = drift["jobs"]["drift"], mine["jobs"]["drift"]
    assert job["strategy"]["matrix"]["include"] == [{"cluster": "gpu-east", "secret": "GPUGOV_KUBECONFIG_GPU_EAST"}]
    assert {**job, "strategy": None} == {**theirs, "strategy": None}
    assert kubeconfig_secret("gpu-east") == "GPUGOV_KUBECONFIG_GPU_EAST"


def test_the_workflows_call_existing_commands_and_pass_actionlint(tmp_path: Path, capsys) -> None:
    from gpugov.cli import build_parser

    folder, _, _ = workflows(tmp_path, capsys)
    parser = build_parser()
    for path in sorted(folder.glob("*.yml")):
        calls = gpugov_calls(path)
        assert calls, path.name
        for args in calls:
            assert parser.parse_args(args).func is not None
    tool = actionlint()  # skips from here when actionlint is not installed
    for path in sorted(folder.glob("*.yml")):
        done = subprocess.run([tool, "-no-color", str(path)], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout + done.stderr


# -- --from-cluster: gpugov import writes the repository, init adds the CI files --


def test_from_cluster_hands_over_to_import(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    import gpugov.cli.adopt as adopt

    # A cluster's objects as a folder (compile's objects of a repository init wrote), read by the real import
    # in place of the API server: what init hands over is checked, and the rest of the road is real.
    assert run(["init", str(tmp_path / "first"), "--cluster", "lab", "--platform-team", "@acme/gpu"], capsys)[0] == 0
    assert run(["render", str(tmp_path / "first"), "--out", str(tmp_path / "live")], capsys)[0] == 0
    handed: list[argparse.Namespace] = []
    real = adopt.run_import

    def from_folder(args: argparse.Namespace):
        handed.append(args)
        return real(argparse.Namespace(**{**vars(args), "source": str(tmp_path / "live")}))

    monkeypatch.setattr(adopt, "run_import", from_folder)
    out = tmp_path / "org"
    code, printed, err = run(["init", str(out), "--from-cluster", "--cluster", "lab", "--kubeconfig", "kc.yaml",
                              "--context", "admin"], capsys)
    assert code in (0, 1), err  # 1: import lists what the declarations do not express
    (args,) = handed
    assert (args.source, args.kubeconfig, args.context, args.cluster, args.out, args.force) == (
        None, "kc.yaml", "admin", "lab", str(out), False)
    assert "init: added .github/workflows/pull-request.yml\n" in printed
    assert (out / ".github" / "workflows" / "drift.yml").is_file()
    assert run(["validate", str(out)], capsys)[0] == 0


def test_from_cluster_keeps_imports_refusal(tmp_path: Path, capsys) -> None:
    out = tmp_path / "org"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    code, _, err = run(["init", str(out), "--from-cluster", "--kubeconfig", str(tmp_path / "none")], capsys)
    assert code == 2 and "not empty" in err
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
