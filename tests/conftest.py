"""Shared test helpers: example trees and a repository overlay builder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = Path(__file__).resolve().parent / "examples"
BASE = EXAMPLES / "base"


def overlay_repo(tmp_path: Path, overlay: Path | None = None, base: Path = BASE) -> Path:
    """A copy of `base` with the files of `overlay` added or replacing base files."""
    root = tmp_path / "repo"
    shutil.copytree(base, root)
    if overlay is not None:
        for path in sorted(overlay.rglob("*")):
            if path.is_file() and path.name != "expect.txt":
                target = root / path.relative_to(overlay)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
    return root


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def base_repo(tmp_path: Path) -> Path:
    return overlay_repo(tmp_path)
