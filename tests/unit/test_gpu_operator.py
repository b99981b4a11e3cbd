"""The GPU Operator's ClusterPolicy settings that make the device plugin the only way to a GPU (issue #38):
compiled from the Cluster's spec.gpuOperator, merged into the live env lists by name, and judged by doctor
DR018 (its pass, fail and unknown cases on the doctor's facts are in test_doctor.py)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.compile import compile
from gpugov.compile.common import MANAGED_BY
from gpugov.compile.gpu_operator import merged_env, merged_policy, runtime_spec
from gpugov.doctor.checks import runtime_problems
from gpugov.manifests import manifest_files
from tests.helpers.repos import REPO

EAST = """  backend: kueue
  migConfig:"""


def declaring(tmp_path: Path, block: str) -> Path:
    """A copy of the example org whose cluster east declares `block` under spec."""
    root = tmp_path / "repo"
    shutil.copytree(REPO / "policies", root / "policies")
    shutil.copytree(REPO / "hardware", root / "hardware")
    shutil.copytree(REPO / "tenants", root / "tenants")
    clusters = root / "policies" / "clusters.yaml"
    text = clusters.read_text(encoding="utf-8")
    assert text.count(EAST) == 1
    clusters.write_text(text.replace(EAST, f"  backend: kueue\n{block}  migConfig:"), encoding="utf-8")
    return root


def compiled(root: Path) -> list[dict[str, Any]]:
    result = validate_repo(root)
    assert result.model is not None and result.findings == [], result.findings
    return compile(result.model, cluster="east")


def policies(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == "ClusterPolicy"]


def test_no_declaration_no_clusterpolicy() -> None:
    result = validate_repo(REPO)
    assert result.model is not None
    assert not policies(compile(result.model, cluster="east"))


def test_volume_mounts_patch_is_compiled_deterministic_and_unowned(tmp_path: Path) -> None:
    root = declaring(tmp_path, "  gpuOperator:\n    clusterPolicy: cluster-policy\n")
    first, second = compiled(root), compiled(root)
    assert first == second
    [policy] = policies(first)
    assert first[-1] is policy  # applied last, after the admission policies and node labels
    assert policy["apiVersion"] == "nvidia.com/v1" and policy["metadata"]["name"] == "cluster-policy"
    assert policy["spec"] == {
        "devicePlugin": {"env": [{"name": "DEVICE_LIST_STRATEGY", "value": "volume-mounts"}]},
        "toolkit": {"env": [{"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "false"},
                            {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "value": "true"}]}}
    # Never gpugov's to prune: no managed-by label; its source is the Cluster declaration.
    assert MANAGED_BY not in (policy["metadata"].get("labels") or {})
    assert policy["metadata"]["annotations"]["gpugov.io/source"].startswith("policies/clusters.yaml:")
    files = manifest_files(first)
    assert "gpu-operator/clusterpolicy-patch.yaml" in files
    assert "gpu-operator/clusterpolicy-patch.yaml" not in files["kustomization.yaml"]
    assert runtime_problems(policy) == []


def test_cdi_patch(tmp_path: Path) -> None:
    root = declaring(tmp_path, "  gpuOperator:\n    clusterPolicy: gpu-cluster-policy\n    deviceListStrategy: cdi\n")
    [policy] = policies(compiled(root))
    assert policy["spec"] == {
        "cdi": {"enabled": True},
        "devicePlugin": {"env": [{"name": "DEVICE_LIST_STRATEGY", "value": "cdi-annotations,cdi-cri"}]},
        "toolkit": {"env": [{"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "false"},
                            {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "value": "true"}]}}
    assert runtime_problems(policy) == []


def test_an_unknown_strategy_is_refused_by_the_schema(tmp_path: Path) -> None:
    root = declaring(tmp_path, "  gpuOperator:\n    clusterPolicy: cluster-policy\n    deviceListStrategy: envvar\n")
    result = validate_repo(root)
    assert any("deviceListStrategy" in str(f) or "envvar" in str(f) for f in result.findings)


def test_merge_keeps_every_other_entry_and_sets_ours_in_place() -> None:
    live = [{"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"},
            {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "true"}]
    wanted = runtime_spec("volume-mounts")["toolkit"]["env"]
    assert merged_env(live, wanted) == [
        {"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"},
        {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "false"},
        {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "value": "true"}]
    assert merged_env(None, wanted) == wanted


def test_merge_patch_carries_the_resource_version_and_whole_lists() -> None:
    live = {"metadata": {"name": "cluster-policy", "resourceVersion": "42"},
            "spec": {"toolkit": {"enabled": True, "env": [{"name": "X", "value": "1"}]}, "devicePlugin": {}}}
    patch = {"metadata": {"name": "cluster-policy", "annotations": {"gpugov.io/source": "policies/clusters.yaml:3"}},
             "spec": runtime_spec("cdi")}
    body = merged_policy(live, patch)
    assert body["metadata"] == {"resourceVersion": "42", "annotations": {"gpugov.io/source": "policies/clusters.yaml:3"}}
    assert body["spec"]["toolkit"] == {"env": [{"name": "X", "value": "1"}, {
        "name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "false"}, {
        "name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "value": "true"}]}
    assert body["spec"]["cdi"] == {"enabled": True}
    assert "enabled" not in body["spec"]["toolkit"]  # a merge patch leaves the fields it does not name


@pytest.mark.parametrize(("spec", "expected"), [
    # the operator's defaults before CDI was: the variable honoured, the envvar strategy
    ({"toolkit": {}, "devicePlugin": {}}, "DEVICE_LIST_STRATEGY is envvar"),
    # CDI on (the operator then sets cdi-annotations,cdi-cri itself), but the toolkit still honours the
    # variable for a pod that asks for the nvidia RuntimeClass
    ({"cdi": {"enabled": True}, "toolkit": {}, "devicePlugin": {}},
     "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED is none, not false"),
    # a CDI strategy without CDI
    ({"toolkit": runtime_spec("cdi")["toolkit"], "devicePlugin": runtime_spec("cdi")["devicePlugin"]},
     "but cdi.enabled is not true"),
    # envvar still in the list
    ({"toolkit": runtime_spec("volume-mounts")["toolkit"],
      "devicePlugin": {"env": [{"name": "DEVICE_LIST_STRATEGY", "value": "envvar,volume-mounts"}]}},
     "DEVICE_LIST_STRATEGY is envvar,volume-mounts"),
])
def test_runtime_problems(spec: dict[str, Any], expected: str) -> None:
    assert any(expected in str(p) for p in runtime_problems({"spec": spec})), runtime_problems({"spec": spec})


def test_cdi_on_by_the_operator_with_the_toolkit_refusing_passes() -> None:
    spec = {"cdi": {"enabled": True}, "toolkit": runtime_spec("cdi")["toolkit"], "devicePlugin": {}}
    assert runtime_problems({"spec": spec}) == []


def runtime_devices(pod: dict[str, Any], toolkit_env: dict[str, str]) -> list[str]:
    """The devices the NVIDIA container runtime gives a pod's first container, by the toolkit's own rule
    (nvidia-container-toolkit, getDevices): the device list from mounts of the host's /dev/null under
    /var/run/nvidia-container-devices when ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS is true, else
    NVIDIA_VISIBLE_DEVICES only for a privileged container or where the toolkit accepts it unprivileged
    (its default)."""
    root = "/var/run/nvidia-container-devices/"
    container = pod["containers"][0]
    if toolkit_env.get("ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "false") == "true":
        null_volumes = {v["name"] for v in pod.get("volumes", []) if v.get("hostPath", {}).get("path") == "/dev/null"}
        mounted = [m["mountPath"].removeprefix(root) for m in container.get("volumeMounts", [])
                   if m["name"] in null_volumes and m["mountPath"].startswith(root)]
        if mounted:
            return mounted
    env = {e["name"]: e.get("value", "") for e in container.get("env", [])}
    privileged = container.get("securityContext", {}).get("privileged") is True
    accepted = toolkit_env.get("ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "true") == "true"
    return env.get("NVIDIA_VISIBLE_DEVICES", "").split(",") if env.get("NVIDIA_VISIBLE_DEVICES") and (
        privileged or accepted) else []


@pytest.mark.parametrize("strategy", [None, "volume-mounts", "cdi"])
def test_the_node_agent_gets_every_device_the_way_the_settings_allow(tmp_path: Path, strategy: str | None) -> None:
    """gpugov's own agent reads NVML for every GPU of its node without privilege: under the operator's
    defaults through the variable, under gpugov's settings (either strategy) through its /dev/null mount
    at the device-list path, which tenants cannot write (gpugov-device-env-sources, Pod Security)."""
    block = f"  gpuOperator:\n    clusterPolicy: cluster-policy\n    deviceListStrategy: {strategy}\n" if strategy else ""
    objects = compiled(declaring(tmp_path, block))
    [agent] = [o for o in objects if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "gpugov-agent"]
    pod = agent["spec"]["template"]["spec"]
    assert pod["containers"][0]["securityContext"].get("privileged") is not True
    toolkit_env = {e["name"]: e["value"] for p in policies(objects) for e in p["spec"]["toolkit"]["env"]}
    assert runtime_devices(pod, toolkit_env) == ["all"]
    # the same pod without the mount sees nothing where gpugov's settings hold
    bare = {**pod, "volumes": []}
    assert runtime_devices(bare, toolkit_env) == ([] if strategy else ["all"])
