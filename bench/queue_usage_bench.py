"""Benchmark: gpugov usage (and gpugov queue, where Kueue's visibility API is served) reading every
Workload, against the raw paginated list of the same Workloads, in one run.

    python bench/queue_usage_bench.py [--tenants 1000 --nodes 5000 --workloads 100000] [--repeat 3]
    python bench/queue_usage_bench.py --cluster /tmp/hold/cluster.env [--repeat 3]

Without --cluster it starts the local control plane (tools/build k8s), applies the synthetic
organisation and creates --workloads Kueue Workloads (one per job, spread over the tenants'
LocalQueues); with --cluster it reads a control plane that `bench/drift_bench.py --hold` keeps
loaded (its cluster.env names the kubeconfig and the organisation). Then, best of --repeat:
  - `gpugov usage --since 7d --no-idle --format json` (a separate process),
  - `gpugov queue --format json` when the server serves Kueue's visibility API (it asks the
    pending positions there; the bare control plane has no Kueue controller, so it is skipped
    and said so),
  - the raw paginated list of every Workload (in-process, every page parsed and dropped),
and prints each command's ratio to the raw list and its peak RSS. Targets (100,000 Workloads):
<= 1.5x the raw list and <= 1 GiB.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubernetes import config as kube_config

from bench.drift_bench import _load, _timed
from bench.synthetic import generate
from gpugov.app.pipeline import gc_paused, validate_repo
from gpugov.cluster.rest import Api, list_all, served_versions
from gpugov.compile import compile
from gpugov.kube.kinds import WORKLOAD
from gpugov.kube.names import VISIBILITY_API
from gpugov.sandbox import ControlPlane


def raw_workloads(api: Api) -> int:
    """The request usage's read makes: every Workload, page by page, parsed and dropped (the
    cyclic collector paused, as in drift_bench's raw lists: its scans are no part of reading)."""
    with gc_paused():
        return sum(1 for _ in list_all(api, WORKLOAD))


def _cluster(args: argparse.Namespace, stack: ExitStack) -> tuple[Path, Path]:
    """(kubeconfig, organisation): the held one of --cluster, or a control plane loaded here."""
    if args.cluster:
        env = dict(line.split("=", 1) for line in args.cluster.read_text().split())
        return Path(env["KUBECONFIG"]), Path(env["ORG"])
    tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
    cp = stack.enter_context(ControlPlane())
    root = generate(tmp / "org", tenants=args.tenants, pools=50, nodes=args.nodes)
    model = validate_repo(root).model
    print("loading the control plane:", flush=True)
    _load(cp.api_client(), compile(model), model, 0, args.workloads)
    return Path(cp.kubeconfig), root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--workloads", type=int, default=100000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cluster", type=Path, help="cluster.env of a `drift_bench.py --hold` control plane")
    args = parser.parse_args()
    with ExitStack() as stack:
        kubeconfig, root = _cluster(args, stack)
        api = Api(kube_config.new_client_from_config(config_file=str(kubeconfig)))
        gpugov = [sys.executable, "-m", "gpugov"]
        commands = {"usage": [*gpugov, "usage", str(root), "--kubeconfig", str(kubeconfig), "--since", "7d",
                              "--no-idle", "--format", "json"]}
        if VISIBILITY_API in served_versions(api):
            commands["queue"] = [*gpugov, "queue", str(root), "--kubeconfig", str(kubeconfig), "--format", "json"]
        else:
            print(f"queue: skipped, the server does not serve {VISIBILITY_API} (no Kueue controller)")
        best = dict.fromkeys([*commands, "raw list"], float("inf"))
        peak = dict.fromkeys(commands, 0.0)
        workloads = 0
        for _ in range(args.repeat):  # interleaved: machine noise hits all alike
            for name, command in commands.items():
                seconds, rss = _timed(command)
                best[name], peak[name] = min(best[name], seconds), max(peak[name], rss)
            started = time.perf_counter()
            workloads = raw_workloads(api)
            best["raw list"] = min(best["raw list"], time.perf_counter() - started)
    print(f"cluster: {workloads} Workloads ({args.cluster or f'{args.tenants} tenants, {args.nodes} nodes'})")
    print(f"{'raw list':<8} {best['raw list']:7.2f} s")
    for name in commands:
        print(f"{name:<8} {best[name]:7.2f} s   {name}/raw list = {best[name] / best['raw list']:4.2f}x   "
              f"peak RSS {peak[name]:.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
