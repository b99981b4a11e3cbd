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
    from gpugov.usage.ledger import Ledger
    from gpugov.usage.segments import Segment
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
    from datetime import UTC, datetime

    from gpugov.cli.cluster import api_client
    from gpugov.compile import Backend
    from gpugov.usage import chart, formats
    from gpugov.usage.window import WindowError, parse_window

    if not args.prometheus and not args.no_idle:
        return fail("idle hours need DCGM utilisation: give --prometheus URL, or --no-idle to leave them at 0")
    now = datetime.now(UTC)
    try:
        window = parse_window(args.since, args.until, now)
    except WindowError as exc:
        return fail(str(exc))
    if args.fleet:
        return _fleet_usage(args, window, now)
    if args.prometheus and len(args.prometheus) > 1:
        return fail("--prometheus given more than once: one cluster reads one Prometheus (CLUSTER=URL per worker "
                    "is for --fleet)")
    args.prometheus = args.prometheus[0] if args.prometheus else None
    state = desired(args)
    if state.backend is Backend.VOLCANO:
        return _volcano_usage(args, state, window, now)
    if state.backend is not Backend.KUEUE:
        return fail(f"usage reads Kueue's Workloads; cluster {state.cluster} is scheduled by {state.backend}")
    try:
        book, found = _kueue_book(args, state, window, now, api_client(args), _dispatched(state))
    except CommandFailed as exc:
        return fail(str(exc), exc.code)
    _write(args.out, formats.RENDER[args.format](book))
    if args.chart:
        _write(args.chart, chart.svg(found, window, book_pools(state), state.cluster))
    for note in book.notes:
        print(f"gpugov: note: {note}", file=sys.stderr)
    return ExitCode.OK


def _dispatched(state: DesiredState) -> dict[str, str]:
    """On a fleet's manager, its fleet tenants and their fleet: the Workloads of theirs there are the
    copies of jobs that run on the workers, where `usage --fleet` counts them once."""
    return {tenant: fleet.name for fleet in state.model.fleets_managed_by(state.cluster)
            for tenant in fleet.tenant_names()}


def _kueue_book(args: argparse.Namespace, state: DesiredState, window: Window, now: datetime,
                api: Any, dispatched: dict[str, str] | None = None) -> tuple[Ledger, list[Segment]]:
    """The ledger of one Kueue cluster read through `api` and its admitted segments, the Workloads of
    `dispatched` tenants left out; CommandFailed (exit 3) where the read is not whole."""
    from dataclasses import replace
    from datetime import timedelta

    from kubernetes import config as kube_config

    from gpugov.app.pipeline import gc_paused
    from gpugov.cluster.queues import read_workloads
    from gpugov.i18n import _
    from gpugov.queueing.workload import WorkloadError, from_object
    from gpugov.sources import CheckIncomplete
    from gpugov.sources.prometheus import utilisation_series
    from gpugov.usage.attribution import attribution
    from gpugov.usage.budget import UnplacedAdmission, budget_holders, budget_statuses, period_rows
    from gpugov.usage.idle import idle
    from gpugov.usage.ledger import ledger
    from gpugov.usage.reclaimed import reclaimed
    from gpugov.usage.segments import segments

    model = state.model
    rules = attribution(model, state.cluster, state.objects)

    # 100,000 Workload records and the segments made of them, none cyclic: the collector's scans of
    # them cost more than the reading (as in `gpugov queue`).
    with gc_paused():
        show, clear = progress_printer("usage")
        try:
            workloads, marks = [], []  # only the annotations of the raw objects are kept (reclaim's)
            left_out: dict[str, set[str]] = {}
            for raw in read_workloads(api, page_size=args.page_size, on_progress=show):
                workload = from_object(raw)
                fleet = (dispatched or {}).get(rules.tenant_of(workload))
                if fleet is not None:
                    left_out.setdefault(fleet, set()).add(rules.tenant_of(workload))
                    continue
                workloads.append(workload)
                marks.append(raw["metadata"].get("annotations") or {})
            taken = reclaimed(zip(workloads, marks, strict=True), window, rules.tenant_of)
            found, unplaced = segments(workloads, window, now, rules.tenant_of, rules.offers)
            if unplaced:
                first = unplaced[0]
                raise CheckIncomplete(f"{len(unplaced)} earlier admission(s) cannot be placed in a pool, e.g. "
                                      f"{first.workload} ({first.seconds} s): {first.why}")
            idle_seconds: dict[tuple[str, str, str], Decimal] = {}
            notes: list[str] = list(taken.notes) + [
                _("fleet {fleet}: the jobs of {tenants} run on its workers and are counted there, once: "
                  "gpugov usage --fleet {fleet}").format(fleet=fleet, tenants=", ".join(sorted(tenants)))
                for fleet, tenants in sorted(left_out.items())]
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
            raise CommandFailed(f"could not read the usage of cluster {state.cluster}: {' '.join(str(exc).split())}",
                                ExitCode.INCOMPLETE) from None
        clear()
        book = ledger(model, state.cluster, window, found, idle_seconds, notes, taken.rows)
        if budget_holders(model):  # spent / budget of the current period, whatever the window
            try:
                rows = period_rows(model, state.cluster, workloads, rules, now)
            except UnplacedAdmission as exc:
                raise CommandFailed(f"could not read the budgets of cluster {state.cluster}: {exc}",
                                    ExitCode.INCOMPLETE) from None
            book = replace(book, budgets=tuple(s.line() for s in budget_statuses(model, rows, now)))
        return book, found


def member_kubeconfigs(args: argparse.Namespace) -> dict[str, str]:
    """--member CLUSTER=KUBECONFIG, each at most once."""
    from gpugov.i18n import _

    given: dict[str, str] = {}
    for text in args.member or []:
        cluster, sep, path = text.partition("=")
        if not sep or not cluster or not path:
            raise CommandFailed(_("--member {text}: give CLUSTER=KUBECONFIG").format(text=text))
        if cluster in given:
            raise CommandFailed(_("--member {cluster} given twice").format(cluster=cluster))
        given[cluster] = path
    return given


def member_prometheus(args: argparse.Namespace, workers: list[str]) -> dict[str, str]:
    """--prometheus CLUSTER=URL with --fleet: each worker's DCGM utilisation is in its own Prometheus (its
    pods are named there, and the same namespaces exist on every worker), so every worker needs one,
    unless --no-idle."""
    from gpugov.i18n import _

    given: dict[str, str] = {}
    for text in args.prometheus or []:
        cluster, sep, url = text.partition("=")
        if not sep or not cluster or not url or "/" in cluster or ":" in cluster:
            raise CommandFailed(_("--prometheus {text}: with --fleet give CLUSTER=URL, one for each worker").format(
                text=text))
        if cluster not in workers:
            raise CommandFailed(_("--prometheus {cluster}=...: not a worker of the fleet ({workers})").format(
                cluster=cluster, workers=", ".join(workers)))
        if cluster in given:
            raise CommandFailed(_("--prometheus {cluster}=... given twice").format(cluster=cluster))
        given[cluster] = url
    missing = [w for w in workers if w not in given]
    if given and missing:
        raise CommandFailed(_("idle hours need every worker's DCGM utilisation: give --prometheus {clusters}=URL "
                              "too, or --no-idle").format(clusters="=URL --prometheus ".join(missing)))
    return given


def _fleet_usage(args: argparse.Namespace, window: Window, now: datetime) -> ExitCode:
    """The ledger of a fleet: each job counted once, on the worker that ran it.

    MultiKueue keeps two Workloads of one job: the manager's, admitted in the fleet's flavor (no pool,
    no device), and the worker's copy, admitted in the worker's own pool where its pods ran. Only the
    workers are read, each with its kubeconfig (--member CLUSTER=KUBECONFIG, else --kubeconfig with the
    context named after the cluster) and its Prometheus for idle hours (--prometheus CLUSTER=URL), and
    their ledgers put side by side: a worker's pools are its own, so no row is counted twice."""
    from argparse import Namespace

    from gpugov.app.pipeline import validate_repo
    from gpugov.cli.cluster import api_client
    from gpugov.i18n import _
    from gpugov.usage import formats

    if args.cluster:
        return fail(_("--fleet reads every worker of the fleet: give no --cluster"))
    try:
        members = member_kubeconfigs(args)
    except CommandFailed as exc:
        return fail(str(exc), exc.code)
    result = validate_repo(Path(args.repo))
    if result.model is None:
        return fail(_("the declarations of {repo} do not validate: run gpugov validate").format(repo=args.repo))
    fleet = result.model.fleets.get(args.fleet)
    if fleet is None:
        return fail(_("no fleet {name} is declared (declared: {names})").format(
            name=args.fleet, names=", ".join(sorted(result.model.fleets)) or "-"))
    unknown = sorted(set(members) - set(fleet.worker_names()) - {fleet.manager})
    if unknown:
        return fail(_("--member {clusters}: not a member of fleet {name}").format(
            clusters=", ".join(unknown), name=fleet.name))
    try:
        prometheus = {} if args.no_idle else member_prometheus(args, list(fleet.worker_names()))
    except CommandFailed as exc:
        return fail(str(exc), exc.code)
    books = []
    for worker in fleet.worker_names():
        member = Namespace(**{**vars(args), "cluster": worker, "kubeconfig": members.get(worker, args.kubeconfig),
                              "context": None if worker in members else (args.context or worker),
                              "prometheus": prometheus.get(worker)})
        try:
            state = desired(member)
            book, _found = _kueue_book(member, state, window, now, api_client(member))
        except CommandFailed as exc:
            return fail(str(exc), exc.code)
        books.append(book)
    book = fleet_ledger(fleet.name, books)
    _write(args.out, formats.RENDER[args.format](book))
    for note in book.notes:
        print(f"gpugov: note: {note}", file=sys.stderr)
    return ExitCode.OK


def fleet_ledger(fleet: str, books: list[Ledger]) -> Ledger:
    """The workers' ledgers side by side (each pool belongs to one worker: nothing is summed twice); the
    budget lines stay per cluster, not added up here."""
    from gpugov.i18n import _
    from gpugov.usage.ledger import Ledger

    notes = [_("fleet {fleet}: each job counted once, on the worker that ran it ({workers}); the manager's "
               "copy of it is not counted").format(fleet=fleet, workers=", ".join(b.cluster for b in books))]
    notes += [f"{b.cluster}: {n}" for b in books for n in b.notes]
    if any(b.budgets for b in books):
        notes.append(_("budgets are per cluster: run gpugov usage --cluster on a worker to see them"))
    return Ledger(cluster=f"{fleet} ({', '.join(b.cluster for b in books)})", window=books[0].window,
                  rows=tuple(r for b in books for r in b.rows),
                  unallocated=tuple(u for b in books for u in b.unallocated),
                  capacity=tuple(c for b in books for c in b.capacity), notes=tuple(notes),
                  currencies=tuple(c for b in books for c in b.currencies),
                  reclaimed=tuple(r for b in books for r in b.reclaimed))


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
    p.add_argument("--prometheus", action="append", metavar="URL", help="Prometheus with DCGM metrics, for idle "
                   "hours (with --fleet: CLUSTER=URL, once for each worker)")
    p.add_argument("--no-idle", action="store_true", help="no Prometheus: leave idle hours at 0 (and say so)")
    p.add_argument("--step", type=positive, default=60, metavar="SECONDS", help="DCGM sampling step (default 60)")
    lazy_choices(p.add_argument("--format", default="table"), "gpugov.usage.formats:FORMATS")
    p.add_argument("--out", metavar="FILE", help="write the ledger here instead of stdout")
    p.add_argument("--chart", metavar="FILE.svg", help="also write an SVG chart of usage per tenant over time")
    p.add_argument("--page-size", type=positive, default=500, metavar="N", help="objects per list request (default 500)")
    p.add_argument("--fleet", metavar="NAME", help="the ledger of a declared Fleet: every worker read, each job counted "
                   "once, on the worker that ran it (the manager's copy is not counted)")
    p.add_argument("--member", action="append", metavar="CLUSTER=KUBECONFIG",
                   help="with --fleet: the kubeconfig of a member (repeat; default --kubeconfig with the context "
                   "named after the cluster)")
    p.set_defaults(func=cmd_usage)
