"""`gpugov init`: a new config repository that validates as written (or, --from-cluster, `gpugov import`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpugov.app.exit import ExitCode
from gpugov.cli.common import fail, kubeconfig_args
from gpugov.cli.lazy import is_built


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "init",
        help="write a new config repository: one cluster, pool and tenant, the CI workflows and CODEOWNERS",
        description="Write a new declarations repository to DIR: policies/ (a Cluster, Guardrails, two priority "
        "classes), hardware/ (one GPU pool), tenants/ (one tenant holding the pool), the editors' schemas, the "
        "pull-request gate and drift workflows (.github/workflows) and a generated .github/CODEOWNERS. It "
        "validates as written (`gpugov validate DIR` exits 0); every file is staged and moved into place at once. "
        "With --from-cluster, `gpugov import` writes the repository from a cluster that already runs Kueue "
        "instead, and init adds the workflows and CODEOWNERS (a repository that would not validate is never "
        "written). Exit codes: 0 written, 1 (--from-cluster) something the declarations do not express, or "
        "nothing written as the repository would not validate, 2 bad options or a non-empty DIR without --force, 3 the "
        "cluster could not be read.",
    )
    if not is_built(p):
        return  # the defaults come from the scaffold (a dataclass): read them only for `gpugov init`
    from gpugov.scaffold.declarations import Options

    d = Options()
    p.add_argument("dir", metavar="DIR", help="folder to write (empty or missing; replaced with --force)")
    p.add_argument("--cluster", default=d.cluster, help=f"the cluster's name (default: {d.cluster})")
    p.add_argument("--pool", default=d.pool, help=f"the GPU pool's name (default: {d.pool})")
    p.add_argument("--model", default=d.model, help=f"the pool's accelerator model, as `gpugov catalog` names it "
                   f"(default: {d.model})")
    p.add_argument("--accelerators-per-node", type=int, default=d.accelerators_per_node, metavar="N",
                   help=f"accelerators per node (default: {d.accelerators_per_node})")
    p.add_argument("--node", action="append", default=[], metavar="NAME",
                   help="a Kubernetes node of the pool, repeated for more (default: POOL-01)")
    p.add_argument("--node-cpu", default=d.node_cpu, help=f"allocatable cpu per node (default: {d.node_cpu})")
    p.add_argument("--node-memory", default=d.node_memory,
                   help=f"allocatable memory per node (default: {d.node_memory})")
    p.add_argument("--tenant", default=d.tenant, help=f"the tenant's name, also its namespace (default: {d.tenant})")
    p.add_argument("--owner", default=d.owner, help=f"the tenant's owner, a Kubernetes user (default: {d.owner})")
    p.add_argument("--platform-team", default=d.platform_team,
                   help=f"code owner of every file, @org/team or @user (default: {d.platform_team})")
    p.add_argument("--backend", choices=("kueue", "volcano"), default=d.backend,
                   help=f"the cluster's scheduler (default: {d.backend})")
    p.add_argument("--pip-spec", default=d.pip_spec,
                   help=f"the gpugov the workflows install (default: {d.pip_spec}; the repository variable "
                   "GPUGOV_PIP_SPEC overrides it)")
    p.add_argument("--force", action="store_true", help="replace a non-empty DIR")
    p.add_argument("--from-cluster", action="store_true",
                   help="read the cluster (--kubeconfig, --context) with `gpugov import` instead of writing examples")
    kubeconfig_args(p)
    p.set_defaults(func=cmd_init)


def cmd_init(args: argparse.Namespace) -> ExitCode:
    from gpugov.findings.report import text
    from gpugov.scaffold.create import ScaffoldError, create
    from gpugov.scaffold.declarations import Options

    out = Path(args.dir)
    if args.from_cluster:
        return _from_cluster(args, out)
    options = Options(
        cluster=args.cluster, pool=args.pool, model=args.model, accelerators_per_node=args.accelerators_per_node,
        nodes=tuple(args.node), node_cpu=args.node_cpu, node_memory=args.node_memory, tenant=args.tenant,
        owner=args.owner, platform_team=args.platform_team, backend=args.backend, pip_spec=args.pip_spec,
    )
    try:
        created = create(out, options, force=args.force)
    except ScaffoldError as exc:
        if exc.findings:
            sys.stderr.write(text(exc.findings, 0, checked="gpugov init"))
        return fail(f"init: {exc}")
    sys.stdout.write(f"wrote {len(created.files)} files to {out}:\n")
    sys.stdout.write("".join(f"  {name}\n" for name in created.files if not name.startswith("schemas/")))
    sys.stdout.write(f"next: gpugov validate {out}; gpugov guide {options.tenant} {out}\n")
    return ExitCode.OK


def _from_cluster(args: argparse.Namespace, out: Path) -> ExitCode:
    """Hand over to `gpugov import` (its options, its report, its exit code), then add the CI files."""
    from gpugov.cli.adopt import run_import
    from gpugov.scaffold.create import add_ci

    handed = argparse.Namespace(source=None, kubeconfig=args.kubeconfig, context=args.context,
                                cluster=args.cluster, out=str(out), force=args.force, format="text")
    code, written = run_import(handed)
    if written:
        for name in add_ci(out, args.cluster, args.pip_spec):
            sys.stdout.write(f"init: added {name}\n")
    return code
