"""Drift comparisons without a cluster: canonical quantities, managers, hardware, usage, idle."""

from __future__ import annotations

import copy
import json
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlparse

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.compile import compile, object_key
from gpugov.drift import check
from gpugov.drift.hardware import expected_allocatable, mig_geometry
from gpugov.drift.live import LiveState
from gpugov.drift.objects import changed_by, differences
from gpugov.drift.usage import accelerator_requests
from gpugov.sandbox.simulated import simulated_nodes
from gpugov.sources.prometheus import PrometheusError, utilisation
from tests.helpers.local_http import serving
from tests.helpers.repos import REPO, overlay_repo
from tests.unit.test_usage_prometheus import FakeRangePrometheus, fake_prometheus


@pytest.fixture(scope="module")
def org():
    model = validate_repo(REPO).model
    objects = compile(model, backend="kueue", cluster="east")
    return model, objects


def in_sync(model, objects) -> LiveState:
    """What a cluster looks like right after apply: objects as compiled, nodes patched."""
    live = LiveState()
    for obj in objects:
        if obj["kind"] != "Node":
            live.objects[object_key(obj)] = copy.deepcopy(obj)
    patches = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Node"}
    for node in simulated_nodes(model, "east"):
        name = node["metadata"]["name"]
        node["metadata"]["labels"].update(patches[name]["metadata"]["labels"])
        node["spec"] = copy.deepcopy(patches[name].get("spec", {}))
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        live.nodes[name] = node
    return live


def test_quantities_compare_canonically_and_server_defaults_are_ignored() -> None:
    desired = {"spec": {"q": "8", "m": "4Ti", "list": [{"name": "a", "v": 1}]}}
    live = {"spec": {"q": 8, "m": "4096Gi", "list": [{"name": "a", "v": 1, "default": "x"}], "stopPolicy": "None"},
            "status": {"x": 1}}
    assert list(differences(desired, live)) == []
    live["spec"]["q"] = "8000m"
    assert list(differences(desired, live)) == []
    live["spec"]["q"] = "9"
    assert list(differences(desired, live)) == [(("spec", "q"), "8", "9")]


def test_changed_by_reads_managed_fields() -> None:
    live = {"metadata": {"managedFields": [
        {"manager": "gpugov", "fieldsV1": {"f:spec": {"f:resourceGroups": {}}}},
        {"manager": "kubectl-edit", "fieldsV1": {"f:spec": {"f:resourceGroups": {}}}},
        {"manager": "kueue", "fieldsV1": {"f:status": {}}},
    ]}}
    assert changed_by(live, ("spec", "resourceGroups", "h100", "resources")) == ["kubectl-edit"]
    assert changed_by(live, ("spec", "queueingStrategy")) == []


def test_in_sync_cluster_has_no_drift_and_each_break_is_caught(org) -> None:
    model, objects = org
    assert check(model, objects, in_sync(model, objects), "kueue", "east") == []
    live = in_sync(model, objects)
    live.nodes["a100-01"]["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = "49"  # a GPU lost its slices
    live.nodes["h100-05"]["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-80GB"
    live.nodes["h100-06"]["metadata"]["labels"]["nvidia.com/gpu.count"] = "7"
    live.nodes["h100-01"]["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    live.nodes["h100-02"]["spec"] = {}
    del live.nodes["h100-03"]
    stray = copy.deepcopy(next(o for o in objects if o["kind"] == "Cohort"))
    stray["metadata"]["name"] = "old-department"
    live.objects[object_key(stray)] = stray
    found = {(f.rule, dict(f.details).get("object")) for f in check(model, objects, live, "kueue", "east")}
    assert found >= {("GD017", "Node a100-01"), ("GD014", "Node h100-05"), ("GD015", "Node h100-06"),
                     ("GD011", "Node h100-01"), ("GD013", "Node h100-02"), ("GD010", "Node h100-03"),
                     ("GD003", "Cohort old-department")}


def test_expected_allocatable_comes_from_the_compiled_mig_config(org) -> None:
    model, objects = org
    geometry = mig_geometry(objects)
    pool = model.pools["a100-mig"]
    assert expected_allocatable(pool, "a100-mig-balanced", geometry) == {
        "nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-3g.40gb": 8, "nvidia.com/gpu": 0}
    assert expected_allocatable(pool, "all-disabled", geometry) == {"nvidia.com/gpu": 8}
    assert expected_allocatable(model.pools["ascend-910b"], None, geometry) == {"huawei.com/Ascend910": 8}


def test_over_quota_and_pool_without_quota(org) -> None:
    model, objects = org
    live = in_sync(model, objects)
    # inference may hold at most its nominal 16 whole GPUs (it runs non-preemptible work, so it never borrows)
    for i in range(8):
        live.pods.append({"metadata": {"name": f"big-{i}", "namespace": "inference",
                                       "labels": {"kueue.x-k8s.io/queue-name": "serving"}},
                          "spec": {"nodeName": f"h100-0{i % 6 + 1}",
                                   "containers": [{"resources": {"limits": {"nvidia.com/gpu": "8"}}}]},
                          "status": {"phase": "Running"}})
    live.pods.append({"metadata": {"name": "lost", "namespace": "nlp-train",
                                   "labels": {"kueue.x-k8s.io/queue-name": "training"}},
                      "spec": {"nodeName": "a100-04", "containers": [{"resources": {"limits": {"nvidia.com/gpu": 1}}}]},
                      "status": {"phase": "Running"}})
    findings = {f.rule: f for f in check(model, objects, live, "kueue", "east")}
    assert (dict(findings["GD020"].details)["live"], dict(findings["GD020"].details)["declared"]) == ("64", "16")
    assert dict(findings["GD023"].details)["object"] == "Pod nlp-train/lost"


def test_accelerator_requests_counts_extended_resources_only() -> None:
    pod = {"spec": {"containers": [
        {"resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "4"}}},
        {"resources": {"requests": {"nvidia.com/mig-1g.10gb": 1}, "limits": {"nvidia.com/mig-1g.10gb": 1}}},
    ]}}
    assert {k: int(v) for k, v in accelerator_requests(pod).items()} == {"nvidia.com/gpu": 2,
                                                                        "nvidia.com/mig-1g.10gb": 1}


def test_idle_accelerators_from_dcgm(org) -> None:
    # idle-0 idle for the whole window, busy-0 busy, mig-0 idle on MIG (already x100); lost-0 idle but the
    # exporter lost its series an hour ago (the pod runs on): unknown, never idle.
    model, objects = org
    now = datetime.now(UTC)
    series = {
        "DCGM_FI_DEV_GPU_UTIL": [
            {"metric": {"exported_namespace": "nlp-train", "exported_pod": "idle-0"}, "value": "1.5"},
            {"metric": {"exported_namespace": "nlp-train", "exported_pod": "busy-0"}, "value": "87"},
            {"metric": {"exported_namespace": "nlp-train", "exported_pod": "lost-0"}, "value": "0",
             "until": (now - timedelta(hours=1)).timestamp()},
        ],
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": [
            {"metric": {"namespace": "inference", "pod": "mig-0"}, "value": "2.0"},
        ],
    }
    with fake_prometheus(series) as url:
        live = in_sync(model, objects)
        live.gpu_utilisation = utilisation(url, "24h", now=now)
        queries = [r["query"] for r in FakeRangePrometheus.requests]
    for name, ns, resource in (("idle-0", "nlp-train", "nvidia.com/gpu"), ("busy-0", "nlp-train", "nvidia.com/gpu"),
                               ("lost-0", "nlp-train", "nvidia.com/gpu"),
                               ("mig-0", "inference", "nvidia.com/mig-1g.10gb")):
        live.pods.append({"metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "q"}},
                          "spec": {"containers": [{"resources": {"limits": {resource: "1"}}}]},
                          "status": {"phase": "Running"}})
    idle = {dict(f.details)["object"] for f in check(model, objects, live, "kueue", "east") if f.rule == "GD030"}
    assert idle == {"Pod nlp-train/idle-0", "Pod inference/mig-0"}
    assert sorted(live.gpu_utilisation) == [("inference", "mig-0"), ("nlp-train", "busy-0"), ("nlp-train", "idle-0")]
    assert any("DCGM_FI_DEV_GPU_UTIL" in q and "[60s]" in q for q in queries)  # a day read every minute


def test_unreachable_prometheus_is_an_incomplete_check() -> None:
    with pytest.raises(PrometheusError):
        utilisation("http://127.0.0.1:9", "1h")


def nvml_snapshot(node: str, gpus: list) -> dict:
    """A real agent snapshot: gpugov's NVML reader over the fake pynvml module."""
    from gpugov.agent.nvml import NvmlReader
    from tests.helpers.fake_nvml import FakeNVML

    with NvmlReader(FakeNVML(gpus)) as reader:
        return json.loads(json.dumps(reader.snapshot(node).to_dict()))


def test_agent_snapshots_confirm_or_contradict_the_layout(org) -> None:
    from tests.helpers.fake_nvml import a100_mig, h100, mig_pending

    model, objects = org
    live = in_sync(model, objects)
    # a100-03 runs layout "balanced" = 3g.40gb + 2g.20gb + 2x1g.10gb on each of its 8 GPUs
    live.agent_snapshots = {"a100-03": nvml_snapshot("a100-03", [a100_mig(bus=f"0000:{i:02x}:00.0") for i in range(8)])}
    assert check(model, objects, live, "kueue", "east") == []
    live.agent_snapshots = {
        "a100-03": nvml_snapshot("a100-03", [a100_mig(bus=f"0000:{i:02x}:00.0") for i in range(7)] + [mig_pending()]),
        "a100-01": nvml_snapshot("a100-01", [h100(bus=f"0000:{i:02x}:00.0") for i in range(8)]),
    }
    found = {(f.rule, dict(f.details)["object"]) for f in check(model, objects, live, "kueue", "east")}
    # 8th GPU of a100-03: the fake's MIG-pending GPU is an H100 with no slices yet
    assert found == {("GD014", "Node a100-03"), ("GD016", "Node a100-03"), ("GD017", "Node a100-03"),
                     ("GD014", "Node a100-01"), ("GD017", "Node a100-01")}  # H100s where A100s with 7x1g should be


# -- drift in the cluster: the CronJob reads the agents where the DaemonSet exposes them ---------


def operations(objects) -> tuple[dict, dict]:
    (cron,) = [o for o in objects if o["kind"] == "CronJob"]
    (daemon,) = [o for o in objects if o["kind"] == "DaemonSet"]
    return cron["spec"]["jobTemplate"]["spec"]["template"]["spec"], daemon["spec"]["template"]["spec"]


def test_the_cronjob_reads_the_agents_on_the_port_and_nodes_the_daemonset_exposes(org) -> None:
    from gpugov.agent.nvml import NvmlReader
    from gpugov.agent.server import SnapshotCache, make_server
    from gpugov.cli import build_parser
    from gpugov.sources.agents import agent_nodes, fetch_snapshots
    from tests.helpers.fake_nvml import FakeNVML, a100_mig

    model, objects = org
    drift_pod, agent_pod = operations(objects)
    (drift,), (agent,) = drift_pod["containers"], agent_pod["containers"]
    drift_args, agent_args = build_parser().parse_args(drift["args"]), build_parser().parse_args(agent["args"])
    (port,) = agent["ports"]
    listen_port = int(agent_args.listen.rpartition(":")[2])
    url = urlparse(drift_args.agent_url.format(node="a100-03", node_ip="192.0.2.7"))
    assert url.hostname == "192.0.2.7"  # the node's own address: a hostPort, not the pod network
    assert url.port == port["hostPort"] == port["containerPort"] == listen_port
    # The nodes drift asks are those the DaemonSet runs on (its nodeSelector), Ready and declared.
    live = in_sync(model, objects)
    declared = [o["metadata"]["name"] for o in objects if o["kind"] == "Node"]
    chosen = agent_nodes(declared, live.nodes, agent_pod["nodeSelector"])
    assert chosen and set(chosen) == {n for n in declared if live.nodes[n]["metadata"]["labels"].get(
        "nvidia.com/gpu.present") == "true"}
    # ...and what the agent serves at that path is what drift reads: a real agent on 127.0.0.1.
    with NvmlReader(FakeNVML([a100_mig(bus=f"0000:{i:02x}:00.0") for i in range(8)])) as reader:
        server = make_server("127.0.0.1:0", SnapshotCache(lambda: reader.snapshot("a100-03")))
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            live.nodes["a100-03"]["status"]["addresses"] = [{"type": "InternalIP", "address": "127.0.0.1"}]
            template = drift_args.agent_url.replace(f":{url.port}/", f":{server.server_address[1]}/")
            snapshots = fetch_snapshots(template, ["a100-03"], live.nodes)
        finally:
            server.shutdown()
            server.server_close()
    assert snapshots["a100-03"]["node"] == "a100-03" and len(snapshots["a100-03"]["gpus"]) == 8


def test_the_cronjob_can_notify_and_keep_its_dedup_state(org) -> None:
    """Sinks from an optional Secret; what was sent in a ConfigMap (its pods keep no files), which
    its ServiceAccount may get and patch, and only that one."""
    from gpugov.cli import build_parser
    from gpugov.notify.cli import CONFIGMAP_STATE

    objects = org[1]
    drift_pod, _ = operations(objects)
    (drift,) = drift_pod["containers"]
    assert {"secretRef": {"name": "gpugov-notify", "optional": True}} in drift["envFrom"]
    state = {e["name"]: e.get("value") for e in drift["env"]}["GPUGOV_NOTIFY_STATE"]
    namespace, _, name = state.removeprefix(CONFIGMAP_STATE).partition("/")
    assert state.startswith(CONFIGMAP_STATE)
    assert ("v1", "ConfigMap", namespace, name) in {object_key(o) for o in objects}
    (binding,) = [o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["name"] == name]
    assert binding["metadata"]["namespace"] == namespace  # the ClusterRole's rights, in this namespace only
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": drift_pod["serviceAccountName"],
                                    "namespace": namespace}]
    (role,) = [o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == binding["roleRef"]["name"]]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [name],
                              "verbs": ["get", "patch"]}]
    assert build_parser().parse_args([*drift["args"], "--notify-state", state]).notify_state == state


class FakeAgent(BaseHTTPRequestHandler):
    body: ClassVar[bytes] = b"{}"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("body", [b"{}", b"[1, 2]", b'{"kind": "gpugov.agent.snapshot", "node": "other"}', b"<html>"])
def test_an_answer_that_is_not_the_nodes_snapshot_is_incomplete(body: bytes) -> None:
    from gpugov.sources import CheckIncomplete
    from gpugov.sources.agents import fetch_snapshots

    FakeAgent.body = body
    with serving(FakeAgent) as url, pytest.raises(CheckIncomplete, match=r"agent on h100-01: GET http://127\.0\.0\.1:"):
        fetch_snapshots(f"{url}/snapshot.json", ["h100-01"])


def test_node_ip_needs_an_internal_ip() -> None:
    from gpugov.sources import CheckIncomplete
    from gpugov.sources.agents import fetch_snapshots

    with pytest.raises(CheckIncomplete, match="has no InternalIP"):
        fetch_snapshots("http://{node_ip}:9402/snapshot.json", ["h100-01"], {"h100-01": {"metadata": {}}})


def test_a_bad_agent_url_template_is_bad_usage(capsys) -> None:
    from gpugov.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["drift", str(REPO), "--agent-url", "http://{host}:9402/snapshot.json"])
    assert exit_.value.code == 2 and "use {node} or {node_ip}" in capsys.readouterr().err


def test_prometheus_answers_that_are_not_its_api_are_incomplete() -> None:
    with fake_prometheus({}) as url:
        FakeRangePrometheus.answer = (200, "application/json", json.dumps(
            {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {"pod": "p"}}]}}).encode())
        with pytest.raises(PrometheusError, match="a series without metric and values"):
            utilisation(url, "1h")


def test_hami_vnpu_and_declared_model_nodes_do_not_drift_when_they_match_their_pools(tmp_path: Path) -> None:
    # Nodes that advertise exactly what their pools declare (HAMi virtual GPUs, Ascend vNPU templates,
    # a user-declared model) are no hardware drift; one with a card missing is.
    root = overlay_repo(tmp_path, REPO / "tests" / "examples" / "positive" / "production-mix")
    model = validate_repo(root).model
    assert model is not None
    cluster = model.cluster_names()[0]
    objects = compile(model, cluster=cluster)
    live = LiveState()
    patches = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Node"}
    for node in simulated_nodes(model, cluster):
        name = node["metadata"]["name"]
        if name in patches:
            node["metadata"]["labels"].update(patches[name]["metadata"]["labels"])
            node["spec"] = copy.deepcopy(patches[name].get("spec", {}))
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        live.nodes[name] = node
    pools = {p.name: p for p in model.pools.values()}
    assert any(p.hami is not None for p in pools.values()) and any(p.vnpu_layouts for p in pools.values())
    hardware = [f for f in check(model, objects, live, model.cluster(cluster).backend, cluster)
                if f.rule in ("GD014", "GD015", "GD017")]
    assert hardware == []
    vnpu_pool, vnpu_node = next((p, n) for p in pools.values() if p.vnpu_layouts for n in p.nodes if n.vnpu_layout)
    allocatable = live.nodes[vnpu_node.name]["status"]["allocatable"]
    resource = sorted(vnpu_pool.node_accelerators(None, vnpu_node.vnpu_layout))[0]  # a vNPU template resource
    allocatable[resource] = str(int(allocatable[resource]) - 1)
    again = [f for f in check(model, objects, live, model.cluster(cluster).backend, cluster) if f.rule == "GD015"]
    assert [f.details for f in again if vnpu_node.name in f.message]
    # A pod outside every tenant that holds a vNPU (not a whole device the catalog names) is still seen.
    live.pods.append({
        "metadata": {"name": "stray", "namespace": "nobody"},
        "spec": {"nodeName": vnpu_node.name,
                 "containers": [{"name": "c", "resources": {"limits": {resource: "1"}}}]},
        "status": {"phase": "Running"},
    })
    foreign = [f for f in check(model, objects, live, model.cluster(cluster).backend, cluster) if f.rule == "GD022"]
    assert [f.message for f in foreign if "nobody/stray" in f.message and resource in f.message]


def test_a_running_pod_no_admitted_workload_holds_is_reported(org) -> None:
    """A pod released from its Job (relabelled) or orphaned (its Job deleted with propagationPolicy
    Orphan) keeps Kueue's labels and runs on with its GPU; no admitted Workload counts it (GD027). A
    controller's pod and a pod-integration pod whose own Workload is admitted are held."""
    from gpugov.cluster.observe import pod_for_drift

    model, objects = org

    def running(name: str, uid: str, owners: list[str]) -> dict:
        pod = {"metadata": {"name": name, "namespace": "nlp-train", "uid": uid,
                            "labels": {"kueue.x-k8s.io/local-queue-name": "training", "job-name": "train"},
                            "annotations": {"kueue.x-k8s.io/workload": "job-train-1a2b"},
                            "ownerReferences": [{"kind": "Job", "name": "train", "uid": u, "controller": True}
                                                for u in owners]},
               "spec": {"nodeName": "h100-01", "containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
               "status": {"phase": "Running"}}
        return pod_for_drift(pod)

    live = in_sync(model, objects)
    live.pods = [running("train-0", "p-0", ["job-1"]), running("train-released", "p-1", []),
                 running("plain", "p-2", [])]
    assert live.pods[1]["metadata"]["uid"] == "p-1" and "ownerReferences" not in live.pods[1]["metadata"]
    live.admitted = [("nlp-train", "job-train-1a2b", ("job-1",)), ("nlp-train", "pod-plain-3c4d", ("p-2",))]
    found = [f for f in check(model, objects, live, "kueue", "east") if f.rule == "GD027"]
    assert [dict(f.details)["object"] for f in found] == ["Pod nlp-train/train-released"]
    assert "holds 1 nvidia.com/gpu on node h100-01 with no owner, and no admitted Workload is its" in found[0].message
    live.admitted = None  # Workloads not read: nothing judged by them
    assert not [f for f in check(model, objects, live, "kueue", "east") if f.rule == "GD027"]
