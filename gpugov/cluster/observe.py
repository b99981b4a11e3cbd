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
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from kubernetes import client

from gpugov.app.pipeline import gc_paused
from gpugov.cluster.rest import PAGE_SIZE, Api, list_all, read_object
from gpugov.compile import Object, object_key
from gpugov.drift.live import LiveState
from gpugov.kube.kinds import KINDS, WORKLOAD, kind_of
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


def pod_for_drift(pod: dict[str, Any], shared: dict[Any, Any] | None = None) -> dict[str, Any]:
    """The fields of a pod drift reads: name, namespace, Kueue's labels and annotation, node,
    scheduler, phase and start time, and the accelerators its containers ask for (limits and requests).

    With `shared` (one per read), equal labels, specs and statuses are one object for all the pods
    that have them: read only, and at 150,000 pods the difference between a few hundred MiB and
    less than a hundred."""
    memo: dict[Any, Any] = {} if shared is None else shared
    meta, spec = pod["metadata"], pod.get("spec") or {}
    slim_meta: dict[str, Any] = {"name": meta["name"], "namespace": _intern(meta.get("namespace") or "")}
    if labels := _kept(meta.get("labels"), POD_LABELS):
        slim_meta["labels"] = _one(memo, ("labels", *labels.items()), labels)
    if annotations := _kept(meta.get("annotations"), POD_ANNOTATIONS):
        slim_meta["annotations"] = annotations
    containers, asks = [], []
    for container in spec.get("containers") or []:
        resources = (container.get("resources") or {}) if isinstance(container, dict) else {}
        kept = {part: amounts for part in ("limits", "requests") if (amounts := _accelerators(resources.get(part)))}
        if kept:
            containers.append({"resources": kept})
            # typed: "1", 1, 1.0 and True are different spellings (the checks tell them apart)
            asks.append(tuple((part, *((r, v, type(v)) for r, v in amounts.items())) for part, amounts in kept.items()))
    slim_spec: dict[str, Any] = {key: _intern(spec[key]) for key in ("nodeName", "schedulerName")
                                 if isinstance(spec.get(key), str)}
    spec_key = ("spec", *slim_spec.items(), *asks)
    if containers:
        slim_spec["containers"] = containers
    if containers:  # whether an admitted Workload holds it: its uid and its owners' (accelerator pods only)
        slim_meta["uid"] = meta.get("uid") or ""
        owners = [o.get("uid") or "" for o in meta.get("ownerReferences") or [] if isinstance(o, dict)]
        if owners:
            slim_meta["ownerReferences"] = [{"uid": uid} for uid in owners]
    status = pod.get("status") or {}
    slim_status = {"phase": _intern(status["phase"])} if isinstance(status.get("phase"), str) else {}
    if isinstance(status.get("startTime"), str):
        slim_status["startTime"] = status["startTime"]  # whether it started under a quota since lowered
    return {"metadata": slim_meta, "spec": _one(memo, spec_key, slim_spec),
            "status": _one(memo, ("status", *slim_status.items()), slim_status)}


def _one(memo: dict[Any, Any], key: tuple[Any, ...], value: dict[str, Any]) -> dict[str, Any]:
    """The first value seen under `key` (its content); `value` itself where the content cannot be a key."""
    try:
        return memo.setdefault(key, value)
    except TypeError:  # an amount that is not a string or a number: kept, never shared
        return value


def node_for_drift(node: dict[str, Any]) -> dict[str, Any]:
    """A node without what no check reads and a real node carries much of: managedFields, images."""
    node["metadata"].pop("managedFields", None)
    (node.get("status") or {}).pop("images", None)
    return node


def observe(api_client: client.ApiClient, desired: list[Object], *, page_size: int = PAGE_SIZE,
            on_progress: Callable[[str], None] | None = None) -> LiveState:
    """Read what drift compares: desired kinds (managed-by gpugov, plus any desired object
    that lost the label), nodes, pods that are not finished, and on Kueue the admitted Workloads.

    The cyclic collector is paused while reading: JSON has no cycles, and with it on CPython
    scans the growing heap of kept pods again and again (at 150,000 pods that cost more than
    the reading itself)."""
    with gc_paused():
        return _observe(Api(api_client), desired, page_size, on_progress)


def _observe(api: Api, desired: list[Object], page_size: int,
             on_progress: Callable[[str], None] | None) -> LiveState:
    progress = on_progress or (lambda _step: None)
    live = LiveState()
    stop = threading.Event()
    # The pods, by far the longest read, go in a thread of their own alongside the objects and
    # nodes: the API server answers both at once, and the waits overlap. The thread starts once a
    # first list came back whole, so a server that is no Kubernetes API is asked once, not twice.
    with ThreadPoolExecutor(1, thread_name_prefix="gpugov-pods") as pool:
        pods: list[Future[list[dict[str, Any]]]] = []
        try:
            _objects_and_nodes(api, desired, page_size, progress, live,
                               lambda: pods or pods.append(pool.submit(_pods, api, page_size, stop)))
            progress("list pods")
            live.pods = pods[0].result() if pods else _pods(api, page_size, stop)
            if any(o["kind"] == "ClusterQueue" for o in desired):
                progress("list workloads")
                live.admitted = _admitted(api, page_size)
        except BaseException:
            stop.set()  # a failed read ends the other one after its current page
            raise
    progress("done")
    return live


def _objects_and_nodes(api: Api, desired: list[Object], page_size: int, progress: Callable[[str], None],
                       live: LiveState, first_read: Callable[[], object]) -> None:
    """The desired kinds and the nodes; `first_read` is called once the first list came back."""
    kinds = sorted({(o["apiVersion"], o["kind"]) for o in desired if o["kind"] != "Node"})
    for key in kinds:
        kind = KINDS[key]
        progress(f"list {kind.plural}")
        for item in list_all(api, kind, label_selector=f"{MANAGED_BY}={MANAGER}", page_size=page_size):
            live.objects[object_key(item)] = item
        first_read()
    for obj in desired:
        if obj["kind"] != "Node" and object_key(obj) not in live.objects:
            kind = kind_of(obj)
            item = read_object(api, kind, obj["metadata"]["name"], obj["metadata"].get("namespace", ""))
            if item is not None:
                live.objects[object_key(item)] = item
    progress("list nodes")
    live.nodes = {n["metadata"]["name"]: node_for_drift(n)
                  for n in list_all(api, KINDS[("v1", "Node")], page_size=page_size)}


def _admitted(api: Api, page_size: int) -> list[tuple[str, str, tuple[str, ...]]]:
    """Kueue's Workloads that hold quota now (admitted, not finished), each as (namespace, name, owner uids)."""
    found = []
    for workload in list_all(api, WORKLOAD, page_size=page_size):
        status = workload.get("status") or {}
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or [] if isinstance(c, dict)}
        if status.get("admission") and conditions.get("Finished") != "True":
            meta = workload["metadata"]
            found.append((meta.get("namespace") or "", meta["name"],
                          tuple(o.get("uid") or "" for o in meta.get("ownerReferences") or [])))
    return found


def _pods(api: Api, page_size: int, stop: threading.Event) -> list[dict[str, Any]]:
    """The pods that are not finished, each cut to what drift reads (until `stop` is set)."""
    pods, shared = [], {}  # type: ignore[var-annotated]
    for pod in list_all(api, KINDS[("v1", "Pod")], page_size=page_size,
                        field_selector="status.phase!=Succeeded,status.phase!=Failed"):
        if stop.is_set():
            break
        pods.append(pod_for_drift(pod, shared))
    return pods
