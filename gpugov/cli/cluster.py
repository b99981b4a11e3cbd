"""Commands that talk to a live cluster: apply and drift (the kubernetes client is the edge)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from gpugov.app.exit import ExitCode
from gpugov.cli.common import compile_target_args, default_format, desired, fail, kubeconfig_args
from gpugov.findings import Level
from gpugov.findings.report import FORMATS, REPORTERS
from gpugov.notify.cli import add_arguments as notify_arguments


def api_client(args: argparse.Namespace, in_cluster: bool = False) -> Any:
    """A client for --kubeconfig/--context; inside a pod (when allowed) its ServiceAccount."""
    from kubernetes import client as kube_client
    from kubernetes import config as kube_config

    if in_cluster and not args.kubeconfig and os.environ.get("KUBERNETES_SERVICE_HOST"):
        kube_config.load_incluster_config()
        return kube_client.ApiClient()
    return kube_config.new_client_from_config(config_file=args.kubeconfig, context=args.context)


def cmd_apply(args: argparse.Namespace) -> ExitCode:
    from kubernetes import config as kube_config
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    from gpugov.cluster.apply import ApplyError, apply_objects

    state = desired(args)
    try:
        applied = apply_objects(api_client(args), state.objects)
    except ApplyError as exc:
        return fail(f"apply failed: {exc}", ExitCode.INCOMPLETE)
    except (ApiException, HTTPError, OSError, kube_config.ConfigException) as exc:
        reason = getattr(exc, "reason", None) or exc
        return fail(f"apply failed: {reason}", ExitCode.INCOMPLETE)
    for kind, namespace, name in applied.applied:
        print(f"applied {kind:<22} {namespace + '/' if namespace else ''}{name}")
    for name in applied.skipped_nodes:
        print(f"skipped Node {name}: not in the cluster (gpugov patches nodes, it never creates them)")
    print(
        f"{len(applied.applied)} objects applied with field manager gpugov; "
        f"{len(applied.applied) - len(applied.missing)} found on the server when read back"
    )
    return ExitCode.OK if not applied.missing else ExitCode.FINDINGS


def cmd_drift(args: argparse.Namespace) -> ExitCode:
    """Compare the declarations with the live cluster; exit 3 when the check is incomplete."""
    from kubernetes import config as kube_config

    from gpugov.cluster.observe import observe
    from gpugov.drift import check
    from gpugov.notify.cli import notify_from_args, print_result
    from gpugov.notify.config import NotifyConfigError
    from gpugov.sources import CheckIncomplete
    from gpugov.sources.agents import fetch_snapshots, load_snapshots
    from gpugov.sources.prometheus import utilisation

    state = desired(args)
    model, objects = state.model, state.objects
    try:
        live = observe(api_client(args, in_cluster=True), objects)
        if args.prometheus:
            live.gpu_utilisation = utilisation(args.prometheus, model.limits.idle_window)
        if args.agent_snapshots:
            live.agent_snapshots = load_snapshots(Path(args.agent_snapshots))
        elif args.agent_url:
            nodes = [o["metadata"]["name"] for o in objects if o["kind"] == "Node" and o["metadata"]["name"] in live.nodes]
            live.agent_snapshots = fetch_snapshots(args.agent_url, nodes)
    except (CheckIncomplete, kube_config.ConfigException, OSError) as exc:
        return fail(f"could not check drift: {exc}", ExitCode.INCOMPLETE)
    findings = check(model, objects, live, state.backend, state.cluster)
    checked = (f"cluster {state.cluster} ({state.backend}): {len(objects)} desired objects, {len(live.nodes)} nodes, "
               f"{len(live.pods)} pods checked")
    sys.stdout.write(REPORTERS[args.format or default_format()](findings, 0, checked, "gpugov drift"))
    failing = [f for f in findings if f.level is not Level.INFO]
    try:
        sent = notify_from_args(args, failing, f"gpugov drift: {state.cluster}")
    except NotifyConfigError as exc:
        return fail(str(exc))
    if sent is not None:
        print_result(sent)
    return ExitCode.FINDINGS if failing else ExitCode.OK


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("drift", help="compare the declarations with the live cluster; exit 1 drift, 3 could not check")
    compile_target_args(p)
    kubeconfig_args(p, in_cluster=True)
    p.add_argument("--format", choices=FORMATS, help="output format (github inside GitHub Actions, else text)")
    p.add_argument("--prometheus", metavar="URL", help="Prometheus with DCGM metrics, to find idle accelerators")
    agents = p.add_mutually_exclusive_group()
    agents.add_argument("--agent-url", metavar="TEMPLATE",
                        help="NVML snapshots from the node agents, e.g. http://{node}:9402/snapshot.json")
    agents.add_argument("--agent-snapshots", metavar="DIR", help="NVML snapshots saved as DIR/*.json")
    notify_arguments(p)
    p.set_defaults(func=cmd_drift)

    p = sub.add_parser("apply", help="server-side apply the compiled objects to a cluster (field manager gpugov)")
    compile_target_args(p)
    kubeconfig_args(p)
    p.set_defaults(func=cmd_apply)
