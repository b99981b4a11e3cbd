"""Writing the imported repository: deterministic YAML with schema modelines, all or nothing.

Files are written to a fresh folder next to the target and renamed into place only once all
of them are there, so an interrupted import leaves no half-written repository.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import yaml

from gpugov.adopt.inventory import Obj
from gpugov.declarations.schema import schema_files


class OutputError(Exception):
    """The output folder cannot be written (not empty without --force, not a folder)."""


class _Dumper(yaml.SafeDumper):
    """Writes a repeated list out again instead of as a YAML alias (people read these files)."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def modeline(path: str, kind: str) -> str:
    depth = path.count("/")
    return f"# yaml-language-server: $schema={'../' * depth}schemas/{kind.lower()}.json\n"


def render(path: str, documents: list[Obj]) -> str:
    body = yaml.dump_all(documents, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False, width=120)
    return modeline(path, documents[0]["kind"]) + body


def render_all(files: dict[str, list[Obj]]) -> dict[str, str]:
    """Relative path -> text of every file of the repository, the editors' schemas included."""
    texts = {path: render(path, documents) for path, documents in files.items()}
    texts.update({f"schemas/{name}": text for name, text in schema_files().items()})
    return dict(sorted(texts.items()))


def check_target(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise OutputError(f"{out}: not a directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise OutputError(f"{out}: not empty (use --force to replace it)")


def stage(texts: dict[str, str], out: Path) -> Path:
    """Write every file into a fresh folder beside `out`; the caller renames or removes it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.import-", dir=out.parent))
    for relative, text in texts.items():
        target = staging / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return staging


def commit(staging: Path, out: Path) -> None:
    """Put the staged folder at `out` (a previous `out` is removed only after staging succeeded)."""
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        out.rename(old)
        staging.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        staging.rename(out)


def discard(staging: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)
