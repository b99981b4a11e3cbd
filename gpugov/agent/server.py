"""HTTP endpoints of the agent: /metrics (Prometheus), /snapshot.json and /healthz.

NVML is read on demand, at most once per `ttl` seconds: concurrent scrapes (two Prometheus replicas,
a curl) share one read instead of each walking every GPU and MIG slot.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gpugov.agent.nvml import NvmlUnavailable
from gpugov.agent.snapshot import Snapshot


class SnapshotCache:
    def __init__(
        self, produce: Callable[[], Snapshot], ttl: float = 2.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._produce = produce
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()  # also serialises NVML reads across handler threads
        self._snapshot: Snapshot | None = None
        self._at = 0.0
        self.last_error: str | None = None

    def get(self) -> Snapshot:
        with self._lock:
            now = self._clock()
            if self._snapshot is None or now - self._at >= self._ttl:
                try:
                    self._snapshot = self._produce()
                except NvmlUnavailable as exc:
                    self.last_error = str(exc)
                    self._snapshot = None
                    raise
                self._at, self.last_error = now, None
            return self._snapshot


def parse_listen(listen: str) -> tuple[str, int]:
    """Split "0.0.0.0:9402", "[::]:9402" or ":9402" into (host, port)."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--listen {listen!r}: expected HOST:PORT, e.g. 0.0.0.0:9402")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


def make_handler(cache: SnapshotCache) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "gpugov-agent"

        def do_GET(self) -> None:
            self._route(body=True)

        def do_HEAD(self) -> None:
            self._route(body=False)

        def _route(self, body: bool) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/healthz":
                ok = cache.last_error is None
                self._reply(
                    HTTPStatus.OK if ok else HTTPStatus.SERVICE_UNAVAILABLE,
                    "text/plain; charset=utf-8",
                    (b"ok\n" if ok else f"{cache.last_error}\n".encode()),
                    body,
                )
                return
            if path not in ("/metrics", "/snapshot.json"):
                self._reply(
                    HTTPStatus.NOT_FOUND,
                    "text/plain; charset=utf-8",
                    b"not found: try /metrics, /snapshot.json or /healthz\n",
                    body,
                )
                return
            try:
                snapshot = cache.get()
            except NvmlUnavailable as exc:
                self._reply(HTTPStatus.SERVICE_UNAVAILABLE, "text/plain; charset=utf-8", f"{exc}\n".encode(), body)
                return
            except Exception as exc:  # a bug or an odd driver answer: fail this scrape, keep serving
                cache.last_error = f"reading NVML failed: {type(exc).__name__}"
                self._reply(
                    HTTPStatus.INTERNAL_SERVER_ERROR,
                    "text/plain; charset=utf-8",
                    f"{cache.last_error}\n".encode(),
                    body,
                )
                return
            if path == "/metrics":
                from gpugov.agent.metrics import CONTENT_TYPE, render

                self._reply(HTTPStatus.OK, CONTENT_TYPE, render(snapshot), body)
            else:
                self._reply(HTTPStatus.OK, "application/json", snapshot.to_json().encode(), body)

        def _reply(self, status: HTTPStatus, content_type: str, payload: bytes, body: bool) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if body:
                self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            pass  # a scrape every 15s per Prometheus replica is not worth a log line

    return Handler


def make_server(listen: str, cache: SnapshotCache) -> ThreadingHTTPServer:
    """Bind now (so the caller can report a busy port); serve with .serve_forever()."""
    host, port = parse_listen(listen)
    cls = _Server6 if ":" in host else _Server
    return cls((host, port), make_handler(cache))
