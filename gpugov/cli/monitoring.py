"""`gpugov monitoring`: the recording rules and Grafana dashboards compiled from the declarations
(gpugov.monitoring), written as files for Prometheus, the prometheus-operator and Grafana's provisioning."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gpugov.app.exit import ExitCode
from gpugov.cli.common import compile_target_args, desired, fail


def cmd_monitoring(args: argparse.Namespace) -> ExitCode:
    import yaml

    from gpugov.monitoring.dashboards import dashboards, provisioning
    from gpugov.monitoring.rules import prometheus_rule, recording_rules

    state = desired(args)
    out = Path(args.out)
    files = {
        Path("rules") / "gpugov.rules.yaml": yaml.safe_dump(recording_rules(state.model, state.cluster),
                                                            sort_keys=False, width=1000),
        Path("prometheusrule.yaml"): yaml.safe_dump(prometheus_rule(state.model, state.cluster, args.namespace),
                                                    sort_keys=False, width=1000),
        Path("grafana") / "provisioning" / "dashboards" / "gpugov.yaml": yaml.safe_dump(
            provisioning(args.dashboards_path), sort_keys=False),
    }
    for name, board in dashboards(state.model, state.cluster).items():
        files[Path("grafana") / "dashboards" / name] = json.dumps(board, indent=2, sort_keys=True) + "\n"
    try:
        for name, text in sorted(files.items()):
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            (out / name).write_text(text, encoding="utf-8")
    except OSError as exc:
        return fail(f"cannot write {out}: {exc.strerror or exc}")
    for name in sorted(files):
        print(out / name)
    return ExitCode.OK


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "monitoring",
        help="write the recording rules and Grafana dashboards compiled from the declarations",
        description="Recording rules attributing DCGM activity, framebuffer memory and allocation to tenant, "
        "department, cost centre, pool, resource and job (as the usage ledger does), as a rule file and a "
        "PrometheusRule, and a Grafana dashboard for the platform and for each tenant with Grafana's "
        "provisioning file. Exit 0, 2 bad usage or invalid declarations.",
    )
    compile_target_args(p)
    p.add_argument("--out", required=True, metavar="DIR", help="directory to write the files into")
    p.add_argument("--namespace", default="monitoring", help="namespace of the PrometheusRule (default monitoring)")
    p.add_argument("--dashboards-path", default="/var/lib/grafana/dashboards/gpugov", metavar="PATH",
                   help="where Grafana reads the dashboard files (the provisioning file's path)")
    p.set_defaults(func=cmd_monitoring)
