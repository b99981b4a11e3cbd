"""The `gpugov` command."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from gpugov import __version__
from gpugov.agent.cli import register as agent_command
from gpugov.compile import BACKENDS, CompileError, Object, compile
from gpugov.declarations.loader import tree_files
from gpugov.declarations.model import Model
from gpugov.declarations.schema import schema_files
from gpugov.findings import RULES, Level
from gpugov.notify.cli import add_arguments as notify_arguments
from gpugov.notify.cli import register as notify_command
from gpugov.policy import load_families
from gpugov.policy.conformance import check_objects
from gpugov.render import RenderError, dump_objects, manifest_files, write_tree
from gpugov.report import FORMATS, REPORTERS
from gpugov.validate import InputError, Validation, check_root, validate_repo

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    print(f"gpugov: {message}", file=sys.stderr)
    return code


def _default_format() -> str:
    return "github" if os.environ.get("GITHUB_ACTIONS") == "true" else "text"


def cmd_validate(args: argparse.Namespace) -> int:
    try:
        result = validate_repo(Path(args.repo))
    except InputError as exc:
        return _fail(str(exc))
    sys.stdout.write(REPORTERS[args.format or _default_format()](result.findings, len(result.files)))
    return result.exit_code(args.strict)


def _validated(repo: str) -> tuple[Validation | None, int]:
    """Validate before acting; print findings to stderr when the repo is not clean."""
    try:
        result = validate_repo(Path(repo))
    except InputError as exc:
        return None, _fail(str(exc))
    if result.errors or result.unreadable:
        sys.stderr.write(REPORTERS["text"](result.findings, len(result.files)))
        print("gpugov: refusing to continue: the declarations have errors", file=sys.stderr)
        return None, result.exit_code()
    return result, EXIT_OK


def cmd_render(args: argparse.Namespace) -> int:
    if not args.stdout and not args.out:
        return _fail("render needs --out DIR or --stdout")
    result, code = _validated(args.repo)
    if result is None or result.model is None:
        return code
    try:
        objects = compile(result.model, args.backend, args.cluster)
    except CompileError as exc:
        return _fail(str(exc))
    problems = check_objects(objects)
    if problems:
        sys.stderr.write(REPORTERS["text"](problems, len(result.files)))
        return EXIT_FINDINGS
    if args.stdout:
        sys.stdout.write(dump_objects(objects))
        return EXIT_OK
    try:
        write_tree(Path(args.out), manifest_files(objects))
    except (RenderError, OSError) as exc:
        return _fail(f"cannot write {args.out}: {exc}")
    kinds = len({o["kind"] for o in objects})
    print(f"rendered {len(objects)} objects of {kinds} kinds to {args.out}")
    return EXIT_OK


def _compiled(args: argparse.Namespace) -> tuple[Model, list[Object]] | int:
    """The validated model and compile's objects for --cluster/--backend, or the exit code."""
    result, code = _validated(args.repo)
    if result is None or result.model is None:
        return code
    try:
        return result.model, compile(result.model, args.backend, args.cluster)
    except CompileError as exc:
        return _fail(str(exc))


def cmd_apply(args: argparse.Namespace) -> int:
    try:
        from kubernetes import config as kube_config
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        from gpugov.apply import ApplyError, apply_objects
    except ImportError as exc:
        return _fail(f"apply needs the cluster extras: pip install 'gpugov[cluster]' ({exc})")
    compiled = _compiled(args)
    if isinstance(compiled, int):
        return compiled
    _, objects = compiled
    try:
        api = kube_config.new_client_from_config(config_file=args.kubeconfig, context=args.context)
        applied = apply_objects(api, objects)
    except ApplyError as exc:
        return _fail(f"apply failed: {exc}", 3)
    except (ApiException, HTTPError, OSError, kube_config.ConfigException) as exc:
        reason = getattr(exc, "reason", None) or exc
        return _fail(f"apply failed: {reason}", 3)
    for kind, namespace, name in applied.applied:
        print(f"applied {kind:<22} {namespace + '/' if namespace else ''}{name}")
    for name in applied.skipped_nodes:
        print(f"skipped Node {name}: not in the cluster (gpugov patches nodes, it never creates them)")
    print(
        f"{len(applied.applied)} objects applied with field manager gpugov; "
        f"{len(applied.applied) - len(applied.missing)} found on the server when read back"
    )
    return EXIT_OK if not applied.missing else EXIT_FINDINGS


def _repo_nodes(repo: Path) -> list[dict]:
    """The example (or given) repository's GPU servers, simulated for the sandbox."""
    from gpugov.simulate import simulated_nodes

    result = validate_repo(repo)
    if result.model is None:
        raise InputError(f"{repo}: declarations have errors; run gpugov validate {repo}")
    return simulated_nodes(result.model)


def _repo_objects(repo: Path, cluster: str | None) -> list[dict]:
    """Compile's objects of the repository for one cluster, for the sandbox's sample jobs."""
    result = validate_repo(repo)
    if result.model is None:
        raise InputError(f"{repo}: declarations have errors; run gpugov validate {repo}")
    try:
        return compile(result.model, None, cluster)
    except CompileError as exc:
        raise InputError(str(exc)) from exc


def cmd_plan(args: argparse.Namespace) -> int:
    from gpugov.gitsource import GitError, resolve, revision_files
    from gpugov.plan import make_plan, to_json
    from gpugov.plan_report import markdown, text
    from gpugov.validate import validate_files

    repo = Path(args.repo)
    try:
        check_root(repo)
        base_files = revision_files(repo, args.base)
        base_label = f"{args.base} ({resolve(repo, args.base)[:8]})"
        if args.head:
            head_files, head_label = revision_files(repo, args.head), f"{args.head} ({resolve(repo, args.head)[:8]})"
        else:
            head_files, head_label = tree_files(repo), "working tree"
    except (GitError, InputError) as exc:
        return _fail(str(exc))
    head = validate_files(repo, head_files)
    if head.errors or head.model is None:
        sys.stdout.write(REPORTERS[args.format if args.format in FORMATS else "text"](head.findings, len(head.files)))
        print(f"gpugov: {head_label} does not validate, so there is no plan", file=sys.stderr)
        return head.exit_code() or EXIT_FINDINGS
    base = validate_files(repo, base_files)
    if base.errors or base.model is None:
        sys.stderr.write(REPORTERS["text"](base.findings, len(base.files)))
        return _fail(f"the base {base_label} does not validate; fix it or plan against another base")
    known = sorted(set(base.model.cluster_names()) | set(head.model.cluster_names()))
    if args.cluster is not None and args.cluster not in known:
        return _fail(f"unknown cluster '{args.cluster}' (declared: {', '.join(known)})")
    try:
        plan = make_plan(base.model, head.model, base_label, head_label, args.cluster)
    except CompileError as exc:
        return _fail(str(exc))
    if args.format == "json":
        sys.stdout.write(json.dumps(to_json(plan), indent=2) + "\n")
    elif args.format == "text":
        sys.stdout.write(text(plan))
    else:
        sys.stdout.write(markdown(plan))
    return EXIT_FINDINGS if args.fail_on == "risk" and plan.risks else EXIT_OK


EXIT_INCOMPLETE = 3


def cmd_drift(args: argparse.Namespace) -> int:
    """Compare the declarations with the live cluster; exit 3 when the check is incomplete."""
    try:
        from kubernetes import config as kube_config

        from gpugov.drift import check
        from gpugov.drift.agent import fetch_snapshots, load_snapshots
        from gpugov.drift.idle import PrometheusError, utilisation
        from gpugov.drift.kube import CheckIncomplete, observe
        from gpugov.notify.cli import notify_from_args, print_result
        from gpugov.notify.config import NotifyConfigError
    except ImportError as exc:
        return _fail(f"drift needs the cluster extras: pip install 'gpugov[cluster,notify]' ({exc})")
    compiled = _compiled(args)
    if isinstance(compiled, int):
        return compiled
    model, objects = compiled
    cluster = args.cluster or model.cluster_names()[0]
    backend = args.backend or model.cluster(cluster).backend
    try:
        if args.kubeconfig or not os.environ.get("KUBERNETES_SERVICE_HOST"):
            api = kube_config.new_client_from_config(config_file=args.kubeconfig, context=args.context)
        else:  # inside the cluster: the CronJob's own ServiceAccount
            kube_config.load_incluster_config()
            from kubernetes import client as kube_client

            api = kube_client.ApiClient()
        live = observe(api, objects)
        if args.prometheus:
            live.gpu_utilisation = utilisation(args.prometheus, model.limits.idle_window)
        if args.agent_snapshots:
            live.agent_snapshots = load_snapshots(Path(args.agent_snapshots))
        elif args.agent_url:
            nodes = [o["metadata"]["name"] for o in objects if o["kind"] == "Node" and o["metadata"]["name"] in live.nodes]
            live.agent_snapshots = fetch_snapshots(args.agent_url, nodes)
    except (CheckIncomplete, PrometheusError, kube_config.ConfigException, OSError) as exc:
        return _fail(f"could not check drift: {exc}", EXIT_INCOMPLETE)
    findings = check(model, objects, live, backend, cluster)
    checked = (f"cluster {cluster} ({backend}): {len(objects)} desired objects, {len(live.nodes)} nodes, "
               f"{len(live.pods)} pods checked")
    sys.stdout.write(REPORTERS[args.format or _default_format()](findings, 0, checked, "gpugov drift"))
    failing = [f for f in findings if f.level is not Level.INFO]
    try:
        sent = notify_from_args(args, [f for f in findings if f.level is not Level.INFO], f"gpugov drift: {cluster}")
    except NotifyConfigError as exc:
        return _fail(str(exc))
    if sent is not None:
        print_result(sent)
    return EXIT_FINDINGS if failing else EXIT_OK


def cmd_codeowners(args: argparse.Namespace) -> int:
    from gpugov import codeowners

    result, code = _validated(args.repo)
    if result is None or result.model is None:
        return code
    text = codeowners.generate(result.model)
    path = Path(args.repo) / codeowners.PATH
    if args.check:
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current == text:
            print(f"{codeowners.PATH} is up to date")
            return EXIT_OK
        print(f"{codeowners.PATH} is {'missing' if current is None else 'stale'}: run gpugov codeowners")
        return EXIT_FINDINGS
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        return _fail(f"cannot write {path}: {exc}")
    print(f"wrote {path}")
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    files = schema_files()
    if args.out:
        out = Path(args.out)
        try:
            out.mkdir(parents=True, exist_ok=True)
            for name, text in files.items():
                (out / name).write_text(text, encoding="utf-8")
        except OSError as exc:
            return _fail(f"cannot write {out}: {exc}")
        print(f"wrote {len(files)} schemas to {out}")
        return EXIT_OK
    if args.kind:
        name = f"{args.kind.lower()}.json"
        if name not in files:
            return _fail(f"unknown kind '{args.kind}' (known: {', '.join(n[:-5] for n in sorted(files))})")
        sys.stdout.write(files[name])
        return EXIT_OK
    sys.stdout.write(json.dumps({n: json.loads(t) for n, t in files.items()}, indent=2) + "\n")
    return EXIT_OK


def cmd_rules(args: argparse.Namespace) -> int:
    load_families()
    for rule in sorted(RULES.values(), key=lambda r: r.id):
        if args.format == "markdown":
            print(f"| {rule.id} | {rule.name} | {rule.level.value} | {rule.summary} |")
        else:
            print(f"{rule.id}  {rule.level.value:<7}  {rule.name}: {rule.summary}")
    return EXIT_OK


def cmd_catalog(args: argparse.Namespace) -> int:
    from gpugov.catalog import MODELS

    for model in MODELS.values():
        mig = ", ".join(p for p in model.mig_profiles) if model.mig_profiles else "no MIG"
        print(f"{model.name:<14} {model.vendor:<10} {model.resource:<22} {mig}")
    return EXIT_OK


def _compile_target_args(parser: argparse.ArgumentParser) -> None:
    """What to compile: shared by render and apply."""
    parser.add_argument("repo", nargs="?", default=".", help="repository root")
    parser.add_argument("--backend", choices=BACKENDS, help="scheduler (default: the cluster's declared backend)")
    parser.add_argument("--cluster", help="cluster to compile for (needed when several are declared)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpugov",
        description="GitOps governance for shared GPU clusters: validate declarations, render scheduler objects.",
    )
    parser.add_argument("--version", action="version", version=f"gpugov {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("validate", help="check declarations (schema and policy); exit 1 on errors")
    p.add_argument("repo", nargs="?", default=".", help="repository root holding tenants/, policies/, hardware/")
    p.add_argument("--format", choices=FORMATS, help="output format (github inside GitHub Actions, else text)")
    p.add_argument("--strict", action="store_true", help="fail on warnings too")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("render", help="write Kueue or Volcano manifests for Argo CD, Flux or kubectl")
    _compile_target_args(p)
    target = p.add_mutually_exclusive_group()
    target.add_argument("--out", metavar="DIR", help="folder to (re)write, with a kustomization.yaml")
    target.add_argument("--stdout", action="store_true", help="print all objects as one YAML stream")
    p.set_defaults(func=cmd_render)

    p = sub.add_parser("plan", help="summarise what a change does: quotas, capacity, MIG, risks, objects")
    p.add_argument("repo", nargs="?", default=".", help="repository root (a git work tree)")
    p.add_argument("--base", required=True, metavar="REF", help="base revision, e.g. origin/main")
    p.add_argument("--head", metavar="REF", help="head revision (default: the working tree)")
    p.add_argument("--format", choices=("markdown", "json", "text"), default="markdown")
    p.add_argument("--fail-on", choices=("risk",), help="exit 1 when the plan has risks")
    p.add_argument("--cluster", help="only this cluster's object changes")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("drift", help="compare the declarations with the live cluster; exit 1 drift, 3 could not check")
    _compile_target_args(p)
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context")
    p.add_argument("--format", choices=FORMATS, help="output format (github inside GitHub Actions, else text)")
    p.add_argument("--prometheus", metavar="URL", help="Prometheus with DCGM metrics, to find idle accelerators")
    agents = p.add_mutually_exclusive_group()
    agents.add_argument("--agent-url", metavar="TEMPLATE",
                        help="NVML snapshots from the node agents, e.g. http://{node}:9402/snapshot.json")
    agents.add_argument("--agent-snapshots", metavar="DIR", help="NVML snapshots saved as DIR/*.json")
    notify_arguments(p)
    p.set_defaults(func=cmd_drift)

    p = sub.add_parser("codeowners", help="write .github/CODEOWNERS from the declarations' owners")
    p.add_argument("repo", nargs="?", default=".", help="repository root")
    p.add_argument("--check", action="store_true", help="only check; exit 1 when missing or stale")
    p.set_defaults(func=cmd_codeowners)

    p = sub.add_parser("apply", help="server-side apply the compiled objects to a cluster (field manager gpugov)")
    _compile_target_args(p)
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context")
    p.set_defaults(func=cmd_apply)

    p = sub.add_parser("schema", help="print or write the JSON Schemas of the declaration kinds")
    p.add_argument("--kind", help="print only this kind's schema")
    p.add_argument("--out", metavar="DIR", help="write one <kind>.json per kind into DIR")
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("rules", help="list the policy rules and their ids")
    p.add_argument("--format", choices=("text", "markdown"), default="text")
    p.set_defaults(func=cmd_rules)

    p = sub.add_parser("catalog", help="list the accelerator models gpugov knows, with their MIG profiles")
    p.set_defaults(func=cmd_catalog)

    agent_command(sub)
    notify_command(sub)
    for register in _extensions():
        register(sub)
    return parser


def _extensions() -> list[Callable[[argparse._SubParsersAction], None]]:
    """Subcommands that need the cluster extras (kubernetes, cryptography), when installed."""
    try:
        from gpugov.sandbox.cli import register as sandbox
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in ("kubernetes", "cryptography", "urllib3"):
            return []
        raise
    return [lambda sub: sandbox(sub, nodes_from_repo=_repo_nodes, objects_from_repo=_repo_objects)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except BrokenPipeError:
        return EXIT_OK
