"""`gpugov usage`: the accelerator usage and cost ledger of a Kueue or Volcano cluster over a window.

Read-only: every Workload (cluster-wide, paginated) and, for idle hours, DCGM utilisation from
Prometheus (range queries in chunks). A read that is not whole, or an earlier admission that
cannot be placed in a pool, exits 3: a partial ledger is never presented as whole.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpugov.app.exit import ExitCode
from gpugov.cli.common import CommandFailed, compile_target_args, desired, fail, kubeconfig_args, lazy_choices
from gpugov.cli.queue import positive, progress_printer

if TYPE_CHECKING:
    from datetime import datetime
    from decimal import Decimal

    from gpugov.app.desired import DesiredState
    from gpugov.usage.window import Window


def _write(path: str | None, text: str) -> None:
    if path is None or path == "-":
        sys.stdout.write(text)
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CommandFailed(f"cannot write {path}: {exc.strerror or exc}") from None


def cmd_usage(args: argparse.Namespace) -> ExitCode:
    from dataclasses import replace
    from datetime import UTC, datetime, timedelta

    from kubernetes import config as kube_config

    from gpugov.app.pipeline import gc_paused
    from gpugov.cli.cluster import api_client
    from gpugov.cluster.queues import read_workloads
    from gpugov.compile import Backend
    from gpugov.queueing.workload import WorkloadError, from_object
    from gpugov.sources import CheckIncomplete
    from gpugov.sources.prometheus import utilisation_series
    from gpugov.usage import chart, formats
    from gpugov.usage.attribution import attribution
    from gpugov.usage.budget import UnplacedAdmission, budget_holders, budget_statuses, period_rows
    from gpugov.usage.idle import idle
    from gpugov.usage.ledger import ledger
    from gpugov.usage.reclaimed import reclaimed
    from gpugov.usage.segments import segments
    from gpugov.usage.window import WindowError, parse_window

    if not args.prometheus and not args.no_idle:
        return fail("idle hours need DCGM utilisation: give --prometheus URL, or --no-idle to leave them at 0")
    now = datetime.now(UTC)
    try:
        window = parse_window(args.since, args.until, now)
    except WindowError as exc:
        return fail(str(exc))
    state = desired(args)
    if state.backend is Backend.VOLCANO:
        return _volcano_usage(args, state, window, now)
    if state.backend is not Backend.KUEUE:
        return fail(f"usage reads Kueue's Workloads; cluster {state.cluster} is scheduled by {state.backend}")
    model = state.model
    rules = attribution(model, state.cluster, state.objects)
    pools = rules.pools

    # 100,000 Workload records and the segments made of them, none cyclic: the collector's scans of
    # them cost more than the reading (as in `gpugov queue`).
    with gc_paused():
        show, clear = progress_printer("usage")
        try:
            workloads, marks = [], []  # only the annotations of the raw objects are kept (reclaim's)
            for raw in read_workloads(api_client(args), page_size=args.page_size, on_progress=show):
                workloads.append(from_object(raw))
                marks.append(raw["metadata"].get("annotations") or {})
            taken = reclaimed(zip(workloads, marks, strict=True), window, rules.tenant_of)
            found, unplaced = segments(workloads, window, now, rules.tenant_of, rules.offers)
            if unplaced:
                first = unplaced[0]
                raise CheckIncomplete(f"{len(unplaced)} earlier admission(s) cannot be placed in a pool, e.g. "
                                      f"{first.workload} ({first.seconds} s): {first.why}")
            idle_seconds: dict[tuple[str, str, str], Decimal] = {}
            notes: list[str] = list(taken.notes)
            if args.prometheus:
                series = utilisation_series(args.prometheus, window.since, window.until, args.step, on_progress=show)
                measured = idle(workloads, found, series, timedelta(seconds=args.step), model.limits.idle_below_percent,
                                window.until)
                idle_seconds = measured.seconds
                if measured.pods_without_samples:
                    notes.append(f"{measured.pods_without_samples} pod(s) of admitted workloads have no DCGM samples: "
                                 "their time is not counted idle")
            else:
                notes.append("idle hours not measured (--no-idle): idle_hours are 0")
        except (CheckIncomplete, WorkloadError, kube_config.ConfigException, OSError) as exc:
            clear()
            return fail(f"could not read the usage of cluster {state.cluster}: {' '.join(str(exc).split())}",
                        ExitCode.INCOMPLETE)
        clear()
        book = ledger(model, state.cluster, window, found, idle_seconds, notes, taken.rows)
        if budget_holders(model):  # spent / budget of the current period, whatever the window
            try:
                rows = period_rows(model, state.cluster, workloads, rules, now)
            except UnplacedAdmission as exc:
                return fail(f"could not read the budgets of cluster {state.cluster}: {exc}", ExitCode.INCOMPLETE)
            book = replace(book, budgets=tuple(s.line() for s in budget_statuses(model, rows, now)))
        _write(args.out, formats.RENDER[args.format](book))
        if args.chart:
            _write(args.chart, chart.svg(found, window, pools, state.cluster))
        for note in book.notes:
            print(f"gpugov: note: {note}", file=sys.stderr)
        return ExitCode.OK


def _volcano_usage(args: argparse.Namespace, state: DesiredState, window: Window, now: datetime) -> ExitCode:
    """The ledger of a Volcano cluster, from the pods Volcano bound (gpugov.usage.volcano)."""
    from dataclasses import replace

    from kubernetes import config as kube_config

    from gpugov.cli.cluster import api_client
    from gpugov.cluster.volcano_budget import read_pods_and_nodes
    from gpugov.sources import CheckIncomplete
    from gpugov.usage import chart, formats
    from gpugov.usage.budget import budget_holders, budget_statuses, volcano_period_rows
    from gpugov.usage.ledger import ledger
    from gpugov.usage.volcano import NOTE, pod_segments

    if args.prometheus:
        return fail("idle hours are measured on Kueue clusters only: give --no-idle on a Volcano cluster")
    owners = state.model.tenant_of_namespace()
    try:
        pods, nodes = read_pods_and_nodes(api_client(args), state.objects, args.page_size)
    except (CheckIncomplete, kube_config.ConfigException, OSError) as exc:
        return fail(f"could not read the usage of cluster {state.cluster}: {' '.join(str(exc).split())}",
                    ExitCode.INCOMPLETE)
    found = pod_segments(pods, nodes, window, now, owners)
    book = ledger(state.model, state.cluster, window, found, {}, [NOTE, "idle hours not measured (--no-idle): "
                                                                     "idle_hours are 0"])
    if budget_holders(state.model):  # spent / budget of the current period, whatever the window
        rows = volcano_period_rows(state.model, state.cluster, pods, nodes, now)
        book = replace(book, budgets=tuple(s.line() for s in budget_statuses(state.model, rows, now)))
    _write(args.out, formats.RENDER[args.format](book))
    if args.chart:
        _write(args.chart, chart.svg(found, window, book_pools(state), state.cluster))
    for note in book.notes:
        print(f"gpugov: note: {note}", file=sys.stderr)
    return ExitCode.OK


def book_pools(state: DesiredState) -> Any:
    from gpugov.usage.ledger import cluster_pools

    return cluster_pools(state.model, state.cluster)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "usage",
        help="the usage and cost ledger per tenant, cost centre and pool over a window",
        description="Accelerator-hours admitted per tenant, cost centre and pool (from Kueue's Workload admission "
        "and finish times), in quota vs borrowed, idle-but-allocated (DCGM below the Guardrails idle threshold), "
        "cost at each pool's pricePerAcceleratorHour, what nobody held, and the capacity it adds up to. "
        "Exit 0, 2 bad usage, 3 could not read the whole window.",
    )
    compile_target_args(p)
    kubeconfig_args(p)
    p.add_argument("--since", required=True, help="start: ISO 8601 (2026-11-01, 2026-11-01T08:00:00Z) or a "
                   "duration before --until (90m, 24h, 7d, 2w)")
    p.add_argument("--until", help="end: ISO 8601, not in the future (default: now)")
    p.add_argument("--prometheus", metavar="URL", help="Prometheus with DCGM metrics, for idle hours")
    p.add_argument("--no-idle", action="store_true", help="no Prometheus: leave idle hours at 0 (and say so)")
    p.add_argument("--step", type=positive, default=60, metavar="SECONDS", help="DCGM sampling step (default 60)")
    lazy_choices(p.add_argument("--format", default="table"), "gpugov.usage.formats:FORMATS")
    p.add_argument("--out", metavar="FILE", help="write the ledger here instead of stdout")
    p.add_argument("--chart", metavar="FILE.svg", help="also write an SVG chart of usage per tenant over time")
    p.add_argument("--page-size", type=positive, default=500, metavar="N", help="objects per list request (default 500)")
    p.set_defaults(func=cmd_usage)
