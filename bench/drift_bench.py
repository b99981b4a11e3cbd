"""Benchmark: gpugov drift on a loaded control plane, against listing the same kinds.

    python bench/drift_bench.py [--tenants 1000 --nodes 5000 --pods 150000 --workloads 100000] [--repeat 3]
                                [--no-kubectl] [--hold DIR]
    python bench/drift_bench.py --cluster DIR/cluster.env [--grow FIRST --pods N --workloads N] [--repeat 3]

Starts the local control plane (tools/build k8s), applies the synthetic organisation
(1,000 ClusterQueues), creates its 5,000 GPU nodes, the pods and Kueue Workloads (one per
job, as a Kueue cluster keeps them: drift does not read them, but the API server holds
them), then times, in one run, best of --repeat:
  - `gpugov drift` (a separate process, reading and comparing; its own peak RSS, os.wait4),
  - `kubectl get <the same kinds> -A -o json` (if kubectl is installed, unless --no-kubectl),
  - the raw paginated lists alone: the same requests drift makes, one after another, every
    page parsed and dropped (in-process, the cyclic collector paused as drift pauses it),
and prints drift's ratio to each and its peak RSS. Targets (Kubernetes' ceiling: 5,000
nodes, 150,000 pods): <= 1.5x the raw lists and <= 1 GiB.

Loading the ceiling takes long on a small machine: --hold DIR keeps the loaded control plane
after measuring (DIR/cluster.env names it; touch DIR/again to measure again, DIR/stop to end),
and --cluster DIR/cluster.env measures that cluster with the code of this checkout, or with
--grow FIRST first adds --pods pods and --workloads Workloads to it (numbered from FIRST).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubernetes import client
from kubernetes import config as kube_config

from bench.synthetic import generate
from gpugov.app.pipeline import gc_paused, validate_repo
from gpugov.cluster.apply import apply_objects
from gpugov.cluster.rest import Api, list_all
from gpugov.compile import compile
from gpugov.kube.kinds import KINDS, WORKLOAD
from gpugov.kube.names import KUEUE_QUEUE_LABEL
from gpugov.kube.objects import MANAGED_BY, MANAGER
from gpugov.sandbox import ControlPlane
from gpugov.sandbox.nodes import create_nodes
from gpugov.sandbox.simulated import simulated_nodes


def _create(api: Api, path: str, body: dict) -> None:
    """POST one object as raw JSON (the typed client's models cost more than the server)."""
    answer = api.call("POST", path, body=body, content_type="application/json")
    if not answer.ok and answer.status != 409:
        raise SystemExit(f"creating {path}: {answer.status} {answer.message or answer.reason}")


def _many(what: str, count: int, create) -> None:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        for done, _ in enumerate(pool.map(create, range(count)), 1):
            if done % 25000 == 0:
                print(f"    {done} {what} ({time.perf_counter() - started:.0f} s)", flush=True)
    print(f"  {count} {what} in {time.perf_counter() - started:.0f} s", flush=True)


def _load(api: client.ApiClient, objects: list[dict], model, pods: int, workloads: int) -> None:
    started = time.perf_counter()
    nodes = simulated_nodes(model)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda chunk: create_nodes(api, chunk), [nodes[i:i + 100] for i in range(0, len(nodes), 100)]))
    client.CoreV1Api(api).create_namespace({"metadata": {"name": "gpu-operator"}})
    print(f"  {len(nodes)} nodes in {time.perf_counter() - started:.0f} s", flush=True)
    started = time.perf_counter()
    apply_objects(api, objects)
    print(f"  {len(objects)} objects applied in {time.perf_counter() - started:.0f} s", flush=True)
    add_jobs(api, objects, [n["metadata"]["name"] for n in nodes], pods, workloads)


def add_jobs(api: client.ApiClient, objects: list[dict], names: list[str], pods: int, workloads: int,
             first: int = 0) -> None:
    """Pods (on the nodes, in turn) and Workloads (one per job) over the LocalQueues, numbered from `first`."""
    queues = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects if o["kind"] == "LocalQueue"]
    raw = Api(api)
    container = {"name": "main", "image": "trainer", "resources": {"limits": {"nvidia.com/gpu": "1"}}}

    def pod(i: int) -> None:
        namespace, queue = queues[i % len(queues)]
        _create(raw, f"/api/v1/namespaces/{namespace}/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"job-{i}", "labels": {KUEUE_QUEUE_LABEL: queue}},
            "spec": {"nodeName": names[i % len(names)], "containers": [container]},
        })

    def workload(i: int) -> None:
        namespace, queue = queues[i % len(queues)]
        _create(raw, f"/apis/{WORKLOAD.api_version}/namespaces/{namespace}/workloads", {
            "apiVersion": WORKLOAD.api_version, "kind": "Workload", "metadata": {"name": f"job-{i}"},
            "spec": {"queueName": queue, "podSets": [
                {"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}]},
        })

    _many("pods", pods, lambda i: pod(first + i))
    _many("workloads", workloads, lambda i: workload(first + i))


def raw_lists(api: client.ApiClient, objects: list[dict]) -> int:
    """The requests drift's read makes, every page parsed and dropped; how many items came.
    With the cyclic collector paused, as drift reads: the collector scanning each parsed page
    is no part of the reading, and counting it would flatter drift."""
    with gc_paused():
        return _raw_lists(Api(api), objects)


def _raw_lists(raw: Api, objects: list[dict]) -> int:
    count = 0
    for key in sorted({(o["apiVersion"], o["kind"]) for o in objects if o["kind"] != "Node"}):
        count += sum(1 for _ in list_all(raw, KINDS[key], label_selector=f"{MANAGED_BY}={MANAGER}"))
    # (drift also GETs a desired object the labelled lists missed: here every one is labelled)
    count += sum(1 for _ in list_all(raw, KINDS[("v1", "Node")]))
    count += sum(1 for _ in list_all(raw, KINDS[("v1", "Pod")],
                                     field_selector="status.phase!=Succeeded,status.phase!=Failed"))
    return count


# Runs `python -m MODULE ARGS...` and writes the process's own peak RSS (VmHWM, KiB) to a file at exit.
# wait4's ru_maxrss will not do: a child's counts the bench's own RSS at the fork (the kernel keeps
# the old memory's high-water mark across exec), and the bench holds what it loaded.
_PEAK_OF_ITSELF = """
import atexit, runpy, sys
out = sys.argv[1]
def peak():
    with open("/proc/self/status") as status:
        hwm = next(line for line in status if line.startswith("VmHWM:"))
    with open(out, "w") as f:
        f.write(hwm.split()[1])
atexit.register(peak)
module, sys.argv = sys.argv[2], [sys.argv[2], *sys.argv[3:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def _timed(command: list[str]) -> tuple[float, float]:
    """Seconds and peak RSS (MiB) of one process: a `python -m` command's own high-water mark
    (_PEAK_OF_ITSELF, read at its exit), another's from wait4 (which may count the bench's)."""
    python_module = len(command) > 2 and command[0] == sys.executable and command[1] == "-m"
    with tempfile.NamedTemporaryFile("r", suffix=".peak") as peak:
        if python_module:
            command = [sys.executable, "-c", _PEAK_OF_ITSELF, peak.name, *command[2:]]
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped above; keeps Popen from waiting again
        if process.returncode not in (0, 1):  # 2 or 3: it did not check, its time means nothing
            raise SystemExit(f"{' '.join(command[:4])}... exited {process.returncode}")
        own = peak.read().strip() if python_module else ""
    return seconds, (int(own) if own else usage.ru_maxrss) / 1024  # KiB -> MiB


def measure(kubeconfig: Path, root: Path, objects: list[dict], repeat: int,
            kubectl: str | None) -> tuple[dict[str, float], float, int]:
    """Best of `repeat` for drift, kubectl and the raw lists, in one run; drift's peak RSS; items listed."""
    api = kube_config.new_client_from_config(config_file=str(kubeconfig))
    kinds = sorted({(o["apiVersion"], o["kind"]) for o in objects} | {("v1", "Pod")})
    plural = ",".join(f"{KINDS[k].plural}.{KINDS[k].group}".rstrip(".") for k in kinds)
    drift_cmd = [sys.executable, "-m", "gpugov", "drift", str(root), "--kubeconfig", str(kubeconfig),
                 "--format", "json"]
    best = {"drift": float("inf"), "kubectl get -o json": float("inf"), "raw lists": float("inf")}
    peak_rss, items = 0.0, 0
    for _ in range(repeat):
        seconds, rss = _timed(drift_cmd)
        best["drift"], peak_rss = min(best["drift"], seconds), max(peak_rss, rss)
        if kubectl:
            seconds, _ = _timed([kubectl, "--kubeconfig", str(kubeconfig), "get", plural, "-A", "-o", "json"])
            best["kubectl get -o json"] = min(best["kubectl get -o json"], seconds)
        started = time.perf_counter()
        items = raw_lists(api, objects)
        best["raw lists"] = min(best["raw lists"], time.perf_counter() - started)
    return best, peak_rss, items


def report(args: argparse.Namespace, objects: list[dict], best: dict[str, float], peak_rss: float,
           items: int) -> None:
    sizes = (f"{args.cluster}" if args.cluster else f"{args.tenants} ClusterQueues, {args.nodes} nodes, "
             f"{args.pods} pods, {args.workloads} Workloads")
    print(f"cluster: {sizes}, {len(objects)} desired objects; the raw lists read {items} items")
    for name, seconds in best.items():
        if seconds != float("inf"):
            print(f"{name:<22} {seconds:7.2f} s   drift/this = {best['drift'] / seconds:4.2f}x")
    print(f"drift peak RSS: {peak_rss:.0f} MiB", flush=True)


def hold(kubeconfig: Path, root: Path, folder: Path, again) -> None:  # type: ignore[no-untyped-def]
    """Keep the loaded control plane for other benches: until <folder>/stop appears, measure
    again whenever <folder>/again appears (removed once measured)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cluster.env").write_text(f"KUBECONFIG={kubeconfig}\nORG={root}\n")
    print(f"holding: KUBECONFIG={kubeconfig} ORG={root}; touch {folder}/again or {folder}/stop", flush=True)
    while not (folder / "stop").exists():
        if (folder / "again").exists():
            again()
            (folder / "again").unlink()
        time.sleep(2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=150000)
    parser.add_argument("--workloads", type=int, default=100000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-kubectl", action="store_true", help="leave kubectl out (minutes at the ceiling)")
    parser.add_argument("--hold", type=Path, help="after measuring, keep the cluster for other benches (see hold)")
    parser.add_argument("--cluster", type=Path, help="measure the cluster.env of a --hold run instead of loading one")
    parser.add_argument("--grow", type=int, default=0, metavar="FIRST",
                        help="with --cluster: first add --pods pods and --workloads Workloads, numbered from FIRST")
    args = parser.parse_args()
    kubectl = None if args.no_kubectl else shutil.which("kubectl")
    if args.cluster:  # the org and the cluster a --hold run keeps: measured with this checkout's code
        env = dict(line.split("=", 1) for line in args.cluster.read_text().split())
        kubeconfig, root = Path(env["KUBECONFIG"]), Path(env["ORG"])
        model = validate_repo(root).model
        objects = compile(model)
        if args.grow:
            names = [n["metadata"]["name"] for n in simulated_nodes(model)]
            add_jobs(kube_config.new_client_from_config(config_file=str(kubeconfig)), objects, names, args.pods,
                     args.workloads, first=args.grow)
            return 0
        report(args, objects, *measure(kubeconfig, root, objects, args.repeat, kubectl))
        return 0
    with tempfile.TemporaryDirectory() as tmp, ControlPlane() as cp:
        root = generate(Path(tmp) / "org", tenants=args.tenants, pools=50, nodes=args.nodes)
        model = validate_repo(root).model
        objects = compile(model)
        print("loading the control plane:", flush=True)
        _load(cp.api_client(), objects, model, args.pods, args.workloads)
        kubeconfig = Path(cp.kubeconfig)
        report(args, objects, *measure(kubeconfig, root, objects, args.repeat, kubectl))
        if args.hold:
            hold(kubeconfig, root, args.hold, lambda: report(args, objects, *measure(kubeconfig, root, objects,
                                                                                       args.repeat, kubectl)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
