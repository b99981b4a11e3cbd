"""Benchmark: `pulumi preview` and `pulumi up` of the example org and a synthetic org.

    python bench/pulumi_bench.py [--tenants 200 --pools 10 --nodes 100] [--skip-example] [--tenants 0]

Each org gets a fresh living sandbox (real controllers, scheduler, KWOK nodes, Kueue) and a
fresh file-state stack, driven like tests/e2e/test_pulumi_up.py: the
real CLI and Kubernetes provider from tools/bin, the inline program gpugov.deploy.run.
Timed, in order: preview (all creates), up (create), preview and up again (no changes).
Prints seconds and seconds per Pulumi resource (stack, provider and components included).
--qps raises the provider's client rate limit; --skip-checkpoints writes the state once.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pulumi import automation as auto

from bench.synthetic import generate
from gpugov.app.pipeline import validate_repo
from gpugov.compile import compile
from gpugov.deploy import run
from gpugov.sandbox.cluster import Sandbox
from gpugov.sandbox.nodes import create_gpu_operator_footprint, create_nodes
from gpugov.sandbox.simulated import simulated_nodes

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools"


def stack_env(tmp: Path, qps: float | None = None, skip_checkpoints: bool = False) -> dict[str, str]:
    (tmp / "state").mkdir(parents=True, exist_ok=True)
    extra = {"PULUMI_K8S_CLIENT_QPS": str(qps), "PULUMI_K8S_CLIENT_BURST": str(int(2 * qps))} if qps else {}
    if skip_checkpoints:  # state written once at the end, not after every step (O(n) writes of O(n) state)
        extra["PULUMI_SKIP_CHECKPOINTS"] = "true"
    return {
        **extra,
        "PULUMI_HOME": str(tmp / ".pulumi"),
        "PULUMI_BACKEND_URL": f"file://{tmp / 'state'}",
        "PULUMI_CONFIG_PASSPHRASE": "bench",
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PATH": f"{TOOLS / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def bench_org(
    label: str, root: Path, cluster: str, tmp: Path, qps: float | None, skip_checkpoints: bool
) -> list[tuple[str, str, int, int, float]]:
    result = validate_repo(root)
    assert result.model is not None and not result.errors, result.errors[:3]
    model = result.model
    objects = compile(model, cluster=cluster)
    rows = []
    with Sandbox() as sandbox:
        cp = sandbox.cp
        api = cp.api_client()
        create_nodes(api, simulated_nodes(model, cluster), kwok=True)
        create_gpu_operator_footprint(api)
        try:
            client.CoreV1Api(api).create_namespace({"metadata": {"name": model.cluster(cluster).mig_config_namespace}})
        except ApiException as exc:
            if exc.status != 409:
                raise
        env = stack_env(tmp, qps, skip_checkpoints)
        stack = auto.create_or_select_stack(
            stack_name=cluster,
            project_name="gpugov-bench",
            program=lambda: run(root),
            opts=auto.LocalWorkspaceOptions(
                work_dir=str(tmp),
                pulumi_home=env["PULUMI_HOME"],
                env_vars=env,
                pulumi_command=auto.PulumiCommand(root=str(TOOLS)),
                project_settings=auto.ProjectSettings(name="gpugov-bench", runtime="python"),
            ),
        )
        stack.set_config("gpugov:cluster", auto.ConfigValue(cluster))
        stack.set_config("kubernetes:kubeconfig", auto.ConfigValue(cp.kubeconfig.read_text(), secret=True))
        for op in ("preview", "up", "preview (no change)", "up (no change)"):
            started = time.perf_counter()
            if op.startswith("preview"):
                summary = stack.preview().change_summary
            else:
                up = stack.up()
                assert up.summary.result == "succeeded", up.summary
                summary = up.summary.resource_changes
            seconds = time.perf_counter() - started
            resources = sum(summary.values())
            changes = {str(k): v for k, v in summary.items()}
            print(f"  {label:<10} {op:<20} {seconds:7.1f} s  {changes}", flush=True)
            rows.append((label, op, len(objects), resources, seconds))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=200, help="synthetic org size; 0 skips the synthetic org")
    parser.add_argument("--pools", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--skip-example", action="store_true")
    parser.add_argument("--qps", type=float, help="the provider's Kubernetes client QPS (burst 2x); default 50")
    parser.add_argument("--skip-checkpoints", action="store_true", help="PULUMI_SKIP_CHECKPOINTS=true")
    args = parser.parse_args()
    for binary in ("pulumi", "pulumi-resource-kubernetes"):
        if not os.access(TOOLS / "bin" / binary, os.X_OK):
            sys.exit(f"tools/bin/{binary} missing: run tools/build pulumi pulumi-k8s")
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpugov-pulumi-bench-") as tmp_name:
        tmp = Path(tmp_name)
        if not args.skip_example:
            rows += bench_org("example", ROOT, "east", tmp / "example", args.qps, args.skip_checkpoints)
        if args.tenants > 0:
            synthetic = generate(tmp / "synthetic-org", tenants=args.tenants, pools=args.pools, nodes=args.nodes)
            rows += bench_org(
                f"synth-{args.tenants}", synthetic, "synthetic", tmp / "synthetic", args.qps, args.skip_checkpoints
            )
    print(f"\n{'org':<10} {'operation':<20} {'objects':>7} {'resources':>9} {'seconds':>8} {'ms/resource':>11}")
    for label, op, objects, resources, seconds in rows:
        print(f"{label:<10} {op:<20} {objects:>7} {resources:>9} {seconds:>8.1f} {1000 * seconds / resources:>11.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
