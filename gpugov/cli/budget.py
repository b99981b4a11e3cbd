"""`gpugov budget`: each declared GPU-hour budget against what its holder spent this period.

Reads every Workload (as `gpugov usage`), tells the sinks of each alert threshold crossed, once per
holder, period and threshold, and with --apply holds the ClusterQueues of a holder whose budget with
`action: hold` is spent (`spec.stopPolicy: Hold`, under its own field manager `gpugov-budget`:
compile never declares stopPolicy, so `gpugov apply` never takes it back), and releases them when
the budget is no longer spent (a new period, a larger budget).

On a Volcano cluster the spend is the Volcano ledger's (the pods Volcano bound, gpugov.usage.volcano),
and a hold closes the tenant's leaf Queue through Volcano's own CloseQueue Command, marked as gpugov's
doing, and opens it again with OpenQueue (gpugov.cluster.volcano_budget).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gpugov.app.exit import ExitCode
from gpugov.cli.common import compile_target_args, desired, fail, kubeconfig_args
from gpugov.cli.queue import positive, progress_printer
from gpugov.i18n import Text, _, localized

FIELD_MANAGER = "gpugov-budget"
HOLD, RUN = "Hold", "None"
ONCE = timedelta(days=400)  # the dedup window of one threshold's alert: longer than any period


def _stop_policy_ours(live: dict[str, Any]) -> bool:
    """Whether `gpugov budget` set the live stopPolicy (and nobody has changed it since)."""
    for entry in live.get("metadata", {}).get("managedFields") or []:
        spec = ((entry.get("fieldsV1") or {}).get("f:spec") or {})
        if entry.get("manager") == FIELD_MANAGER and "f:stopPolicy" in spec:
            return True
    return False


def hold_queues(api_client: Any, objects: list[dict[str, Any]], held: frozenset[str]) -> list[str]:
    """Set Hold on the ClusterQueues of the held tenants, and None on the others where gpugov budget
    had set Hold; never touch a HoldAndDrain (prune's drain) or a stop set by someone else.
    Returns one line per change."""
    from gpugov.cluster.rest import Api, read_object, server_side_apply
    from gpugov.kube.kinds import kind_of
    from gpugov.kube.objects import LABEL_TENANT

    api = Api(api_client)
    changes = []
    for obj in objects:
        if obj["kind"] != "ClusterQueue" or LABEL_TENANT not in (obj["metadata"].get("labels") or {}):
            continue
        tenant, name, kind = obj["metadata"]["labels"][LABEL_TENANT], obj["metadata"]["name"], kind_of(obj)
        live = read_object(api, kind, name)
        if live is None:
            continue  # not applied yet: nothing to hold
        current = (live.get("spec") or {}).get("stopPolicy") or RUN
        if tenant in held and current == RUN:
            wanted = HOLD
        elif tenant not in held and current == HOLD and _stop_policy_ours(live):
            wanted = RUN
        else:
            continue
        body = {"apiVersion": obj["apiVersion"], "kind": "ClusterQueue", "metadata": {"name": name},
                "spec": {"stopPolicy": wanted}}
        server_side_apply(api, kind, body, field_manager=FIELD_MANAGER)
        changes.append(Text("ClusterQueue {name} (tenant {tenant}): stopPolicy {current} -> {wanted}", name=name,
                            tenant=tenant, current=current, wanted=wanted))
    return changes


def command_namespace(state: Any) -> str:
    """Where a Volcano hold's Commands go: the operations namespace where gpugov runs in the cluster
    (its budget CronJob may create Commands there only), else `default` (as vcctl sends them)."""
    cluster = state.scope.cluster
    return cluster.operations_namespace if cluster.operations_image else "default"


def _text(statuses: list[Any]) -> str:
    from gpugov.declarations.timeline import holder_words
    from gpugov.usage.budget import unit_words
    from gpugov.usage.ledger import decimal_string

    if not statuses:
        return _("no GPU-hour budgets declared") + "\n"
    lines = []
    for s in statuses:
        crossed = _(", ").join(f"{t}%" for t in s.crossed) or "-"
        line = _("{holder}: {spent} of {budget} {unit} in {period} ({percent}%), alerts crossed: {crossed}").format(
            holder=localized(holder_words(s.holder)), spent=decimal_string(s.spent),
            budget=decimal_string(s.budget.amount), unit=unit_words(s.unit),
            period=s.period.label, percent=decimal_string(s.percent), crossed=crossed)
        lines.append(line + (_(", held") if s.hold else ""))
    return "\n".join(lines) + "\n"


def _json(statuses: list[Any], changes: list[str]) -> str:
    from gpugov.usage.ledger import decimal_string

    def entry(s: Any) -> dict[str, Any]:
        # an hours budget as spent_hours / budget_hours, a cost budget as spent_cost / budget_cost and its currency
        line = s.line().to_json(decimal_string)
        amounts = {key: line[key] for key in ("spent_hours", "budget_hours", "spent_cost", "budget_cost", "currency")
                   if key in line}
        return {"holder": s.holder.name, "kind": s.holder.kind, "period": s.period.label,
                "since": f"{s.period.since:%Y-%m-%dT%H:%M:%SZ}", **amounts, "percent": decimal_string(s.percent),
                "crossed": list(s.crossed), "action": s.budget.action, "held": s.hold, "tenants": list(s.tenants)}

    return json.dumps({"budgets": [entry(s) for s in statuses], "changes": changes}, indent=2) + "\n"


def _notify(args: argparse.Namespace, alerts: list[Any], cluster: str, api: Any) -> ExitCode | None:
    """Each alert as its own one-finding notification, under its own dedup key: once each."""
    from gpugov.cluster.notify_state import ConfigMapState
    from gpugov.notify.cli import NOTIFY_ENV, print_result, state_store
    from gpugov.notify.config import NotifyConfigError, build_sinks
    from gpugov.notify.dedup import FileState
    from gpugov.notify.dispatch import notify
    from gpugov.notify.keyed import KeyedState

    specs = args.notify or ([os.environ[NOTIFY_ENV]] if os.environ.get(NOTIFY_ENV, "").strip() else [])
    if not specs or not alerts:
        return None

    def configmap(where: str) -> Any:
        try:
            return ConfigMapState.parse(api, where)
        except ValueError as exc:
            raise NotifyConfigError(str(exc)) from None

    try:
        sinks = build_sinks(specs, os.environ, Path(args.notify_config) if args.notify_config else None)
        where = state_store(args.notify_state, os.environ, configmap)
        store = FileState(where) if isinstance(where, Path) else where
    except NotifyConfigError as exc:
        return fail(str(exc))
    except ImportError:
        return fail("requests is not installed (pip install 'gpugov[notify]')")
    for alert in alerts:
        result = notify([alert.finding], sinks, KeyedState(store, f"budget/{cluster}/{alert.key}"), ONCE,
                        f"gpugov budget: {cluster}")
        print_result(result)
    return None


def cmd_budget(args: argparse.Namespace) -> ExitCode:
    from kubernetes import config as kube_config

    from gpugov.cli.cluster import api_client
    from gpugov.cluster.queues import read_workloads
    from gpugov.cluster.rest import Rejected
    from gpugov.cluster.volcano_budget import WAIT, hold_volcano_queues, read_pods_and_nodes
    from gpugov.compile import Backend
    from gpugov.queueing.workload import WorkloadError, from_object
    from gpugov.sources import CheckIncomplete
    from gpugov.usage.attribution import attribution
    from gpugov.usage.budget import (
        UnplacedAdmission,
        alerts,
        budget_holders,
        budget_statuses,
        held_tenants,
        period_rows,
        volcano_period_rows,
    )

    now = datetime.now(UTC)
    state = desired(args)
    if state.backend not in (Backend.KUEUE, Backend.VOLCANO):
        return fail(f"budgets read Kueue's Workloads or Volcano's pods; cluster {state.cluster} is scheduled by "
                    f"{state.backend}")
    volcano = state.backend is Backend.VOLCANO
    model = state.model
    if not budget_holders(model) and not args.apply:
        sys.stdout.write(_json([], []) if args.format == "json" else _text([]))
        return ExitCode.OK
    api = api_client(args, in_cluster=True)
    show, clear = progress_printer("budget")
    statuses: list[Any] = []
    try:
        if budget_holders(model) and volcano:  # the pods Volcano bound, as `gpugov usage` counts them
            pods, nodes = read_pods_and_nodes(api, state.objects, args.page_size, on_progress=show)
            statuses = budget_statuses(model, volcano_period_rows(model, state.cluster, pods, nodes, now), now)
        elif budget_holders(model):  # without any (the last one removed), --apply only releases what it still holds
            workloads = [from_object(raw) for raw in read_workloads(api, page_size=args.page_size, on_progress=show)]
            rows = period_rows(model, state.cluster, workloads, attribution(model, state.cluster, state.objects), now)
            statuses = budget_statuses(model, rows, now)
        if not args.apply:
            changes = []
        elif volcano:
            changes = hold_volcano_queues(api, state.objects, held_tenants(statuses), command_namespace(state), now,
                                          wait=args.wait or WAIT)
        else:
            changes = hold_queues(api, state.objects, held_tenants(statuses))
    except (CheckIncomplete, Rejected, WorkloadError, UnplacedAdmission, kube_config.ConfigException, OSError) as exc:
        clear()
        return fail(f"could not check the budgets of cluster {state.cluster}: {' '.join(str(exc).split())}",
                    ExitCode.INCOMPLETE)
    clear()
    sys.stdout.write(_json(statuses, changes) if args.format == "json" else _text(statuses))
    for change in changes:  # in the reader's language; JSON keeps the English
        print(f"gpugov budget: {localized(change)}", file=sys.stderr)
    found = alerts(model, statuses)
    bad = _notify(args, found, state.cluster, api)
    if bad is not None:
        return bad
    return ExitCode.FINDINGS if found else ExitCode.OK


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "budget",
        help="GPU-hour budgets: spent this period, alerts once per threshold, hold at 100%%",
        description="Each Tenant's and Department's spec.budget against the accelerator-hours (a cost budget: their "
        "cost) admitted since its period began (from Kueue's Workloads, or on Volcano the pods it bound, as gpugov "
        "usage). --notify tells each crossed threshold once per period; --apply sets stopPolicy Hold on the "
        "ClusterQueues of a spent budget with action hold (on Volcano: closes its Queues with a CloseQueue "
        "Command; running work finishes) and releases them when it is no longer spent. "
        "Exit 0 under every threshold, 1 a threshold crossed, 2 bad usage, 3 could not read the cluster.",
    )
    compile_target_args(p)
    kubeconfig_args(p, in_cluster=True)
    p.add_argument("--apply", action="store_true", help="hold (and release) the ClusterQueues (Volcano: Queues) of hold budgets")
    # None: volcano_budget.WAIT, read where the run begins (the parser is built at every start)
    p.add_argument("--wait", type=positive, metavar="SECONDS",
                   help="on Volcano, how long --apply waits for its queue controller to carry out each CloseQueue or "
                   "OpenQueue it sends (default 5); one not carried out by then stays pending and a later run goes on")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--page-size", type=positive, default=500, metavar="N", help="objects per list request (default 500)")
    group = p.add_argument_group("notifications")
    group.add_argument("--notify", action="append", metavar="SINK",
                       help="tell SINK of each threshold crossed, once per period (default $GPUGOV_NOTIFY); as "
                       "gpugov notify's --notify")
    group.add_argument("--notify-config", metavar="FILE", help="webhook URLs and secrets (as gpugov notify)")
    group.add_argument("--notify-state", metavar="FILE",
                       help="what was sent (default: $GPUGOV_NOTIFY_STATE or ~/.local/state/gpugov/), or "
                       "configmap:NAMESPACE/NAME")
    p.set_defaults(func=cmd_budget)
