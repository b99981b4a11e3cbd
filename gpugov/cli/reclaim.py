"""`gpugov reclaim`: warn about, then deactivate, admitted Workloads that hold accelerators idle, by the
reclaim policy declared in Git (issue #26).

Everything is read first (Workloads, running Pods, the declared metric from Prometheus); a read that is
not whole ends the run with exit 3 before anything is decided or done. Dry run by default: the exact
list of what would be done; --apply patches the Workloads, records Events and notifies the sinks.

On a Volcano cluster the subjects are the tenants' batch/v1 Jobs scheduled by volcano and their Volcano Jobs
(gpugov.reclaim.volcano): the warning and the deactivation are marks on the Job, a deactivation also sets
spec.suspend=true (a Volcano Job: Volcano's AbortJob Command; its pods end and Volcano frees their
accelerators), and the admission policy gpugov-volcano-reclaim keeps the tenant from undoing either.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from gpugov.app.exit import ExitCode
from gpugov.cli.common import compile_target_args, desired, fail, kubeconfig_args
from gpugov.i18n import _
from gpugov.i18n.width import ljust

VERBS = {"warn": "warn", "deactivate": "deactivate", "clear": "clear warning", "": "-"}


def _series(args: argparse.Namespace, candidates: list[Any], now: datetime) -> dict[str, dict[tuple[str, str], Any]]:
    """metric -> (namespace, pod) -> series over the longest window any candidate's policy declares."""
    from gpugov.sources.pod_metrics import pod_series

    windows: dict[str, int] = defaultdict(int)
    for c in candidates:
        if c.policy.idle is not None:
            windows[c.policy.idle.metric] = max(windows[c.policy.idle.metric], c.policy.idle.window)
    step = args.step
    return {metric: pod_series(args.prometheus, metric, now - timedelta(seconds=window + step), now, step)
            for metric, window in sorted(windows.items())}


def decisions_for(candidates: list[Any], series: dict[str, dict[tuple[str, str], Any]] | None, now: datetime,
                  step: int, volcano: bool = False) -> list[Any]:
    from gpugov.reclaim.decide import NONE, Decision, decide

    out = []
    for c in candidates:
        idle = c.policy.idle
        if idle is not None and series is None:
            out.append(Decision(c.subject.key, c.subject.tenant, "unknown", NONE, "no --prometheus given: "
                                "utilisation unknown, nothing is done"))
            continue
        # Only its own pods' series: one lookup per pod, not a scan of every series per Workload.
        of_metric = (series or {}).get(idle.metric if idle else "", {})
        by_pod = {pod: of_metric[(c.namespace, pod)] for pod in c.subject.pods if (c.namespace, pod) in of_metric}
        out.append(decide(c.subject, idle, by_pod, now, timedelta(seconds=step), c.policy.snooze_maximum, volcano))
    return out


def _verb(action: str) -> str:
    """VERBS[action] in the reader's language (the JSON keeps the action as it is)."""
    return {"warn": _("warn"), "deactivate": _("deactivate"), "clear": _("clear warning")}.get(action, VERBS[action])


def _text(rows: list[dict[str, Any]], cluster: str, applied: bool) -> str:
    columns = zip((_("WORKLOAD"), _("TENANT"), _("STATE"), _("ACTION")), (40, 16, 10, 14), strict=True)
    lines = [" ".join(ljust(name, cells) for name, cells in columns) + " " + _("WHY")]
    for row in rows:
        action = _verb(row["action"])
        if row["action"] and row.get("error"):
            action += _(" (FAILED)")
        elif row["action"] and not applied:
            action = _("would {action}").format(action=action)
        why = row["why"] + (f" [{row['error']}]" if row.get("error") else "")
        lines.append(f"{row['workload']:<40} {row['tenant']:<16} {row['state']:<10} {ljust(action, 14)} {why}")
    acted = sum(1 for r in rows if r["action"])
    mode = _("applied") if applied else _("dry run, nothing changed (--apply acts)")
    lines.append(_("cluster {cluster}: {count} admitted workloads under a reclaim policy, {acted} to act on; "
                   "{mode}").format(cluster=cluster, count=len(rows), acted=acted, mode=mode))
    return "\n".join(lines) + "\n"


def cmd_reclaim(args: argparse.Namespace) -> ExitCode:
    from kubernetes import config as kube_config

    from gpugov.cli.cluster import _notify, api_client
    from gpugov.cluster.reclaim import act, read
    from gpugov.cluster.volcano_reclaim import act_on_job, read_jobs
    from gpugov.compile import Backend
    from gpugov.queueing.workload import WorkloadError
    from gpugov.reclaim.subjects import candidates, findings
    from gpugov.reclaim.volcano import volcano_candidates
    from gpugov.sources import CheckIncomplete

    state = desired(args)
    if state.backend not in (Backend.KUEUE, Backend.VOLCANO):
        return fail(f"reclaim deactivates Kueue Workloads or Volcano-scheduled Jobs; cluster {state.cluster} is "
                    f"scheduled by {state.backend}")
    volcano = state.backend is Backend.VOLCANO
    now = datetime.now(UTC).replace(microsecond=0)
    api = None
    try:
        api = api_client(args, in_cluster=True)
        if volcano:  # the tenants' batch/v1 Jobs scheduled by volcano and Volcano Jobs (gpugov.reclaim.volcano)
            jobs, pods, vcjobs = read_jobs(api, args.page_size)
            found = volcano_candidates(state.model, jobs, pods, vcjobs)
        else:
            workloads, pods = read(api, args.page_size)
            found = candidates(state.model, workloads, pods)
        series = _series(args, found, now) if args.prometheus else None
    except (CheckIncomplete, WorkloadError, kube_config.ConfigException, OSError) as exc:
        return fail(f"could not read cluster {state.cluster} and its metrics, nothing was done: "
                    f"{' '.join(str(exc).split())}", ExitCode.INCOMPLETE)
    decisions = decisions_for(found, series, now, args.step, volcano)
    rows = [{"workload": d.key, "tenant": d.tenant, "state": d.state, "action": d.action, "why": d.why,
             **({"peakPercent": round(d.peak, 2)} if d.peak is not None else {})} for d in decisions]
    failed = 0
    if args.apply:
        for candidate, decision, row in zip(found, decisions, rows, strict=True):
            if decision.action:
                try:
                    error = (act_on_job if volcano else act)(api, candidate, decision, now)
                except CheckIncomplete as exc:
                    error = " ".join(str(exc).split())
                if error:
                    row["error"] = error
                    failed += 1
    if args.format == "json":
        sys.stdout.write(json.dumps({"cluster": state.cluster, "at": f"{now:%Y-%m-%dT%H:%M:%SZ}",
                                     "applied": bool(args.apply), "workloads": rows}, indent=2) + "\n")
    else:
        sys.stdout.write(_text(rows, state.cluster, bool(args.apply)))
    if args.apply:
        done = [d for d, r in zip(decisions, rows, strict=True) if d.action and not r.get("error")]
        code = _notify(args, findings(done), state.cluster, api, "reclaim") if findings(done) else None
        if code is not None:
            return code
        if failed:
            return fail(f"{failed} action(s) on cluster {state.cluster} were refused", ExitCode.INCOMPLETE)
        return ExitCode.OK
    return ExitCode.FINDINGS if any(d.action in ("warn", "deactivate") for d in decisions) else ExitCode.OK


def register(sub: argparse._SubParsersAction) -> None:
    from gpugov.cli.queue import positive
    from gpugov.notify.cli import add_arguments as notify_arguments

    p = sub.add_parser(
        "reclaim",
        help="warn about, then deactivate, Workloads (Kueue) or Jobs (Volcano) that hold accelerators idle "
        "(declared reclaim policy)",
        description="Per admitted Workload of a tenant with a reclaim policy: idle for the declared window "
        "(every pod below the threshold, the metric present, fresh and covering the window), warned, grace over, "
        "not exempt, not snoozed? Dry run by default, printing the exact list; --apply warns (an Event and the "
        "gpugov.io/reclaim-warned-at annotation), deactivates (spec.active=false: Kueue frees the quota; on "
        "Volcano the Job's spec.suspend=true: its pods end) and "
        "notifies the sinks. Missing, stale or partial metrics are 'unknown', never idle. Exit 0 (dry run: "
        "nothing to do; --apply: done), 1 dry run with workloads to warn or deactivate, 2 bad usage, 3 could not "
        "read the cluster or Prometheus (nothing done) or an action was refused.",
    )
    compile_target_args(p)
    kubeconfig_args(p, in_cluster=True)
    p.add_argument("--prometheus", metavar="URL", help="Prometheus with the declared metric (without it every "
                   "workload is 'unknown' and nothing is done)")
    p.add_argument("--apply", action="store_true", help="act: patch Workloads (Kueue) or Jobs (Volcano), record Events, "
                   "notify")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--step", type=positive, default=60, metavar="SECONDS",
                   help="metric resolution: a gap of more than two steps is missing data (default 60)")
    p.add_argument("--page-size", type=positive, default=500, metavar="N", help="objects per list request (default 500)")
    notify_arguments(p)
    p.set_defaults(func=cmd_reclaim)
