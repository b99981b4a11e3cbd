"""Golden files: what a test renders must equal what a reviewer accepted under tests/golden.

GPUGOV_UPDATE_GOLDEN=1 rewrites them (after a reviewed change); the diff is then in `git diff`.
"""

from __future__ import annotations

import os
from pathlib import Path

UPDATING = os.environ.get("GPUGOV_UPDATE_GOLDEN") == "1"


def assert_golden_file(path: Path, text: str) -> None:
    if UPDATING:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def assert_golden_tree(folder: Path, files: dict[str, str], pattern: str = "*.yaml") -> None:
    """`files` (relative path -> text) must be exactly the files of `folder` matching `pattern`."""
    if UPDATING:
        for stale in folder.rglob(pattern):
            if stale.relative_to(folder).as_posix() not in files:
                stale.unlink()
        for rel, text in files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text, encoding="utf-8")
    expected = {p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8") for p in folder.rglob(pattern)}
    assert files == expected
