"""The sandbox's DCGM-shaped exporter driven by what a real kube-apiserver holds (issue #41): a GPU Node and a
Running pod bound to it, read through `kube_source`, are scraped by the real Prometheus as the GPU
Operator's ServiceMonitor would scrape them, and drift's idle check reads the pod's activity; once the pod
is deleted its series stop, and the same check no longer judges it (stopped before the window's end).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from kubernetes import client

from gpugov.sandbox import ToolUnavailableError
from gpugov.sandbox.prometheus import ACTIVITY_ANNOTATION, kube_source, monitoring, prometheus_binary
from gpugov.sources.prometheus import query, utilisation
from tests.e2e.conftest import skip_or_fail


def test_the_exporter_follows_the_api_servers_pods(api_client: client.ApiClient, namespace: str, unique: str,
                                                   tmp_path: Path) -> None:
    try:
        binary = prometheus_binary()
    except ToolUnavailableError as exc:
        skip_or_fail(f"e2e: no Prometheus binary: {exc}")
        raise
    core = client.CoreV1Api(api_client)
    node = f"gpu-{unique}"
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=node, labels={
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.count": "2"})))
    core.patch_node_status(node, {"status": {"capacity": {"nvidia.com/gpu": "2", "pods": "10"},
                                             "allocatable": {"nvidia.com/gpu": "2", "pods": "10"}}})
    core.create_namespaced_pod(namespace, client.V1Pod(
        metadata=client.V1ObjectMeta(name="train-0-x7k2p", annotations={ACTIVITY_ANNOTATION: "1"}),
        spec=client.V1PodSpec(containers=[client.V1Container(
            name="main", image="registry.example/train:1",
            resources=client.V1ResourceRequirements(limits={"nvidia.com/gpu": "1"}))])))
    # Bound as kube-scheduler binds (pods/binding): where gpugov's admission policies are in force (other
    # modules apply them to this session's server), no pod may name its node at creation.
    core.create_namespaced_pod_binding("train-0-x7k2p", namespace, {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "train-0-x7k2p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}}, _preload_content=False)
    started = f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}"
    core.patch_namespaced_pod_status("train-0-x7k2p", namespace, {"status": {"phase": "Running", "startTime": started}})
    nodes, pods = kube_source(api_client)
    ours = [n for n in nodes() if n["metadata"]["name"] == node]
    try:
        with monitoring(tmp_path, binary, lambda: ours, pods, interval="500ms") as url:
            deadline = time.monotonic() + 60
            selector = f'DCGM_FI_DEV_GPU_UTIL{{exported_namespace="{namespace}",exported_pod="train-0-x7k2p"}}'
            while not query(url, selector):
                assert time.monotonic() < deadline, "the pod's series never arrived"
                time.sleep(0.5)
            # Judged once its samples cover a whole 5 s window to its end (a loaded machine scrapes late).
            key = (namespace, "train-0-x7k2p")
            deadline = time.monotonic() + 60
            while utilisation(url, "5s").get(key) != 1.0:
                assert time.monotonic() < deadline, f"never judged at 1 %: {utilisation(url, '5s').get(key)}"
                time.sleep(1)
            [free] = query(url, f'DCGM_FI_DEV_GPU_UTIL{{Hostname="{node}",exported_pod=""}}')  # the other card
            assert free["metric"]["gpu"] == "1"
            core.delete_namespaced_pod("train-0-x7k2p", namespace, grace_period_seconds=0)
            deadline = time.monotonic() + 30
            while key in utilisation(url, "5s"):
                assert time.monotonic() < deadline, "drift still judges the deleted pod"
                time.sleep(1)
    finally:
        core.delete_node(node)
