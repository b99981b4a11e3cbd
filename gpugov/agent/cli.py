"""`gpugov agent`: print one NVML snapshot (--once) or serve /metrics, /snapshot.json and /healthz."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from gpugov.app.exit import ExitCode

if TYPE_CHECKING:  # NVML is read when the agent runs, never to build gpugov's parser
    from gpugov.agent.nvml import NvmlReader

DEFAULT_LISTEN = "0.0.0.0:9402"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "agent",
        help="node agent: read GPUs and MIG devices through NVML; serve Prometheus metrics and a JSON snapshot",
        description="Exit codes: 0 ok, 2 usage or bind error, 3 NVML unavailable (no driver, library or bindings).",
    )
    p.add_argument(
        "--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT", help=f"address to serve on (default {DEFAULT_LISTEN})"
    )
    p.add_argument("--once", action="store_true", help="print one JSON snapshot to stdout and exit")
    p.add_argument("--node", help="node name in the snapshot and labels (default: $NODE_NAME, else the host name)")
    p.add_argument(
        "--cache-seconds", type=float, default=2.0, metavar="S", help="reuse an NVML read for S seconds (default 2)"
    )
    p.set_defaults(func=cmd_agent)


def _fail(message: str, code: ExitCode) -> ExitCode:
    print(f"gpugov agent: {message}", file=sys.stderr)
    return code


def _node_name(explicit: str | None) -> str:
    # NODE_NAME is what a DaemonSet usually sets from the downward API (spec.nodeName).
    import socket  # here, not at the top: building gpugov's parser must stay cheap

    return explicit or os.environ.get("NODE_NAME") or socket.gethostname()


def cmd_agent(args: argparse.Namespace, nvml: Any | None = None) -> ExitCode:
    from gpugov.agent.nvml import NvmlReader, NvmlUnavailable

    node = _node_name(args.node)
    if not args.once:
        from gpugov.agent.server import parse_listen

        try:  # a bad address is bad usage, whatever the node's NVML says
            parse_listen(args.listen)
        except ValueError as exc:
            return _fail(str(exc), ExitCode.USAGE)
    try:
        reader = NvmlReader(nvml).open()
    except NvmlUnavailable as exc:
        return _fail(str(exc), ExitCode.INCOMPLETE)
    try:
        if args.once:
            try:
                snapshot = reader.snapshot(node)
            except NvmlUnavailable as exc:
                return _fail(str(exc), ExitCode.INCOMPLETE)
            sys.stdout.write(snapshot.to_json())
            return ExitCode.OK
        return _serve(args, reader, node)
    finally:
        reader.close()


def _serve(args: argparse.Namespace, reader: NvmlReader, node: str) -> ExitCode:
    import signal
    import threading

    from gpugov.agent.server import SnapshotCache, make_server

    try:
        import prometheus_client  # noqa: F401  # fail now, not at the first scrape
    except ImportError:
        return _fail("prometheus-client is not installed (pip install 'gpugov[agent]')", ExitCode.USAGE)
    cache = SnapshotCache(lambda: reader.snapshot(node), ttl=args.cache_seconds)
    try:
        server = make_server(args.listen, cache)
    except ValueError as exc:
        return _fail(str(exc), ExitCode.USAGE)
    except OSError as exc:
        return _fail(f"cannot listen on {args.listen}: {exc.strerror or exc}", ExitCode.USAGE)

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM from the kubelet: leave serve_forever and shut NVML down

    main_thread = threading.current_thread() is threading.main_thread()  # signal() works only there
    previous = signal.signal(signal.SIGTERM, stop) if main_thread else None
    host, port = server.server_address[:2]
    print(f"gpugov agent: node {node}: serving http://{host}:{port}/metrics, /snapshot.json, /healthz", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
        server.server_close()
    return ExitCode.OK
