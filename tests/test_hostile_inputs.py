"""Bad input never gives a traceback: each case ends in a finding or a clear usage error."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpugov.cli import main
from gpugov.declarations import loader
from tests.conftest import write

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)


def run_validate(root: Path, *extra: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["validate", str(root), *extra])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("content", "rule", "code"),
    [
        (b"apiVersion: [unclosed\n", "GG001", 1),
        (b"\x00\x01\x02binary\xff", "GG004", 2),
        ("kind: Tenant\nname: caf\u00e9\n".encode("latin-1"), "GG004", 2),
        (BOMB.encode(), "GG004", 2),
        (("[" * 5000 + "]" * 5000).encode(), "GG004", 2),
        (("a:\n" + "".join(" " * i + "- \n" for i in range(1, 100))).encode(), "GG004", 2),
        (b"", "GG005", 0),
        (b"- just\n- a list\n", "GG003", 1),
        (b"apiVersion: gpugov.io/v1alpha1\nkind: Tenant\nmetadata: {name: x}\nspec: {namespaces: 3}\n", "GG003", 1),
        (b"apiVersion: v1\nkind: Tenant\nmetadata: {name: x}\nspec: {namespaces: [x]}\n", "GG003", 1),
        (b"a: !!python/object:os.system ls\n", "GG001", 1),
    ],
    ids=[
        "malformed",
        "binary",
        "not-utf8",
        "alias-bomb",
        "deep-nesting",
        "nesting-past-64",
        "empty",
        "not-a-mapping",
        "wrong-type",
        "wrong-apiversion",
        "python-tag",
    ],
)
def test_hostile_file(base_repo: Path, capsys: pytest.CaptureFixture[str], content: bytes, rule: str, code: int):
    (base_repo / "tenants" / "hostile.yaml").write_bytes(content)
    started = time.monotonic()
    exit_code, out, err = run_validate(base_repo, capsys=capsys)
    assert time.monotonic() - started < 10, "hostile input must be refused quickly"
    assert exit_code == code
    assert "tenants/hostile.yaml" in out and f"[{rule}]" in out
    assert "Traceback" not in out + err


def test_huge_file_is_refused_without_reading_it(base_repo: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(loader, "MAX_FILE_BYTES", 1024)
    write(base_repo, "tenants/huge.yaml", "# padding\n" * 200)
    code, out, _ = run_validate(base_repo, capsys=capsys)
    assert code == 2
    assert "tenants/huge.yaml: error: file is 2000 bytes, over the 1024-byte limit [GG004]" in out


@pytest.mark.parametrize("path", ["does/not/exist", "README.md"])
def test_missing_or_wrong_folder_is_a_usage_error(tmp_path: Path, capsys, path: str) -> None:
    (tmp_path / "README.md").write_text("hi")
    code = main(["validate", str(tmp_path / path)])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.startswith("gpugov: ") and "Traceback" not in err


def test_folder_without_declarations_is_a_usage_error(tmp_path: Path, capsys) -> None:
    assert main(["validate", str(tmp_path)]) == 2
    assert "not a gpugov repository" in capsys.readouterr().err


def test_bad_option_is_a_usage_error_from_the_real_command(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gpugov", "validate", "--format", "yaml"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2
    assert "invalid choice: 'yaml'" in proc.stderr
    assert "Traceback" not in proc.stderr
