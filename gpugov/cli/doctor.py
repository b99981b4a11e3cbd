"""`gpugov doctor`: read-only checks that the cluster can govern GPUs as the declarations need."""

from __future__ import annotations

import argparse
import sys

from gpugov.app.exit import ExitCode
from gpugov.cli.common import compile_target_args, desired, fail, kubeconfig_args, lazy_choices


def cmd_doctor(args: argparse.Namespace) -> ExitCode:
    from gpugov.doctor import report

    if args.list_checks:
        sys.stdout.write(report.checks_table())
        return ExitCode.OK
    from kubernetes import config as kube_config

    from gpugov.cli.cluster import api_client
    from gpugov.cluster.inventory import read_facts
    from gpugov.compile.admission import API as ADMISSION_API
    from gpugov.doctor.checks import VISIBILITY_APISERVICE, required_crds, run_checks, tenant_namespaces, workload_crds
    from gpugov.doctor.facts import FactsRequest
    from gpugov.doctor.roles import is_tenant_rbac
    from gpugov.i18n import _

    state = desired(args)
    request = FactsRequest(
        crd_names=tuple(required_crds(state)) + tuple(sorted(workload_crds())),
        apiservice_names=(VISIBILITY_APISERVICE,) if state.backend == "kueue" else (),
        kueue_namespace=args.kueue_namespace,
        admission=tuple((o["kind"], o["metadata"]["name"]) for o in state.objects if o["apiVersion"] == ADMISSION_API),
        kueue_metrics_url=args.kueue_metrics,
        dcgm_metrics_url=args.dcgm_metrics,
        namespaces=tenant_namespaces(state),
        rbac=tuple((o["kind"], o["metadata"]["name"]) for o in state.objects
                   if o["kind"] in ("ClusterRole", "ClusterRoleBinding") and is_tenant_rbac(o)),
        volcano=state.backend == "volcano",
        multikueue=tuple((o["kind"], o["metadata"]["name"]) for o in state.objects
                         if o["kind"] in ("AdmissionCheck", "MultiKueueCluster")),
    )
    try:
        api = api_client(args)
    except (kube_config.ConfigException, OSError) as exc:
        return fail(f"could not check: {' '.join(str(exc).split())}", ExitCode.INCOMPLETE)
    results = run_checks(state, facts=read_facts(api, request), request=request)
    where = _("cluster {name} ({backend})").format(name=state.cluster, backend=state.backend)
    if args.format == "json":
        sys.stdout.write(report.to_json(results, state.cluster, state.backend))
    elif args.format == "markdown":
        sys.stdout.write(report.markdown(results, where))
    else:
        sys.stdout.write(report.text(results, where))
    return report.exit_code(results)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="read-only readiness checks of a cluster (scheduler, Kueue settings, GPU stack, pools, admission); "
        "exit 1 a failure, 3 could not check",
        description="Checks with stable ids (DR001...), each pass, warn, fail or skip with a hint; "
        "--list-checks prints them with what each reads. Exit 0 when nothing fails, 1 when a check fails, "
        "3 when a check could not read what it needs.",
    )
    compile_target_args(p)
    kubeconfig_args(p)
    lazy_choices(p.add_argument("--format", default="text", help="text (default), json or markdown"),
                 "gpugov.doctor.report:FORMATS")
    p.add_argument("--kueue-namespace", default="kueue-system", help="where Kueue is installed (kueue-system)")
    p.add_argument("--kueue-metrics", metavar="URL", help="Kueue's /metrics, e.g. through kubectl port-forward")
    p.add_argument("--dcgm-metrics", metavar="URL", help="a DCGM exporter's /metrics (one node's is enough)")
    p.add_argument("--list-checks", action="store_true", help="print every check and what it reads, then exit")
    p.set_defaults(func=cmd_doctor)
