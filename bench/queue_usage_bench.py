"""Benchmark: gpugov usage (and gpugov queue, where Kueue's visibility API is served) reading every
Workload, against the raw paginated list of the same Workloads, in one run.

    python bench/queue_usage_bench.py [--tenants 1000 --nodes 5000 --workloads 100000] [--repeat 3]
    python bench/queue_usage_bench.py --cluster /tmp/hold/cluster.env [--repeat 3]
    python bench/queue_usage_bench.py --fake [--tenants 1000 --workloads 100000] [--repeat 3]

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

With --fake, no control plane: bench/fake_queue_api.py serves (a process of its own) the
organisation's ClusterQueues and LocalQueues, the Workloads (one in four pending) and Kueue's
visibility API, each item encoded once, so the server's share of a run is small and the same for
every reader. Then, also best of --repeat: `gpugov queue --format json` for all tenants and with
`--tenant` (one tenant), each against the raw reads queue makes (every ClusterQueue, LocalQueue
and Workload page, every ClusterQueue's pending workloads, parsed and dropped), and usage against
the raw Workload list.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubernetes import config as kube_config

from bench.drift_bench import _load, _timed
from bench.synthetic import generate
from gpugov.app.pipeline import gc_paused, validate_repo
from gpugov.cluster.queues import CLUSTER_QUEUE, LOCAL_QUEUE, pending_workloads
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


def raw_queue_reads(api: Api) -> int:
    """The reads `gpugov queue` makes: the ClusterQueues, LocalQueues and Workloads, page by page,
    and each ClusterQueue's pending workloads (the visibility API), parsed and dropped."""
    with gc_paused():
        names = [q["metadata"]["name"] for q in list_all(api, CLUSTER_QUEUE)]
        count = len(names) + sum(1 for _ in list_all(api, LOCAL_QUEUE)) + sum(1 for _ in list_all(api, WORKLOAD))
        return count + sum(len(pending_workloads(api, name)) for name in names)


def _fake(args: argparse.Namespace, stack: ExitStack) -> tuple[Path, Path]:
    """(kubeconfig, organisation) of bench/fake_queue_api.py serving a synthetic organisation."""
    tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
    root = generate(tmp / "org", tenants=args.tenants, pools=50, nodes=args.nodes)
    ready = tmp / "kubeconfig"
    server = subprocess.Popen([sys.executable, str(Path(__file__).with_name("fake_queue_api.py")), str(root),
                               "--workloads", str(args.workloads), "--ready", str(ready)])
    stack.callback(server.wait)
    stack.callback(server.terminate)
    print("the fake API server is encoding the objects:", flush=True)
    while not ready.exists() or not ready.read_text():
        if server.poll() is not None:
            raise SystemExit(f"bench/fake_queue_api.py exited {server.returncode}")
        time.sleep(0.5)
    print(f"  serving {json.loads(ready.read_text())['counts']}", flush=True)
    return ready, root


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
    parser.add_argument("--fake", action="store_true", help="serve the queues from bench/fake_queue_api.py")
    args = parser.parse_args()
    with ExitStack() as stack:
        kubeconfig, root = _fake(args, stack) if args.fake else _cluster(args, stack)
        api = Api(kube_config.new_client_from_config(config_file=str(kubeconfig)))
        gpugov = [sys.executable, "-m", "gpugov"]
        target = [str(root), "--kubeconfig", str(kubeconfig), "--format", "json"]
        commands = {"usage": [*gpugov, "usage", *target, "--since", "7d", "--no-idle"]}
        raws: dict[str, Callable[[Api], int]] = {"usage": raw_workloads}
        if args.fake or VISIBILITY_API in served_versions(api):
            tenant = sorted(validate_repo(root).model.tenants)[0]
            commands["queue"] = [*gpugov, "queue", *target]
            commands[f"queue --tenant {tenant}"] = [*gpugov, "queue", *target, "--tenant", tenant]
            raws["queue"] = raws[f"queue --tenant {tenant}"] = raw_queue_reads
        else:
            print(f"queue: skipped, the server does not serve {VISIBILITY_API} (no Kueue controller)")
        baselines = {"raw Workload list": raw_workloads, "raw queue reads": raw_queue_reads}
        baseline_of = {name: next(b for b, read in baselines.items() if read is raws[name]) for name in commands}
        best = dict.fromkeys([*commands, *baselines], float("inf"))
        peak = dict.fromkeys(commands, 0.0)
        items = dict.fromkeys(baselines, 0)
        for _ in range(args.repeat):  # interleaved: machine noise hits all alike
            for name, command in commands.items():
                seconds, rss = _timed(command)
                best[name], peak[name] = min(best[name], seconds), max(peak[name], rss)
            for name, read in baselines.items():
                if name in baseline_of.values():
                    started = time.perf_counter()
                    items[name] = read(api)
                    best[name] = min(best[name], time.perf_counter() - started)
    where = "fake API server" if args.fake else args.cluster or "control plane"
    print(f"cluster ({where}): {args.tenants} tenants, {args.nodes} nodes, {args.workloads} Workloads")
    for name in baselines:
        if name in baseline_of.values():
            print(f"{name:<28} {best[name]:7.2f} s   ({items[name]} items)")
    for name in commands:
        base = baseline_of[name]
        print(f"{name:<28} {best[name]:7.2f} s   {best[name] / best[base]:4.2f}x the {base}   "
              f"peak RSS {peak[name]:.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
