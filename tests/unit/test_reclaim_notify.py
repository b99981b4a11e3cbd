"""Reclaim's notifications are titled `gpugov reclaim: <cluster>`, drift's `gpugov drift: <cluster>`
(the shared cli.cluster._notify), as a real webhook receiver reads them."""

from __future__ import annotations

import argparse
import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from gpugov.cli.cluster import _notify
from gpugov.findings import make
from gpugov.notify.cli import add_arguments
from gpugov.reclaim.rules import RECLAIM_DEACTIVATED
from tests.helpers.local_http import serving


def _args(state: Path) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["--notify", "webhook", "--notify-state", str(state)])


@pytest.mark.parametrize("command", ["reclaim", "drift"])
def test_the_title_names_the_command_and_the_cluster(command: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    bodies: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0)))))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: object) -> None:
            pass

    finding = make(RECLAIM_DEACTIVATED, "Workload alpha/job-a (tenant alpha): idle 2h", None,
                   object="Workload alpha/job-a")
    with serving(Handler) as url:
        monkeypatch.setenv("GPUGOV_WEBHOOK_URL", f"{url}/hook")
        monkeypatch.delenv("GPUGOV_WEBHOOK_SECRET", raising=False)
        extra = () if command == "drift" else (command,)  # drift is the default
        assert _notify(_args(tmp_path / "state.json"), [finding], "east", None, *extra) is None
    assert [body["title"] for body in bodies] == [f"gpugov {command}: east"]
