"""The review gate is data to a pull request, never code (issue #22).

A real git repository holds the example org and a copy of gpugov's source, as this repository does.
The pull request's head makes a risky change and edits gpugov/plan/ so that gpugov, run from the
head, reports no risks. Run from the head, it does (the attack is real); run the way the workflow
runs it (the base revision checked out, the trusted gpugov, the head fetched as git objects), the
verdict stands, and the change to gpugov's code is a risk of its own. The workflows are read too: no
job that holds cluster credentials runs anything of an unapproved head.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers.repos import BASE, REPO
from tests.unit.test_plan import edit, git

WORKFLOWS = REPO / ".github" / "workflows"
PULL_REQUEST = WORKFLOWS / "pull-request.yml"
TRUSTED_BIN = Path(sys.executable).parent  # the gpugov under test: the base's, installed
LIE = """

_make_plan_honestly = make_plan


def make_plan(*args, **kwargs):  # the pull request's edit: every plan is risk-free
    plan = _make_plan_honestly(*args, **kwargs)
    plan.risks = []
    return plan
"""


def risky_change(repo: Path) -> None:
    edit(repo, "tenants/alpha.yaml", "namespaces: [alpha]", "namespaces: [alpha, argocd]")
    edit(repo, "tenants/alpha.yaml", "borrowingLimit: 4, ", "")  # unbounded borrowing


def origin(tmp_path: Path, lie: str = "gpugov/plan/diff.py") -> tuple[Path, str, str]:
    """A repository with the org and gpugov's source on main, and a pull request's head that makes
    a risky change and edits `lie` (a file of gpugov) so that gpugov reports no risk."""
    repo = tmp_path / "origin"
    shutil.copytree(BASE, repo)
    shutil.copytree(REPO / "gpugov", repo / "gpugov", ignore=shutil.ignore_patterns("__pycache__"))
    from gpugov.cli import main

    assert main(["codeowners", str(repo)]) == 0
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    base = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "-b", "pr")
    risky_change(repo)
    with (repo / lie).open("a") as f:
        f.write(LIE)
    git(repo, "commit", "-qam", "raise my limits; tidy the plan")
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "update-ref", "refs/pull/1/head", head)
    git(repo, "checkout", "-q", "main")
    return repo, base, head


def plan_with_head_code(tmp_path: Path, repo: Path, base: str, head: str) -> dict:
    """What the old workflow did: install (here: import) the pull request's own gpugov and ask it."""
    tree = tmp_path / "head-tree"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(repo), "archive", head], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    where = subprocess.run([sys.executable, "-c", "import gpugov; print(gpugov.__file__)"], cwd=tree, env=env,
                           capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(tree)), where  # it really is the head's code that runs
    proc = subprocess.run([sys.executable, "-m", "gpugov", "plan", str(repo), "--base", base, "--head", head,
                           "--format", "json"], cwd=tree, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def steps(job: str) -> dict[str, dict]:
    flow = yaml.safe_load(PULL_REQUEST.read_text())
    return {s.get("name", s.get("uses", "")): s for s in flow["jobs"][job]["steps"]}


def run_step(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A step's script as Actions runs it (bash -e), with the trusted gpugov on PATH."""
    full = {"PATH": f"{TRUSTED_BIN}:/usr/bin:/bin", "HOME": str(cwd), **env}
    return subprocess.run(["bash", "-e", "-c", script], cwd=cwd, env=full, capture_output=True, text=True,
                          check=False)


def checkout_base(tmp_path: Path, repo: Path, base: str) -> Path:
    """actions/checkout with ref: the base sha, fetch-depth 0."""
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", "--no-checkout", str(repo), str(work))
    git(work, "checkout", "-q", "--detach", base)
    return work


@pytest.mark.parametrize("lie", ["gpugov/plan/diff.py", "gpugov/plan/__init__.py"])
def test_a_pull_request_that_edits_gpugov_cannot_change_the_verdict(tmp_path: Path, lie: str) -> None:
    repo, base, head = origin(tmp_path, lie)
    lied = plan_with_head_code(tmp_path, repo, base, head)
    assert lied["risks"] == [], "the head's own gpugov reports no risk: the attack works against head code"

    work = checkout_base(tmp_path, repo, base)
    env = {"BASE_SHA": base, "HEAD_SHA": head, "GITHUB_OUTPUT": str(tmp_path / "output"), "RUNNER_TEMP": str(tmp_path)}
    gate = steps("validate-and-plan")
    for name in ("Fetch the head as data", "CODEOWNERS of the head is current", "Plan",
                 "Risks the platform team must approve"):
        proc = run_step(gate[name]["run"], work, env)
        assert proc.returncode == 0, f"{name}: {proc.stdout}{proc.stderr}"
    assert (tmp_path / "output").read_text().splitlines() == ["risky=true"]
    verdict = (work / "risks.txt").read_text()
    assert "RISK namespace-claimed (GP012): Tenant alpha: spec.namespaces adds argocd" in verdict
    assert "RISK borrowing-limit-raised (GP015)" in verdict
    assert f"RISK change-outside-declarations (GP011): 1 file(s) outside the declaration folders change ({lie})" \
        in verdict
    assert "**Risks (" in (work / "plan.md").read_text()
    # the work tree is the base's, untouched: nothing of the head was checked out
    assert git(work, "rev-parse", "HEAD").strip() == base
    assert git(work, "status", "--porcelain", "--untracked-files=no").strip() == ""
    assert LIE not in (work / lie).read_text()


def test_a_change_to_code_alone_is_a_risk(tmp_path: Path, capsys) -> None:
    """Even without a declaration change: schemas, workflows, CODEOWNERS and code need the platform team."""
    from gpugov.cli import main

    repo, base, _ = origin(tmp_path)
    capsys.readouterr()
    git(repo, "checkout", "-q", "-b", "code-only", base)
    for rel, text in ((".github/CODEOWNERS", "* @me\n"), ("schemas/tenant.json", "{}\n"), ("whatif/trace.csv", "x\n")):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "loosen")
    code = main(["plan", str(repo), "--base", base, "--head", "code-only", "--format", "json", "--fail-on", "risk"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    assert [r["rule"] for r in data["risks"]] == ["GP011"]
    assert "(.github/CODEOWNERS, schemas/tenant.json, whatif/trace.csv)" in data["risks"][0]["message"]
    main(["plan", str(repo), "--base", base, "--head", "code-only"])  # the comment shows it too
    comment = capsys.readouterr().out
    assert "**Risks (1)**" in comment and "change-outside-declarations" in comment and "No change" not in comment
    # the working tree as head: untracked files count too
    (repo / "scripts").mkdir()
    (repo / "scripts" / "x.sh").write_text("echo\n")
    main(["plan", str(repo), "--base", "code-only", "--format", "json"])
    (risk,) = json.loads(capsys.readouterr().out)["risks"]
    assert "(scripts/x.sh)" in risk["message"]


def test_the_head_codeowners_is_checked_from_git(tmp_path: Path, capsys) -> None:
    from gpugov.cli import main

    repo, _, head = origin(tmp_path)
    capsys.readouterr()
    assert main(["codeowners", "--check", "--rev", head, str(repo)]) == 0
    assert "CODEOWNERS is up to date at" in capsys.readouterr().out
    git(repo, "checkout", "-q", "pr")
    edit(repo, "tenants/alpha.yaml", "owners: {users: [a@example.com]}", "owners: {users: [a@example.com, me@x.org]}")
    git(repo, "commit", "-qam", "owners, CODEOWNERS not regenerated")
    git(repo, "checkout", "-q", "main")
    assert main(["codeowners", "--check", "--rev", "pr", str(repo)]) == 1
    assert "CODEOWNERS is stale at pr" in capsys.readouterr().out
    assert git(repo, "status", "--porcelain").strip() == "", "read from git: the work tree is untouched"
    assert main(["codeowners", "--rev", "pr", str(repo)]) == 2  # --rev only checks


# -- the workflows: who runs what, with which credentials ---------------------------------------------

def workflows() -> dict[str, dict]:
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted(WORKFLOWS.glob("*.yml"))}


def triggers(flow: dict) -> set[str]:
    on = flow.get("on", flow.get(True))  # YAML 1.1 reads a bare `on` as true
    return set(on) if isinstance(on, dict) else {on} if isinstance(on, str) else set(on)


def test_no_workflow_runs_on_pull_request_target() -> None:
    for name, flow in workflows().items():
        assert "pull_request_target" not in triggers(flow), name
        assert "pull_request_target" not in (WORKFLOWS / name).read_text().split("#")[0]


def test_every_pull_request_job_checks_out_the_base_never_the_head() -> None:
    flow = workflows()["pull-request.yml"]
    assert triggers(flow) == {"pull_request"}
    for job_name, job in flow["jobs"].items():
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["ref"] == "${{ github.event.pull_request.base.sha }}", job_name
            run = step.get("run", "")
            # the head is only ever read as git objects: fetched, listed, archived (declaration folders)
            for line in run.splitlines():
                if "HEAD_SHA" in line and "echo" not in line:
                    assert any(cmd in line for cmd in ("git fetch", "git ls-tree", "git archive", "--head",
                                                       "--rev")), f"{job_name}: {line.strip()}"
            assert "checkout" not in run and "pip install ." not in run, job_name


SECRET_ENVIRONMENTS = {"gpugov-cluster-preview", "gpugov-drift"}


def test_no_job_with_cluster_credentials_runs_before_an_approval_or_off_the_default_branch() -> None:
    found = 0
    for name, flow in workflows().items():
        for job_name, job in flow["jobs"].items():
            text = json.dumps(job)
            if "secrets." not in text.replace("secrets.GITHUB_TOKEN", ""):
                continue
            found += 1
            assert job.get("environment") in SECRET_ENVIRONMENTS, f"{name} {job_name}: secrets outside an environment"
            if "pull_request" in triggers(flow):
                # the environment's required reviewers are the approval; its program is the base's
                assert job["environment"] == "gpugov-cluster-preview"
                assert job["if"] == "vars.GPUGOV_PULUMI_PREVIEW == 'true'"
                assert job["permissions"] == {"contents": "read"}, "no write token beside the credentials"
            else:
                assert triggers(flow) <= {"schedule", "workflow_dispatch"}, name
    assert found == 2  # the preview and the drift check


def test_the_approval_is_an_environment_with_required_reviewers_and_the_gate_holds_no_secret() -> None:
    jobs = workflows()["pull-request.yml"]["jobs"]
    assert jobs["platform-approval"]["environment"] == "gpugov-platform-approval"
    assert jobs["platform-approval"]["needs"] == "validate-and-plan"
    assert "secrets." not in json.dumps(jobs["validate-and-plan"])
    names = {job.get("name") for job in jobs.values()}
    assert {"gpugov gate", "platform approval"} <= names  # the required status checks the README names
    readme = (REPO / "README.md").read_text()
    assert "`gpugov gate`" in readme and "`platform approval`" in readme


def _head_with(tmp_path: Path, symlink: bool) -> tuple[Path, str, str]:
    repo, base, _ = origin(tmp_path)
    git(repo, "checkout", "-q", "-b", "decl", base)
    risky_change(repo)
    if symlink:
        (repo / "tenants" / "secret.yaml").symlink_to("/etc/hostname")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "decl")
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "main")
    return repo, base, head


def test_the_preview_puts_the_heads_declarations_over_the_trusted_program(tmp_path: Path) -> None:
    repo, base, head = _head_with(tmp_path, symlink=False)
    (repo / "gpugov" / "plan" / "diff.py").read_text()
    work = checkout_base(tmp_path, repo, base)
    preview = steps("pulumi-preview")
    env = {"HEAD_SHA": head}
    for name in ("Fetch the head as data", "The head's declarations over the trusted program"):
        proc = run_step(preview[name]["run"], work, env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "argocd" in (work / "tenants" / "alpha.yaml").read_text()  # the head's declarations
    assert git(work, "rev-parse", "HEAD").strip() == base  # the base's program and gpugov
    assert git(work, "status", "--porcelain", "--", "gpugov").strip() == ""


def test_the_preview_refuses_a_symlink_among_the_heads_declarations(tmp_path: Path) -> None:
    repo, base, head = _head_with(tmp_path, symlink=True)
    work = checkout_base(tmp_path, repo, base)
    preview = steps("pulumi-preview")
    assert run_step(preview["Fetch the head as data"]["run"], work, {"HEAD_SHA": head}).returncode == 0
    proc = run_step(preview["The head's declarations over the trusted program"]["run"], work, {"HEAD_SHA": head})
    assert proc.returncode == 1 and "hold a symlink or a submodule: no preview" in proc.stdout
    assert "argocd" not in (work / "tenants" / "alpha.yaml").read_text()


def test_the_gitlab_gate_installs_the_target_branch_and_plans_the_source_commit_as_data(tmp_path: Path) -> None:
    """examples/ci/gitlab-ci.yml's job, run as GitLab runs it: the merge request's commit is checked
    out, yet pip installs in a worktree of the target branch, and the verdict holds."""
    repo, base, head = origin(tmp_path)
    work = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(repo), str(work))
    git(work, "checkout", "-q", "--detach", head)  # GitLab checks out the merge request's commit
    job = yaml.safe_load((REPO / "examples" / "ci" / "gitlab-ci.yml").read_text())["gpugov-gate"]
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "python").write_text('#!/bin/sh\nprintf "%s|%s\\n" "$PWD" "$*" >> "$CI_PROJECT_DIR/../pip-calls"\n')
    (fake / "python").chmod(0o755)
    (fake / "gpugov").symlink_to(TRUSTED_BIN / "gpugov")
    lines = [line for line in job["before_script"] if not line.startswith("apt-get")] + job["script"]
    env = {"CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main", "CI_COMMIT_SHA": head, "CI_PROJECT_DIR": str(work),
           "GPUGOV_PIP_SPEC": job["variables"]["GPUGOV_PIP_SPEC"], "BASE_TREE": str(tmp_path / "gpugov-base"),
           "PATH": f"{fake}:/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run(["bash", "-e", "-c", "\n".join(lines)], cwd=work, env=env, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the last line: --fail-on risk
    assert "RISK namespace-claimed (GP012)" in proc.stdout and "(gpugov/plan/diff.py)" in proc.stdout
    (install,) = (tmp_path / "pip-calls").read_text().splitlines()
    assert install == f"{tmp_path / 'gpugov-base'}|-m pip install -q ."  # "." is the target branch's tree
    assert git(tmp_path / "gpugov-base", "rev-parse", "HEAD").strip() == base
    assert LIE not in (tmp_path / "gpugov-base" / "gpugov" / "plan" / "diff.py").read_text()


def test_a_change_above_a_nested_gpugov_folder_is_outside_the_declarations(tmp_path: Path, capsys) -> None:
    """A gpugov folder inside a bigger repository: a change above it (the top-level workflows) counts too."""
    from gpugov.cli import main

    top = tmp_path / "top"
    shutil.copytree(BASE, top / "gpu")
    git(top, "init", "-q", "-b", "main")
    git(top, "add", "-A")
    git(top, "commit", "-qm", "base")
    (top / ".github" / "workflows").mkdir(parents=True)
    (top / ".github" / "workflows" / "pr.yml").write_text("on: pull_request\n")
    edit(top, "gpu/tenants/alpha.yaml", "costCenter: CC-1", "costCenter: CC-1\n  description: d")  # neutral
    git(top, "add", "-A")
    git(top, "commit", "-qm", "change")
    assert main(["plan", str(top / "gpu"), "--base", "HEAD~1", "--head", "HEAD", "--format", "json"]) == 0
    (risk,) = json.loads(capsys.readouterr().out)["risks"]
    assert risk["rule"] == "GP011" and "(:/.github/workflows/pr.yml)" in risk["message"]
