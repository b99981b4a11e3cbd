"""Checks on the repository around the declarations (they need the work tree, not just the model)."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from pathlib import Path

from gpugov.compile import codeowners
from gpugov.declarations.loader import DECLARATION_DIRS
from gpugov.declarations.model import Decl, Model
from gpugov.findings import Finding, Level, Location, make, rule
from gpugov.i18n import Text
from gpugov.policy.checks import check

CODEOWNERS_STALE = rule(
    "GG090",
    "codeowners-stale",
    Level.WARNING,
    ".github/CODEOWNERS does not match the declarations' owners.",
    "Run `gpugov codeowners` and commit the result.",
)

FOLDER_NOT_READ = rule(
    "GG091",
    "folder-not-read",
    Level.WARNING,
    "A top-level folder that looks like a declaration folder (e.g. tenant/ for tenants/) holds YAML files that "
    "gpugov never reads.",
    "Move the files into hardware/, policies/ or tenants/.",
)
WRONG_FOLDER = rule(
    "GG092",
    "declaration-in-wrong-folder",
    Level.WARNING,
    "A declaration sits in another kind's folder (a Tenant in hardware/, say), where reviewers and CODEOWNERS do "
    "not expect it.",
    "Move it: GPUPool to hardware/; Tenant and Department to tenants/; the policy kinds to policies/.",
)


def check_repository(root: Path, model: Model) -> list[Finding]:
    findings = list(_unread_folders(root))
    if codeowners.is_stale(root, model):
        findings.append(make(CODEOWNERS_STALE,
                             Text("CODEOWNERS is out of date with the tenants' owners and the platform team"),
                             Location(codeowners.PATH.as_posix(), 1, 1)))
    return findings


def _unread_folders(root: Path) -> Iterator[Finding]:
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if folder.name in DECLARATION_DIRS:
            continue
        close = difflib.get_close_matches(folder.name.lower(), DECLARATION_DIRS, n=1, cutoff=0.75)
        yaml_files = sorted(f for f in folder.rglob("*") if f.suffix in (".yaml", ".yml") and f.is_file())
        if close and yaml_files:
            yield make(FOLDER_NOT_READ, Text("{folder}/ holds {count} YAML file(s) that gpugov does not read: did you "
                                             "mean {close}/?", folder=folder.name, count=len(yaml_files), close=close[0]),
                       Location(yaml_files[0].relative_to(root).as_posix(), 1, 1))


def _folder_of(decl: Decl) -> str:
    return decl.origin.split("/", 1)[0]


@check
def check_declaration_folders(model: Model) -> Iterator[Finding]:
    expected: list[tuple[str, list[Decl]]] = [
        ("hardware", [*model.pools.values(), *model.accelerator_models.values()]),
        ("tenants", [*model.tenants.values(), *model.departments.values()]),
        ("policies", [*model.priority_classes.values(), *model.clusters.values(), *model.fleets.values(),
                      *(d for d in (model.scheduling, model.guardrails) if d is not None)]),
    ]
    for folder, decls in expected:
        for decl in decls:
            if decl.origin and _folder_of(decl) != folder:
                kind = decl.kind
                yield make(WRONG_FOLDER, Text("{kind} '{name}' is declared in {found}/, not {folder}/", kind=kind,
                                              name=decl.name, found=_folder_of(decl), folder=folder),
                           decl.name_at())
