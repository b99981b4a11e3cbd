"""`gpugov import`: a declarations repository from a cluster (or a folder of YAML) that already runs Kueue or Volcano."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpugov.app.exit import ExitCode
from gpugov.cli.common import fail, kubeconfig_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import",
        help="write declarations for a cluster that already runs Kueue or Volcano (adopting it)",
        description="Read ResourceFlavors, ClusterQueues, Cohorts, LocalQueues, WorkloadPriorityClasses and "
        "Topologies (Kueue v1beta2, or v1beta1), or Volcano's Queues, PodGroups, PriorityClasses and scheduler "
        "ConfigMap, Nodes and Namespaces from a cluster (--kubeconfig) or a folder of "
        "YAML (--from), and write a declarations repository to --out that keeps the cluster's names. The result is "
        "validated and compiled back; what the declarations cannot express, or express differently, is listed in "
        "the report with its object and field. A repository that would not validate (`gpugov validate` errors) is "
        "never written: import prints the findings and leaves --out as it was. Exit codes: 0 everything expressed, "
        "1 something listed as not expressed (the repository is still written) or the repository would not "
        "validate (nothing written), 2 bad input or a non-empty --out without --force, 3 the cluster could not "
        "be read.",
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument("--from", dest="source", metavar="DIR",
                        help="a folder of Kubernetes YAML (a GitOps repository, a kustomize build) instead of a cluster")
    kubeconfig_args(p)
    p.add_argument("--cluster", default="default",
                   help="name of the Cluster declaration to write, a DNS-1123 label (default: default)")
    p.add_argument("--out", required=True, help="folder to write the repository to (empty, or replaced with --force)")
    p.add_argument("--force", action="store_true", help="replace a non-empty --out")
    p.add_argument("--backend", choices=("kueue", "volcano"), default=None,
                   help="the scheduler to import from (default: the one the cluster or folder holds; one holding "
                   "both must be told)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="report format (default: text)")
    p.set_defaults(func=cmd_import)


def cmd_import(args: argparse.Namespace) -> ExitCode:
    return run_import(args)[0]


def run_import(args: argparse.Namespace) -> tuple[ExitCode, bool]:
    """`gpugov import`: its exit code, and whether the repository was written."""
    from gpugov.adopt import InvalidImport, import_inventory
    from gpugov.adopt.convert import is_label
    from gpugov.adopt.report import render_json, render_text
    from gpugov.adopt.run import BothBackends
    from gpugov.adopt.sources import SourceError, read_cluster, read_folder
    from gpugov.adopt.write import OutputError, check_target
    from gpugov.findings.report import text
    from gpugov.sources import CheckIncomplete

    if not is_label(args.cluster):
        return fail(f"import: --cluster {args.cluster!r} is not a DNS-1123 label"), False
    out = Path(args.out)
    backend = getattr(args, "backend", None)  # init --from-cluster hands over without one
    try:
        check_target(out, args.force)  # before reading a cluster: a refused --out costs nothing
        if args.source:
            inv = read_folder(Path(args.source))
        else:
            from gpugov.cli.cluster import api_client

            api = api_client(args)
            inv = read_cluster(api, backend=backend) if backend else read_cluster(api)
        report = import_inventory(inv, args.cluster, out, force=args.force, backend=backend)
    except (SourceError, OutputError, BothBackends) as exc:
        return fail(f"import: {exc}"), False
    except CheckIncomplete as exc:
        return fail(f"import: could not read the cluster: {exc}", ExitCode.INCOMPLETE), False
    except InvalidImport as exc:
        sys.stderr.write(text(exc.errors, 0, checked="gpugov import"))
        return fail(f"import: {exc}", ExitCode.FINDINGS), False
    render = render_json if args.format == "json" else render_text
    sys.stdout.write(render(report, str(out)))
    return (ExitCode.OK if report.complete else ExitCode.FINDINGS), True
