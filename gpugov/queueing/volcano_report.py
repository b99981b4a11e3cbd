"""`gpugov queue` and `gpugov why` on a Volcano cluster: entries and their text, json and markdown."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from gpugov.findings.markdown import table
from gpugov.i18n import Text, _, localized
from gpugov.i18n.width import ljust, width
from gpugov.kube.quantity import format_quantity
from gpugov.queueing.report import timestamp
from gpugov.queueing.volcano import Capacity, Job, Verdict, capacities, explain, jobs, node_total, queue

ACCELERATOR_HINTS = ("gpu", "ascend", "npu", "mlu", "dcu", "neuron", "tpu")


@dataclass(frozen=True)
class Entry:
    tenant: str
    job: Job
    verdict: Verdict

    @property
    def label(self) -> str:
        return f"{self.job.namespace}/{self.job.job}"


@dataclass(frozen=True)
class View:
    now: datetime
    capacity: dict[str, Capacity]
    entries: list[Entry]
    notes: tuple[str, ...] = ()  # Texts: what the view could not read


def declared_total(capacities_of_pools: list[Mapping[str, Decimal]]) -> dict[str, Decimal]:
    """The scheduler's total as the declarations give it (for a reader who may not list nodes): every
    pool's capacity; cpu and memory, where no pool declares them, unbounded."""
    total: dict[str, Decimal] = {"cpu": Decimal("Infinity"), "memory": Decimal("Infinity")}
    declared: set[str] = set()
    for capacity in capacities_of_pools:
        for resource, amount in capacity.items():
            total[resource] = (total[resource] if resource in declared else Decimal(0)) + amount
            declared.add(resource)
    return total


def view(now: datetime, tenant_of_namespace: Mapping[str, str], queues: list[dict[str, Any]],
         nodes: list[dict[str, Any]] | None, podgroups: list[dict[str, Any]], pods: list[dict[str, Any]],
         batch_jobs: list[dict[str, Any]], failed_create: Mapping[tuple[str, str], str],
         declared: Mapping[str, Decimal] | None = None, refused: tuple[str, ...] = ()) -> View:
    """Every job of the read, explained (VolcanoError for what Volcano would not write). `nodes` None:
    the total is `declared` (declared_total), and the view says so."""
    notes: list[str] = []
    if nodes is None:
        total = dict(declared or {})
        notes.append(Text("real capabilities computed from the declared pools: you may not list nodes"))
    else:
        total = node_total(nodes)
    notes += [Text("not shown: namespace {namespace} (you may not list its PodGroups)", namespace=n) for n in refused]
    capacity = capacities([queue(q) for q in queues], total)
    found = [Entry(tenant_of_namespace.get(j.namespace, ""), j, explain(j, capacity))
             for j in jobs(podgroups, pods, batch_jobs, failed_create)]
    found.sort(key=lambda e: (e.tenant, e.job.queue, e.job.state != "admitted", e.job.namespace, e.job.job))
    return View(now, capacity, found, tuple(notes))


def _size(job: Job) -> str:
    accelerators = {r: a for r, a in job.asks.items() if any(h in r.lower() for h in ACCELERATOR_HINTS)}
    shown = accelerators or job.asks
    return " + ".join(f"{format_quantity(a)} {r}" for r, a in sorted(shown.items())) or "?"


def _state(state: str) -> str:
    return {"admitted": _("admitted"), "pending": _("pending"), "finished": _("finished")}.get(state, state)


def _resources(resources: Mapping[str, Decimal]) -> dict[str, str]:
    return {r: format_quantity(a) for r, a in sorted(resources.items()) if a.is_finite()}


def entry_json(e: Entry) -> dict[str, Any]:
    v = e.verdict
    return {
        "tenant": e.tenant, "namespace": e.job.namespace, "job": e.job.job, "podgroup": e.job.podgroup or None,
        "queue": e.job.queue, "state": e.job.state, "phase": e.job.phase or None, "min_member": e.job.min_member,
        "pods": e.job.pods, "bound": e.job.bound, "asks": _resources(e.job.asks),
        "reason": v.why.value, "finding": v.finding, "message": v.text, "volcano_message": v.volcano or None,
        "shortfalls": [{"queue": s.queue, "resource": s.resource, "asks": format_quantity(s.asks),
                        "held": format_quantity(s.held), "real_capability": format_quantity(s.real),
                        "more": format_quantity(s.more)} for s in v.shortfalls],
        "quota_refusal": None if v.refusal is None else {
            "resource_quota": v.refusal.quota, "resource": v.refusal.resource,
            "requested": format_quantity(v.refusal.requested), "used": format_quantity(v.refusal.used),
            "limited": format_quantity(v.refusal.limited), "more": format_quantity(v.refusal.more)},
    }


def queues_json(capacity: Mapping[str, Capacity]) -> list[dict[str, Any]]:
    return [{"queue": name, "parent": c.queue.parent or None, "state": c.queue.state, "leaf": c.leaf,
             "real_capability": _resources(c.real), "allocated": _resources(c.queue.allocated),
             "deserved": _resources(c.queue.deserved), "guarantee": _resources(c.queue.guarantee)}
            for name, c in sorted(capacity.items())]


def _rows(entries: list[Entry]) -> list[tuple[str, ...]]:
    return [(e.tenant or "?", e.job.queue, _state(e.job.state), e.label, _size(e.job), localized(e.verdict.text))
            for e in entries if e.job.state != "finished"]


def _columns() -> tuple[str, ...]:
    return (_("TENANT"), _("QUEUE"), _("STATE"), _("JOB"), _("SIZE"), _("WHY"))


def _summary(entries: list[Entry], cluster: str) -> str:
    shown = [e for e in entries if e.job.state != "finished"]
    pending = sum(e.job.state == "pending" for e in shown)
    return _("cluster {cluster}: {admitted} admitted, {pending} pending, {never} that can never start as declared "
             "(Volcano)").format(cluster=cluster, admitted=len(shown) - pending, pending=pending,
                                 never=sum(e.verdict.finding for e in shown))


def queue_text(v: View, cluster: str) -> str:
    rows = _rows(v.entries)
    if not rows:
        return "\n".join([_("cluster {cluster}: no admitted or pending workloads").format(cluster=cluster),
                          *(localized(n) for n in v.notes)]) + "\n"
    columns = _columns()
    widths = [max(width(r[i]) for r in [columns, *rows]) for i in range(len(columns) - 1)]
    lines = ["  ".join(ljust(c, w) for c, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1]
             for row in [columns, *rows]]
    lines.append(_summary(v.entries, cluster))
    lines += [localized(n) for n in v.notes]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def queue_markdown(v: View, cluster: str) -> str:
    return "\n".join([_("### Queues of cluster {cluster}").format(cluster=cluster), "", *table(_columns(), _rows(v.entries)),
                      "", _summary(v.entries, cluster), *(f"- {localized(n)}" for n in v.notes)]) + "\n"


def queue_json(v: View, cluster: str) -> str:
    return json.dumps({"cluster": cluster, "at": timestamp(v.now), "backend": "volcano",
                       "jobs": [entry_json(e) for e in v.entries if e.job.state != "finished"],
                       "queues": queues_json(v.capacity), "notes": list(v.notes)}, indent=2) + "\n"


def why_json(e: Entry, v: View, cluster: str) -> str:
    chain = [e.job.queue, *reversed(v.capacity[e.job.queue].ancestors)] if e.job.queue in v.capacity else []
    return json.dumps({"cluster": cluster, "at": timestamp(v.now), "backend": "volcano", "job": entry_json(e),
                       "queues": [q for q in queues_json(v.capacity) if q["queue"] in chain]}, indent=2) + "\n"


def why_text(e: Entry, v: View, markdown: bool = False) -> str:
    bullet = "- " if markdown else "  "
    job = e.job
    lines = [("### " if markdown else "") + _("{job} (PodGroup {podgroup}, tenant {tenant}, Queue {queue})").format(
        job=e.label, podgroup=job.podgroup or "-", tenant=e.tenant or "?", queue=job.queue)]
    if markdown:
        lines.append("")
    phase = " (" + _("Volcano phase {phase}").format(phase=job.phase) + ")" if job.phase else ""
    lines.append(f"{bullet}{_('state')}: {_state(job.state)}{phase}")
    pods = _("{pods} pod(s), {bound} bound, {members} needed at once").format(
        pods=job.pods, bound=job.bound, members=job.min_member)
    lines.append(f"{bullet}{_('size')}: {_size(job)}; {pods}")
    lines.append(f"{bullet}{_('why')}: {localized(e.verdict.text)}")
    if e.verdict.volcano:
        lines.append(f"{bullet}Volcano: {e.verdict.volcano}")
    if job.state == "pending" and job.queue in v.capacity:
        c = v.capacity[job.queue]
        for name in (job.queue, *reversed(c.ancestors)):
            q = v.capacity[name]
            asked = sorted(r for r, a in job.asks.items() if a > 0 and q.real.get(r, Decimal(0)).is_finite())
            held = ", ".join(_("{resource} {held} of {real}").format(
                resource=r, held=format_quantity(q.queue.allocated.get(r, Decimal(0))),
                real=format_quantity(q.real.get(r, Decimal(0)))) for r in asked)
            label = _("queue {queue} holds (of its real capability)").format(queue=name)
            lines.append(f"{bullet}{label}: {held}")
    lines += [f"{bullet}{localized(n)}" for n in v.notes]
    return "\n".join(lines) + "\n"
