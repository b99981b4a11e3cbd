"""Bad input never gives a traceback: each case ends in a finding or a clear usage error."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpugov.cli import main
from gpugov.declarations import loader
from tests.helpers.repos import write

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


TENANT = (
    "apiVersion: gpugov.io/v1alpha1\nkind: Tenant\nmetadata:\n  name: hostile\nspec:\n  namespaces: [hostile]\n"
    "  owners: {users: [h@example.com]}\n  costCenter: CC-9\n"
)
TAB_INDENT = "tab character used for indentation (YAML allows only spaces)"
TAB_AFTER_DASH = "tab character where YAML needs a space (YAML indents only with spaces)"


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        (TENANT.replace("\n  name", "\n\tname"), "4:1", TAB_INDENT),
        (TENANT.replace("  namespaces: [hostile]", "  namespaces:\n  \t- hostile"), "7:3", TAB_INDENT),
        (TENANT.replace("  namespaces: [hostile]", "  namespaces:\n    - hostile\n\t\t- other"), "8:1", TAB_INDENT),
        (TENANT.replace("  namespaces: [hostile]", "  namespaces:\n  -\t- hostile"), "7:4", TAB_AFTER_DASH),
        ("\ufeff" + TENANT.replace("\n  name", "\n\tname"), "4:1", TAB_INDENT),  # the mark does not shift columns
    ],
    ids=["mapping", "sequence", "two-tabs", "after-dash", "after-utf8-bom"],
)
def test_tab_indentation_is_named_as_a_tab(base_repo: Path, capsys, text: str, where: str, message: str) -> None:
    (base_repo / "tenants" / "hostile.yaml").write_bytes(text.encode("utf-8"))
    code, out, _ = run_validate(base_repo, capsys=capsys)
    assert code == 1
    assert f"tenants/hostile.yaml:{where}: error: {message} [GG001]" in out


def test_tabs_inside_values_and_flow_collections_still_load(base_repo: Path, capsys) -> None:
    text = TENANT.replace("  namespaces: [hostile]", '  description: "a\\tb"\n  namespaces: [hostile,\n\tspare]')
    (base_repo / "tenants" / "hostile.yaml").write_text(text, encoding="utf-8")
    code, out, _ = run_validate(base_repo, capsys=capsys)
    assert code == 0, out


@pytest.mark.parametrize(
    ("content", "encoding", "iconv"),
    [
        (TENANT.encode("utf-16"), "UTF-16LE (with a byte-order mark)", "UTF-16"),  # Python writes LE + mark
        (b"\xfe\xff" + TENANT.encode("utf-16-be"), "UTF-16BE (with a byte-order mark)", "UTF-16"),
        (TENANT.encode("utf-16-le"), "UTF-16LE (without a byte-order mark)", "UTF-16LE"),
        (TENANT.replace("hostile", "caf\u00e9").encode("utf-16-be"), "UTF-16BE (without a byte-order mark)", "UTF-16BE"),
        (TENANT.encode("utf-32"), "UTF-32LE (with a byte-order mark)", "UTF-32"),
    ],
    ids=["utf16-le-bom", "utf16-be-bom", "utf16-le", "utf16-be-non-ascii", "utf32-le-bom"],
)
def test_utf16_is_named_and_utf8_asked_for(base_repo: Path, capsys, content: bytes, encoding: str, iconv: str) -> None:
    (base_repo / "tenants" / "hostile.yaml").write_bytes(content)
    code, out, _ = run_validate(base_repo, capsys=capsys)
    assert code == 2
    assert (
        f"tenants/hostile.yaml: error: file is {encoding}: declarations must be UTF-8; convert it, "
        f"e.g. `iconv -f {iconv} -t UTF-8` [GG004]"
    ) in out
    assert "binary" not in out


def test_nul_bytes_that_are_not_utf16_are_binary(base_repo: Path, capsys) -> None:
    (base_repo / "tenants" / "hostile.yaml").write_bytes(b"a\x00b\x00\x00c\x00d")  # a NUL in both halves
    _, out, _ = run_validate(base_repo, capsys=capsys)
    assert "tenants/hostile.yaml: error: file is binary (it contains NUL bytes) [GG004]" in out


def test_utf8_with_a_byte_order_mark_loads(base_repo: Path, capsys) -> None:
    (base_repo / "tenants" / "hostile.yaml").write_bytes(b"\xef\xbb\xbf" + TENANT.encode("utf-8"))
    code, out, _ = run_validate(base_repo, capsys=capsys)
    assert code == 0, out
    docs = loader.load_tree(base_repo).documents
    hostile = next(d for d in docs if d.file == "tenants/hostile.yaml")
    assert hostile.data["metadata"]["name"] == "hostile"
    assert (hostile.locate(("kind",)).line, hostile.locate(("kind",)).col) == (2, 7)
