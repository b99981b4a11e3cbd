"""The risks of a computed plan (GP001-GP010): what the changes found by differ.py mean for
running work, in one line each for the reviewer."""

from __future__ import annotations

from decimal import Decimal

from gpugov.declarations.equivalents import device_equivalents, equivalents_of, hami_views
from gpugov.declarations.model import Model
from gpugov.kube.quantity import format_quantity
from gpugov.kube.resources import is_accelerator
from gpugov.plan.changes import QUOTA_FIELDS, Move, Plan
from gpugov.plan.differ import protected_gains
from gpugov.plan.removal import drain_hint
from gpugov.plan.risks import (
    DEPARTMENT_CHANGED,
    FAIR_SHARE_RAISED,
    KUEUE_IMMUTABLE,
    LOCALQUEUE_REPOINTED,
    MIG_RECONFIGURATION,
    NEEDS_APPROVAL,
    PROTECTED_PRIORITY,
    QUEUE_GAINS_PROTECTED,
    QUOTA_DECREASE,
    TENANT_REMOVED,
    Risk,
    risk,
)


def plan_risks(plan: Plan, base: Model, head: Model) -> list[Risk]:
    """GP001-GP010 for a plan of `base` -> `head`."""
    risks = []
    for change in plan.quotas:
        removed_tenant = change.holder == "tenant" and change.name in plan.tenants_removed  # GP002 says it
        if change.decreases and not removed_tenant:
            risks.append(risk(QUOTA_DECREASE, f"{change.holder} {change.name}: {change.resource} in {change.pool} "
                              f"goes down ({_pair(change.before, change.after)}); running work may be preempted"))
    for name in plan.tenants_removed:
        risks.append(risk(TENANT_REMOVED, _removed_tenant(plan, name)))
    nodes = sorted({m.node for m in plan.mig})
    if nodes:
        risks.append(risk(MIG_RECONFIGURATION, f"{len(nodes)} node(s) get a new MIG geometry and will be drained: "
                          + ", ".join(nodes)))
    for change in plan.priorities:
        if change.protected:
            risks.append(risk(PROTECTED_PRIORITY, f"non-preemptible priority class {change.name} changes "
                              f"({change.before or 'absent'} -> {change.after or 'absent'})"))
    for move in plan.moves:
        risks.append(risk(DEPARTMENT_CHANGED, _move(move)))
    for weight in plan.weights:
        if weight.raised:
            was = "starts with" if weight.new else f"goes from {weight.before or 1} to"
            risks.append(risk(FAIR_SHARE_RAISED, f"{'new ' if weight.new else ''}{weight.holder} {weight.name}: "
                              f"fairSharing weight {was} {weight.after} (default 1): a larger share of idle "
                              "accelerators, taken from the others in its cohort"))
    for tenant, namespace, queue, classes in protected_gains(base, head):
        risks.append(risk(QUEUE_GAINS_PROTECTED, f"queue {namespace}/{queue} of tenant {tenant} now admits "
                          f"non-preemptible {', '.join(classes)}: that work cannot be preempted to give quota back"))
    for change in plan.objects:
        if change.action == "replace" and change.kind == "LocalQueue":
            risks.append(risk(LOCALQUEUE_REPOINTED, f"LocalQueue {change.namespace}/{change.name} moves to another "
                              "ClusterQueue: clusterQueue is immutable, so it is deleted and recreated"))
        elif change.action == "replace":
            risks.append(risk(KUEUE_IMMUTABLE, f"{change.kind} {change.name}: {', '.join(change.fields)} cannot change "
                              "in place (Kueue refuses it); it must be deleted and recreated, and the queues that use "
                              "it stop admitting meanwhile"))
    approval = _approval(plan, base, head)
    if approval:
        risks.append(approval)
    return risks


def _removed_tenant(plan: Plan, name: str) -> str:
    queues = [o for o in plan.objects if o.action == "delete" and o.kind in ("ClusterQueue", "Queue") and o.name == name]
    several = len({o.cluster for o in queues}) > 1
    hints = [(f"in cluster {o.cluster}, " if several else "") + drain_hint(o.kind, o.name) for o in queues]
    return f"tenant {name} is removed: " + ("; ".join(hints) or "drain its queue first") + "; its namespaces are kept"


def _move(move: Move) -> str:
    who = f"{move.holder} {move.name}"
    if move.before is None:
        what = f"joins {move.field} {move.after}: it now borrows from and lends to {move.after}'s queues"
    elif move.after is None:
        what = f"leaves {move.field} {move.before}: it no longer borrows from or lends to {move.before}'s queues"
    else:
        what = (f"moves from {move.field} {move.before} to {move.after}: it now borrows from and lends to "
                f"{move.after}'s queues instead of {move.before}'s")
    return f"{who} {what} (the Kueue cohort, the Volcano parent queue)"


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
    team = ", ".join(head.limits.platform_team) or "the platform team"
    detail = f"whole devices {_gpus(whole)}, MIG slices {_gpus(slices)}"
    detail += f", vNPUs {_gpus(vnpus)}" if vnpus else ""
    detail += f", HAMi vGPUs {_gpus(shared)}" if shared else ""
    if uncounted:
        detail += f"; not counted: {', '.join(sorted(uncounted))}"
    return risk(NEEDS_APPROVAL, f"accelerator quotas move by {_gpus(moved)} GPU equivalents in total ({detail}), "
                f"above the guardrail of {limit} per pull request: needs approval from {team}")


def _gpus(value: Decimal) -> str:
    """GPU equivalents as a plain number, two decimals at most (6/7 -> 0.86)."""
    if value == value.to_integral_value():
        return str(int(value))
    return f"{value.quantize(Decimal('0.01'))}".rstrip("0").rstrip(".")


def _pair(before: dict[str, Decimal | None], after: dict[str, Decimal | None]) -> str:
    parts = []
    for name in QUOTA_FIELDS:
        if before[name] != after[name]:
            parts.append(f"{name.replace('_', ' ')} {_q(before[name])} -> {_q(after[name])}")
    return ", ".join(parts)


def _q(value: Decimal | None) -> str:
    return "-" if value is None else format_quantity(value)
