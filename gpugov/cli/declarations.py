"""Commands on the declarations alone: validate, render, plan, codeowners, schema, rules, catalog."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gpugov.app.exit import ExitCode
from gpugov.cli.common import at_arg, compile_target_args, default_format, desired, fail, format_arg, instant, valid
from gpugov.i18n import _

# Each command imports what it runs on when it runs: registering them all must stay cheap.


def cmd_validate(args: argparse.Namespace) -> ExitCode:
    from datetime import UTC, datetime

    from gpugov.app.pipeline import InputError
    from gpugov.app.revision import read_revision
    from gpugov.findings.report import REPORTERS

    repo = Path(args.repo)
    base_model = None
    if args.base:
        try:
            base = read_revision(repo, args.base, conformance=False)
        except InputError as exc:
            return fail(str(exc))
        if base.model is None:
            return fail(f"the base {base.label} does not load; validate without --base or against another base")
        base_model = base.model
    try:
        result = read_revision(repo, base=base_model, now=datetime.now(UTC)).validation  # the clock, read once
    except InputError as exc:
        return fail(str(exc))
    sys.stdout.write(REPORTERS[args.format or default_format()](result.findings, len(result.files)))
    return result.exit_code(args.strict)


def cmd_render(args: argparse.Namespace) -> ExitCode:
    from gpugov.manifests import RenderError, dump_objects, manifest_files, write_tree

    if not args.stdout and not args.out and not args.kustomize:
        return fail("render needs --out DIR, --kustomize DIR or --stdout")
    values_given = [flag for flag, value in (("--image-registry", args.image_registry), ("--image-name", args.image_name),
                                             ("--image-tag", args.image_tag), ("--pull-secret", args.pull_secret))
                    if value is not None]
    if values_given and not args.kustomize:
        return fail(f"{', '.join(values_given)} only set the values of --kustomize DIR")
    state = desired(args)
    if args.kustomize:
        return _render_kustomize(args, state.objects)
    if args.stdout:
        sys.stdout.write(dump_objects(state.objects))
        return ExitCode.OK
    try:
        write_tree(Path(args.out), manifest_files(state.objects))
    except (RenderError, OSError) as exc:
        return fail(f"cannot write {args.out}: {exc}")
    kinds = len({o["kind"] for o in state.objects})
    print(_("rendered {count} objects of {kinds} kinds to {out}").format(count=len(state.objects), kinds=kinds,
                                                                        out=args.out))
    return ExitCode.OK


def _render_kustomize(args: argparse.Namespace, objects: list[dict[str, Any]]) -> ExitCode:
    """--kustomize DIR: DIR/base (gpugov's in-cluster objects) and DIR/overlays/example, each
    replaced atomically; other overlays under DIR/overlays are left alone."""
    from gpugov.manifests import RenderError, write_tree
    from gpugov.manifests.kustomize import DEFAULT_PULL_SECRET, KustomizeError, Values, kustomize_files

    secrets = tuple(dict.fromkeys(s for s in args.pull_secret if s)) if args.pull_secret is not None else (
        DEFAULT_PULL_SECRET,)
    values = Values(registry=args.image_registry, name=args.image_name, tag=args.image_tag, pull_secrets=secrets)
    try:
        trees = kustomize_files(objects, values)
    except KustomizeError as exc:
        return fail(str(exc))
    out = Path(args.kustomize)
    try:
        for folder, files in trees.items():
            write_tree(out / folder, files)
    except (RenderError, OSError) as exc:
        return fail(f"cannot write {args.kustomize}: {exc}")
    resources = sum(1 for name in trees["base"] if name != "kustomization.yaml")
    print(f"rendered gpugov's in-cluster parts ({resources} files) to {out / 'base'} and an example overlay to "
          f"{out / 'overlays' / 'example'}")
    return ExitCode.OK


def cmd_plan(args: argparse.Namespace) -> ExitCode:
    from gpugov.app.pipeline import InputError
    from gpugov.app.revision import read_revision
    from gpugov.compile import CompileError
    from gpugov.findings.report import FORMATS, REPORTERS
    from gpugov.plan import make_plan, to_json
    from gpugov.plan.report import markdown, text
    from gpugov.sources.git import GitError, changed_paths

    repo = Path(args.repo)
    try:
        now = instant(args)  # the timeline's checks and the plan's timeline look from here
        base = read_revision(repo, args.base, now=now)
        # the head's findings point at what the change did, the base's lines as related locations
        head = read_revision(repo, args.head, base=base.model, repository_checks=False, now=now,
                             reuse=base.validation.parsed)  # files the change leaves alone are parsed once
        changed = changed_paths(repo, args.base, args.head)
    except (GitError, InputError) as exc:
        return fail(str(exc))
    if not head.valid or head.model is None:
        sys.stdout.write(REPORTERS[args.format if args.format in FORMATS else "text"](head.findings,
                                                                                      len(head.validation.files)))
        print(f"gpugov: {head.label} does not validate, so there is no plan", file=sys.stderr)
        return head.validation.exit_code() or ExitCode.FINDINGS
    if not base.valid or base.model is None:
        sys.stderr.write(REPORTERS["text"](base.findings, len(base.validation.files)))
        return fail(f"the base {base.label} does not validate; fix it or plan against another base")
    known = sorted(set(base.model.cluster_names()) | set(head.model.cluster_names()))
    if args.cluster is not None and args.cluster not in known:
        return fail(f"unknown cluster '{args.cluster}' (declared: {', '.join(known)})")
    try:
        plan = make_plan(base.model, head.model, base.label, head.label, args.cluster, changed,
                         base_objects=base.compiled, head_objects=head.compiled)
    except CompileError as exc:
        return fail(str(exc))
    if args.format == "json":
        import json

        sys.stdout.write(json.dumps(to_json(plan), indent=2) + "\n")
    elif args.format == "text":
        sys.stdout.write(text(plan))
    else:
        sys.stdout.write(markdown(plan))
    return ExitCode.FINDINGS if args.fail_on == "risk" and plan.risks else ExitCode.OK


def cmd_codeowners(args: argparse.Namespace) -> ExitCode:
    from gpugov.compile import codeowners

    if args.rev:
        return _codeowners_at(args)
    model = valid(args.repo)
    text = codeowners.generate(model)
    path = Path(args.repo) / codeowners.PATH
    if args.check:
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current == text:
            print(f"{codeowners.PATH} is up to date")
            return ExitCode.OK
        print(f"{codeowners.PATH} is {'missing' if current is None else 'stale'}: run gpugov codeowners")
        return ExitCode.FINDINGS
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        return fail(f"cannot write {path}: {exc}")
    print(f"wrote {path}")
    return ExitCode.OK


def _codeowners_at(args: argparse.Namespace) -> ExitCode:
    """--check --rev REF: the revision's CODEOWNERS against its own declarations, both read from git
    (the pull-request gate runs a trusted gpugov on the head as data, never its checkout)."""
    from gpugov.app.pipeline import InputError
    from gpugov.app.revision import read_revision
    from gpugov.compile import codeowners
    from gpugov.sources.git import GitError, file_at

    if not args.check:
        return fail("--rev only checks (--check): writing CODEOWNERS needs the working tree")
    repo = Path(args.repo)
    try:
        revision = read_revision(repo, args.rev)
        current = file_at(repo, args.rev, codeowners.PATH.as_posix())
    except (GitError, InputError) as exc:
        return fail(str(exc))
    if not revision.valid or revision.model is None:
        return fail(f"the declarations at {args.rev} do not validate (gpugov plan lists why)", ExitCode.FINDINGS)
    if current is not None and current.decode(errors="replace") == codeowners.generate(revision.model):
        print(f"{codeowners.PATH} is up to date at {args.rev}")
        return ExitCode.OK
    print(f"{codeowners.PATH} is {'missing' if current is None else 'stale'} at {args.rev}: run gpugov codeowners")
    return ExitCode.FINDINGS


def cmd_schema(args: argparse.Namespace) -> ExitCode:
    import json

    from gpugov.declarations.schema import schema_files

    files = schema_files()
    if args.out:
        out = Path(args.out)
        try:
            out.mkdir(parents=True, exist_ok=True)
            for name, text in files.items():
                (out / name).write_text(text, encoding="utf-8")
        except OSError as exc:
            return fail(f"cannot write {out}: {exc}")
        print(f"wrote {len(files)} schemas to {out}")
        return ExitCode.OK
    if args.kind:
        name = f"{args.kind.lower()}.json"
        if name not in files:
            return fail(f"unknown kind '{args.kind}' (known: {', '.join(n[:-5] for n in sorted(files))})")
        sys.stdout.write(files[name])
        return ExitCode.OK
    sys.stdout.write(json.dumps({n: json.loads(t) for n, t in files.items()}, indent=2) + "\n")
    return ExitCode.OK


def cmd_rules(args: argparse.Namespace) -> ExitCode:
    from gpugov.rules import markdown_table, text_table  # the table imports every family and the doctor

    sys.stdout.write(markdown_table() if args.format == "markdown" else text_table())
    return ExitCode.OK


def cmd_catalog(args: argparse.Namespace) -> ExitCode:
    from gpugov.catalog import MODELS
    from gpugov.catalog.table import markdown_table, text_table

    sys.stdout.write((markdown_table if args.format == "markdown" else text_table)(MODELS.values()))
    return ExitCode.OK


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate", help="check declarations (schema and policy); exit 1 on errors",
        description="Check every declaration under tenants/, policies/ and hardware/ against its JSON Schema and the "
        "policy rules (GG...), compile each declared cluster and check the objects. Findings read file:line:col, "
        "with a hint; with --base, at the lines the change made. Exit 0 clean (warnings allowed unless --strict), "
        "1 errors, 2 bad usage, unreadable input or an unknown --base revision.")
    p.add_argument("repo", nargs="?", default=".", help="repository root holding tenants/, policies/, hardware/")
    format_arg(p)
    p.add_argument("--strict", action="store_true", help="fail on warnings too")
    p.add_argument("--base", metavar="REF",
                   help="the revision the tree changes (e.g. origin/main, read from git): a finding the change "
                   "caused is reported at the line it changed (a namespace's new claim, the hardware/ line that "
                   "lowered a pool's capacity), the base's lines as related locations")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser(
        "render", help="write Kueue or Volcano manifests for Argo CD, Flux or kubectl",
        description="Compile one cluster's declarations and write the objects, one file per kind in apply order with "
        "a kustomization.yaml (byte-identical on rerun), or print them as one YAML stream; with --kustomize, gpugov's "
        "own in-cluster parts as a versioned kustomize base and an example overlay for a private registry. Exit 0 written, "
        "1 the declarations have errors (printed, nothing written), 2 bad usage or unreadable input.")
    compile_target_args(p)
    target = p.add_mutually_exclusive_group()
    target.add_argument("--out", metavar="DIR", help="folder to (re)write, with a kustomization.yaml")
    target.add_argument("--stdout", action="store_true", help="print all objects as one YAML stream")
    target.add_argument("--kustomize", metavar="DIR",
                        help="write gpugov's own in-cluster parts (CronJobs, agent, RBAC, MIG config) as a kustomize "
                        "base, DIR/base, and an example overlay for a private registry, DIR/overlays/example")
    values = p.add_argument_group("--kustomize values (the overlay's; defaults: the Cluster's operations.image)")
    values.add_argument("--image-registry", metavar="HOST", help="registry of gpugov's image, e.g. harbor.example.cn")
    values.add_argument("--image-name", metavar="PATH", help="repository path in the registry, e.g. platform/gpugov")
    values.add_argument("--image-tag", metavar="TAG", help="image tag (replaces a pinned digest)")
    values.add_argument("--pull-secret", metavar="NAME", action="append",
                        help="imagePullSecrets name, repeatable (default: gpugov-registry; '' for none)")
    p.set_defaults(func=cmd_render)

    p = sub.add_parser(
        "plan", help="summarise what a change does: quotas, capacity, MIG, risks, objects",
        description="Compare the declarations at --base with --head (default: the working tree), both read from "
        "git as data: quota changes, capacity, MIG relayouts and the nodes they drain, risks for the reviewer and "
        "the object changes per cluster. Exit 0 plan computed, 1 the head is invalid (its findings are printed) or "
        "risks with --fail-on risk, 2 bad usage, an unknown revision or an invalid base.")
    p.add_argument("repo", nargs="?", default=".", help="repository root (a git work tree)")
    p.add_argument("--base", required=True, metavar="REF", help="base revision, e.g. origin/main")
    p.add_argument("--head", metavar="REF",
                   help="head revision, read from git as data, nothing of it run (default: the working tree)")
    p.add_argument("--format", choices=("markdown", "json", "text"), default="markdown")
    p.add_argument("--fail-on", choices=("risk",),
                   help="exit 1 when the plan has risks (every widening change, any file outside the declarations)")
    p.add_argument("--cluster", help="only this cluster's object changes")
    p.add_argument("--at", type=at_arg, default=None, metavar="INSTANT",
                   help="the instant the quota timeline is shown from: now (default) or RFC 3339 with a zone")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("codeowners", help="write .github/CODEOWNERS from the declarations' owners")
    p.add_argument("repo", nargs="?", default=".", help="repository root")
    p.add_argument("--check", action="store_true", help="only check; exit 1 when missing or stale")
    p.add_argument("--rev", metavar="REF", help="with --check: check this git revision (read from git, no checkout)")
    p.set_defaults(func=cmd_codeowners)

    p = sub.add_parser("schema", help="print or write the JSON Schemas of the declaration kinds")
    p.add_argument("--kind", help="print only this kind's schema")
    p.add_argument("--out", metavar="DIR", help="write one <kind>.json per kind into DIR")
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("rules", help="list every rule: declarations (GG), drift (GD), plan risks (GP) and readiness checks (DR)")
    p.add_argument("--format", choices=("text", "markdown"), default="text")
    p.set_defaults(func=cmd_rules)

    p = sub.add_parser("catalog", help="list the built-in accelerator models: resource, memory, MIG, vNPU, HAMi")
    p.add_argument("--format", choices=("text", "markdown"), default="text",
                   help="markdown: the README's catalog table, with every fact's source")
    p.set_defaults(func=cmd_catalog)
