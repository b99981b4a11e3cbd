"""The GPU Operator's ClusterPolicy settings that make the device plugin the only way to a GPU.

Threat (issue #38): the NVIDIA container runtime hands GPUs to any container whose environment
names them in NVIDIA_VISIBLE_DEVICES, and every CUDA base image sets it in its own ENV, which no
admission policy can read. A pod without an accelerator request on a GPU node would get devices
around the queue. Control: the toolkit refuses the variable from unprivileged containers
(ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED=false) and the device plugin hands the
devices it allocated another way: volume mounts the toolkit reads
(DEVICE_LIST_STRATEGY=volume-mounts with ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS=true), or
CDI (cdi.enabled, DEVICE_LIST_STRATEGY=cdi-annotations,cdi-cri). Privileged containers keep the
variable, which tenant namespaces' Pod Security already refuses. Check: doctor DR018. Test:
tests/unit/test_gpu_operator.py, tests/e2e/test_runtime_visibility.py.

Field names are the GPU Operator's (api/nvidia/v1/clusterpolicy_types.go: spec.toolkit.env,
spec.devicePlugin.env, spec.cdi.enabled) and the environment its toolkit and device plugin
containers read (controllers/object_controls.go sets DEVICE_LIST_STRATEGY to
"cdi-annotations,cdi-cri" itself when CDI is on).

The object compile emits is a patch, emitted only where the Cluster declares spec.gpuOperator:
it carries no managed-by label (prune never deletes the operator's ClusterPolicy) and apply
merges its env entries by name into the live lists, which the CRD keeps atomic (see
``merged_policy``), so the platform's other settings (CONTAINERD_SOCKET and the like) stay.
"""

from __future__ import annotations

import copy
from typing import Any

from gpugov.compile.common import Object, Scope
from gpugov.kube.objects import ANNOTATION_SOURCE

CLUSTERPOLICY_API = "nvidia.com/v1"
CLUSTERPOLICY_KIND = "ClusterPolicy"
TOOLKIT_REFUSES_ENVVAR = ("ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "false")
TOOLKIT_VOLUME_MOUNTS = ("ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "true")
DEVICE_LIST_STRATEGY = "DEVICE_LIST_STRATEGY"
VOLUME_MOUNTS = "volume-mounts"
CDI_STRATEGIES = ("cdi-annotations", "cdi-cri")
# The ClusterPolicy components whose env lists the patch sets entries in.
ENV_COMPONENTS = ("toolkit", "devicePlugin")


def _env(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"name": name, "value": value} for name, value in pairs]


def runtime_spec(strategy: str) -> dict[str, Any]:
    """The ClusterPolicy spec fields for a device-list strategy (volume-mounts or cdi)."""
    # Volume mounts are accepted under CDI too: gpugov's node agent asks for every device by a mount
    # at the device-list path (compile.operations), which the toolkit reads in both of its modes.
    if strategy == "cdi":
        return {"cdi": {"enabled": True},
                "devicePlugin": {"env": _env((DEVICE_LIST_STRATEGY, ",".join(CDI_STRATEGIES)))},
                "toolkit": {"env": _env(TOOLKIT_REFUSES_ENVVAR, TOOLKIT_VOLUME_MOUNTS)}}
    return {"devicePlugin": {"env": _env((DEVICE_LIST_STRATEGY, VOLUME_MOUNTS))},
            "toolkit": {"env": _env(TOOLKIT_REFUSES_ENVVAR, TOOLKIT_VOLUME_MOUNTS)}}


def gpu_operator_objects(scope: Scope) -> list[Object]:
    """The ClusterPolicy patch of a cluster whose GPU Operator the platform team manages, else nothing."""
    cluster = scope.cluster
    if cluster.gpu_operator_policy is None:
        return []
    return [{"apiVersion": CLUSTERPOLICY_API, "kind": CLUSTERPOLICY_KIND,
             "metadata": {"name": cluster.gpu_operator_policy, "annotations": {ANNOTATION_SOURCE: cluster.origin}},
             "spec": runtime_spec(cluster.device_list_strategy)}]


def is_clusterpolicy(obj: Object) -> bool:
    return obj.get("apiVersion") == CLUSTERPOLICY_API and obj.get("kind") == CLUSTERPOLICY_KIND


def merged_env(live: list[Any] | None, wanted: list[dict[str, str]]) -> list[Any]:
    """`live` with each wanted entry set by name (in place where the name is, else appended), every
    other entry kept as it is."""
    values = {e["name"]: e["value"] for e in wanted}
    out: list[Any] = []
    for entry in live or []:
        if isinstance(entry, dict) and entry.get("name") in values:
            out.append({**entry, "value": values.pop(str(entry["name"]))})
        else:
            out.append(entry)
    out.extend({"name": name, "value": value} for name, value in values.items())
    return out


def merged_policy(live: Object, patch: Object) -> dict[str, Any]:
    """The JSON merge patch that puts `patch`'s settings on the live ClusterPolicy: the env lists
    (atomic for the API, so written whole) are the live ones with gpugov's entries set by name, the
    resourceVersion guards against a writer in between, other fields merge as JSON merge patch does."""
    spec: dict[str, Any] = copy.deepcopy({k: v for k, v in patch["spec"].items() if k not in ENV_COMPONENTS})
    live_spec = live.get("spec") or {}
    for component in ENV_COMPONENTS:
        wanted = (patch["spec"].get(component) or {}).get("env")
        if wanted:
            spec[component] = {"env": merged_env((live_spec.get(component) or {}).get("env"), wanted)}
    return {"metadata": {"resourceVersion": live["metadata"]["resourceVersion"],
                         "annotations": dict(patch["metadata"].get("annotations") or {})},
            "spec": spec}


__all__ = ["CDI_STRATEGIES", "CLUSTERPOLICY_API", "CLUSTERPOLICY_KIND", "DEVICE_LIST_STRATEGY", "TOOLKIT_REFUSES_ENVVAR",
           "TOOLKIT_VOLUME_MOUNTS", "VOLUME_MOUNTS", "gpu_operator_objects", "is_clusterpolicy", "merged_env",
           "merged_policy", "runtime_spec"]
