"""The CI files are real: actionlint passes, and every gpugov call in them parses with the CLI."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gpugov.app.pipeline import validate_repo
from gpugov.cli import build_parser
from gpugov.compile import codeowners
from tests.helpers.repos import REPO

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
CI_FILES = [*WORKFLOWS, REPO / "examples" / "ci" / "gitlab-ci.yml"]


def actionlint() -> str:
    for candidate in (REPO / "tools" / "bin" / "actionlint", shutil.which("actionlint"),
                      Path.home() / "go" / "bin" / "actionlint"):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    if os.environ.get("GPUGOV_REQUIRE_E2E") == "1":
        pytest.fail("actionlint is missing: make test installs it with Go")
    pytest.skip("actionlint not installed (make test builds it with `go install`; it needs Go)")


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_actionlint(workflow: Path) -> None:
    proc = subprocess.run([actionlint(), "-no-color", str(workflow)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def gpugov_calls(path: Path) -> list[list[str]]:
    calls = []
    text = re.sub(r"\$\{\{[^}]*\}\}", "placeholder", path.read_text())
    text = re.sub(r"\\\n\s*", " ", text)  # join shell line continuations
    for line in text.splitlines():
        line = line.strip().removeprefix("- ").removeprefix("run: ")
        if line.startswith("gpugov "):
            words = shlex.split(line.split(">")[0])
            # a shell array expansion ("${notify[@]}") adds optional words: drop it
            words = [w for w in words[1:] if not (w.startswith("$") and "[@]" in w)]
            calls.append([w if not w.startswith("$") else "placeholder" for w in words])
    return calls


@pytest.mark.parametrize("path", CI_FILES, ids=lambda p: p.name)
def test_ci_files_call_only_existing_commands_and_options(path: Path) -> None:
    yaml.safe_load(path.read_text())
    calls = gpugov_calls(path)
    assert calls, f"{path.name} calls no gpugov command"
    parser = build_parser()
    for args in calls:
        parsed = parser.parse_args(args)  # exits (fails the test) on an unknown command or option
        assert parsed.func is not None


def test_codeowners_round_trips(tmp_path: Path) -> None:
    model = validate_repo(REPO).model
    assert model is not None
    text = codeowners.generate(model)
    assert (REPO / codeowners.PATH).read_text() == text, "run: gpugov codeowners"
    rules = codeowners.parse(text)
    assert rules["*"] == list(model.limits.platform_team)  # the default owner of every file
    for tenant in model.tenants.values():
        owners = rules[f"/{tenant.file}"]
        assert set(tenant.owners.reviewers or tenant.owners.users) <= set(owners)
    assert codeowners.generate(model) == text  # stable


# -- what the workflows promise: a pinned gpugov, per-cluster secrets, state kept, no silent skip --


def workflow(name: str) -> dict:
    return yaml.safe_load((REPO / ".github" / "workflows" / name).read_text())


def steps(job: dict) -> dict[str, dict]:
    return {step.get("name") or step.get("uses", "").split("@")[0]: step for step in job["steps"]}


def bash(script: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run a step's script as Actions does (bash -e), with a `python` that records its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "python"
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$RUNNER_TEMP/python-args"\n')
    fake.chmod(0o755)
    base = {"PATH": f"{bin_dir}:/usr/bin:/bin", "RUNNER_TEMP": str(tmp_path)}
    return subprocess.run(["bash", "-e", "-c", script], env={**base, **env}, capture_output=True, text=True,
                          check=False)


INSTALLS = [(".", ".[{extras}]"), ("gpugov==0.1.0", "gpugov[{extras}]==0.1.0"),
            ("gpugov @ git+https://github.com/example/gpugov@v0.1.0",
             "gpugov[{extras}] @ git+https://github.com/example/gpugov@v0.1.0")]


@pytest.mark.parametrize(("name", "job", "step", "extras"), [
    ("drift.yml", "drift", "Install gpugov", "cluster,notify"),
    ("pull-request.yml", "pulumi-preview", "Pulumi preview", "deploy"),
])
def test_a_config_repository_installs_a_pinned_gpugov(tmp_path, name: str, job: str, step: str, extras: str) -> None:
    flow = workflow(name)
    assert flow["env"]["GPUGOV_PIP_SPEC"] == "${{ vars.GPUGOV_PIP_SPEC || '.' }}"  # this repo: its source
    script = steps(flow["jobs"][job])[step]["run"].split('python -m pip install "$spec"')[0]
    script += 'python -m pip install "$spec"\n'
    for pinned, installed in INSTALLS:
        proc = bash(script, {"GPUGOV_PIP_SPEC": pinned}, tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / "python-args").read_text().splitlines() == ["-m", "pip", "install",
                                                                       installed.format(extras=extras)]
    proc = bash(script, {"GPUGOV_PIP_SPEC": "./gpugov"}, tmp_path)
    assert proc.returncode == 1 and "GPUGOV_PIP_SPEC must be" in proc.stdout


def test_no_workflow_installs_a_source_tree_it_may_not_have() -> None:
    for path in [*WORKFLOWS, REPO / "examples" / "ci" / "gitlab-ci.yml"]:
        for line in path.read_text().splitlines():
            if "pip install" in line:
                assert "GPUGOV_PIP_SPEC" in line or '"$spec"' in line, f"{path.name}: {line.strip()}"


def test_each_cluster_has_its_own_kubeconfig_secret() -> None:
    job = workflow("drift.yml")["jobs"]["drift"]
    clusters = job["strategy"]["matrix"]["include"]
    assert [c["cluster"] for c in clusters] == ["east", "west"]
    assert len({c["secret"] for c in clusters}) == len(clusters)
    assert all(c["secret"] == f"GPUGOV_KUBECONFIG_{c['cluster'].upper()}" for c in clusters)
    assert job["env"]["KUBECONFIG_DATA"] == "${{ secrets[matrix.secret] }}"


def test_an_empty_kubeconfig_secret_fails_the_job_with_a_clear_message(tmp_path) -> None:
    job = workflow("drift.yml")["jobs"]["drift"]
    assert all("if" not in step for step in job["steps"] if step.get("name") in ("Cluster credentials", "Drift"))
    script = steps(job)["Cluster credentials"]["run"]
    env = {"CLUSTER": "west", "KUBECONFIG_SECRET": "GPUGOV_KUBECONFIG_WEST"}
    proc = bash(script, {**env, "KUBECONFIG_DATA": ""}, tmp_path)
    assert proc.returncode == 1
    assert "::error title=gpugov drift::secret GPUGOV_KUBECONFIG_WEST is empty or not set" in proc.stdout
    proc = bash(script, {**env, "KUBECONFIG_DATA": "apiVersion: v1\nkind: Config\n"}, tmp_path)
    assert proc.returncode == 0 and (tmp_path / "kubeconfig").read_text() == "apiVersion: v1\nkind: Config\n"


def test_the_alert_state_is_saved_after_every_run() -> None:
    job = workflow("drift.yml")["jobs"]["drift"]
    names = [step.get("name") for step in job["steps"]]
    by_name = steps(job)
    restore, save = by_name["Restore the alert state"], by_name["Save the alert state"]
    assert restore["uses"].startswith("actions/cache/restore@") and save["uses"].startswith("actions/cache/save@")
    assert save["if"] == "always()"  # drift exits 1 or 3 exactly when the state matters most
    assert names.index("Restore the alert state") < names.index("Drift") < names.index("Save the alert state")
    assert restore["with"]["path"] == save["with"]["path"] == ".gpugov-state"
    assert restore["with"]["key"] == save["with"]["key"] and "github.run_attempt" in save["with"]["key"]
    assert job["env"]["GPUGOV_NOTIFY_STATE"].startswith("${{ github.workspace }}/.gpugov-state/")
    assert not any(step.get("uses", "").startswith("actions/cache@") for step in job["steps"])


# -- the image operations.image names --------------------------------------------------------------

DOCKERFILE = REPO / "Dockerfile"


def dockerfile_arg(name: str) -> str:
    (value,) = re.findall(rf"^ARG {name}=(.*)$", DOCKERFILE.read_text(), re.MULTILINE)
    return value


def test_the_image_installs_every_extra_the_in_cluster_commands_import() -> None:
    """Static: there is no docker here. The extras are those of every optional module the CLI
    knows (gpugov.cli.EXTRA_OF_MODULE) except Pulumi's, which nothing in the cluster runs."""
    from gpugov.cli import EXTRA_OF_MODULE

    pyproject = (REPO / "pyproject.toml").read_text()
    extras = set(dockerfile_arg("GPUGOV_EXTRAS").split(","))
    assert extras == set(EXTRA_OF_MODULE.values()) - {"deploy"}
    assert all(re.search(rf"^{extra} = \[", pyproject, re.MULTILINE) for extra in extras)
    text = DOCKERFILE.read_text()
    assert '"/src[$GPUGOV_EXTRAS]"' in text and '"gpugov[$GPUGOV_EXTRAS]${GPUGOV_PIP_SPEC#gpugov}"' in text
    assert dockerfile_arg("GPUGOV_PIP_SPEC") == "."


def test_the_image_runs_the_compiled_cronjob_and_daemonset() -> None:
    from gpugov.app.desired import desired_state
    from gpugov.sources.git import DECLARATION_DIRS

    text = DOCKERFILE.read_text()
    assert text.rstrip().endswith('ENTRYPOINT ["gpugov"]')  # the containers' args start with the command
    assert re.search(r"for folder in (.*); do cp -r \"/src/\$folder\" /config/", text).group(1).split() == sorted(
        DECLARATION_DIRS, key=["tenants", "policies", "hardware"].index)
    state = desired_state(REPO, cluster="east")
    (cron,) = [o for o in state.objects if o["kind"] == "CronJob"]
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (uid,) = re.findall(r"^USER (\d+):", text, re.MULTILINE)
    assert pod["securityContext"]["runAsUser"] == int(uid)
    (container,) = pod["containers"]
    assert container["args"][:2] == ["drift", "/config"]
    assert build_parser().parse_args(container["args"]).func is not None
    assert state.model.cluster("east").operations_image == "registry.example.com/platform/gpugov-config:main"
    ignored = (REPO / ".dockerignore").read_text().split()
    assert ".venv" in ignored and not set(ignored) & set(DECLARATION_DIRS)



def test_the_pull_request_posts_the_what_if_comment_when_a_trace_is_configured() -> None:
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "pull-request.yml").read_text(encoding="utf-8"))
    steps = workflow["jobs"]["validate-and-plan"]["steps"]
    run = next(s for s in steps if s.get("id") == "whatif")["run"]
    assert "[ -f whatif/trace.csv ]" in run and "gpugov whatif --base" in run and "--trace whatif/trace.csv" in run
    post = next(s for s in steps if s.get("name") == "Post or update the what-if comment")
    assert post["if"].startswith("steps.whatif.outputs.posted == 'true'")
    assert "--head \"$HEAD_SHA\"" in run  # the head's declarations, read from git by the trusted gpugov
    # the marker the comment is found by is the one `gpugov whatif --format markdown` writes first
    golden = (REPO / "tests" / "golden" / "whatif" / "move-8-gpus.md").read_text(encoding="utf-8")
    assert golden.splitlines()[0] in post["with"]["script"]
