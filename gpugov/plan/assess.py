"""The risks of a computed plan (GP001-GP010): what the changes found by differ.py mean for
running work, in one line each for the reviewer."""

from __future__ import annotations

from decimal import Decimal

from gpugov.declarations.equivalents import device_equivalents, equivalents_of, hami_views
from gpugov.declarations.model import Model
from gpugov.i18n import Joined, Text
from gpugov.kube.quantity import format_quantity
from gpugov.kube.resources import is_accelerator
from gpugov.plan.changes import QUOTA_FIELDS, Move, Plan
from gpugov.plan.differ import protected_gains
from gpugov.plan.removal import drain_hint
from gpugov.plan.risks import (
    ABSENT,
    DEPARTMENT_CHANGED,
    FAIR_SHARE_RAISED,
    FIELDS,
    KUEUE_IMMUTABLE,
    LOCALQUEUE_REPOINTED,
    MIG_RECONFIGURATION,
    NEEDS_APPROVAL,
    PROTECTED_PRIORITY,
    QUEUE_GAINS_PROTECTED,
    QUOTA_DECREASE,
    TENANT_REMOVED,
    Risk,
    holder,
    risk,
)

NOTHING = ""  # a separator by name: Babel extracts no empty message
QUOTA_WORDS = {"nominal": Text("nominal"), "borrowing_limit": Text("borrowing limit"),
               "lending_limit": Text("lending limit")}


def plan_risks(plan: Plan, base: Model, head: Model) -> list[Risk]:
    """GP001-GP010 for a plan of `base` -> `head`."""
    risks = []
    for change in plan.quotas:
        removed_tenant = change.holder == "tenant" and change.name in plan.tenants_removed  # GP002 says it
        if change.decreases and not removed_tenant:
            message = Text("{holder} {name}: {resource} in {pool} goes down ({change}); running work may be preempted",
                           holder=holder(change.holder), name=change.name, resource=change.resource,
                           pool=change.pool, change=_pair(change.before, change.after))
            risks.append(risk(QUOTA_DECREASE, message))
    for name in plan.tenants_removed:
        risks.append(risk(TENANT_REMOVED, _removed_tenant(plan, name)))
    nodes = sorted({m.node for m in plan.mig})
    if nodes:
        message = Text("{count} node(s) get a new MIG geometry and will be drained: {nodes}", count=len(nodes),
                       nodes=", ".join(nodes))
        risks.append(risk(MIG_RECONFIGURATION, message))
    for change in plan.priorities:
        if change.protected:
            message = Text("non-preemptible priority class {name} changes ({before} -> {after})", name=change.name,
                           before=change.before or ABSENT, after=change.after or ABSENT)
            risks.append(risk(PROTECTED_PRIORITY, message))
    for move in plan.moves:
        risks.append(risk(DEPARTMENT_CHANGED, _move(move)))
    for weight in plan.weights:
        if weight.raised:
            risks.append(risk(FAIR_SHARE_RAISED, _weight(weight.holder, weight.name, weight.new, weight.before,
                                                         weight.after)))
    for tenant, namespace, queue, classes in protected_gains(base, head):
        message = Text("queue {namespace}/{queue} of tenant {tenant} now admits non-preemptible {classes}: that work "
                       "cannot be preempted to give quota back", namespace=namespace, queue=queue, tenant=tenant,
                       classes=", ".join(classes))
        risks.append(risk(QUEUE_GAINS_PROTECTED, message))
    for change in plan.objects:
        if change.action == "replace" and change.kind == "LocalQueue":
            message = Text("LocalQueue {namespace}/{name} moves to another ClusterQueue: clusterQueue is immutable, so "
                           "it is deleted and recreated", namespace=change.namespace, name=change.name)
            risks.append(risk(LOCALQUEUE_REPOINTED, message))
        elif change.action == "replace":
            message = Text("{kind} {name}: {fields} cannot change in place (Kueue refuses it); it must be deleted and "
                           "recreated, and the queues that use it stop admitting meanwhile", kind=change.kind,
                           name=change.name, fields=", ".join(change.fields))
            risks.append(risk(KUEUE_IMMUTABLE, message))
    approval = _approval(plan, base, head)
    if approval:
        risks.append(approval)
    return risks


def _weight(word: str, name: str, new: bool, before: object, after: object) -> str:
    if new:
        return Text("new {holder} {name}: fairSharing weight starts with {after} (default 1): a larger share of idle "
                    "accelerators, taken from the others in its cohort", holder=holder(word), name=name, after=after)
    return Text("{holder} {name}: fairSharing weight goes from {before} to {after} (default 1): a larger share of idle "
                "accelerators, taken from the others in its cohort", holder=holder(word), name=name,
                before=before or 1, after=after)


def _removed_tenant(plan: Plan, name: str) -> str:
    queues = [o for o in plan.objects if o.action == "delete" and o.kind in ("ClusterQueue", "Queue") and o.name == name]
    several = len({o.cluster for o in queues}) > 1
    hints = [_in_cluster(o.cluster, drain_hint(o.kind, o.name)) if several else drain_hint(o.kind, o.name)
             for o in queues]
    drain = Joined("; ", hints) if hints else Text("drain its queue first")
    return Text("tenant {name} is removed: {drain}; its namespaces are kept", name=name, drain=drain)


def _in_cluster(cluster: str, hint: str) -> str:
    return Text("in cluster {cluster}, {hint}", cluster=cluster, hint=hint)


def _move(move: Move) -> str:
    who = {"holder": holder(move.holder), "name": move.name, "field": FIELDS.get(move.field, move.field),
           "before": move.before, "after": move.after}
    if move.before is None:
        return Text("{holder} {name} joins {field} {after}: it now borrows from and lends to {after}'s queues (the "
                    "Kueue cohort, the Volcano parent queue)", **who)
    if move.after is None:
        return Text("{holder} {name} leaves {field} {before}: it no longer borrows from or lends to {before}'s queues "
                    "(the Kueue cohort, the Volcano parent queue)", **who)
    return Text("{holder} {name} moves from {field} {before} to {after}: it now borrows from and lends to {after}'s "
                "queues instead of {before}'s (the Kueue cohort, the Volcano parent queue)", **who)


def _approval(plan: Plan, base: Model, head: Model) -> Risk | None:
    """GP007 in one unit: GPU equivalents. A whole device counts 1, a MIG slice its compute
    slices over the GPU's (1g.10gb = 1/7 of an A100), so slices never add up as whole GPUs."""
    limit = head.limits.max_quota_change
    if limit is None:
        return None
    whole = slices = vnpus = Decimal(0)
    uncounted: set[str] = set()
    hami: dict[tuple[str, str, str], dict[str, Decimal]] = {}  # HAMi's views of one holder's devices
    for change in plan.quotas:
        if not is_accelerator(change.resource):
            continue
        pool = head.pools.get(change.pool) or base.pools.get(change.pool)
        if pool is None or (weight := device_equivalents(pool).get(change.resource)) is None:
            uncounted.add(change.resource)
        elif change.resource in hami_views(pool):
            hami.setdefault((change.holder, change.name, change.pool), {})[change.resource] = change.nominal_delta
        elif change.resource == pool.model.resource:
            whole += abs(change.nominal_delta)
        elif change.resource.startswith("nvidia.com/mig-"):
            slices += abs(change.nominal_delta) * weight
        else:  # an Ascend vNPU template (declarations.equivalents)
            vnpus += abs(change.nominal_delta) * weight
    shared = sum((equivalents_of(head.pools.get(p) or base.pools[p], amounts)[0]
                  for (_, _, p), amounts in sorted(hami.items())), Decimal(0))
    moved = whole + slices + vnpus + shared
    if moved <= limit:
        return None
    team = ", ".join(head.limits.platform_team) or Text("the platform team")
    parts = [Text("whole devices {whole}, MIG slices {slices}", whole=_gpus(whole), slices=_gpus(slices))]
    if vnpus:
        parts.append(Text(", vNPUs {count}", count=_gpus(vnpus)))
    if shared:
        parts.append(Text(", HAMi vGPUs {count}", count=_gpus(shared)))
    if uncounted:
        parts.append(Text("; not counted: {resources}", resources=", ".join(sorted(uncounted))))
    message = Text("accelerator quotas move by {moved} GPU equivalents in total ({detail}), above the guardrail of "
                   "{limit} per pull request: needs approval from {team}", moved=_gpus(moved),
                   detail=Joined(NOTHING, parts), limit=limit, team=team)
    return risk(NEEDS_APPROVAL, message)


def _gpus(value: Decimal) -> str:
    """GPU equivalents as a plain number, two decimals at most (6/7 -> 0.86)."""
    if value == value.to_integral_value():
        return str(int(value))
    return f"{value.quantize(Decimal('0.01'))}".rstrip("0").rstrip(".")


def _pair(before: dict[str, Decimal | None], after: dict[str, Decimal | None]) -> str:
    parts = [Text("{field} {before} -> {after}", field=QUOTA_WORDS[name], before=_q(before[name]),
                  after=_q(after[name])) for name in QUOTA_FIELDS if before[name] != after[name]]
    return Joined(", ", parts)


def _q(value: Decimal | None) -> str:
    return "-" if value is None else format_quantity(value)
