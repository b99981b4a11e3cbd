"""Benchmark: gpugov usage (and gpugov queue, where Kueue's visibility API is served) reading every
Workload, against the raw paginated list of the same Workloads, in one run.

    python bench/queue_usage_bench.py [--tenants 1000 --nodes 5000 --workloads 100000] [--repeat 3] [--hold DIR]
    python bench/queue_usage_bench.py --cluster DIR/cluster.env [--repeat 3]
    python bench/queue_usage_bench.py --fake [--tenants 1000 --workloads 100000] [--repeat 3]

Without --cluster it starts the local control plane (tools/build k8s), applies the synthetic
organisation and creates --workloads Kueue Workloads, the same ones --fake serves (one per job,
spread over the tenants' LocalQueues, three in four admitted, their status written through the
status subresource as Kueue writes it), and puts bench/fake_queue_api.py behind the real server's
aggregation layer as Kueue's visibility API (an APIService, as the sandbox does for Kueue's own:
the bare control plane runs no Kueue controller, which would admit the Workloads anew), serving
the pending positions of those Workloads. Every read then goes through the real API server. Nodes
and pods are not created: neither command reads them. Loading takes long on a small machine:
--hold DIR keeps the loaded control plane after measuring, as drift_bench's does. With --cluster
it reads a control plane such a run keeps (its cluster.env names the kubeconfig and the
organisation): this bench's, or `bench/drift_bench.py --hold`'s (whose Workloads have no status,
and where queue is skipped: no visibility API). Then,
best of --repeat:
  - `gpugov usage --since 7d --no-idle --format json` (a separate process),
  - `gpugov queue --format json`, for all tenants and with `--tenant` (one tenant), where the
    server serves Kueue's visibility API (it asks the pending positions there),
  - the raw reads each makes (in-process, every page parsed and dropped): the Workload list for
    usage; for queue every ClusterQueue, LocalQueue and Workload page and every ClusterQueue's
    pending workloads,
and prints each command's ratio to its raw reads and its peak RSS. Targets (100,000 Workloads):
<= 1.5x the raw reads and <= 1 GiB.

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

from bench.drift_bench import _create, _many, _timed, hold
from bench.fake_queue_api import planned_workloads
from bench.synthetic import generate
from gpugov.app.pipeline import gc_paused, validate_repo
from gpugov.cluster.apply import apply_objects
from gpugov.cluster.queues import CLUSTER_QUEUE, LOCAL_QUEUE, pending_workloads
from gpugov.cluster.rest import Api, list_all, served_versions
from gpugov.compile import compile
from gpugov.kube.kinds import WORKLOAD
from gpugov.kube.names import VISIBILITY_API
from gpugov.sandbox import ControlPlane
from gpugov.sandbox.kueue import NAMESPACE as KUEUE_NAMESPACE
from gpugov.sandbox.kueue import VISIBILITY_VERSIONS, visibility_objects
from gpugov.sandbox.kueue import _apply as apply_with_dynamic_client


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


def _start_fake(stack: ExitStack, root: Path, workloads: int, tls: tuple[Path, Path] | None = None) -> dict:
    """bench/fake_queue_api.py serving `root`'s queues (a process of its own); its ready document."""
    ready = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "kubeconfig"
    server = subprocess.Popen([sys.executable, str(Path(__file__).with_name("fake_queue_api.py")), str(root),
                               "--workloads", str(workloads), "--ready", str(ready),
                               *(("--tls", *map(str, tls)) if tls else ())])
    stack.callback(server.wait)
    stack.callback(server.terminate)
    print("the fake API server is encoding the objects:", flush=True)
    while not ready.exists() or not ready.read_text():
        if server.poll() is not None:
            raise SystemExit(f"bench/fake_queue_api.py exited {server.returncode}")
        time.sleep(0.5)
    document = json.loads(ready.read_text())
    print(f"  serving {document['counts']}", flush=True)
    return document


def _fake(args: argparse.Namespace, stack: ExitStack) -> tuple[Path, Path]:
    """(kubeconfig, organisation) of bench/fake_queue_api.py serving a synthetic organisation."""
    tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
    root = generate(tmp / "org", tenants=args.tenants, pools=50, nodes=args.nodes)
    kubeconfig = tmp / "kubeconfig"
    kubeconfig.write_text(json.dumps(_start_fake(stack, root, args.workloads)))
    return kubeconfig, root


def _cluster(args: argparse.Namespace, stack: ExitStack) -> tuple[Path, Path]:
    """(kubeconfig, organisation): the held one of --cluster, or a control plane loaded here."""
    if args.cluster:
        env = dict(line.split("=", 1) for line in args.cluster.read_text().split())
        return Path(env["KUBECONFIG"]), Path(env["ORG"])
    tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
    cp = stack.enter_context(ControlPlane())
    root = generate(tmp / "org", tenants=args.tenants, pools=50, nodes=args.nodes)
    objects = compile(validate_repo(root).model)
    print("loading the control plane:", flush=True)
    started = time.perf_counter()
    operator = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}}  # the MIG config's
    apply_objects(cp.api_client(), [operator, *objects])
    print(f"  {len(objects)} objects applied in {time.perf_counter() - started:.0f} s", flush=True)
    _serve_visibility(cp, stack, root, args.workloads)
    _create_workloads(Api(cp.api_client()), objects, args.workloads)
    return Path(cp.kubeconfig), root


def _serve_visibility(cp: ControlPlane, stack: ExitStack, root: Path, workloads: int) -> None:
    """The fake's visibility API behind the real server's aggregation layer, Available."""
    port = _start_fake(stack, root, workloads, (cp.pki.serving_cert, cp.pki.serving_key))["port"]
    api = Api(cp.api_client())
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KUEUE_NAMESPACE}}
    apply_with_dynamic_client(cp, [namespace, *visibility_objects(port)])  # as the sandbox puts Kueue's there
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        conditions = [c for version in VISIBILITY_VERSIONS for c in (api.call(
            "GET", f"/apis/apiregistration.k8s.io/v1/apiservices/{version}.{VISIBILITY_API.split('/')[0]}")
            .body or {}).get("status", {}).get("conditions", []) if c.get("type") == "Available"]
        if any(c.get("status") == "True" for c in conditions):
            return
        time.sleep(0.5)
    raise SystemExit(f"the fake visibility API did not become Available behind the API server: {conditions}")


def _create_workloads(api: Api, objects: list[dict], count: int) -> None:
    """The fake's Workloads on the real server: created, then their status written as Kueue writes it."""
    planned = list(planned_workloads(objects, count))

    def create(i: int) -> None:
        item = planned[i]
        namespace, name = item["metadata"]["namespace"], item["metadata"]["name"]
        path = f"/apis/{WORKLOAD.api_version}/namespaces/{namespace}/workloads"
        metadata = {key: item["metadata"][key] for key in ("name", "labels", "ownerReferences")}
        _create(api, path, {"apiVersion": WORKLOAD.api_version, "kind": "Workload", "metadata": metadata,
                            "spec": item["spec"]})
        answer = api.call("PATCH", f"{path}/{name}/status", body={"status": item["status"]},
                          content_type="application/merge-patch+json")
        if not answer.ok:
            raise SystemExit(f"writing the status of {path}/{name}: {answer.status} {answer.message or answer.reason}")

    _many("workloads with their status", count, create)


def measure(args: argparse.Namespace, kubeconfig: Path, root: Path) -> None:
    """Each command against its raw reads, interleaved, best of --repeat; prints the ratios and peak RSS."""
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
              f"peak RSS {peak[name]:.0f} MiB", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--workloads", type=int, default=100000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cluster", type=Path, help="cluster.env of a --hold control plane (this bench's or drift's)")
    parser.add_argument("--fake", action="store_true", help="serve the queues from bench/fake_queue_api.py")
    parser.add_argument("--hold", type=Path, help="after measuring, keep the loaded control plane (see drift_bench.hold)")
    args = parser.parse_args()
    with ExitStack() as stack:
        kubeconfig, root = _fake(args, stack) if args.fake else _cluster(args, stack)
        measure(args, kubeconfig, root)
        if args.hold and not args.fake and not args.cluster:
            hold(kubeconfig, root, args.hold, lambda: measure(args, kubeconfig, root))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
