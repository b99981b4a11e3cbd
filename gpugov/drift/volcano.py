"""Drift on a Volcano cluster beyond the objects' fields: a declared Queue that is not Open.

A Queue's state lives in its status (the queue controller opens a Queue gpugov applies; an
operator's close command, vcctl's or a Command object, closes it): the field comparison of
objects.py never sees it. A Queue `gpugov budget` closed (its gpugov.io/budget-held mark) is held by
a declared budget, not drift. The Queues' parents and the scheduler's configuration ConfigMap
(volcano-system/volcano-scheduler-configmap) are declared fields: objects.py compares them.
"""

from __future__ import annotations

from gpugov.compile import Object
from gpugov.compile.origin import source_location
from gpugov.drift.live import LiveState
from gpugov.drift.rules import QUEUE_NOT_OPEN
from gpugov.findings import Finding, make
from gpugov.i18n import Text
from gpugov.kube.objects import ANNOTATION_BUDGET_HELD, object_key


def queue_findings(objects: list[Object], live: LiveState) -> list[Finding]:
    findings = []
    for obj in objects:
        if obj.get("kind") != "Queue" or not obj.get("apiVersion", "").startswith("scheduling.volcano.sh/"):
            continue
        current = live.objects.get(object_key(obj))
        if current is None:
            continue  # objects.py reports it missing
        state = (current.get("status") or {}).get("state") or ""
        if ANNOTATION_BUDGET_HELD in ((current.get("metadata") or {}).get("annotations") or {}):
            continue  # closed by `gpugov budget` for a spent hold budget: what the declarations ask
        if state and state != "Open":
            name = obj["metadata"]["name"]
            findings.append(make(QUEUE_NOT_OPEN, Text("Queue {queue} is {state}: Volcano admits no new job into it",
                                                      queue=name, state=state),
                                 source_location(obj), object=f"Queue {name}", field="status.state",
                                 declared="Open", live=state))
    return findings
