"""Reading the live cluster for drift: paginated raw lists of only the kinds it needs.

Raw JSON, not the client's typed models: deserialising 50,000 pods into Python objects
costs more time and memory than the comparison itself. Any failure (unreachable, forbidden,
timed out, an expired continue token, an answer that is not the asked list: see rest.py)
raises CheckIncomplete: a partial read never reports "no drift".

Pages are read one at a time and each pod is cut down to the fields the checks read
(gpugov.drift.usage and .idle) before the next page: at Kubernetes' ceiling (150,000 pods) the
whole pods would take gigabytes, while what drift keeps grows with the organisation (its
objects and nodes), not with the pods. Nodes lose only what no check reads and is large
(managedFields, the image list).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from kubernetes import client

from gpugov.app.pipeline import gc_paused
from gpugov.cluster.rest import PAGE_SIZE, Api, list_all, read_object
from gpugov.compile import Object, object_key
from gpugov.drift.live import LiveState
from gpugov.kube.kinds import KINDS, kind_of
from gpugov.kube.names import KUEUE_ADMITTED_LABEL, KUEUE_QUEUE_LABEL, KUEUE_WORKLOAD_ANNOTATION
from gpugov.kube.objects import MANAGED_BY, MANAGER
from gpugov.kube.resources import is_accelerator

POD_LABELS = (KUEUE_QUEUE_LABEL, KUEUE_ADMITTED_LABEL)
POD_ANNOTATIONS = (KUEUE_WORKLOAD_ANNOTATION,)
_intern = sys.intern  # namespaces, nodes, phases and resource names repeat across 150,000 pods


def _kept(values: Any, keys: tuple[str, ...]) -> dict[str, str]:
    return {key: values[key] for key in keys if key in values} if isinstance(values, dict) else {}


def _accelerators(amounts: Any) -> dict[str, Any]:
    if not isinstance(amounts, dict):
        return {}
    return {_intern(r): _intern(v) if isinstance(v, str) else v for r, v in amounts.items() if is_accelerator(r)}


def pod_for_drift(pod: dict[str, Any]) -> dict[str, Any]:
    """The fields of a pod drift reads: name, namespace, Kueue's labels and annotation, node,
    scheduler, phase, and the accelerators its containers ask for (limits and requests)."""
    meta, spec = pod["metadata"], pod.get("spec") or {}
    slim_meta: dict[str, Any] = {"name": meta["name"], "namespace": _intern(meta.get("namespace") or "")}
    if labels := _kept(meta.get("labels"), POD_LABELS):
        slim_meta["labels"] = labels
    if annotations := _kept(meta.get("annotations"), POD_ANNOTATIONS):
        slim_meta["annotations"] = annotations
    containers = []
    for container in spec.get("containers") or []:
        resources = (container.get("resources") or {}) if isinstance(container, dict) else {}
        kept = {part: amounts for part in ("limits", "requests") if (amounts := _accelerators(resources.get(part)))}
        if kept:
            containers.append({"resources": kept})
    slim_spec: dict[str, Any] = {key: _intern(spec[key]) for key in ("nodeName", "schedulerName")
                                 if isinstance(spec.get(key), str)}
    if containers:
        slim_spec["containers"] = containers
    phase = (pod.get("status") or {}).get("phase")
    return {"metadata": slim_meta, "spec": slim_spec, "status": {"phase": _intern(phase)} if phase else {}}


def node_for_drift(node: dict[str, Any]) -> dict[str, Any]:
    """A node without what no check reads and a real node carries much of: managedFields, images."""
    node["metadata"].pop("managedFields", None)
    (node.get("status") or {}).pop("images", None)
    return node


def observe(api_client: client.ApiClient, desired: list[Object], *, page_size: int = PAGE_SIZE,
            on_progress: Callable[[str], None] | None = None) -> LiveState:
    """Read what drift compares: desired kinds (managed-by gpugov, plus any desired object
    that lost the label), nodes, and pods that are not finished.

    The cyclic collector is paused while reading: JSON has no cycles, and with it on CPython
    scans the growing heap of kept pods again and again (at 150,000 pods that cost more than
    the reading itself)."""
    with gc_paused():
        return _observe(Api(api_client), desired, page_size, on_progress)


def _observe(api: Api, desired: list[Object], page_size: int,
             on_progress: Callable[[str], None] | None) -> LiveState:
    progress = on_progress or (lambda _step: None)
    live = LiveState()
    kinds = sorted({(o["apiVersion"], o["kind"]) for o in desired if o["kind"] != "Node"})
    for key in kinds:
        kind = KINDS[key]
        progress(f"list {kind.plural}")
        for item in list_all(api, kind, label_selector=f"{MANAGED_BY}={MANAGER}", page_size=page_size):
            live.objects[object_key(item)] = item
    for obj in desired:
        if obj["kind"] != "Node" and object_key(obj) not in live.objects:
            kind = kind_of(obj)
            item = read_object(api, kind, obj["metadata"]["name"], obj["metadata"].get("namespace", ""))
            if item is not None:
                live.objects[object_key(item)] = item
    progress("list nodes")
    live.nodes = {n["metadata"]["name"]: node_for_drift(n)
                  for n in list_all(api, KINDS[("v1", "Node")], page_size=page_size)}
    progress("list pods")
    live.pods = [pod_for_drift(pod) for pod in list_all(api, KINDS[("v1", "Pod")], page_size=page_size,
                                                        field_selector="status.phase!=Succeeded,status.phase!=Failed")]
    progress("done")
    return live
