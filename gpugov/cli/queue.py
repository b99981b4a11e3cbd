"""`gpugov queue` and `gpugov why`: the queues of a Kueue or Volcano cluster in the organisation's terms.

Read-only and paginated (gpugov.cluster.queues); a read that is not whole exits 3. Exit 1 when
a shown pending workload can never start as declared (it exceeds its tenant's maximum, no pool
matches it, or its queue is misconfigured): a finding, not a wait.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from gpugov.app.exit import ExitCode
from gpugov.cli.common import CommandFailed, compile_target_args, desired, fail, kubeconfig_args, lazy_choices

if TYPE_CHECKING:  # the commands import them when they run
    from gpugov.app.desired import DesiredState
    from gpugov.queueing.view import Snapshot
    from gpugov.queueing.volcano_report import View as VolcanoView

Progress = Callable[[str], None]


def progress_printer(what: str) -> tuple[Progress, Callable[[], None]]:
    """(report a step, clear the line): on a terminal only, on stderr, so output stays clean."""
    if not sys.stderr.isatty():
        return (lambda _step: None), (lambda: None)

    def show(step: str) -> None:
        sys.stderr.write(f"\r\x1b[2Kgpugov {what}: {step}")
        sys.stderr.flush()

    def clear() -> None:
        sys.stderr.write("\r\x1b[2K")
        sys.stderr.flush()

    return show, clear


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def _kueue_state(args: argparse.Namespace, what: str, state: DesiredState | None = None) -> DesiredState:
    state = state or desired(args)
    if state.backend != "kueue":
        raise CommandFailed(f"{what} reads Kueue's queues; cluster {state.cluster} is scheduled by {state.backend}")
    return state


def _snapshot(args: argparse.Namespace, state: DesiredState, what: str) -> Snapshot:
    """The Snapshot of the cluster, or CommandFailed (exit 3 when it could not be read whole)."""
    from datetime import UTC, datetime

    from kubernetes import config as kube_config

    from gpugov.app.pipeline import gc_paused
    from gpugov.cli.cluster import api_client
    from gpugov.cluster.impersonate import impersonate
    from gpugov.cluster.queues import read_queues
    from gpugov.kube.objects import LABEL_TENANT
    from gpugov.queueing.view import snapshot
    from gpugov.queueing.workload import WorkloadError, from_object
    from gpugov.sources import CheckIncomplete

    if args.as_group and not args.as_user:
        raise CommandFailed("--as-group needs --as (the user to act as), as with kubectl")
    show, clear = progress_printer(what)
    now = datetime.now(UTC).replace(microsecond=0)
    # The tenants' namespaces on this cluster: read one by one where LocalQueues cannot be listed cluster-wide.
    declared = sorted(o["metadata"]["name"] for o in state.objects
                      if o["kind"] == "Namespace" and LABEL_TENANT in (o["metadata"].get("labels") or {}))
    try:
        kube = api_client(args)
        if args.as_user:
            impersonate(kube, args.as_user, args.as_group or ())
        with gc_paused():  # 100,000 records and no cycle among them: the collector's scans cost more than reading
            read = read_queues(kube, page_size=args.page_size, on_progress=show, namespaces=declared,
                               workload_record=from_object)
            cohorts = read.cohorts if read.cohorts is not None else [o for o in state.objects if o["kind"] == "Cohort"]
            snap = snapshot(state.model, now, read.cluster_queues, read.local_queues, read.workloads, read.pending,
                            read.readable, read.denied, cohorts)
    except (CheckIncomplete, WorkloadError, kube_config.ConfigException, OSError) as exc:
        clear()
        raise CommandFailed(f"could not read the queues of cluster {state.cluster}: {' '.join(str(exc).split())}",
                            ExitCode.INCOMPLETE) from None
    clear()
    return snap


def _volcano_view(args: argparse.Namespace, state: DesiredState) -> VolcanoView:
    """The Volcano view of the cluster (gpugov.queueing.volcano), or CommandFailed (exit 3)."""
    from datetime import UTC, datetime

    from kubernetes import config as kube_config

    from gpugov.cli.cluster import api_client
    from gpugov.cluster.impersonate import impersonate
    from gpugov.cluster.volcano_queues import read_volcano
    from gpugov.kube.objects import LABEL_TENANT
    from gpugov.queueing.volcano import VolcanoError
    from gpugov.queueing.volcano_report import declared_total, view
    from gpugov.sources import CheckIncomplete

    if args.as_group and not args.as_user:
        raise CommandFailed("--as-group needs --as (the user to act as), as with kubectl")
    tenant_of_namespace = state.model.tenant_of_namespace()
    try:
        kube = api_client(args)
        if args.as_user:
            impersonate(kube, args.as_user, args.as_group or ())
        namespaces = sorted(o["metadata"]["name"] for o in state.objects if o["kind"] == "Namespace"
                            and LABEL_TENANT in (o["metadata"].get("labels") or {}))
        read = read_volcano(kube, namespaces, page_size=args.page_size)
        pools = [p.capacity for p in state.model.pools.values() if state.model.pool_cluster(p) == state.cluster]
        return view(datetime.now(UTC).replace(microsecond=0), tenant_of_namespace, read.queues, read.nodes,
                    read.podgroups, read.pods, read.jobs, read.failed_create, declared_total(pools), read.refused)
    except (CheckIncomplete, VolcanoError, kube_config.ConfigException, OSError) as exc:
        raise CommandFailed(f"could not read the queues of cluster {state.cluster}: {' '.join(str(exc).split())}",
                            ExitCode.INCOMPLETE) from None


def _volcano_queue(args: argparse.Namespace, state: DesiredState) -> ExitCode:
    from gpugov.queueing import volcano_report as vr

    v = _volcano_view(args, state)
    if args.tenant:
        v = vr.View(v.now, v.capacity, [e for e in v.entries if e.tenant in set(args.tenant)])
    render = {"text": vr.queue_text, "markdown": vr.queue_markdown, "json": vr.queue_json}[args.format]
    sys.stdout.write(render(v, state.cluster))
    return ExitCode.FINDINGS if any(e.verdict.finding for e in v.entries if e.job.state != "finished") else ExitCode.OK


def _volcano_why(args: argparse.Namespace, state: DesiredState, namespace: str, job: str) -> ExitCode:
    from gpugov.queueing import volcano_report as vr

    v = _volcano_view(args, state)
    found = [e for e in v.entries if e.job.namespace == namespace and job in (e.job.job, e.job.podgroup)]
    if not found:
        return fail(f"no job {namespace}/{job} scheduled by Volcano: no such Job or PodGroup, or you may not read it")
    e = found[0]
    if args.format == "json":
        sys.stdout.write(vr.why_json(e, v, state.cluster))
    else:
        sys.stdout.write(vr.why_text(e, v, markdown=args.format == "markdown"))
    return ExitCode.FINDINGS if e.verdict.finding else ExitCode.OK


def cmd_queue(args: argparse.Namespace) -> ExitCode:
    from gpugov.app.pipeline import gc_paused
    from gpugov.queueing import report
    from gpugov.queueing.view import entries, gaps

    volcano = desired(args)
    if volcano.backend == "volcano":
        unknown = sorted(set(args.tenant or ()) - set(volcano.model.tenants))
        if unknown:
            return fail(f"no tenant {', '.join(unknown)} is declared (tenants: {', '.join(sorted(volcano.model.tenants))})")
        return _volcano_queue(args, volcano)
    state = _kueue_state(args, "queue", volcano)
    known = set(state.model.tenants)
    unknown = sorted(set(args.tenant or ()) - known)
    if unknown:
        return fail(f"no tenant {', '.join(unknown)} is declared (tenants: {', '.join(sorted(known))})")
    snap = _snapshot(args, state, "queue")
    with gc_paused():  # an entry per Workload, acyclic, as in _snapshot
        shown = entries(snap, args.tenant or ())
        missing = gaps(snap, args.tenant or ())
        if args.format == "json":  # written as it is encoded: 100,000 workloads are never one string
            sys.stdout.writelines(report.queue_json_pieces(shown, snap.now, state.cluster, missing))
        else:
            render = {"text": report.queue_text, "markdown": report.queue_markdown}[args.format]
            sys.stdout.write(render(shown, snap.now, state.cluster, missing))
    return ExitCode.FINDINGS if any(e.reason.finding for e in shown) else ExitCode.OK


def cmd_why(args: argparse.Namespace) -> ExitCode:
    from gpugov.queueing import report
    from gpugov.queueing.view import explain_job

    namespace, _, job = args.job.partition("/")
    if not namespace or not job:
        return fail(f"{args.job!r}: name the job as NAMESPACE/JOB")
    volcano = desired(args)
    if volcano.backend == "volcano":
        return _volcano_why(args, volcano, namespace, job)
    state = _kueue_state(args, "why", volcano)
    snap = _snapshot(args, state, "why")
    if namespace not in snap.readable:
        tenant = snap.tenant_of_namespace.get(namespace, "")
        grant = f"; the {snap.contacts[tenant]}" if tenant in snap.contacts else ""
        return fail(f"you may not read the Workloads of namespace {namespace} (forbidden: list "
                    f"workloads.kueue.x-k8s.io there){grant}", ExitCode.INCOMPLETE)
    candidates = [w for w in snap.workloads
                  if w.namespace == namespace and job in (w.job, w.name)]
    if not candidates:
        return fail(f"no Workload for {namespace}/{job}: no such job, or it finished and its Workload was deleted")
    workload = max(candidates, key=lambda w: (w.created or snap.now, w.name))
    explanation = explain_job(snap, workload)
    if args.format == "json":
        sys.stdout.write(report.why_json(explanation, snap.now, state.cluster))
    else:
        sys.stdout.write(report.why_text(explanation, snap.now, markdown=args.format == "markdown"))
    return ExitCode.FINDINGS if explanation.entry.reason.finding else ExitCode.OK


def _common(p: argparse.ArgumentParser) -> None:
    compile_target_args(p)
    kubeconfig_args(p)
    p.add_argument("--as", dest="as_user", metavar="USER",
                   help="act as this user (Impersonate-User, like kubectl --as): see what a tenant sees")
    p.add_argument("--as-group", action="append", metavar="GROUP",
                   help="act as a member of this group too (repeatable; needs --as)")
    lazy_choices(p.add_argument("--format", default="text"), "gpugov.queueing.report:FORMATS")
    p.add_argument("--page-size", type=positive, default=500, metavar="N", help="objects per list request (default 500)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "queue",
        help="pending and admitted workloads per tenant and queue, with positions and why each waits",
        description="Per tenant and LocalQueue: admitted and pending Workloads with size (accelerators x pool), "
        "priority, position (Kueue's visibility API), why each pending one waits in plain words, and an estimated "
        "start where the running workloads' ends are known. Other tenants' job names are hidden unless you may "
        "read their Workloads; a read your roles refuse is named on a line of its own (what it hides, which "
        "declaration grants it, whom to ask), and workloads you may not read are counted from their ClusterQueue's "
        "status. On a Volcano cluster: every job (PodGroup) per tenant and Queue, and why each waits: what its Queue "
        "and every ancestor may hold (their real capability, as Volcano's capacity plugin computes it) and what is "
        "short, or the namespace's ResourceQuota refusing its pods. Exit 0, 1 when a pending workload can never start "
        "as declared, 3 could not read (or may not list ClusterQueues or Queues).",
    )
    _common(p)
    p.add_argument("--tenant", action="append", metavar="T", help="only this tenant (repeatable)")
    p.set_defaults(func=cmd_queue)
    w = sub.add_parser(
        "why",
        help="why one job waits: reason, deficit, what is ahead of it, estimated start",
        description="Explain one job (NAMESPACE/JOB: a Job's name or its Workload's): its state and position, why "
        "it waits, what is ahead of it in its ClusterQueue, what runs where it waits, and when it may start. "
        "Exit 0, 1 when it can never start as declared, 2 no such job, 3 could not read.",
    )
    w.add_argument("job", metavar="NAMESPACE/JOB")
    _common(w)
    w.set_defaults(func=cmd_why)
