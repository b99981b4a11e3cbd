"""`gpugov budget` on a Volcano cluster: what it reads (the pods of the tenants' namespaces and the
nodes, as `gpugov usage` reads them) and how it holds a spent tenant.

A hold closes the tenant's leaf Queue the way Volcano's own queue controller honours: a
``bus.volcano.sh/v1alpha1`` Command ``CloseQueue`` whose target is the Queue (what ``vcctl queue
operate --action close`` creates). The controller deletes the Command and sets the Queue's
``status.state`` to Closing (PodGroups remain) or Closed; the scheduler's enqueue action then rejects
every new job of a queue that is not Open (the capacity and proportion plugins' JobEnqueueable: its
PodGroup stays Pending), while a job already running keeps its pods. ``OpenQueue`` releases it.

The Queue's state lives in its status and says nothing of who closed it, so before closing gpugov
marks the Queue with the annotation ``gpugov.io/budget-held`` (server-side apply under its own field
manager ``gpugov-budget``: compile never declares it, so `gpugov apply` never takes it away). Only a
Queue carrying that mark is ever opened again; a Queue closed without it (an operator's vcctl, a
department queue's close) is left as it is, held or not.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from gpugov.cluster.rest import Api, Rejected, list_all, read_object, server_side_apply
from gpugov.cluster.volcano_queues import NODE, POD, QUEUE, _core
from gpugov.i18n import Text
from gpugov.kube.names import VOLCANO_API
from gpugov.kube.objects import ANNOTATION_BUDGET_HELD, LABEL_TENANT
from gpugov.sources import CheckIncomplete

FIELD_MANAGER = "gpugov-budget"
COMMAND_API = "bus.volcano.sh/v1alpha1"
CLOSE, OPEN = "CloseQueue", "OpenQueue"
NOT_OPEN = ("Closed", "Closing")


def tenant_namespaces(objects: list[dict[str, Any]]) -> list[str]:
    """The tenants' namespaces compile emits for this cluster."""
    return sorted(o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"
                  and LABEL_TENANT in (o["metadata"].get("labels") or {}))


def read_pods_and_nodes(api_client: Any, objects: list[dict[str, Any]], page_size: int,
                        on_progress: Callable[..., None] | None = None) -> tuple[list[dict[str, Any]],
                                                                                  list[dict[str, Any]]]:
    """(every pod of the tenants' namespaces, every node): what the Volcano ledger is made of
    (gpugov.usage.volcano). Whole or CheckIncomplete."""
    from gpugov.cluster.queues import may

    api = Api(api_client)
    if not may(api, "list", "nodes", group=""):
        raise CheckIncomplete("forbidden: list nodes: a pod's pool is its node's")
    nodes = list(list_all(api, NODE, page_size=page_size))
    pods: list[dict[str, Any]] = []
    for namespace in tenant_namespaces(objects):
        pods += list_all(api, _core(POD, namespace), page_size=page_size)
        if on_progress is not None:
            on_progress(len(pods))
    return pods, nodes


def marked(queue: dict[str, Any]) -> bool:
    """Whether `gpugov budget` closed this Queue (its mark is on it)."""
    return ANNOTATION_BUDGET_HELD in ((queue.get("metadata") or {}).get("annotations") or {})


def state_of(queue: dict[str, Any]) -> str:
    return (queue.get("status") or {}).get("state") or "Open"


def _mark(api: Api, name: str, held_since: str | None) -> None:
    """Apply (or, with None, drop) gpugov-budget's annotation: the only field that manager owns."""
    metadata: dict[str, Any] = {"name": name}
    if held_since is not None:
        metadata["annotations"] = {ANNOTATION_BUDGET_HELD: held_since}
    server_side_apply(api, QUEUE, {"apiVersion": VOLCANO_API, "kind": "Queue", "metadata": metadata},
                      field_manager=FIELD_MANAGER)


def command(queue: dict[str, Any], action: str, namespace: str, why: str) -> dict[str, Any]:
    """The Command Volcano's queue controller carries out on the Queue (and then deletes)."""
    meta = queue["metadata"]
    target = {"apiVersion": VOLCANO_API, "kind": "Queue", "name": meta["name"], "uid": meta["uid"],
              "controller": True}
    return {"apiVersion": COMMAND_API, "kind": "Command",
            "metadata": {"generateName": f"{meta['name']}-{action.lower()}-", "namespace": namespace,
                         "ownerReferences": [target]},
            "target": target, "action": action, "reason": "GpugovBudget", "message": why[:1024]}


def _send(api: Api, body: dict[str, Any]) -> None:
    namespace = body["metadata"]["namespace"]
    answer = api.call("POST", f"/apis/{COMMAND_API}/namespaces/{namespace}/commands", (), body, "application/json")
    if not answer.ok:
        if answer.is_status:
            raise Rejected(answer)
        raise answer.not_an_api("Command")


def hold_volcano_queues(api_client: Any, objects: list[dict[str, Any]], held: frozenset[str], namespace: str,
                        now: datetime) -> list[Text]:
    """Close the leaf Queues of the held tenants (marked first), open again those gpugov closed whose
    tenant is no longer held (then unmark); never touch a Queue closed by someone else. Commands go to
    `namespace`. Returns one line per change."""
    api = Api(api_client)
    changes: list[Text] = []
    for obj in objects:
        if obj["kind"] != "Queue" or LABEL_TENANT not in (obj["metadata"].get("labels") or {}):
            continue
        tenant, name = obj["metadata"]["labels"][LABEL_TENANT], obj["metadata"]["name"]
        live = read_object(api, QUEUE, name)
        if live is None:
            continue  # not applied yet: nothing to hold
        state, ours = state_of(live), marked(live)
        if tenant in held and state not in NOT_OPEN:
            _mark(api, name, f"{now:%Y-%m-%dT%H:%M:%SZ}")
            _send(api, command(live, CLOSE, namespace, f"gpugov budget: tenant {tenant} has spent a hold budget"))
            changes.append(Text("Queue {name} (tenant {tenant}): {current} -> Closed (CloseQueue)", name=name,
                                tenant=tenant, current=state))
        elif tenant not in held and ours:
            if state in NOT_OPEN:
                _send(api, command(live, OPEN, namespace, f"gpugov budget: tenant {tenant} is within its budgets"))
                changes.append(Text("Queue {name} (tenant {tenant}): {current} -> Open (OpenQueue)", name=name,
                                    tenant=tenant, current=state))
            _mark(api, name, None)
    return changes
