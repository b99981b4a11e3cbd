"""`gpugov whatif`: what a change does to waiting times, replayed against a job trace; and
`gpugov trace`: import public traces, export a live cluster's finished Workloads, synthesize one."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from gpugov.app.exit import ExitCode
from gpugov.cli.common import CommandFailed, fail, kubeconfig_args
from gpugov.i18n import _

if TYPE_CHECKING:  # the commands import them when they run
    from gpugov.app.revision import Revision
    from gpugov.declarations.model import Model
    from gpugov.whatif.pair import Pair
    from gpugov.whatif.trace import Job

DEFAULT_SYNTHETIC_JOBS = 2000


def _label(revision: Revision) -> str:
    from gpugov.app.revision import WORKING_TREE

    return WORKING_TREE if revision.ref is None or revision.commit is None else \
        f"`{revision.ref}` ({revision.commit[:8]})"


def _valid(repo: Path, ref: str | None, what: Callable[[str], str]) -> tuple[Model, str]:
    """The model of `ref` (None: the working tree) and its label; refused (findings on stderr)
    when it does not validate. `what` names the revision in the refusal."""
    from gpugov.app.pipeline import InputError
    from gpugov.app.revision import WORKING_TREE, InvalidDeclarations, valid_revision
    from gpugov.findings.report import REPORTERS

    try:
        revision = valid_revision(repo, ref, repository_checks=False)
    except InputError as exc:
        raise CommandFailed(str(exc)) from None
    except InvalidDeclarations as exc:
        sys.stderr.write(REPORTERS["text"](exc.findings, len(exc.validation.files)))
        label = _label(exc.revision) if exc.revision is not None else WORKING_TREE
        raise CommandFailed(f"{what(label)} does not validate, so there is nothing to replay",
                            exc.exit_code) from None
    assert revision.model is not None  # valid_revision refuses a revision without one
    return revision.model, _label(revision)


def _cluster(models: list[Model], wanted: str | None, volcano: bool = True) -> str:
    """The cluster to replay: --cluster, or the only cluster both revisions know (Kueue's replay, or
    Volcano's where `volcano`)."""
    from gpugov.compile import Backend

    known = sorted(set.intersection(*(set(m.cluster_names()) for m in models)))
    if wanted is not None:
        if wanted not in known:
            raise CommandFailed(_("cluster '{cluster}' is not declared in both revisions (both have: {known})").format(
                cluster=wanted, known=", ".join(known) or _("none")))
        backends = {m.cluster(wanted).backend for m in models}
        if not volcano and backends != {Backend.KUEUE}:
            raise CommandFailed(_("this command reads Kueue's queues; cluster '{cluster}' is scheduled by {backend}")
                                .format(cluster=wanted, backend=models[-1].cluster(wanted).backend))
        if len(backends) > 1:
            raise CommandFailed(_("cluster '{cluster}' changes its scheduler between the revisions ({backends}); "
                                  "whatif replays one scheduler").format(
                                      cluster=wanted, backends=", ".join(sorted(str(b) for b in backends))))
        return wanted
    if len(known) != 1:
        described = ", ".join(f"{name} ({models[-1].cluster(name).backend})" for name in known) or _("none")
        raise CommandFailed(_("choose a cluster with --cluster (clusters in both revisions: {clusters})").format(
            clusters=described))
    return _cluster(models, known[0], volcano)


def _start(text: str | None, models: list[Model]) -> datetime:
    """The calendar instant of the trace's second 0: --start, else the earliest QuotaGrant's start."""
    from gpugov.declarations.timeline import parse_instant
    from gpugov.whatif.timeline import default_start

    if text is None:
        return default_start(models)
    instant = parse_instant(text)
    if instant is None:
        raise CommandFailed(f"--start must be an RFC 3339 instant with a zone (2030-03-01T08:00:00+08:00), got {text!r}")
    return instant.astimezone(UTC)


class ProgressLine:
    """One line on a terminal, rewritten in place while the what-if replays: which revision, how many of
    the trace's jobs it has submitted and the simulated time; where base and head replay at once
    (`together`), both on the one line. Only on a terminal (on_terminal), at most every REFRESH_S
    seconds, and cleared at the end, so nothing of it reaches a log or a pipe."""

    REFRESH_S = 0.2

    def __init__(self, stream: TextIO, together: bool = False) -> None:
        self.stream = stream
        self.together = together
        self.shown = 0.0  # monotonic time of the last line written
        self.width = 0  # characters on the line now
        self.sides: dict[str, tuple[int, int, int]] = {}  # which -> (submitted, total, simulated ms)

    @classmethod
    def on_terminal(cls, stream: TextIO, together: bool = False) -> ProgressLine | None:
        try:
            return cls(stream, together) if stream.isatty() else None
        except (AttributeError, ValueError):  # a replaced or closed stream
            return None

    def reporter(self, which: str) -> Callable[[int, int, int], None]:
        def report(submitted: int, total: int, now_ms: int) -> None:
            self.show(submitted, total, now_ms, which)

        return report

    def __call__(self, which: str, submitted: int, total: int, now_ms: int) -> None:
        """gpugov.whatif.pair's progress: one side's."""
        self.show(submitted, total, now_ms, which)

    def show(self, submitted: int, total: int, now_ms: int, which: str) -> None:
        self.sides[which] = (submitted, total, now_ms)
        now = time.monotonic()
        if now - self.shown < self.REFRESH_S:
            return
        self.shown = now
        if self.together:
            parts = []
            for side in ("base", "head"):
                if side in self.sides:
                    done, jobs, ms = self.sides[side]
                    parts.append(f"{side} {done:,} of {jobs:,} jobs ({100 * done // jobs if jobs else 100}%), "
                                 f"day {ms / 86_400_000:,.1f}")
                else:
                    parts.append(f"{side} starting")
            text = "gpugov whatif: replaying the base and the head at once: " + "; ".join(parts)
        else:
            days = now_ms / 86_400_000
            percent = 100 * submitted // total if total else 100
            text = (f"gpugov whatif: replaying the {which}: {submitted:,} of {total:,} jobs submitted ({percent}%), "
                    f"simulated day {days:,.1f}")
        self.stream.write("\r" + text.ljust(self.width))
        self.stream.flush()
        self.width = len(text)

    def clear(self) -> None:
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


def cmd_whatif(args: argparse.Namespace) -> ExitCode:
    from gpugov.whatif.pair import Pair, parallel_wanted

    with Pair(parallel_wanted(args.serial)) as pair:  # its second process starts while the revisions validate
        return _whatif(args, pair)


def _whatif(args: argparse.Namespace, pair: Pair) -> ExitCode:
    from gpugov.compile import Backend, CompileError
    from gpugov.whatif.replay import kueue_setup, replay
    from gpugov.whatif.report import compare, markdown, to_json
    from gpugov.whatif.setup import SetupError
    from gpugov.whatif.simulate import Options
    from gpugov.whatif.synthetic import synthesize
    from gpugov.whatif.trace import TraceError, read_trace

    repo = Path(args.repo)
    head, head_label = _valid(repo, args.head, lambda label: f"the head ({label})")
    base, base_label = _valid(repo, args.base, lambda label: f"the base {label}")
    cluster = _cluster([base, head], args.cluster)
    if head.cluster(cluster).backend == Backend.VOLCANO:
        return _whatif_volcano(args, pair, repo, base, head, base_label, head_label, cluster)
    options = Options(fair_sharing=not args.classical_preemption, seed=args.seed)
    start = _start(args.start, [base, head])
    try:
        if args.trace:
            jobs = read_trace(Path(args.trace))
            name = Path(args.trace).name
        else:
            jobs = synthesize(kueue_setup(base, cluster), args.synthetic_jobs, args.seed,
                              head=kueue_setup(head, cluster))
            if not jobs:
                return fail(f"no tenant of cluster '{cluster}' holds accelerator quota to synthesize a trace from; "
                            "give one with --trace")
            name = f"a synthetic trace ({len(jobs):,} jobs, seed {args.seed})"
        line = ProgressLine.on_terminal(sys.stderr, pair.parallel)
        try:
            base_run, head_run = pair.replay(replay, (base, cluster, jobs, base_label, options, start),
                                             (head, cluster, jobs, head_label, options, start), line)
        finally:
            if line is not None:
                line.clear()
    except (TraceError, SetupError, CompileError) as exc:
        return fail(str(exc))
    comparison = compare(name, cluster, options, base_run, head_run)
    text = json.dumps(to_json(comparison), indent=2) + "\n" if args.format == "json" else markdown(comparison)
    return _emit(text, args.out)


def _whatif_volcano(args: argparse.Namespace, pair: Pair, repo: Path, base: Model, head: Model, base_label: str,
                    head_label: str, cluster: str) -> ExitCode:
    """whatif on a cluster Volcano schedules: the trace replayed through vc-scheduler's sessions
    (gpugov.whatif.volcano) over each revision's compiled Queues."""
    from gpugov.compile import CompileError
    from gpugov.whatif.setup import SetupError
    from gpugov.whatif.trace import TraceError, read_trace
    from gpugov.whatif.volcano_report import markdown, to_json, volcano_run
    from gpugov.whatif.volcano_setup import volcano_setup
    from gpugov.whatif.volcano_synthetic import synthesize_volcano

    try:
        base_setup, head_setup = volcano_setup(base, cluster), volcano_setup(head, cluster)
        if args.trace:
            jobs = read_trace(Path(args.trace))
            name = Path(args.trace).name
        else:
            jobs = synthesize_volcano(base_setup, args.synthetic_jobs, args.seed, head=head_setup)
            if not jobs:
                return fail(_("no tenant of cluster '{cluster}' holds accelerator quota to synthesize a trace from; "
                              "give one with --trace").format(cluster=cluster))
            name = _("a synthetic trace ({jobs} jobs, seed {seed})").format(jobs=f"{len(jobs):,}", seed=args.seed)
        line = ProgressLine.on_terminal(sys.stderr, pair.parallel)
        try:
            base_run, head_run = pair.replay(volcano_run, (base_label, base_setup, jobs),
                                             (head_label, head_setup, jobs), line)
        finally:
            if line is not None:
                line.clear()
    except (TraceError, SetupError, CompileError) as exc:
        return fail(str(exc))
    text = (json.dumps(to_json(name, cluster, base_run, head_run), indent=2) + "\n" if args.format == "json"
            else markdown(name, cluster, base_run, head_run))
    return _emit(text, args.out)


def _emit(text: str, out: str | None) -> ExitCode:
    if out is None:
        sys.stdout.write(text)
        return ExitCode.OK
    try:
        Path(out).write_text(text, encoding="utf-8")
    except OSError as exc:
        return fail(f"cannot write {out}: {exc}")
    print(f"wrote {out}", file=sys.stderr)
    return ExitCode.OK


def _pairs(values: list[str], what: str) -> dict[str, str]:
    pairs = {}
    for value in values or []:
        key, sep, target = value.partition("=")
        if not sep or not key or not target:
            raise CommandFailed(f"{what} must be KEY=VALUE, got {value!r}")
        pairs[key] = target
    return pairs


def cmd_trace_import(args: argparse.Namespace) -> ExitCode:
    from gpugov.whatif.importers import IMPORTERS, Mapping
    from gpugov.whatif.trace import TraceError, dump_trace

    try:
        scale = Decimal(args.time_scale)
        if not scale.is_finite() or scale <= 0:
            raise InvalidOperation
    except InvalidOperation:
        return fail(f"--time-scale must be a number above 0, got {args.time_scale!r}")
    mapping = Mapping(_pairs(args.map, "--map"), _pairs(args.model, "--model"), scale, not args.accelerators_only,
                      args.strict)
    path = Path(args.file)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        return fail(f"{path}: cannot read: {exc}")
    try:
        imported = IMPORTERS[args.source](text, str(path), mapping)
    except TraceError as exc:
        return fail(str(exc))
    jobs = imported.jobs[: args.limit] if args.limit else imported.jobs
    skipped = ", ".join(f"{n:,} {why}" for why, n in sorted(imported.skipped.items()))
    tenants = sorted({j.tenant for j in jobs})
    print(f"imported {len(jobs):,} jobs of {len(tenants)} tenants ({', '.join(tenants[:8])}"
          f"{', ...' if len(tenants) > 8 else ''})" + (f"; left out {skipped}" if skipped else ""), file=sys.stderr)
    for what, n in sorted(imported.notes.items()):  # every constraint, mapping and drop, counted
        print(f"  {n:,} rows: {what}", file=sys.stderr)
    return _emit(dump_trace(jobs, args.format), args.out)


def cmd_trace_export(args: argparse.Namespace) -> ExitCode:
    from kubernetes import config as kube_config

    from gpugov.cli.cluster import api_client
    from gpugov.cluster.workloads import finished_jobs
    from gpugov.sources import CheckIncomplete
    from gpugov.whatif.trace import dump_trace

    try:
        jobs, skipped = finished_jobs(api_client(args))
    except (CheckIncomplete, kube_config.ConfigException, OSError) as exc:
        return fail(f"export failed: {str(exc).splitlines()[0]}", ExitCode.INCOMPLETE)
    if not jobs:
        return fail("no finished Workloads to export", ExitCode.INCOMPLETE)
    print(f"exported {len(jobs):,} finished Workloads" + (f" ({skipped:,} others left out)" if skipped else ""),
          file=sys.stderr)
    return _emit(dump_trace(jobs, args.format), args.out)


def cmd_trace_synth(args: argparse.Namespace) -> ExitCode:
    from gpugov.compile import Backend, CompileError
    from gpugov.whatif.replay import kueue_setup
    from gpugov.whatif.setup import SetupError
    from gpugov.whatif.synthetic import synthesize
    from gpugov.whatif.trace import dump_trace
    from gpugov.whatif.volcano_setup import volcano_setup
    from gpugov.whatif.volcano_synthetic import synthesize_volcano

    model = _valid(Path(args.repo), None, lambda label: label)[0]
    cluster = _cluster([model], args.cluster)
    try:
        if model.cluster(cluster).backend == Backend.VOLCANO:
            jobs: list[Job] = synthesize_volcano(volcano_setup(model, cluster), args.jobs, args.seed, args.load)
        else:
            jobs = synthesize(kueue_setup(model, cluster), args.jobs, args.seed, args.load)
    except (SetupError, CompileError) as exc:
        return fail(str(exc))
    return _emit(dump_trace(jobs, args.format), args.out)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "whatif",
        help="replay a job trace against the base and the proposed quotas: waits, use, borrowing, preemptions",
        description="Replay a job trace through a simulation of Kueue v0.17's admission over compile's objects "
        "of two revisions, and compare per tenant: p50/p95 wait, use of nominal quota, borrowed GPU-hours, "
        "preemptions. Without --trace, a seeded synthetic trace from the base's quotas.",
    )
    p.add_argument("repo", nargs="?", default=".", help="repository root (a git work tree)")
    p.add_argument("--base", required=True, metavar="REF", help="base revision, e.g. origin/main")
    p.add_argument("--head", metavar="REF", help="head revision (default: the working tree)")
    p.add_argument("--trace", metavar="FILE", help="job trace (CSV or JSON lines; see the README)")
    p.add_argument("--cluster", help="cluster to replay, Kueue or Volcano (default: the only cluster both revisions declare)")
    p.add_argument("--format", choices=("markdown", "json"), default="markdown")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic trace and of Kueue's UID tie-breaks")
    p.add_argument("--synthetic-jobs", type=int, default=DEFAULT_SYNTHETIC_JOBS, metavar="N",
                   help=f"jobs of the synthetic trace (default {DEFAULT_SYNTHETIC_JOBS})")
    p.add_argument("--classical-preemption", action="store_true",
                   help="simulate Kueue without fair sharing (default: fair sharing on, as gpugov's weights need)")
    p.add_argument("--start", metavar="INSTANT",
                   help="where a revision declares QuotaGrants or QuotaWindows: the calendar instant of the "
                   "trace's second 0, RFC 3339 with a zone (default: the earliest QuotaGrant's start in either "
                   "revision, else 2024-01-01T00:00:00Z, a Monday); the quotas change at each boundary after it")
    p.add_argument("--serial", action="store_true",
                   help="replay the base, then the head, in this process (default: where more than one CPU is "
                   "usable, the head replays in a second process while this one replays the base; the report is "
                   "the same either way; GPUGOV_WHATIF_SERIAL=1 does the same as this flag)")
    p.add_argument("--out", metavar="FILE", help="write the report here instead of stdout")
    p.set_defaults(func=cmd_whatif)

    trace = sub.add_parser("trace", help="job traces for whatif: import public ones, export a cluster's, synthesize")
    actions = trace.add_subparsers(dest="trace_command", metavar="ACTION")
    actions.required = True
    p = actions.add_parser("import", help="convert an Alibaba (openb_pod_list), Helios (cluster_log) or "
                           "AcmeTrace (trace_seren, trace_kalos) trace")
    p.add_argument("source", choices=("alibaba", "helios", "acme"))
    p.add_argument("file", help="the public trace's CSV file")
    p.add_argument("--map", action="append", metavar="KEY=TENANT",
                   help="tenant of a QoS class (alibaba) or virtual cluster (helios); * for the rest")
    p.add_argument("--model", action="append", metavar="SPEC=MODEL",
                   help="alibaba: accelerator model for a gpu_spec, e.g. V100M32=V100-32GB")
    p.add_argument("--time-scale", default="1", metavar="F", help="multiply every time by F (e.g. 0.01)")
    p.add_argument("--accelerators-only", action="store_true", help="leave out the trace's cpu and memory requests")
    p.add_argument("--strict", action="store_true",
                   help="refuse a constraint the import would drop (a gpu_spec alternative without --model)")
    p.add_argument("--limit", type=int, metavar="N", help="only the first N jobs")
    p.add_argument("--format", choices=("csv", "jsonl"), default="csv")
    p.add_argument("-o", "--out", metavar="FILE", help="write here instead of stdout")
    p.set_defaults(func=cmd_trace_import)

    p = actions.add_parser("export", help="a trace of the finished Kueue Workloads of a live cluster")
    kubeconfig_args(p)
    p.add_argument("--format", choices=("csv", "jsonl"), default="csv")
    p.add_argument("-o", "--out", metavar="FILE", help="write here instead of stdout")
    p.set_defaults(func=cmd_trace_export)

    p = actions.add_parser("synth", help="the seeded synthetic trace whatif uses when given none")
    p.add_argument("repo", nargs="?", default=".", help="repository root")
    p.add_argument("--cluster", help="cluster (default: the only cluster declared)")
    p.add_argument("--jobs", type=int, default=DEFAULT_SYNTHETIC_JOBS)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--load", type=float, default=0.8, help="offered load as a share of each tenant's quota")
    p.add_argument("--format", choices=("csv", "jsonl"), default="csv")
    p.add_argument("-o", "--out", metavar="FILE", help="write here instead of stdout")
    p.set_defaults(func=cmd_trace_synth)
