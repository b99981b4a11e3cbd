"""`gpugov capacity`: do the declared guarantees fit what exists and what is used?"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gpugov.app.exit import ExitCode
from gpugov.cli.common import CommandFailed, backend_arg, desired, fail, kubeconfig_args, valid

FORMATS = ("markdown", "json", "html")


def cmd_capacity(args: argparse.Namespace) -> ExitCode:
    from gpugov.capacity import LedgerError, cluster_report, load_ledger
    from gpugov.capacity.html import html
    from gpugov.capacity.jsonout import report_json
    from gpugov.capacity.markdown import markdown

    if args.prometheus and args.format != "html":
        return fail("--prometheus draws the history charts of the html report: give --format html")
    try:
        ledger = load_ledger(Path(args.usage)) if args.usage else None
    except LedgerError as exc:
        return fail(f"--usage: {exc}")
    model = valid(args.repo)
    declared = model.cluster_names()
    if args.cluster is not None and args.cluster not in declared:
        return fail(f"unknown cluster '{args.cluster}' (declared: {', '.join(declared)})")
    live = bool(args.kubeconfig or args.context)
    clusters = [args.cluster] if args.cluster else declared
    if live and len(clusters) > 1:
        return fail(f"a kubeconfig reaches one cluster: choose which with --cluster ({', '.join(declared)})")
    if ledger is not None and ledger.cluster not in clusters:
        return fail(f"--usage: {args.usage} is the ledger of cluster '{ledger.cluster}', the report covers "
                    f"{', '.join(clusters)}")
    nodes = _live_nodes(args) if live else None
    reports = []
    for cluster in clusters:
        state = desired(argparse.Namespace(repo=args.repo, cluster=cluster, backend=args.backend))
        usage = ledger if ledger is not None and ledger.cluster == cluster else None
        reports.append(cluster_report(state, nodes, usage))
    if args.format == "json":
        text = json.dumps(report_json(reports), indent=2) + "\n"
    elif args.format == "html":
        histories = {}
        if args.prometheus:
            from gpugov.cli.history import DEFAULT_WINDOWS, read_histories

            for cluster in clusters:
                state = desired(argparse.Namespace(repo=args.repo, cluster=cluster, backend=args.backend))
                histories[cluster] = read_histories(state, args.prometheus, DEFAULT_WINDOWS, args.history_step)
        text = html(reports, histories)
    else:
        text = markdown(reports)
    if args.out:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as exc:
            return fail(f"cannot write {args.out}: {exc.strerror or exc}")
        print(f"wrote the {args.format} capacity report of {', '.join(clusters)} to {args.out}")
    else:
        sys.stdout.write(text)
    return ExitCode.OK


def _live_nodes(args: argparse.Namespace) -> list[dict]:
    from kubernetes import config as kube_config

    from gpugov.cli.cluster import api_client
    from gpugov.cluster.inventory import read_nodes
    from gpugov.sources import CheckIncomplete

    try:
        return read_nodes(api_client(args))
    except (CheckIncomplete, kube_config.ConfigException, OSError) as exc:
        raise CommandFailed(f"could not read the cluster's nodes: {' '.join(str(exc).split())}",
                            ExitCode.INCOMPLETE) from None


def register(sub: argparse._SubParsersAction) -> None:
    from gpugov.cli.queue import positive

    p = sub.add_parser(
        "capacity",
        help="capacity planning report: physical, guaranteed, borrowable, oversubscription, MIG, usage, advice",
        description="Per cluster and pool: physical capacity (declared; live allocatable and GFD labels with "
        "--kubeconfig), guaranteed (sum of nominal quotas), borrowable, the oversubscription ratio, MIG profiles "
        "declared against what the nodes' nvidia.com/mig.config carves, and with --usage (a `gpugov usage` "
        "ledger) used / borrowed / idle hours per tenant with advice.",
    )
    p.add_argument("repo", nargs="?", default=".", help="repository root")
    p.add_argument("--cluster", help="one cluster (default: every declared cluster; needed with --kubeconfig)")
    backend_arg(p)
    kubeconfig_args(p)
    p.add_argument("--usage", metavar="FILE", help="usage ledger JSON (gpugov usage --format json); "
                   "refused unless complete")
    p.add_argument("--format", choices=FORMATS, default="markdown",
                   help="markdown (default), json, or html (one page, charts inline, renders offline)")
    p.add_argument("--out", metavar="FILE", help="write the report to FILE instead of stdout")
    p.add_argument("--prometheus", metavar="URL", help="with --format html: per tenant and pool, GPU allocation "
                   "and activity over 24 h, 7 d and 30 d as charts (gpugov history), read from this Prometheus "
                   "evaluating gpugov's recording rules (gpugov monitoring); unmeasured time drawn as unknown")
    p.add_argument("--history-step", type=positive, default=60, metavar="SECONDS",
                   help="with --prometheus: seconds between the instants read (default 60)")
    p.set_defaults(func=cmd_capacity)
