"""`gpugov queue`, `why` and `usage` options: bad usage is one line and exit 2, a cluster that
cannot be read is exit 3 with nothing on stdout (the living sandbox runs the rest: tests/e2e)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpugov.cli import main
from tests.helpers.repos import REPO


@pytest.fixture
def unreachable(tmp_path: Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "gone",
        "clusters": [{"name": "gone", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "u"}}]}))
    return str(path)


@pytest.mark.parametrize(("argv", "words"), [
    (["queue", str(REPO), "--cluster", "west", "--tenant", "nobody"], "no tenant nobody is declared"),
    (["why", "recsys/job", str(REPO), "--cluster", "west", "--as-group", "x"], "--as-group needs --as"),
    (["queue", str(REPO), "--cluster", "east", "--tenant", "nobody"], "no tenant nobody is declared"),
    (["why", "just-a-name", str(REPO), "--cluster", "east"], "name the job as NAMESPACE/JOB"),
    (["queue", str(REPO), "--cluster", "east", "--as-group", "vision-team"], "--as-group needs --as"),
    (["usage", str(REPO), "--cluster", "east", "--since", "1h"], "give --prometheus URL, or --no-idle"),
    (["usage", str(REPO), "--cluster", "east", "--since", "last week", "--no-idle"], "neither an ISO 8601 time"),
    (["usage", str(REPO), "--cluster", "west", "--since", "1h", "--prometheus", "http://127.0.0.1:9"],
     "give --no-idle on a Volcano cluster"),
])
def test_bad_usage_is_one_line_and_exit_2(argv: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert words in err and out == "" and err.count("\n") == 1


@pytest.mark.parametrize("argv", [
    ["queue", str(REPO), "--cluster", "east"],
    ["why", "vision/job", str(REPO), "--cluster", "east"],
    ["queue", str(REPO), "--cluster", "west"],
    ["why", "speech/job", str(REPO), "--cluster", "west"],
    ["usage", str(REPO), "--cluster", "east", "--since", "1h", "--no-idle", "--format", "json"],
])
def test_a_cluster_that_cannot_be_read_is_exit_3_and_no_report(argv: list[str], unreachable: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--kubeconfig", unreachable]) == 3
    out, err = capsys.readouterr()
    assert out == "" and "could not read" in err and "unreachable" in err


@pytest.mark.parametrize("argv", [["queue", str(REPO), "--page-size", "0"],
                                  ["usage", str(REPO), "--since", "1h", "--no-idle", "--step", "-5"]])
def test_counts_must_be_positive(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2 and "not a whole number of at least 1" in capsys.readouterr().err


def test_progress_shows_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    from gpugov.cli.queue import progress_printer

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for tty, expected in ((False, ""), (True, "\r\x1b[2Kgpugov usage: list workloads\r\x1b[2K")):
        stream = Terminal() if tty else io.StringIO()
        monkeypatch.setattr(sys, "stderr", stream)
        show, clear = progress_printer("usage")
        show("list workloads")
        clear()
        assert stream.getvalue() == expected
