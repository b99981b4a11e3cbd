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

Volcano carries a Command out later, and in no set order: its controller deletes the Command, then
queues a request that one of several workers runs against its informer's copy of the Queue. So the
Queue's state says nothing of gpugov's Commands still to come, and every decision here also reads
them: gpugov's own pending Commands for the Queue (reason ``GpugovBudget``, target the Queue's uid).
One is never sent twice; one going the other way is deleted first (a delete that succeeds means
Volcano never carries it out; NotFound means it was taken and is being carried out, so its effect is
awaited). After sending, the Queue's state is read until it shows the Command carried out, for at
most WAIT seconds; the mark is dropped only on a Queue seen Open with nothing of gpugov's pending or
in flight, so a run that could not finish leaves the mark and the next run goes on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gpugov.cluster.rest import Api, Rejected, list_all, read_object, server_side_apply
from gpugov.cluster.volcano_queues import NODE, POD, QUEUE, _core, _in
from gpugov.i18n import Text
from gpugov.kube.kinds import Kind
from gpugov.kube.names import VOLCANO_API
from gpugov.kube.objects import ANNOTATION_BUDGET_HELD, LABEL_TENANT
from gpugov.sources import CheckIncomplete

FIELD_MANAGER = "gpugov-budget"
COMMAND_API = "bus.volcano.sh/v1alpha1"
CLOSE, OPEN = "CloseQueue", "OpenQueue"
NOT_OPEN = ("Closed", "Closing")
REASON = "GpugovBudget"
COMMAND = Kind(COMMAND_API, "Command", "commands", True)
WAIT = 5.0  # seconds a run waits for Volcano's queue controller to carry out a Command it sent
POLL = 0.25


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
            "target": target, "action": action, "reason": REASON, "message": why[:1024]}


def pending(api: Api, queue: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
    """gpugov's Commands for this Queue that Volcano's controller has not taken yet."""
    uid = queue["metadata"]["uid"]
    return [c for c in list_all(api, _in(COMMAND, namespace))
            if c.get("reason") == REASON and (c.get("target") or {}).get("uid") == uid]


def _send(api: Api, body: dict[str, Any]) -> None:
    namespace = body["metadata"]["namespace"]
    answer = api.call("POST", _in(COMMAND, namespace).collection_path(), (), body, "application/json")
    if not answer.ok:
        if answer.is_status:
            raise Rejected(answer)
        raise answer.not_an_api("Command")


def _withdraw(api: Api, commands: list[dict[str, Any]]) -> tuple[int, int]:
    """Delete the Commands: (how many were deleted, so never carried out; how many Volcano's controller
    had taken already, so are being carried out). Its handleCommand deletes a Command before acting on
    it and skips one it finds gone, so whichever delete comes first decides."""
    withdrawn = taken = 0
    for cmd in commands:
        meta = cmd["metadata"]
        answer = api.call("DELETE", COMMAND.object_path(meta["name"], meta["namespace"]), (),
                          {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": meta.get("uid")}}
                          if meta.get("uid") else None, "application/json")
        if answer.ok:
            withdrawn += 1
        elif answer.status == 404 and answer.status_reason == "NotFound":
            taken += 1
        elif answer.is_status:
            raise Rejected(answer)
        else:
            raise answer.not_an_api("Status")
    return withdrawn, taken


@dataclass
class _Waiter:
    api: Api
    clock: Callable[[], float]
    sleep: Callable[[float], None]
    wait: float = WAIT

    def until(self, name: str, states: tuple[str, ...]) -> str | None:
        """The Queue's state once it is one of `states`; None if `wait` seconds passed first (or it is gone)."""
        deadline = self.clock() + self.wait
        while True:
            live = read_object(self.api, QUEUE, name)
            if live is None:
                return None
            if state_of(live) in states:
                return state_of(live)
            if self.clock() >= deadline:
                return None
            self.sleep(POLL)


def _withdrew(name: str, tenant: str, current: str, action: str) -> Text:
    return Text("Queue {name} (tenant {tenant}): {current}, withdrew gpugov's pending {action} before Volcano "
                "carried it out", name=name, tenant=tenant, current=current, action=action)


def _in_flight(name: str, tenant: str, current: str, action: str) -> Text:
    return Text("Queue {name} (tenant {tenant}): {current}, gpugov's {action} was taken by Volcano's queue "
                "controller and is not carried out yet (the mark stays: a later run goes on)", name=name,
                tenant=tenant, current=current, action=action)


def _still_pending(name: str, tenant: str, current: str, action: str) -> Text:
    return Text("Queue {name} (tenant {tenant}): {current}, gpugov's {action} of an earlier run is still pending; "
                "nothing more sent", name=name, tenant=tenant, current=current, action=action)


def _sent(waiter: _Waiter, live: dict[str, Any], tenant: str, action: str, namespace: str, why: str,
          current: str) -> tuple[Text, str | None]:
    """Send `action` and wait for the Queue to show it: (the line, the state seen, None if not yet)."""
    name = live["metadata"]["name"]
    _send(waiter.api, command(live, action, namespace, why))
    seen = waiter.until(name, NOT_OPEN if action == CLOSE else ("Open",))
    if seen is None:
        return Text("Queue {name} (tenant {tenant}): {current}, {action} sent; Volcano's queue controller has not "
                    "carried it out within {seconds} s (the mark stays: a later run goes on)", name=name,
                    tenant=tenant, current=current, action=action, seconds=f"{waiter.wait:g}"), None
    return Text("Queue {name} (tenant {tenant}): {current} -> {observed} ({action})", name=name, tenant=tenant,
                current=current, observed=seen, action=action), seen


def hold_volcano_queues(api_client: Any, objects: list[dict[str, Any]], held: frozenset[str], namespace: str,
                        now: datetime, clock: Callable[[], float] = time.monotonic,
                        sleep: Callable[[float], None] = time.sleep, wait: float = WAIT) -> list[Text]:
    """Close the leaf Queues of the held tenants (marked first), open again those gpugov closed whose
    tenant is no longer held (then unmark); never touch a Queue closed by someone else. Commands go to
    `namespace`; each is waited for at most `wait` seconds. Returns one line per change, or per Command
    still waiting on Volcano."""
    waiter = _Waiter(Api(api_client), clock, sleep, wait)
    changes: list[Text] = []
    for obj in objects:
        if obj["kind"] != "Queue" or LABEL_TENANT not in (obj["metadata"].get("labels") or {}):
            continue
        tenant, name = obj["metadata"]["labels"][LABEL_TENANT], obj["metadata"]["name"]
        live = read_object(waiter.api, QUEUE, name)
        if live is None:
            continue  # not applied yet: nothing to hold
        if tenant in held and (marked(live) or state_of(live) not in NOT_OPEN):
            changes += _hold(waiter, live, tenant, namespace, now)
        elif tenant not in held and marked(live):
            changes += _release(waiter, live, tenant, namespace)
    return changes


def _hold(waiter: _Waiter, live: dict[str, Any], tenant: str, namespace: str, now: datetime) -> list[Text]:
    api, name, state = waiter.api, live["metadata"]["name"], state_of(live)
    lines: list[Text] = []
    ours = pending(api, live, namespace)
    withdrawn, taken = _withdraw(api, [c for c in ours if c.get("action") == OPEN])
    if withdrawn:
        lines.append(_withdrew(name, tenant, state, OPEN))
    if taken and state in NOT_OPEN:  # a release is being carried out: close only once it shows
        seen = waiter.until(name, ("Open",))
        if seen is None:
            return [*lines, _in_flight(name, tenant, state, OPEN)]
        state = seen
    if state in NOT_OPEN:
        return lines  # held already
    if not marked(live):
        _mark(api, name, f"{now:%Y-%m-%dT%H:%M:%SZ}")
    if any(c.get("action") == CLOSE for c in ours):
        return [*lines, _still_pending(name, tenant, state, CLOSE)]
    line, _ = _sent(waiter, live, tenant, CLOSE, namespace,
                    f"gpugov budget: tenant {tenant} has spent a hold budget", state)
    return [*lines, line]


def _release(waiter: _Waiter, live: dict[str, Any], tenant: str, namespace: str) -> list[Text]:
    api, name, state = waiter.api, live["metadata"]["name"], state_of(live)
    lines: list[Text] = []
    ours = pending(api, live, namespace)
    withdrawn, taken = _withdraw(api, [c for c in ours if c.get("action") == CLOSE])
    if withdrawn:
        lines.append(_withdrew(name, tenant, state, CLOSE))
    # A close taken while the Queue shows Open is awaited (it would close the Queue after an open); one
    # taken while it shows Closed already cannot be seen to finish, so the mark stays for a later run.
    settled = not taken
    if taken and state not in NOT_OPEN:
        seen = waiter.until(name, NOT_OPEN)
        if seen is None:
            return [*lines, _in_flight(name, tenant, state, CLOSE)]
        state, settled = seen, True
    if state in NOT_OPEN:
        if any(c.get("action") == OPEN for c in ours):
            return [*lines, _still_pending(name, tenant, state, OPEN)]
        line, seen = _sent(waiter, live, tenant, OPEN, namespace,
                           f"gpugov budget: tenant {tenant} is within its budgets", state)
        lines.append(line)
        if seen is None:
            return lines
    if settled and not pending(api, live, namespace):  # seen Open, nothing of gpugov's still to come
        _mark(api, name, None)
    return lines
