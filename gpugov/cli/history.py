"""`gpugov history`: GPU allocation and activity per tenant and per pool over 24 h, 7 d and 30 d, as SVG
charts (gpugov.capacity.charts) read from the recording rules `gpugov monitoring` compiles."""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpugov.app.exit import ExitCode
from gpugov.cli.common import CommandFailed, compile_target_args, desired, fail

if TYPE_CHECKING:
    from gpugov.app.desired import DesiredState
    from gpugov.capacity.report import ClusterReport
    from gpugov.monitoring.history import History

DEFAULT_WINDOWS = "24h,7d,30d"


def read_histories(state: DesiredState, url: str, windows: str, step: int,
                   until: datetime | None = None) -> list[History]:
    """Every tenant's and pool's history over each window (comma-separated); CommandFailed on a window
    that cannot be cut, INCOMPLETE where Prometheus does not answer whole."""
    from datetime import UTC

    from gpugov.monitoring.history import HistoryError, read, span
    from gpugov.sources import CheckIncomplete
    from gpugov.sources.prometheus import query_range

    end = until or datetime.now(UTC)
    try:
        spans = [span(name.strip(), end, step) for name in windows.split(",") if name.strip()]
    except HistoryError as exc:
        raise CommandFailed(str(exc)) from None
    if not spans:
        raise CommandFailed("--windows names no window (e.g. 24h,7d,30d)")

    def ask(promql: str, start: datetime, stop: datetime, every: int) -> list[dict[str, Any]]:
        return query_range(url, promql, start, stop, every)

    try:
        return [h for s in spans for h in read(state.model, state.cluster, s, ask)]
    except CheckIncomplete as exc:
        raise CommandFailed(f"could not read the history of cluster {state.cluster}: {exc}",
                            ExitCode.INCOMPLETE) from None


def cmd_history(args: argparse.Namespace) -> ExitCode:
    from gpugov.capacity.charts import ledger_notes, svg

    state = desired(args)
    report = _report(state, args.usage) if args.usage else None
    until = _until(args.until) if args.until else None
    found = read_histories(state, args.prometheus, args.windows, args.step, until)
    out = Path(args.out)
    try:
        written = []
        for h in found:
            path = out / f"{h.kind}s" / f"{h.name}-{h.span.name}.svg"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(svg(h, ledger_notes(h, report)), encoding="utf-8")
            written.append(path)
    except OSError as exc:
        return fail(f"cannot write {out}: {exc.strerror or exc}")
    for path in written:
        print(path)
    return ExitCode.OK


def _until(text: str) -> datetime:
    from gpugov.usage.window import WindowError, parse_time

    try:
        return parse_time(text, "--until")
    except WindowError as exc:
        raise CommandFailed(str(exc)) from None


def _report(state: DesiredState, path: str) -> ClusterReport:
    """The capacity report's usage lines of the ledger at `path` (gpugov usage --format json)."""
    from gpugov.capacity import LedgerError, cluster_report, load_ledger

    try:
        ledger = load_ledger(Path(path))
    except LedgerError as exc:
        raise CommandFailed(f"--usage: {exc}") from None
    if ledger.cluster != state.cluster:
        raise CommandFailed(f"--usage: {path} is the ledger of cluster '{ledger.cluster}', not {state.cluster}")
    return cluster_report(state, None, ledger)


def register(sub: argparse._SubParsersAction) -> None:
    from gpugov.cli.queue import positive

    p = sub.add_parser(
        "history",
        help="SVG charts of GPU allocation and activity per tenant and pool over 24 h, 7 d and 30 d",
        description="From Prometheus range queries over the recording rules `gpugov monitoring` compiles: per "
        "tenant and per pool of the cluster, for each window, the mean devices held, the idle devices and the "
        "activity per held device in buckets (15 min for 24h, 2 h for 7d, 6 h for 30d), with the device-hours "
        "held and idle and the activity over the window. Time Prometheus has no measurement for is drawn as a "
        "hatched gap marked unknown, never as idle. Writes DIR/tenants/NAME-WINDOW.svg and "
        "DIR/pools/NAME-WINDOW.svg (in the language of --lang) and prints their paths. The same charts appear in "
        "`gpugov capacity --format html --prometheus URL`. Exit 0, 2 bad usage, 3 could not read Prometheus.",
    )
    compile_target_args(p)
    p.add_argument("--prometheus", metavar="URL", required=True,
                   help="Prometheus evaluating gpugov's recording rules (gpugov monitoring)")
    p.add_argument("--out", required=True, metavar="DIR", help="directory to write the SVG files into")
    p.add_argument("--windows", default=DEFAULT_WINDOWS, metavar="LIST",
                   help="comma-separated windows ending at --until (default 24h,7d,30d; others, e.g. 90m, in about "
                   "60 buckets)")
    p.add_argument("--until", metavar="TIME", help="end of the windows, ISO 8601 (default now), rounded down to a "
                   "whole step")
    p.add_argument("--step", type=positive, default=60, metavar="SECONDS",
                   help="seconds between the instants read (default 60; must divide each window's bucket)")
    p.add_argument("--usage", metavar="FILE", help="usage ledger JSON (gpugov usage --format json): its efficiency "
                   "figures (used, idle, guarantee used, utilisation) under each chart, as the capacity report shows "
                   "them")
    p.set_defaults(func=cmd_history)
