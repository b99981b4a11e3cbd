"""The living sandbox's pure parts, without binaries: Kueue wiring, KWOK stages, sample jobs,
component supervision, and tools/build's parallel lanes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from gpugov.app.exit import ExitCode
from gpugov.app.pipeline import validate_repo
from gpugov.cli import main
from gpugov.compile import compile
from gpugov.sandbox import kueue, samples
from gpugov.sandbox.components import Component, ComponentError
from gpugov.sandbox.kwok import RUN_FOR_ANNOTATION, STAGES
from tests.helpers.repos import REPO

URL, CA = "https://127.0.0.1:9443", "Q0E="

MANIFESTS = """\
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutating-webhook-configuration}
webhooks:
- name: mjob.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate-batch-v1-job}}
  rules: [{apiGroups: [batch], apiVersions: [v1], operations: [CREATE], resources: [jobs]}]
- name: mpod.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
- name: mraycluster.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate-ray-io-v1-raycluster}}
  rules: [{apiGroups: [ray.io], apiVersions: [v1], operations: [CREATE], resources: [rayclusters]}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: validating-webhook-configuration}
webhooks:
- name: vclusterqueue.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /validate-kueue-x-k8s-io-v1beta2-clusterqueue}}
  rules: [{apiGroups: [kueue.x-k8s.io], apiVersions: [v1beta2], operations: [CREATE], resources: [clusterqueues]}]
- name: vdeployment.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /validate-apps-v1-deployment}}
  rules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
"""


def crd(plural: str) -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.kueue.x-k8s.io"},
        "spec": {"group": "kueue.x-k8s.io"},
    }


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    (tmp_path / "webhook").mkdir()
    (tmp_path / "webhook" / "manifests.yaml").write_text(MANIFESTS)
    (tmp_path / "crd").mkdir()
    for plural in ("workloads", "clusterqueues", "resourceflavors", "topologies"):
        (tmp_path / "crd" / f"{plural}.yaml").write_text(yaml.safe_dump(crd(plural)))
    return tmp_path


def test_webhooks_keep_kueue_jobs_and_pods_pointed_at_loopback(config_dir: Path) -> None:
    configs = {c["kind"]: c for c in kueue.webhook_configurations(config_dir, URL, CA)}
    mutating = configs["MutatingWebhookConfiguration"]
    assert mutating["metadata"] == {"name": "kueue-mutating-webhook-configuration"}
    assert [w["name"] for w in mutating["webhooks"]] == ["mjob.kb.io", "mpod.kb.io"]
    job, pod = mutating["webhooks"]
    assert job["clientConfig"] == {"url": f"{URL}/mutate-batch-v1-job", "caBundle": CA}
    assert "namespaceSelector" not in job
    assert pod["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "kueue-system"]}
    ]
    validating = configs["ValidatingWebhookConfiguration"]
    assert [w["name"] for w in validating["webhooks"]] == ["vclusterqueue.kb.io"]


def test_conversion_webhook_only_where_upstream_converts(config_dir: Path) -> None:
    crds = {c["metadata"]["name"]: c for c in kueue.patched_crds(config_dir, URL, CA)}
    for name in ("workloads.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io"):
        conversion = crds[name]["spec"]["conversion"]
        assert conversion["strategy"] == "Webhook"
        assert conversion["webhook"]["clientConfig"] == {"url": f"{URL}/convert", "caBundle": CA}
    for name in ("resourceflavors.kueue.x-k8s.io", "topologies.kueue.x-k8s.io"):
        assert "conversion" not in crds[name]["spec"]


def test_configuration_binds_only_loopback(tmp_path: Path) -> None:
    ports = {"webhook": 1, "health": 2, "metrics": 3, "visibility": 4}
    config = kueue.configuration(tmp_path, ports)
    assert config["webhook"]["host"] == "127.0.0.1"
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:2"
    assert config["metrics"]["bindAddress"] == "127.0.0.1:3"
    assert config["visibilityServer"] == {"bindAddress": "127.0.0.1", "bindPort": 4}
    assert config["integrations"]["frameworks"] == ["batch/job", "pod"]
    assert config["leaderElection"] == {"leaderElect": False}
    # gpugov's tainted topology-aware pools (DR022): Kueue v0.17's node taint check would evict their workloads
    assert config["featureGates"] == {"TASReplaceNodeOnNodeTaints": False}


def test_visibility_behind_an_external_name_service() -> None:
    service, *api_services = kueue.visibility_objects(8082)
    assert service["spec"] == {"type": "ExternalName", "externalName": "127.0.0.1"}
    assert [a["metadata"]["name"] for a in api_services] == [
        "v1beta1.visibility.kueue.x-k8s.io",
        "v1beta2.visibility.kueue.x-k8s.io",
    ]
    assert all(a["spec"]["service"]["port"] == 8082 for a in api_services)


def test_fixed_certs_written_once_and_never_replaced(tmp_path: Path) -> None:
    metrics, visibility = tmp_path / "metrics", tmp_path / "visibility"
    kueue.ensure_fixed_certs([metrics, visibility])
    first = (metrics / "tls.crt").read_bytes()
    assert first.startswith(b"-----BEGIN CERTIFICATE-----")
    assert (visibility / "tls.key").stat().st_mode & 0o777 == 0o600
    kueue.ensure_fixed_certs([metrics, visibility])
    assert (metrics / "tls.crt").read_bytes() == first


def test_fixed_certs_unwritable_names_the_files(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"  # a folder cannot be made under a file, not even by root
    blocker.write_text("")
    with pytest.raises(ComponentError, match=r"create .*tls\.crt and .*tls\.key"):
        kueue.ensure_fixed_certs([blocker / "certs"])


def test_kwok_stages_complete_only_pods_that_say_how_long() -> None:
    stages = list(yaml.safe_load_all(STAGES.read_text()))
    assert [s["kind"] for s in stages] == ["Stage"] * 5
    names = [s["metadata"]["name"] for s in stages]
    assert len(set(names)) == len(names)
    complete = next(s for s in stages if s["metadata"]["name"] == "gpugov-pod-complete")
    keys = {e["key"]: e["operator"] for e in complete["spec"]["selector"]["matchExpressions"]}
    assert keys[f'.metadata.annotations["{RUN_FOR_ANNOTATION}"]'] == "Exists"
    assert RUN_FOR_ANNOTATION in complete["spec"]["delay"]["durationFrom"]["expressionFrom"]


def test_sample_job_per_tenant_from_compiled_queues() -> None:
    model = validate_repo(REPO).model
    assert model is not None
    jobs = samples.sample_jobs(compile(model, backend="kueue", cluster="east"))
    by_tenant = {j.tenant: j for j in jobs}
    assert sorted(by_tenant) == ["data-platform", "inference", "nlp", "speech", "vision"]
    assert (by_tenant["nlp"].namespace, by_tenant["nlp"].queue, by_tenant["nlp"].flavor) == ("nlp-train", "training", "h100")
    assert by_tenant["speech"].resource == "nvidia.com/mig-1g.10gb"
    job = samples.job_manifest(by_tenant["nlp"], "7s")
    assert job["metadata"]["labels"][samples.QUEUE_LABEL] == "training"
    assert job["spec"]["suspend"] is True
    pod = job["spec"]["template"]
    assert pod["metadata"]["annotations"] == {RUN_FOR_ANNOTATION: "7s"}
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_component_that_exits_is_reported_with_code_and_log(tmp_path: Path) -> None:
    component = Component(
        name="broken",
        binary=Path("/bin/sh"),
        args=["-c", "echo cannot bind 127.0.0.1:1; exit 3"],
        log_path=tmp_path / "broken.log",
        health_url="http://127.0.0.1:1/healthz",
    )
    component.start()
    with pytest.raises(ComponentError) as info:
        component.wait_healthy(timeout=10)
    assert "broken (pid" in str(info.value) and "exited with code 3" in str(info.value)
    assert "cannot bind 127.0.0.1:1" in str(info.value)
    component.stop()
    assert component.pid is None


SPAWN_BESIDE_GRPC = """
import sys
from concurrent import futures
from pathlib import Path

import grpc  # first, as a test that drives Pulumi's automation API loads it
import gpugov.deploy
from gpugov.sandbox.processes import spawn

server = grpc.server(futures.ThreadPoolExecutor(2))
port = server.add_insecure_port("127.0.0.1:0")
server.start()
grpc.channel_ready_future(grpc.insecure_channel(f"127.0.0.1:{port}")).result(timeout=10)
codes = [spawn(["/bin/true"], Path(sys.argv[1]), None, detach=False).wait() for _ in range(400)]
print(sum(code != 0 for code in codes))
"""


def test_servers_start_beside_a_live_grpc_runtime(tmp_path: Path) -> None:
    """A test process that drove Pulumi holds gRPC's poller threads; the sandbox still starts its
    servers from it. Forked with the parent-death signal's preexec_fn, gRPC's fork support restarted
    those threads in each child, where closing the inherited descriptors before exec aborted about one
    start in forty (SIGABRT, `epoll_wait error: Bad file descriptor` in the server's log: CI runs lost
    a module's KWOK and kube-scheduler so)."""
    log = tmp_path / "children.log"
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    run = subprocess.run(
        [sys.executable, "-c", SPAWN_BESIDE_GRPC, str(log)], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "0", log.read_text(errors="replace")[-2000:]
    assert "epoll" not in (log.read_text() if log.exists() else "")


@pytest.mark.parametrize("command", ["up", "jobs"])
def test_sandbox_on_bad_input_exits_with_usage_like_every_command(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUGOV_CACHE", str(tmp_path / "cache"))
    if command == "jobs":  # a sandbox that runs: this process stands in for its apiserver
        state = tmp_path / "cache" / "sandbox"
        state.mkdir(parents=True)
        process = {"name": "python", "pid": os.getpid(), "log": "x.log", "health": "http://127.0.0.1:1/"}
        (state / "state.json").write_text(json.dumps({"kubeconfig": "kubeconfig", "processes": [process]}))
    assert main(["sandbox", command, str(tmp_path / "nope")]) == ExitCode.USAGE
    error = capsys.readouterr().err
    assert "is not a directory" in error and "Traceback" not in error


def test_tools_build_lanes_fail_when_one_tool_fails(tmp_path: Path) -> None:
    """GPUGOV_BUILD_JOBS=2: every lane's output is prefixed, and one failed build fails the run."""
    script = (REPO / "tools" / "build").read_text()
    fake = tmp_path / "tools" / "build"
    fake.parent.mkdir()
    # The real main() and lanes, with two stand-in tools (no Go build).
    stand_ins = textwrap.dedent("""\
        TOOLS=(good bad)
        build_good() { sleep 0.2; echo "good built"; }
        build_bad() { echo "bad broke"; return 1; }""")
    replaced, count = re.subn(r"^TOOLS=\(.*\)$", lambda _: stand_ins, script, flags=re.MULTILINE)
    assert count == 1, "tools/build has no TOOLS=(...) line to stand in for"
    fake.write_text(replaced)
    fake.chmod(0o755)
    env = {**os.environ, "GPUGOV_BUILD_JOBS": "2"}
    result = subprocess.run([str(fake)], capture_output=True, text=True, env=env, timeout=30)
    assert result.returncode == 1
    assert "[good] good built" in result.stdout + result.stderr
    assert "[bad] bad broke" in result.stdout + result.stderr
    assert "some builds failed" in result.stderr
    ok = subprocess.run([str(fake), "good"], capture_output=True, text=True, env=env, timeout=30)
    assert ok.returncode == 0, ok.stderr
