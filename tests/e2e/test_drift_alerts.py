"""The drift CronJob's alerts on a real API server: under its own ServiceAccount, what it sent is
kept in the ConfigMap compile gives it (its pods keep no files), so an unchanged set of findings
is not sent again by the next run; it may write that ConfigMap and no other, and `gpugov apply`
(with its prune) leaves the state alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpugov.app.pipeline import validate_repo
from gpugov.cli import main
from gpugov.cluster.apply import apply_objects
from gpugov.cluster.notify_state import KEY
from gpugov.compile import compile
from gpugov.compile.operations import NOTIFY_STATE
from gpugov.sandbox import ControlPlane
from gpugov.sandbox.nodes import create_gpu_operator_footprint, create_nodes
from gpugov.sandbox.simulated import simulated_nodes
from tests.helpers.local_http import serving
from tests.helpers.repos import REPO

pytestmark = pytest.mark.e2e
NAMESPACE = "gpugov-system"


@pytest.fixture(scope="module")
def cluster(controlplane_binary_path: Path, tmp_path_factory) -> Iterator[tuple[ControlPlane, Path]]:
    model = validate_repo(REPO).model
    with ControlPlane(binary=controlplane_binary_path) as cp:
        api = cp.api_client()
        create_nodes(api, simulated_nodes(model, "east"))
        create_gpu_operator_footprint(api)
        assert not apply_objects(api, compile(model, backend="kueue", cluster="east")).missing
        token = client.CoreV1Api(api).create_namespaced_service_account_token(
            "gpugov-drift", NAMESPACE, {"spec": {"expirationSeconds": 3600}}).status.token
        admin = yaml.safe_load(cp.kubeconfig.read_text())
        kubeconfig = {**admin, "users": [{"name": "drift", "user": {"token": token}}],
                      "contexts": [{"name": "drift", "context": {"cluster": admin["clusters"][0]["name"],
                                                                 "user": "drift"}}],
                      "current-context": "drift"}
        path = tmp_path_factory.mktemp("drift") / "kubeconfig"
        path.write_text(yaml.safe_dump(kubeconfig))
        yield cp, path


@pytest.fixture
def webhook() -> Iterator[list[dict]]:
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as url:
        seen.append({"url": f"{url}/hook"})
        yield seen


def test_the_cronjobs_alert_state_survives_its_pods(cluster, webhook, capsys, monkeypatch) -> None:
    cp, kubeconfig = cluster
    monkeypatch.setenv("GPUGOV_WEBHOOK_URL", webhook.pop(0)["url"])
    monkeypatch.setenv("GPUGOV_NOTIFY", "webhook")  # as the CronJob's Secret sets it
    monkeypatch.setenv("GPUGOV_NOTIFY_STATE", f"configmap:{NAMESPACE}/{NOTIFY_STATE}")  # as the CronJob does
    custom = client.CustomObjectsApi(cp.api_client())
    custom.delete_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "nlp-dev", "localqueues", "dev")

    def drift() -> int:
        code = main(["drift", str(REPO), "--cluster", "east", "--kubeconfig", str(kubeconfig), "--format", "json"])
        return code

    assert drift() == 1
    err = capsys.readouterr().err
    assert "gpugov notify: webhook: sent" in err and "warning" not in err
    assert [f["object"] for f in webhook[0]["findings"]] == ["LocalQueue nlp-dev/dev"]
    core = client.CoreV1Api(cp.api_client())
    stored = core.read_namespaced_config_map(NOTIFY_STATE, NAMESPACE)
    assert json.loads(stored.data[KEY])["sinks"]["webhook"]["findings"] == 1
    assert drift() == 1  # a new process: only the ConfigMap remembers
    assert "webhook: skipped (unchanged since" in capsys.readouterr().err and len(webhook) == 1

    # gpugov apply (and its prune) keeps the ConfigMap and leaves drift's data in it.
    code = main(["apply", str(REPO), "--cluster", "east", "--kubeconfig", str(cp.kubeconfig)])
    assert code == 0 and "nothing to prune" in capsys.readouterr().out
    assert core.read_namespaced_config_map(NOTIFY_STATE, NAMESPACE).data == stored.data
    assert drift() == 0  # the LocalQueue is back: a resolved message, once
    assert "webhook: sent" in capsys.readouterr().err and webhook[1]["status"] == "resolved"


def test_the_drift_account_may_write_its_state_and_no_other_configmap(cluster) -> None:
    from kubernetes import config as kube_config

    _, kubeconfig = cluster
    reader = client.CoreV1Api(kube_config.new_client_from_config(config_file=str(kubeconfig)))
    reader.patch_namespaced_config_map(NOTIFY_STATE, NAMESPACE, {"metadata": {"annotations": {"probe": "ok"}}})
    for name, namespace in (("gpugov-mig-parted-config", "gpu-operator"), ("other", NAMESPACE)):
        with pytest.raises(ApiException) as denied:
            reader.patch_namespaced_config_map(name, namespace, {"metadata": {"annotations": {"probe": "no"}}})
        assert denied.value.status == 403
    with pytest.raises(ApiException) as denied:
        reader.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": "other"}})
    assert denied.value.status == 403
