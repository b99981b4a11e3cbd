"""Fixtures every test may use; shared functions live in tests/helpers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.repos import overlay_repo


@pytest.fixture
def base_repo(tmp_path: Path) -> Path:
    return overlay_repo(tmp_path)
