"""`gpugov profile`: a job's use of what it asked for, or a tenant's jobs in one table (gpugov.profile)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gpugov.app.exit import ExitCode
from gpugov.cli.common import compile_target_args, desired, fail, kubeconfig_args


def _facts(workload: Any, tenant: str, model: Any) -> Any:
    from gpugov.profile.job import JobFacts
    from gpugov.usage.ledger import cluster_pools

    accelerators = workload.accelerators
    resource = next(iter(accelerators), "")
    flavor = next((f for ps in workload.pod_sets for r, f in ps.flavors.items() if r == resource), "")
    pool = cluster_pools(model[0], model[1]).get(flavor)
    return JobFacts(f"{workload.namespace}/{workload.job}", tenant, resource, int(accelerators.get(resource, 0)),
                    pool.model if pool is not None else None, workload.created or workload.admitted_at,
                    workload.admitted_at, workload.finished_at)


def _row(p: Any) -> dict[str, Any]:
    def num(value: float | None, digits: int = 1) -> float | None:
        return None if value is None else round(value, digits)

    return {"job": p.key, "tenant": p.tenant, "resource": p.resource, "devices": p.devices,
            "queue_wait_seconds": num(p.queue_wait, 0), "admitted_seconds": num(p.admitted_for, 0),
            "measured_seconds": num(p.measured, 0), "activity_mean_percent": num(p.activity_mean),
            "activity_peak_percent": num(p.activity_peak),
            "idle_share": num(p.idle_share, 3), "low_activity_share": num(p.low_share, 3),
            "memory_peak_mib": num(p.memory_peak_mib, 0), "card_mib": num(p.card_mib, 0), "fits_mig": p.fits_mig,
            "hami_share": p.hami_share, "host_io_bytes_per_second": num(p.host_io_mean, 0), "advice": list(p.advice)}  # Texts: English in the JSON, the reader's language in text


def _text(rows: list[dict[str, Any]]) -> str:
    from gpugov.i18n import _, localized
    from gpugov.i18n.width import ljust

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{value:.0f}%"

    head = [(_("JOB"), 36), (_("DEVICES"), 14), (_("ACTIVITY"), 9), (_("PEAK"), 6), (_("IDLE"), 6),
            (_("MEMORY-PEAK"), 12), (_("FITS"), 9), (_("WAIT"), 8)]
    lines = [" ".join(ljust(name, width) for name, width in head).rstrip()]
    for r in rows:
        memory = "-" if r["memory_peak_mib"] is None else f"{r['memory_peak_mib'] / 1024:.1f}GiB"
        idle = None if r["idle_share"] is None else r["idle_share"] * 100
        cells = [r["job"], f"{r['devices']} {r['resource'].removeprefix('nvidia.com/')}",
                 pct(r["activity_mean_percent"]), pct(r["activity_peak_percent"]), pct(idle), memory,
                 r["fits_mig"] or "-", f"{r['queue_wait_seconds']:.0f}s"]
        lines.append(" ".join(ljust(str(c), w) for c, (_n, w) in zip(cells, head, strict=True)).rstrip())
        lines += [f"  - {localized(a)}" for a in r["advice"]]
    return "\n".join(lines) + "\n"


def cmd_profile(args: argparse.Namespace) -> ExitCode:
    from datetime import UTC, datetime, timedelta

    from kubernetes import config as kube_config

    from gpugov.cli.cluster import api_client
    from gpugov.cluster.queues import read_workloads
    from gpugov.profile.job import profile
    from gpugov.queueing.workload import WorkloadError, from_object
    from gpugov.sources import CheckIncomplete
    from gpugov.sources.prometheus import HOST_IO, MEMORY, per_pod, utilisation_series
    from gpugov.usage.attribution import attribution

    if args.tenant and args.job and args.repo == ".":  # `profile --tenant T REPO`: the one positional is the repo
        args.repo, args.job = args.job, None
    if bool(args.job) == bool(args.tenant):
        return fail("give one NAMESPACE/JOB, or --tenant T for a table of its jobs")
    if args.job and "/" not in args.job:
        return fail(f"{args.job}: a job is NAMESPACE/JOB")
    state = desired(args)
    model = state.model
    rules = attribution(model, state.cluster, state.objects)
    now = datetime.now(UTC)
    try:
        workloads = [from_object(raw) for raw in read_workloads(api_client(args))]
    except (CheckIncomplete, WorkloadError, kube_config.ConfigException, OSError) as exc:
        return fail(f"could not read the Workloads of cluster {state.cluster}: {exc}", ExitCode.INCOMPLETE)
    chosen = [w for w in workloads if w.accelerators and (
        f"{w.namespace}/{w.job}" == args.job if args.job else rules.tenant_of(w) == args.tenant)]
    if not chosen:
        return fail(f"no Workload with accelerators for {args.job or 'tenant ' + args.tenant} on cluster "
                    f"{state.cluster}")
    step = timedelta(seconds=args.step)
    starts = [w.admitted_at for w in chosen if w.admitted_at is not None]
    series: dict[str, dict[tuple[str, str], list[Any]]] = {"activity": {}, "memory": {}, "io": {}}
    if starts:
        since, step_s = min(starts) - step, args.step
        try:
            series["activity"] = utilisation_series(args.prometheus, since, now, step_s)
            series["memory"] = per_pod(args.prometheus, (MEMORY.format(window=f"{step_s}s"),), since, now, step_s)
            series["io"] = per_pod(args.prometheus, (HOST_IO.format(window=f"{step_s}s"),), since, now, step_s)
        except CheckIncomplete as exc:
            return fail(f"could not read Prometheus: {exc}", ExitCode.INCOMPLETE)
    rows = []
    for w in sorted(chosen, key=lambda w: w.key):
        def mine(kind: str, w: Any = w) -> dict[str, list[Any]]:
            return {pod: s for (ns, pod), s in series[kind].items()
                    if ns == w.namespace and (pod == w.owner_name or pod.startswith(f"{w.job}-"))}

        facts = _facts(w, rules.tenant_of(w), (model, state.cluster))
        found = profile(facts, mine("activity"), mine("memory"), mine("io"), step, now,
                        model.limits.idle_below_percent, model.limits.profile)
        rows.append(_row(found))
    if args.format == "json":
        sys.stdout.write(json.dumps({"cluster": state.cluster, "jobs": rows}, ensure_ascii=False, indent=1) + "\n")
    else:
        sys.stdout.write(_text(rows))
    return ExitCode.OK


def register(sub: argparse._SubParsersAction) -> None:
    from gpugov.cli.queue import positive

    p = sub.add_parser(
        "profile",
        help="a job's use of what it asked for (activity, memory peak, idle time, queue wait) with advice",
        description="From the job's Workload and its pods' DCGM samples over its admitted life: devices asked "
        "for, mean and peak activity, idle and low-activity share of the measured time, memory peak against the "
        "card and the smallest MIG profile or HAMi share that would hold it, time waiting in the queue, and advice "
        "by the thresholds Guardrails.profile declares. --tenant T: one row per job of the tenant. Exit 0, 2 bad "
        "usage or no such job, 3 could not read the cluster or Prometheus.",
    )
    p.add_argument("job", nargs="?", metavar="NAMESPACE/JOB", help="the job (a Job's name, or the Workload's own)")
    compile_target_args(p)
    kubeconfig_args(p)
    p.add_argument("--tenant", help="a table of every job of this tenant instead")
    p.add_argument("--prometheus", metavar="URL", required=True, help="Prometheus with the DCGM exporter's series")
    p.add_argument("--step", type=positive, default=60, metavar="SECONDS", help="sample resolution (default 60)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=cmd_profile)
