"""A fake Kubernetes API endpoint: a real HTTP server on 127.0.0.1 that answers as an empty API
server does (discovery, empty lists of the asked kind, the API's own NotFound Status), unless a
test makes it answer otherwise: a 404 page, `{}`, an HTML login page, a list of another kind.

It holds no objects: tests that need a cluster's behaviour use the real API server (tests/e2e).
"""

from __future__ import annotations

import json
import re
import socket
import struct
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlsplit

from gpugov.kube.kinds import KINDS, WORKLOAD, Kind
from tests.helpers.local_http import serving


@dataclass(frozen=True)
class Reply:
    status: int
    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()  # more headers (Retry-After)
    stall: float = 0.0  # seconds to wait, sending nothing, before answering (or resetting)
    reset: bool = False  # reset the connection (TCP RST) instead of answering

    @classmethod
    def of(cls, status: int, data: object, headers: tuple[tuple[str, str], ...] = ()) -> Reply:
        return cls(status, "application/json", json.dumps(data).encode(), headers)


RESET = Reply(0, "", b"", reset=True)


def stalled(seconds: float, then: Reply | None = None) -> Reply:
    """No byte for `seconds`, then `then` (a reset when None): a stalled connection."""
    return Reply(then.status, then.content_type, then.body, then.headers, stall=seconds) if then else \
        Reply(0, "", b"", stall=seconds, reset=True)


NOT_FOUND_PAGE = Reply(404, "text/plain; charset=utf-8", b"404 page not found\n")
EMPTY_OBJECT = Reply(200, "application/json", b"{}")
HTML_PAGE = Reply(200, "text/html; charset=utf-8", b"<!doctype html><html><body><h1>Sign in</h1></body></html>")
KUBE_SYSTEM_UID = "00000000-0000-4000-8000-00000000fa6e"  # the fake cluster's identity (gpugov.cluster.identity)
POD_LIST = Reply.of(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": []})


def discovery(kinds: list[Kind]) -> Reply:
    groups: dict[str, set[str]] = {}
    for kind in kinds:
        if kind.group:
            groups.setdefault(kind.group, set()).add(kind.api_version)
    return Reply.of(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": g, "versions": [{"groupVersion": v, "version": v.rpartition("/")[2]} for v in sorted(vs)]}
        for g, vs in sorted(groups.items())]})


def empty_list(kind: Kind) -> Reply:
    return Reply.of(200, {"kind": f"{kind.kind}List", "apiVersion": kind.api_version,
                          "metadata": {"resourceVersion": "1"}, "items": []})


def not_found(kind: Kind, name: str) -> Reply:
    return Reply.of(404, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                          "message": f'{kind.plural} "{name}" not found', "reason": "NotFound",
                          "details": {"name": name, "group": kind.group, "kind": kind.plural}, "code": 404})


def route(path: str) -> tuple[Kind, str] | None:
    """The kind a path names and the object's name ("" for the collection)."""
    for kind in (*KINDS.values(), WORKLOAD):  # and Kueue's Workloads, which drift reads
        prefix = "/api/" if not kind.group else "/apis/"
        base = re.escape(f"{prefix}{kind.api_version}")
        if path == kind.collection_path():
            return kind, ""
        scoped = f"{base}/namespaces/[^/]+/{kind.plural}" if kind.namespaced else f"{base}/{kind.plural}"
        match = re.fullmatch(f"{scoped}/([^/]+)", path)
        if match:
            return kind, match.group(1)
    return None


Answer = Callable[[str, str], Reply | None]  # (method, path) -> a reply that replaces the empty API's


class FakeKube:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        self.bodies: list[bytes] = []  # each request's body, in the order of `requests`
        self.answer: Answer = lambda method, path: None
        self.served = [*KINDS.values(), WORKLOAD]  # the kinds discovery lists (drop some: "CRD not installed")
        self.url = ""

    def reply(self, method: str, path: str) -> Reply:
        override = self.answer(method, path)
        if override is not None:
            return override
        if method == "GET" and path == "/apis":
            return discovery(self.served)
        routed = route(path)
        if routed is None or routed[0] not in self.served:
            return NOT_FOUND_PAGE  # what the apiserver sends for a path it does not serve
        kind, name = routed
        if method == "GET" and not name:
            return empty_list(kind)
        if method == "GET" and (kind.kind, name) == ("Namespace", "kube-system"):  # every API server has it
            return Reply.of(200, {"kind": "Namespace", "apiVersion": "v1",
                                  "metadata": {"name": name, "uid": KUBE_SYSTEM_UID}})
        return not_found(kind, name or "?")

    def kubeconfig(self, folder: Path) -> Path:
        path = folder / "kubeconfig"
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "fake-token"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        }))
        return path

    @property
    def writes(self) -> list[tuple[str, str]]:
        return [(m, p) for m, p in self.requests if m != "GET"]


@contextmanager
def fake_kube() -> Iterator[FakeKube]:
    fake = FakeKube()

    class Handler(BaseHTTPRequestHandler):
        def handle_any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            path = urlsplit(self.path).path
            fake.requests.append((self.command, path))
            fake.bodies.append(body)
            reply = fake.reply(self.command, path)
            if reply.stall:
                time.sleep(reply.stall)
            if reply.reset:  # SO_LINGER 0: close() sends RST, as a proxy or a crashed server does
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True
                return
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            for name, value in reply.headers:
                self.send_header(name, value)
            self.end_headers()
            try:
                self.wfile.write(reply.body)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up on a stalled answer
                self.close_connection = True

        do_GET = do_PATCH = do_POST = do_PUT = do_DELETE = handle_any

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving(Handler) as url:
        fake.url = url
        yield fake
