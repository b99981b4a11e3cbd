"""Benchmark: `gpugov reclaim` deciding over 10,000 Workloads and their metrics, against reading them.

    python bench/reclaim_bench.py [--workloads 10000] [--step 60] [--repeat 3] [--repo .]

Synthesizes, in memory, what the API server and Prometheus answer for a cluster of the example
organisation (its Guardrails given a reclaim idle policy: window 2h, grace 1h, deactivate, queue
`serving` exempt): the Workload list (as Kueue v0.17 writes them, admitted 3h ago), the running
Pods, and the range answer of the declared metric, one series per pod over the window (121 samples
at 60 s: 1.2 million samples for 10,000 pods). A mix of busy, idle, warned, exempt, snoozed and
metric-less Workloads. Times, best of --repeat, in the same run:
  - read: parsing the three JSON answers (the least any reclaim run must do),
  - reclaim: the same parsing, then what `gpugov reclaim` does between its reads and its writes:
    the candidates (reclaim.subjects), the per-pod series (sources.pod_metrics, through an in-memory
    HTTP session so its own parsing runs), and the decision per Workload (cli.reclaim.decisions_for),
and prints their ratio. No network, no cluster.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpugov.app.pipeline import validate_repo
from gpugov.cli.reclaim import decisions_for
from gpugov.declarations.model import Model
from gpugov.kube.objects import ANNOTATION_RECLAIM_SNOOZE, ANNOTATION_RECLAIM_WARNED
from gpugov.reclaim.subjects import candidates
from gpugov.sources.pod_metrics import pod_series

METRIC = "DCGM_FI_DEV_GPU_UTIL"
RECLAIM = """  reclaim:
    idle: {metric: DCGM_FI_DEV_GPU_UTIL, window: 2h, grace: 1h, action: deactivate, exempt: {queues: [serving]}}
    snooze: {maximum: 8h}
"""
NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
# share of Workloads per kind; the rest are busy
MIX = {"idle": 0.3, "warned": 0.1, "no-metrics": 0.1, "snoozed": 0.05}


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def org_with_reclaim(repo: Path, into: Path) -> Model:
    for folder in ("hardware", "policies", "tenants"):
        shutil.copytree(repo / folder, into / folder)
    guardrails = into / "policies" / "guardrails.yaml"
    guardrails.write_text(guardrails.read_text() + RECLAIM)
    result = validate_repo(into)
    if result.model is None or result.errors:
        raise SystemExit(f"the example organisation with a reclaim policy does not validate: {result.errors}")
    return result.model


def synthesize(model: Model, count: int, step: int, seed: int) -> tuple[bytes, bytes, bytes, Counter[str]]:
    """(Workload list, Pod list, Prometheus range answer) as the servers send them, and the kinds made."""
    rng = random.Random(seed)
    queues = sorted((q.namespace, q.name) for t in model.tenants.values() for q in t.queues)
    admitted = NOW - timedelta(hours=3)
    window_start = NOW - timedelta(hours=2, seconds=step)
    times = [window_start.timestamp() + i * step for i in range(int((NOW - window_start).total_seconds()) // step + 1)]
    workloads, pods, series = [], [], []
    kinds: Counter[str] = Counter()
    for index in range(count):
        namespace, queue = queues[index % len(queues)]
        roll, kind, edge = rng.random(), "busy", 0.0
        for name, share in MIX.items():
            edge += share
            if roll < edge:
                kind = name
                break
        kinds[kind] += 1
        job, uid = f"job-{index:05d}", f"uid-job-{index:05d}"
        annotations = {}
        if kind == "warned":
            annotations[ANNOTATION_RECLAIM_WARNED] = stamp(NOW - timedelta(minutes=90))
        if kind == "snoozed":
            annotations[ANNOTATION_RECLAIM_SNOOZE] = stamp(NOW + timedelta(hours=2))
        template = {"spec": {"containers": [{"name": "main", "resources": {
            "requests": {"nvidia.com/gpu": "1", "cpu": "4"}, "limits": {"nvidia.com/gpu": "1"}}}]}}
        workloads.append({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": f"job-{job}-abcde", "namespace": namespace, "uid": f"uid-wl-{index:05d}",
                         "creationTimestamp": stamp(admitted - timedelta(seconds=5)), "annotations": annotations,
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job,
                                              "controller": True, "uid": uid}]},
            "spec": {"active": True, "queueName": queue, "priority": 100,
                     "podSets": [{"name": "main", "count": 1, "template": template}]},
            "status": {"admission": {"clusterQueue": namespace, "podSetAssignments": [{
                "name": "main", "count": 1, "flavors": {"nvidia.com/gpu": "default"},
                "resourceUsage": {"nvidia.com/gpu": "1"}}]},
                "conditions": [{"type": cond, "status": "True", "reason": cond, "message": "",
                                "lastTransitionTime": stamp(admitted)} for cond in ("QuotaReserved", "Admitted")]},
        })
        pod = f"{job}-x7k2p"
        pods.append({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": pod, "namespace": namespace, "uid": f"uid-pod-{index:05d}",
                                  "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job,
                                                       "controller": True, "uid": uid}]},
                     "status": {"phase": "Running"}})
        if kind == "no-metrics":
            continue
        busy = kind == "busy"
        series.append({"metric": {"exported_namespace": namespace, "exported_pod": pod},
                       "values": [[at, str(rng.randint(40, 100) if busy else rng.randint(0, 3))] for at in times]})
    answer = {"status": "success", "data": {"resultType": "matrix", "result": series}}
    as_list = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "1"}}
    return (json.dumps({**as_list, "items": workloads}).encode(), json.dumps({**as_list, "items": pods}).encode(),
            json.dumps(answer).encode(), kinds)


class Answer:
    """What requests' Response gives pod_series: its JSON, parsed from the body on each call."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def raise_for_status(self) -> None:
        pass

    def json(self) -> Any:
        return json.loads(self.body)


class InMemory:
    """A requests.Session stand-in that answers every query_range with the synthesized body."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def get(self, url: str, params: dict[str, str], timeout: float) -> Answer:
        return Answer(self.body)


def best_of(repeat: int, work: Any) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = work()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--step", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]))
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        model = org_with_reclaim(Path(args.repo), Path(tmp))
    workloads_body, pods_body, metrics_body, kinds = synthesize(model, args.workloads, args.step, args.seed)
    megabytes = (len(workloads_body) + len(pods_body) + len(metrics_body)) / 1e6
    samples = sum(len(s["values"]) for s in json.loads(metrics_body)["data"]["result"])
    print(f"{args.workloads:,} Workloads ({', '.join(f'{k} {n:,}' for k, n in sorted(kinds.items()))}), "
          f"{samples:,} samples, {megabytes:.1f} MB of JSON")

    def read() -> tuple[Any, Any, Any]:
        return json.loads(workloads_body), json.loads(pods_body), json.loads(metrics_body)

    def reclaim() -> list[Any]:
        workloads, pods = json.loads(workloads_body)["items"], json.loads(pods_body)["items"]
        found = candidates(model, workloads, pods)
        window = max(c.policy.idle.window for c in found if c.policy.idle is not None)
        series = {METRIC: pod_series("http://prometheus.invalid", METRIC, NOW - timedelta(seconds=window + args.step),
                                     NOW, args.step, session=InMemory(metrics_body))}  # type: ignore[arg-type]
        return decisions_for(found, series, NOW, args.step)

    read_s, _ = best_of(args.repeat, read)
    reclaim_s, decisions = best_of(args.repeat, reclaim)
    states = Counter(d.state for d in decisions)
    actions = Counter(d.action for d in decisions if d.action)
    print(f"decided {len(decisions):,}: {', '.join(f'{k} {n:,}' for k, n in sorted(states.items()))}; "
          f"actions {dict(sorted(actions.items()))}")
    print(f"read (parse the three answers): {read_s:.3f} s")
    print(f"reclaim (parse, candidates, series, decide): {reclaim_s:.3f} s ({args.workloads / reclaim_s:,.0f} "
          "Workloads/s)")
    print(f"ratio reclaim / read: {reclaim_s / read_s:.2f}x (best of {args.repeat})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
