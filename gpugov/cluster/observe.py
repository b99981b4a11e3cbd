"""Reading the live cluster for drift: paginated raw lists of only the kinds it needs.

Raw JSON, not the client's typed models: deserialising 50,000 pods into Python objects
costs more time and memory than the comparison itself. Any failure (unreachable, forbidden,
timed out, an expired continue token, an answer that is not the asked list: see rest.py)
raises CheckIncomplete: a partial read never reports "no drift".
"""

from __future__ import annotations

from collections.abc import Callable

from kubernetes import client

from gpugov.cluster.rest import PAGE_SIZE, Api, list_all, read_object
from gpugov.compile import Object, object_key
from gpugov.drift.live import LiveState, live_key
from gpugov.kube.kinds import KINDS, kind_of
from gpugov.kube.objects import MANAGED_BY, MANAGER


def observe(api_client: client.ApiClient, desired: list[Object], *, page_size: int = PAGE_SIZE,
            on_progress: Callable[[str], None] | None = None) -> LiveState:
    """Read what drift compares: desired kinds (managed-by gpugov, plus any desired object
    that lost the label), nodes, and pods that are not finished."""
    api = Api(api_client)
    progress = on_progress or (lambda _step: None)
    live = LiveState()
    kinds = sorted({(o["apiVersion"], o["kind"]) for o in desired if o["kind"] != "Node"})
    for key in kinds:
        kind = KINDS[key]
        progress(f"list {kind.plural}")
        for item in list_all(api, kind, label_selector=f"{MANAGED_BY}={MANAGER}", page_size=page_size):
            live.objects[live_key(item)] = item
    for obj in desired:
        if obj["kind"] != "Node" and object_key(obj) not in live.objects:
            kind = kind_of(obj)
            item = read_object(api, kind, obj["metadata"]["name"], obj["metadata"].get("namespace", ""))
            if item is not None:
                live.objects[live_key(item)] = item
    progress("list nodes")
    live.nodes = {n["metadata"]["name"]: n for n in list_all(api, KINDS[("v1", "Node")], page_size=page_size)}
    progress("list pods")
    live.pods = list(list_all(api, KINDS[("v1", "Pod")], field_selector="status.phase!=Succeeded,status.phase!=Failed",
                              page_size=page_size))
    progress("done")
    return live
