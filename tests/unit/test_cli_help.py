"""Issue #23 item 12: the older commands' --help has a description and the exit codes, as the newer ones do."""

from __future__ import annotations

import pytest

from gpugov.cli import main

EXIT_CODES = {
    "validate": ["0 clean", "1 errors", "2 bad usage"],
    "render": ["0 written", "1 the declarations have errors", "2 bad usage"],
    "plan": ["0 plan computed", "1 the head is invalid", "2 bad usage"],
    "drift": ["0 no drift", "1 drift", "3 could not check"],
    "apply": ["0 applied", "1 an applied object", "2 bad usage", "refused", "3 could not apply"],
}


@pytest.mark.parametrize("command", sorted(EXIT_CODES))
def test_help_describes_the_command_and_its_exit_codes(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    usage, _, _ = text.partition("positional arguments:")
    description = usage.split("]", )[-1]
    assert len(description.split()) > 12, f"{command} --help has no description: {usage!r}"
    assert "Exit " in usage, f"{command} --help names no exit codes: {usage!r}"
    for code in EXIT_CODES[command]:
        assert code in usage, (command, code, usage)


def test_completion_offers_the_repositorys_clusters_and_tenants(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #23 item 12: --cluster and --tenant complete from the declarations (real bash, real script)."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from tests.helpers.repos import REPO

    assert main(["completion", "--names", "clusters", "--repo", str(REPO)]) == 0
    assert capsys.readouterr().out.split() == ["east", "west"]
    assert main(["completion", "--names", "tenants", "--repo", str(REPO)]) == 0
    assert "vision" in capsys.readouterr().out.split()
    assert main(["completion", "--names", "clusters", "--repo", "/nonexistent"]) == 0  # silent, never an error
    assert capsys.readouterr() == ("", "")
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash to run the completion script")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    script = ('source <(gpugov completion bash); COMP_WORDS=(gpugov apply --cluster ""); COMP_CWORD=3; '
              'COMP_LINE="gpugov apply --cluster "; COMP_POINT=${#COMP_LINE}; _shtab_gpugov gpugov "" --cluster; '
              'echo "${COMPREPLY[*]}"; COMP_WORDS=(gpugov queue --tenant vi); COMP_CWORD=3; '
              'COMP_LINE="gpugov queue --tenant vi"; COMP_POINT=${#COMP_LINE}; _shtab_gpugov gpugov vi --tenant; '
              'echo "${COMPREPLY[*]}"')
    done = subprocess.run([bash, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines() == ["east west", "vision"], done.stderr
