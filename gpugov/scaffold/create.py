"""Write a new config repository all at once, and only when it validates.

Every file is staged in a fresh folder beside the target, CODEOWNERS is generated from the staged
declarations (as `gpugov codeowners` would), the whole is validated, and only then is the folder
renamed into place: an interrupted or refused init leaves nothing half-written.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gpugov.app.pipeline import validate_repo
from gpugov.compile import codeowners
from gpugov.declarations.schema import schema_files
from gpugov.findings import Finding
from gpugov.scaffold.declarations import Options, declaration_files
from gpugov.scaffold.workflows import kubeconfig_secret, workflow_files


class ScaffoldError(Exception):
    """The repository cannot be written: a bad option, a non-empty folder, or declarations that do not
    validate (their findings attached)."""

    def __init__(self, message: str, findings: list[Finding] | None = None) -> None:
        super().__init__(message)
        self.findings = findings or []


@dataclass(frozen=True)
class Created:
    root: Path
    files: list[str]  # relative paths, sorted


def check_target(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise ScaffoldError(f"{out}: not a directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ScaffoldError(f"{out}: not empty (use --force to replace it)")


def readme(o: Options) -> str:
    return (
        "# GPU governance declarations\n\n"
        "Written by `gpugov init`. Tenants, quotas and GPU pools as code, checked and compiled by gpugov.\n\n"
        "- `policies/` clusters, guardrails and priority classes; `hardware/` GPU pools; `tenants/` tenants\n"
        "- `gpugov validate .` checks them; `gpugov render . --out out` writes the scheduler objects\n"
        f"- `gpugov guide {o.tenant} .` prints the guide for a tenant's users\n"
        "- `.github/workflows/` the pull-request gate and the hourly drift check; `.github/CODEOWNERS` is\n"
        "  generated (`gpugov codeowners .` after changing owners)\n\n"
        f"Set the repository secret `{kubeconfig_secret(o.cluster)}` (environment `gpugov-drift`) for the drift check.\n"
    )


def repository_files(o: Options) -> dict[str, str]:
    """Relative path -> text of every file but CODEOWNERS (which is generated from these)."""
    files = {
        **declaration_files(o),
        **workflow_files(o.cluster, o.pip_spec),
        **{f"schemas/{name}": text for name, text in schema_files().items()},
        "README.md": readme(o),
    }
    return dict(sorted(files.items()))


def create(out: Path, options: Options, force: bool = False) -> Created:
    """Write the repository to `out` (empty, or replaced with `force`); ScaffoldError when it cannot."""
    problems = options.problems()
    if problems:
        raise ScaffoldError("; ".join(problems))
    out = out.absolute()
    check_target(out, force)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.init-", dir=out.parent))
    try:
        for relative, text in repository_files(options).items():
            _write(staging / relative, text)
        validation = validate_repo(staging)
        if validation.model is not None:
            _write(staging / codeowners.PATH, codeowners.generate(validation.model))
            validation = validate_repo(staging)
        if validation.errors or validation.model is None or validation.findings:
            raise ScaffoldError("the options give declarations that do not validate; nothing was written",
                                validation.findings)
        files = sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file())
        os.chmod(staging, 0o755)  # mkdtemp made it 0700
        _commit(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Created(out, files)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _commit(staging: Path, out: Path) -> None:
    """Put the staged folder at `out`; a previous `out` is removed only once the new one is in place."""
    if not out.exists():
        os.rename(staging, out)
        return
    retired = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    os.rename(out, retired / "tree")
    os.rename(staging, out)
    shutil.rmtree(retired, ignore_errors=True)


def add_ci(root: Path, cluster: str, pip_spec: str) -> list[str]:
    """Add the workflows, and CODEOWNERS when the declarations validate and name a platform team, to a
    repository written by `gpugov import`; files already there are kept. The relative paths added."""
    added = []
    for relative, text in workflow_files(cluster, pip_spec).items():
        if not (root / relative).exists():
            _write(root / relative, text)
            added.append(relative)
    validation = validate_repo(root)
    owners = root / codeowners.PATH
    if validation.model is not None and not validation.errors and validation.model.limits.platform_team \
            and not owners.exists():
        _write(owners, codeowners.generate(validation.model))
        added.append(codeowners.PATH.as_posix())
    return added
