"""Commands that talk to a live cluster: apply and drift (the kubernetes client is the edge)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpugov.app.exit import ExitCode
from gpugov.cli.common import (
    CommandFailed,
    compile_target_args,
    default_format,
    desired,
    fail,
    format_arg,
    kubeconfig_args,
)
from gpugov.i18n import Text, _, localized
from gpugov.notify.cli import add_arguments as notify_arguments

if TYPE_CHECKING:  # the commands import them when they run
    from gpugov.app.desired import DesiredState
    from gpugov.findings import Finding


def api_client(args: argparse.Namespace, in_cluster: bool = False) -> Any:
    """A client for --kubeconfig/--context; inside a pod (when allowed) its ServiceAccount."""
    from kubernetes import client as kube_client
    from kubernetes import config as kube_config

    if in_cluster and not args.kubeconfig and os.environ.get("KUBERNETES_SERVICE_HOST"):
        kube_config.load_incluster_config()
        return kube_client.ApiClient()
    if args.kubeconfig and not Path(args.kubeconfig).is_file():  # bad usage, not an unreachable cluster
        raise CommandFailed(f"--kubeconfig {args.kubeconfig}: no such file")
    return kube_config.new_client_from_config(config_file=args.kubeconfig, context=args.context)


def cmd_apply(args: argparse.Namespace) -> ExitCode:
    from kubernetes import config as kube_config

    from gpugov.cluster.apply import ApplyError, apply_objects, check_served, preview_changes
    from gpugov.cluster.identity import WrongCluster, check, declared_elsewhere, record
    from gpugov.cluster.ownership import ForeignObjects, declared_adoption, refuse_foreign
    from gpugov.cluster.prune import PruneError, owned_objects, prune, prune_plan
    from gpugov.cluster.rest import Api, Rejected, served_versions
    from gpugov.sources import CheckIncomplete

    if getattr(args, "fleet", None):
        return _apply_fleet(args)
    state = desired(args)
    if args.only_quotas:  # the timeline CronJob: a boundary changes quota objects only, and never what exists
        from dataclasses import replace

        from gpugov.compile.operations import QUOTA_KINDS

        state = replace(state, objects=[o for o in state.objects if (o["apiVersion"], o["kind"]) in QUOTA_KINDS])
        args.prune = False
    cluster = state.model.cluster(state.cluster)
    try:
        # Reads only, up to the guard: which cluster this is, and how much a prune would remove.
        api = api_client(args, in_cluster=True)
        raw = Api(api)
        served = served_versions(raw)
        owned = owned_objects(api, served)
        identity = check(raw, cluster, state.objects, owned, declared_elsewhere(state.model, state.cluster),
                         reidentify=args.reidentify)
        # After the identity: the wrong cluster is told as such, not as one that lacks a scheduler's kinds.
        check_served(raw, state.objects, served)
        taken = refuse_foreign(api, state.objects, declared_adoption(state.model, state.cluster))
        plan = prune_plan(api, state.objects, owned) if args.prune else []
        too_many = "" if args.allow_mass_prune else _mass_prune(plan, len(owned), cluster)
        if args.dry_run:
            print(localized(identity.describe()))
            print("".join(f"{note}\n" for note in taken.notes()), end="")
            return _dry_run(state.objects, plan, args.prune, too_many, preview_changes(api, state.objects))
        if too_many:
            return fail(f"refused: {too_many}; nothing was changed", ExitCode.USAGE)
        try:
            record(raw, identity)
        except Rejected as exc:
            raise ApplyError(f"recording the cluster's identity: {exc}") from exc
        print(localized(identity.describe(done=True)))
        print("".join(f"{note}\n" for note in taken.notes()), end="")
        applied = apply_objects(api, state.objects)
        _print_applied(applied)
        if applied.missing:
            print(_("prune skipped: not every applied object was found on read-back"))
            return ExitCode.FINDINGS
        not_in_force = _admission_in_force(raw, state.objects)
        if args.prune:
            plan = prune_plan(api, state.objects)
            too_many = "" if args.allow_mass_prune else _mass_prune(plan, len(owned), cluster)
            if too_many:  # grown since the check: something else changed the cluster meanwhile
                return fail(f"prune refused: {too_many}; the objects were applied, nothing was pruned",
                            ExitCode.USAGE)
            _print_pruned(prune(api, plan))
        if not_in_force:
            return fail(not_in_force, ExitCode.INCOMPLETE)
    except WrongCluster as exc:  # in the reader's language
        return fail(_("refused: {why}; nothing was changed").format(why=_one_line(exc)), ExitCode.USAGE)
    except ForeignObjects as exc:
        return fail(f"refused: {_one_line(exc)}; nothing was changed", ExitCode.USAGE)
    except (ApplyError, PruneError, CheckIncomplete, kube_config.ConfigException, OSError) as exc:
        return fail(f"apply failed: {_one_line(exc)}", ExitCode.INCOMPLETE)
    return ExitCode.OK


def _apply_fleet(args: argparse.Namespace) -> ExitCode:
    """Every member of a fleet (issue #43), in the order MultiKueue needs: the workers first (their
    namespaces, queues and the manager's roles), then the manager, whose AdmissionCheck goes Active only
    once it reaches each worker. Each member is one `gpugov apply --cluster MEMBER` with its own
    kubeconfig (--member CLUSTER=KUBECONFIG, else --kubeconfig with the context named after the cluster),
    the wrong-cluster guard and all; the first that does not succeed stops the rest."""
    from argparse import Namespace

    from gpugov.app.pipeline import validate_repo
    from gpugov.cli.usage import member_kubeconfigs

    if args.cluster:
        return fail(_("--fleet applies every member of the fleet: give no --cluster"))
    try:
        members = member_kubeconfigs(args)
    except CommandFailed as exc:
        return fail(str(exc), exc.code)
    result = validate_repo(Path(args.repo))
    fleet = None if result.model is None else result.model.fleets.get(args.fleet)
    if fleet is None:
        return fail(_("no fleet {name} is declared (declared: {names})").format(
            name=args.fleet, names=", ".join(sorted(result.model.fleets if result.model else ())) or "-"))
    order = [*fleet.worker_names(), fleet.manager]
    unknown = sorted(set(members) - set(order))
    if unknown:
        return fail(_("--member {clusters}: not a member of fleet {name}").format(
            clusters=", ".join(unknown), name=fleet.name))
    for done, cluster in enumerate(order):
        role = _("manager") if cluster == fleet.manager else _("worker")
        print(_("fleet {fleet}: cluster {cluster} ({role})").format(fleet=fleet.name, cluster=cluster, role=role))
        member = Namespace(**{**vars(args), "fleet": None, "cluster": cluster,
                              "kubeconfig": members.get(cluster, args.kubeconfig),
                              "context": None if cluster in members else (args.context or cluster)})
        code = cmd_apply(member)
        if code != ExitCode.OK:
            return fail(_("fleet {fleet}: stopped at {cluster}; done before it: {done}; not reached: {left}").format(
                fleet=fleet.name, cluster=cluster, done=", ".join(order[:done]) or "-",
                left=", ".join(order[done + 1:]) or "-"), code)
    return ExitCode.OK


def _admission_in_force(api: Any, objects: list[dict[str, Any]]) -> str:
    """Wait until the applied admission policies refuse what they must (enforcement.py); '' when
    they do, else the one line that says which do not yet."""
    from gpugov.cluster.enforcement import WAIT_S, probes_for, wait_until_enforced

    probes = probes_for(objects)
    if not probes:
        return ""
    result = wait_until_enforced(api, probes)
    if result.in_force:
        print(_("admission: in force ({policies} refused a server-side dry run as it must)").format(
            policies=", ".join(result.in_force)))
    for note in result.not_probed:
        print(_("admission: not probed: {note}").format(note=note))
    if result.not_yet:
        return (f"apply done, but the API server does not enforce {', '.join(result.not_yet)} after {WAIT_S:.0f} s: "
                "tenants are not held by it yet; rerun apply to check again")
    return ""


MASS_PRUNE_FIX = "if this is the cluster you mean, rerun with --allow-mass-prune"


def _mass_prune(plan: list[Any], owned: int, cluster: Any) -> str:
    from gpugov.cluster.prune import mass_prune

    why = mass_prune(plan, owned, cluster.prune_limit_objects, cluster.prune_limit_fraction)
    return f"{why} of cluster {cluster.name}; {MASS_PRUNE_FIX}" if why else ""


def _one_line(exc: BaseException) -> str:
    """The error in one line, in the reader's language when it was raised with a Text."""
    told = localized(exc.args[0]) if len(exc.args) == 1 and isinstance(exc.args[0], Text) else str(exc)
    return " ".join(told.split()) or type(exc).__name__


def _row(verb: str, kind: str, namespace: str, name: str, note: str = "", width: int = 8) -> str:
    """One listing row: the verb in the reader's language (padded to terminal cells), kind and name as
    the API has them."""
    from gpugov.i18n.width import ljust

    return f"{ljust(_verb(verb), width)} {kind:<22} {namespace + '/' if namespace else ''}{name}{': ' + note if note else ''}"


def _verb(verb: str) -> str:
    """What apply did or would do to an object, as the reader reads it."""
    words = {"created": _("created"), "configured": _("configured"), "labelled": _("labelled"),
             "unchanged": _("unchanged"), "applied": _("applied"), "deleted": _("deleted"), "deleting": _("deleting"),
             "released": _("released"), "would create": _("would create"), "would configure": _("would configure"),
             "would label": _("would label"), "would skip": _("would skip"), "would apply": _("would apply"),
             "would delete": _("would delete"), "would release": _("would release")}
    return words.get(verb, verb)


CHANGES = ("created", "configured", "labelled", "unchanged")


def _print_applied(applied: Any) -> None:
    for key in applied.applied:
        print(_row(applied.changes.get(key, "applied"), *key, width=10))
    for name in applied.skipped_nodes:
        print(_("skipped Node {name}: not in the cluster (gpugov patches nodes, it never creates them)").format(
            name=name))
    counts = _(", ").join(f"{applied.count(c)} {_verb(c)}" for c in CHANGES if applied.count(c))
    print(_("{count} objects applied with field manager gpugov ({counts}); {found} found on the server when read "
            "back").format(count=len(applied.applied), counts=counts or _("none"),
                           found=len(applied.applied) - len(applied.missing)))


def _print_pruned(pruned: list[Any]) -> None:
    for p in pruned:
        meta = p.item.obj["metadata"]
        note = "; ".join(filter(None, (p.item.describe(done=True), p.note)))
        print(_row(p.outcome, p.item.obj["kind"], meta.get("namespace", ""), meta["name"], note))
    counts = {outcome: sum(p.outcome == outcome for p in pruned) for outcome in ("deleted", "deleting", "released")}
    if not pruned:
        print(_("nothing to prune: every object labelled managed-by gpugov is declared"))
    else:
        print(_("pruned what gpugov no longer declares: {counts}").format(
            counts=_(", ").join(f"{n} {_verb(o)}" for o, n in counts.items() if n)))


PREVIEW = {"create": "would create", "configure": "would configure", "label": "would label", "unchanged": "unchanged",
           "skip": "would skip", "apply": "would apply"}


def _dry_run(objects: list[dict[str, Any]], plan: list[Any], pruning: bool, too_many: str = "",
             changes: dict[tuple[str, str, str], str] | None = None) -> ExitCode:
    """The dry run's listing; `changes`: what the server-side apply dry run says each object would see."""
    changes = changes or {}
    for obj in objects:
        meta = obj["metadata"]
        change = changes.get((obj["kind"], meta.get("namespace", ""), meta["name"]), "apply")
        note = _("not in the cluster (gpugov patches nodes, it never creates them)") if change == "skip" else ""
        print(_row(PREVIEW[change], obj["kind"], meta.get("namespace", ""), meta["name"], note, width=15))
    for item in plan:
        meta = item.obj["metadata"]
        print(_row(f"would {item.action}", item.obj["kind"], meta.get("namespace", ""), meta["name"], item.describe(),
                   width=15))
    deletes = sum(item.action == "delete" for item in plan)
    what = (_("{deletes} would be deleted and {released} released").format(deletes=deletes, released=len(plan) - deletes)
            if pruning else _("nothing would be pruned (--no-prune)"))
    if too_many:
        print(_("apply would be refused (exit 2): {why}").format(why=too_many))
    to = {"create": _("to create"), "configure": _("to configure"), "label": _("to label"), "unchanged": _("unchanged"),
          "skip": _("to skip"), "apply": _("to apply")}
    tally = _(", ").join(f"{sum(1 for c in changes.values() if c == verb)} {to[verb]}"
                         for verb in PREVIEW if any(c == verb for c in changes.values()))
    print(_("dry run: {count} objects would be applied{tally}; {what}; nothing was changed").format(
        count=len(objects), tally=_(" ({tally})").format(tally=tally) if tally else "", what=what))
    return ExitCode.USAGE if too_many else ExitCode.OK


def cmd_drift(args: argparse.Namespace) -> ExitCode:
    """Compare the declarations with the live cluster; exit 3 (and alert) when the check is incomplete."""
    from kubernetes import config as kube_config

    from gpugov.cluster.observe import observe
    from gpugov.compile.operations import AGENT_NODE_SELECTOR
    from gpugov.drift import check
    from gpugov.findings import Level
    from gpugov.findings.report import REPORTERS
    from gpugov.i18n import Text
    from gpugov.sources import CheckIncomplete
    from gpugov.sources.agents import agent_nodes, fetch_snapshots, load_snapshots
    from gpugov.sources.prometheus import utilisation

    state = desired(args)
    model, objects = state.model, state.objects
    api = None
    try:
        api = api_client(args, in_cluster=True)
        live = observe(api, objects)
        if args.prometheus:
            live.gpu_utilisation = utilisation(args.prometheus, model.limits.idle_window)
        if args.agent_snapshots:
            live.agent_snapshots = load_snapshots(Path(args.agent_snapshots))
        elif args.agent_url:
            declared = [o["metadata"]["name"] for o in objects if o["kind"] == "Node"]
            nodes = agent_nodes(declared, live.nodes, AGENT_NODE_SELECTOR)
            live.agent_snapshots = fetch_snapshots(args.agent_url, nodes, live.nodes)
    except (CheckIncomplete, kube_config.ConfigException, OSError) as exc:
        return _incomplete(args, state, _one_line(exc), api)
    findings = check(model, objects, live, state.backend, state.cluster)
    checked = Text("cluster {cluster} ({backend}): {objects} desired objects, {nodes} nodes, {pods} pods checked",
                   cluster=state.cluster, backend=state.backend, objects=len(objects), nodes=len(live.nodes),
                   pods=len(live.pods))  # the reader's language in text; JSON keeps the English
    sys.stdout.write(REPORTERS[args.format or default_format()](findings, 0, checked, "gpugov drift"))
    failing = [f for f in findings if f.level is not Level.INFO]
    sent = _notify(args, failing, state.cluster, api)
    if sent is not None:
        return sent
    return ExitCode.FINDINGS if failing else ExitCode.OK


def _notify(args: argparse.Namespace, findings: list[Finding], cluster: str, api: Any,
            command: str = "drift") -> ExitCode | None:
    """Send the findings when --notify asks, titled `gpugov <command>: <cluster>`; an ExitCode only
    for a bad notification setup. The state may live in a ConfigMap of the cluster (the CronJob's
    pods keep no files)."""
    from gpugov.notify.cli import notify_from_args, print_result
    from gpugov.notify.config import NotifyConfigError

    def configmap(where: str) -> Any:
        from gpugov.cluster.notify_state import ConfigMapState

        if api is None:
            raise NotifyConfigError(f"notify state configmap:{where}: no cluster client to reach it")
        try:
            return ConfigMapState.parse(api, where)
        except ValueError as exc:
            raise NotifyConfigError(str(exc)) from None

    try:
        sent = notify_from_args(args, findings, f"gpugov {command}: {cluster}", configmap=configmap)
    except NotifyConfigError as exc:
        return fail(str(exc))
    if sent is not None:
        print_result(sent)
    return None


def _incomplete(args: argparse.Namespace, state: DesiredState, reason: str, api: Any) -> ExitCode:
    """Exit 3: one line on stderr, a report saying so (json, github, markdown) and an alert
    (GD000, deduplicated like any finding), so an unreachable cluster is never silent."""
    import json

    from gpugov.drift.rules import INCOMPLETE
    from gpugov.findings import make
    from gpugov.findings.report import REPORTERS
    from gpugov.i18n import Text

    finding = make(INCOMPLETE, Text("could not check drift on cluster {cluster}: {reason}", cluster=state.cluster,
                                    reason=reason), None,
                   object=f"Cluster {state.cluster}")
    fmt = args.format or default_format()
    checked = f"cluster {state.cluster} ({state.backend}): could not check"
    if fmt == "json":
        report = json.loads(REPORTERS["json"]([finding], 0, checked, "gpugov drift"))
        sys.stdout.write(json.dumps({"incomplete": True, "reason": reason, **report}, indent=2) + "\n")
    elif fmt != "text":  # text: the stderr line is the report
        sys.stdout.write(REPORTERS[fmt]([finding], 0, checked, "gpugov drift"))
    fail(f"could not check drift: {reason}", ExitCode.INCOMPLETE)
    code = _notify(args, [finding], state.cluster, api)
    return ExitCode.INCOMPLETE if code is None else code


def _agent_url(template: str) -> str:
    """--agent-url: only the {node} and {node_ip} placeholders (checked before any read)."""
    try:
        template.format(node="node", node_ip="192.0.2.1")
    except (KeyError, IndexError, ValueError):
        raise argparse.ArgumentTypeError(f"bad template {template!r}: use {{node}} or {{node_ip}}, e.g. "
                                         "http://{node_ip}:9402/snapshot.json") from None
    return template


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "drift", help="compare the declarations with the live cluster; exit 1 drift, 3 could not check",
        description="Compare what compile wants for the cluster with what it holds: objects (only the fields gpugov "
        "sets), nodes' labels, taints, GPU model and MIG layout, usage against quota, idle accelerators (with "
        "Prometheus), the node agents' NVML readings; optionally send the findings to chat. Exit 0 no drift, 1 drift, "
        "2 bad usage, 3 could not check (unreachable, forbidden, partial, not a Kubernetes API): never read as no "
        "drift.")
    compile_target_args(p)
    kubeconfig_args(p, in_cluster=True)
    format_arg(p)
    p.add_argument("--prometheus", metavar="URL", help="Prometheus with DCGM metrics, to find idle accelerators")
    agents = p.add_mutually_exclusive_group()
    agents.add_argument("--agent-url", metavar="TEMPLATE", type=_agent_url,
                        help="NVML snapshots from the node agents; {node} is the node's name, {node_ip} its "
                        "InternalIP, e.g. http://{node_ip}:9402/snapshot.json (the agent DaemonSet's hostPort)")
    agents.add_argument("--agent-snapshots", metavar="DIR", help="NVML snapshots saved as DIR/*.json")
    notify_arguments(p)
    p.set_defaults(func=cmd_drift)

    p = sub.add_parser("apply", help="server-side apply the compiled objects to a cluster (field manager gpugov), "
                       "then prune what gpugov owns and no longer declares; exit 3 could not apply",
                       description="First check which cluster the API server is (the identity record gpugov keeps "
                       "there, a pinned spec.identity, gpugov's objects of another declared cluster) and refuse "
                       "before any write when it is another one; then server-side apply compile's objects (nodes "
                       "are labelled, never created), read them back, wait (up to 30 s) until the API server "
                       "enforces the admission policies (asked by dry runs it must refuse), and prune what gpugov "
                       "owns and no longer "
                       "declares (a prune past spec.pruneLimit needs --allow-mass-prune). Each object reads "
                       "created, configured, labelled or unchanged. Exit 0 applied, 1 an applied object was not "
                       "found on read-back (nothing pruned), 2 bad usage, or refused (another cluster, a mass prune, "
                       "objects gpugov does not own): nothing changed, 3 could not apply (unreachable, not a "
                       "Kubernetes API, a kind not served, an object refused, or an admission policy still not enforced).")
    compile_target_args(p)
    kubeconfig_args(p, in_cluster=True)
    p.add_argument("--only-quotas", action="store_true",
                   help="apply only the quota objects (ClusterQueues, Cohorts, Volcano Queues, ResourceQuotas) and "
                   "prune nothing: what the timeline CronJob runs at each QuotaGrant or QuotaWindow boundary")
    p.add_argument("--dry-run", action="store_true",
                   help="list what would be applied, deleted and released; change nothing")
    p.add_argument("--prune", action=argparse.BooleanOptionalAction, default=True,
                   help="delete objects gpugov owns that are no longer declared; release (unlabel) namespaces and "
                   "nodes (default: prune; --no-prune to keep them)")
    p.add_argument("--allow-mass-prune", action="store_true",
                   help="prune even past the Cluster's spec.pruneLimit (default: more than 30 objects or half of "
                   "what gpugov owns on the cluster is refused)")
    p.add_argument("--reidentify", action="store_true",
                   help="record this cluster anew as --cluster, over an identity record (or gpugov objects) of "
                   "another declared cluster: only to rebuild a cluster as another one on purpose; never "
                   "overrides a pinned spec.identity")
    p.add_argument("--fleet", metavar="NAME",
                   help="apply every member of a declared Fleet, the workers first, then the manager, each as "
                   "apply --cluster MEMBER (the wrong-cluster guard for each); the first that fails stops the rest")
    p.add_argument("--member", action="append", metavar="CLUSTER=KUBECONFIG",
                   help="with --fleet: the kubeconfig of a member (repeat; default --kubeconfig with the context "
                   "named after the cluster)")
    p.set_defaults(func=cmd_apply)
