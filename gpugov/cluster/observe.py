"""Reading the live cluster for drift: paginated raw lists of only the kinds it needs.

Raw JSON, not the client's typed models: deserialising 50,000 pods into Python objects
costs more time and memory than the comparison itself. Any failure (unreachable, forbidden,
timed out, an expired continue token) raises CheckIncomplete: a partial read never reports
"no drift".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from gpugov.compile import Object, object_key
from gpugov.compile.common import MANAGED_BY, MANAGER
from gpugov.drift.live import LiveState, live_key
from gpugov.kube.kinds import KINDS, Kind, kind_of
from gpugov.sources import CheckIncomplete

PAGE_SIZE = 500
TIMEOUT = (10, 60)  # connect, read (seconds)


def _get(api: client.ApiClient, path: str, query: list[tuple[str, str]]) -> dict[str, Any]:
    method, url, headers, body, post = api.param_serialize(
        "GET", path, query_params=query, header_params={"Accept": "application/json"}, auth_settings=["BearerToken"]
    )
    try:
        response = api.call_api(method, url, headers, body, post, _request_timeout=TIMEOUT)
        data = response.read()
    except ApiException as exc:
        raise CheckIncomplete(f"GET {path}: {exc.status} {exc.reason}") from exc
    except (HTTPError, OSError) as exc:
        raise CheckIncomplete(f"GET {path}: {type(exc).__name__}: cluster unreachable or timed out") from exc
    if response.status == 404:
        return {}
    if response.status >= 400:
        reason = response.reason or ""
        if response.status in (401, 403):
            reason += " (the credentials may not read this kind)"
        raise CheckIncomplete(f"GET {path}: {response.status} {reason}")
    return json.loads(data)


def list_all(api: client.ApiClient, kind: Kind, label_selector: str = "", field_selector: str = "",
             page_size: int = PAGE_SIZE) -> Iterator[dict[str, Any]]:
    """Every object of `kind` in all namespaces, page by page (limit/continue)."""
    token = ""
    while True:
        query = [("limit", str(page_size))]
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        if token:
            query.append(("continue", token))
        page = _get(api, kind.collection_path(), query)
        for item in page.get("items", []):
            item.setdefault("apiVersion", kind.api_version)
            item.setdefault("kind", kind.kind)
            yield item
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return


def observe(api: client.ApiClient, desired: list[Object], *, page_size: int = PAGE_SIZE,
            on_progress: Callable[[str], None] | None = None) -> LiveState:
    """Read what drift compares: desired kinds (managed-by gpugov, plus any desired object
    that lost the label), nodes, and pods that are not finished."""
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
            item = _get(api, kind.object_path(obj["metadata"]["name"], obj["metadata"].get("namespace", "")), [])
            if item:
                live.objects[live_key({**item, "apiVersion": kind.api_version, "kind": kind.kind})] = item
    progress("list nodes")
    live.nodes = {n["metadata"]["name"]: n for n in list_all(api, KINDS[("v1", "Node")], page_size=page_size)}
    progress("list pods")
    live.pods = list(list_all(api, KINDS[("v1", "Pod")], field_selector="status.phase!=Succeeded,status.phase!=Failed",
                              page_size=page_size))
    progress("done")
    return live
