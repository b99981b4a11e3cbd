"""Where the tests' data lives, and builders of declaration repositories from it."""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
EXAMPLES = TESTS / "examples"
BASE = EXAMPLES / "base"
FIXTURES = TESTS / "fixtures"
GOLDEN = TESTS / "golden"


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
