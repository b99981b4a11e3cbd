"""plan: what a change to the declarations does, for the pull-request reviewer.

Both revisions go through the same load -> model -> compile path; the summary compares
their models (quotas, tenants, pools, priority classes, guaranteed sums from
Model.guaranteed) and their compiled objects (MIG reconfigurations from the node patches
and the mig-parted config, the object-level change list). Nothing here re-derives
desired state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any

from gpugov.catalog.equivalents import device_equivalents, equivalents_of, hami_views
from gpugov.compile import Object, compile, object_key
from gpugov.compile.common import NON_ACCELERATOR
from gpugov.compile.mig import compiled_mig_configs
from gpugov.compile.nodes import MIG_CONFIG_LABEL
from gpugov.declarations.model import Model, ResourceQuota, Tenant
from gpugov.kube.objects import without_source
from gpugov.kube.quantity import format_quantity
from gpugov.plan.removal import KEPT_KINDS, PLURAL, WHAT_EACH_PATH_DOES, category, drain_hint
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
from gpugov.plan.widening import declaration_risks, outside_risks

QUOTA_FIELDS = ("nominal", "borrowing_limit", "lending_limit")


@dataclass(frozen=True)
class QuotaChange:
    holder: str  # "tenant" or "department"
    name: str
    pool: str
    resource: str
    before: dict[str, Decimal | None]
    after: dict[str, Decimal | None]

    @property
    def nominal_delta(self) -> Decimal:
        return (self.after["nominal"] or Decimal(0)) - (self.before["nominal"] or Decimal(0))

    @property
    def decreases(self) -> bool:
        """Whether a quota that existed shrinks: a new quota (a new tenant's, a new pool's) has
        nothing to go down from, even where it sets a limit that was unlimited before."""
        if self.before["nominal"] is None:
            return False
        if self.after["nominal"] is None or self.nominal_delta < 0:
            return True
        for limit in ("borrowing_limit", "lending_limit"):  # None: unlimited
            old, new = self.before[limit], self.after[limit]
            if new is not None and (old is None or new < old):
                return True
        return False


@dataclass(frozen=True)
class CapacityRow:
    pool: str
    resource: str
    guaranteed_before: Decimal
    guaranteed_after: Decimal
    capacity_before: Decimal
    capacity_after: Decimal


@dataclass(frozen=True)
class PoolChange:
    pool: str
    status: str  # added, removed, changed
    nodes_added: tuple[str, ...] = ()
    nodes_removed: tuple[str, ...] = ()
    capacity_before: dict[str, Decimal] = field(default_factory=dict)
    capacity_after: dict[str, Decimal] = field(default_factory=dict)


@dataclass(frozen=True)
class MigChange:
    cluster: str
    node: str
    before: str | None
    after: str | None
    reason: str


@dataclass(frozen=True)
class PriorityChange:
    name: str
    before: str | None
    after: str | None
    protected: bool


@dataclass(frozen=True)
class Move:
    """A tenant's department, or a department's parent, changes: its cohort (Kueue) or parent queue (Volcano)."""

    holder: str  # "tenant" or "department"
    name: str
    before: str | None
    after: str | None

    @property
    def field(self) -> str:
        return "department" if self.holder == "tenant" else "parent"


@dataclass(frozen=True)
class WeightChange:
    holder: str  # "tenant" or "department"
    name: str
    before: int | None  # as declared; None: the default 1, or the holder is new (see `new`)
    after: int | None
    new: bool = False

    @property
    def raised(self) -> bool:
        return (self.after or 1) > (self.before or 1)


@dataclass(frozen=True)
class Removal:
    """What a change stops declaring, of one category, and what each deploy path does with it."""

    category: str  # object, Namespace or Node
    names: tuple[str, ...]
    paths: dict[str, str]


@dataclass(frozen=True)
class ObjectChange:
    cluster: str
    action: str  # create, update, delete, replace (delete + create), retain (kept: a Namespace or a Node)
    kind: str
    namespace: str
    name: str
    fields: tuple[str, ...] = ()


@dataclass
class Plan:
    base: str
    head: str
    tenants_added: list[str] = field(default_factory=list)
    tenants_removed: list[str] = field(default_factory=list)
    departments_added: list[str] = field(default_factory=list)
    departments_removed: list[str] = field(default_factory=list)
    quotas: list[QuotaChange] = field(default_factory=list)
    capacity: list[CapacityRow] = field(default_factory=list)
    pools: list[PoolChange] = field(default_factory=list)
    mig: list[MigChange] = field(default_factory=list)
    priorities: list[PriorityChange] = field(default_factory=list)
    moves: list[Move] = field(default_factory=list)
    weights: list[WeightChange] = field(default_factory=list)
    objects: list[ObjectChange] = field(default_factory=list)
    removals: list[Removal] = field(default_factory=list)
    risks: list[Risk] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.objects or self.quotas or self.tenants_added or self.tenants_removed or self.pools
                    or self.moves or self.weights)


def _quota_map(model: Model) -> dict[tuple[str, str, str, str], ResourceQuota]:
    result = {}
    for holder, quota in model.quota_holders():
        kind = "tenant" if isinstance(holder, Tenant) else "department"
        for rq in quota.resources:
            result[(kind, holder.name, quota.pool, rq.resource)] = rq
    return result


def _fields(rq: ResourceQuota | None) -> dict[str, Decimal | None]:
    if rq is None:
        return dict.fromkeys(QUOTA_FIELDS)
    return {"nominal": rq.nominal, "borrowing_limit": rq.borrowing_limit, "lending_limit": rq.lending_limit}


def quota_changes(base: Model, head: Model) -> list[QuotaChange]:
    old, new = _quota_map(base), _quota_map(head)
    changes = []
    for key in sorted(set(old) | set(new)):
        before, after = _fields(old.get(key)), _fields(new.get(key))
        if before != after:
            changes.append(QuotaChange(*key, before=before, after=after))
    return changes


def capacity_rows(base: Model, head: Model) -> list[CapacityRow]:
    """Guaranteed sum against capacity per pool and resource, where either side changed."""
    g_old, g_new = base.guaranteed(), head.guaranteed()
    rows = []
    for pool, resource in sorted(set(g_old) | set(g_new)):
        c_old = base.pools[pool].capacity.get(resource, Decimal(0)) if pool in base.pools else Decimal(0)
        c_new = head.pools[pool].capacity.get(resource, Decimal(0)) if pool in head.pools else Decimal(0)
        row = CapacityRow(pool, resource, g_old.get((pool, resource), Decimal(0)),
                          g_new.get((pool, resource), Decimal(0)), c_old, c_new)
        if (row.guaranteed_before, row.capacity_before) != (row.guaranteed_after, row.capacity_after):
            rows.append(row)
    return rows


def pool_changes(base: Model, head: Model) -> list[PoolChange]:
    changes = []
    for name in sorted(set(base.pools) | set(head.pools)):
        old, new = base.pools.get(name), head.pools.get(name)
        cap_old = old.capacity if old else {}
        cap_new = new.capacity if new else {}
        if old is None:
            nodes = tuple(n.name for n in new.nodes)  # type: ignore[union-attr]
            changes.append(PoolChange(name, "added", nodes, (), cap_old, cap_new))
        elif new is None:
            changes.append(PoolChange(name, "removed", (), tuple(n.name for n in old.nodes), cap_old, cap_new))
        else:
            before, after = {n.name for n in old.nodes}, {n.name for n in new.nodes}
            if before != after or cap_old != cap_new:
                added, removed = tuple(sorted(after - before)), tuple(sorted(before - after))
                changes.append(PoolChange(name, "changed", added, removed, cap_old, cap_new))
    return changes


def priority_changes(base: Model, head: Model) -> list[PriorityChange]:
    def describe(model: Model, name: str) -> str | None:
        pc = model.priority_classes.get(name)
        return None if pc is None else f"{pc.value}{'' if pc.preemptible else ', not preemptible'}"

    changes = []
    for name in sorted(set(base.priority_classes) | set(head.priority_classes)):
        before, after = describe(base, name), describe(head, name)
        if before != after:
            protected = any(
                name in m.priority_classes and not m.priority_classes[name].preemptible for m in (base, head)
            )
            changes.append(PriorityChange(name, before, after, protected))
    return changes


def moves(base: Model, head: Model) -> list[Move]:
    changes = [Move("tenant", name, base.tenants[name].department, head.tenants[name].department)
               for name in sorted(set(base.tenants) & set(head.tenants))]
    changes += [Move("department", name, base.departments[name].parent, head.departments[name].parent)
                for name in sorted(set(base.departments) & set(head.departments))]
    return [m for m in changes if m.before != m.after]


def weight_changes(base: Model, head: Model) -> list[WeightChange]:
    changes = []
    for holder, old, new in (("department", base.departments, head.departments), ("tenant", base.tenants, head.tenants)):
        for name in sorted(new):
            after = new[name].weight
            if name not in old:
                if after is not None:
                    changes.append(WeightChange(holder, name, None, after, new=True))
            elif old[name].weight != after:
                changes.append(WeightChange(holder, name, old[name].weight, after))
    return changes


def protected_gains(base: Model, head: Model) -> list[tuple[str, str, str, list[str]]]:
    """(tenant, namespace, queue, non-preemptible classes it admits now and did not before)."""
    gains = []
    for name in sorted(head.tenants):
        before = {(q.namespace, q.name): set(q.priority_classes)
                  for q in (base.tenants[name].queues if name in base.tenants else ())}
        for queue in head.tenants[name].queues:
            added = set(queue.priority_classes) - before.get((queue.namespace, queue.name), set())
            protected = sorted(c for c in added if c in head.priority_classes and not head.priority_classes[c].preemptible)
            if protected:
                gains.append((name, queue.namespace, queue.name, protected))
    return gains


def removals(objects: list[ObjectChange]) -> list[Removal]:
    gone: dict[str, list[str]] = {}
    for o in objects:
        if o.action in ("delete", "retain"):
            gone.setdefault(category(o.kind), []).append(
                o.name if o.kind in KEPT_KINDS else f"{o.kind} {o.namespace + '/' if o.namespace else ''}{o.name}")
    return [Removal(cat, tuple(gone[cat]), WHAT_EACH_PATH_DOES[cat]) for cat in PLURAL if cat in gone]


def _without_source(obj: Object) -> Object:
    """Objects compare without the source annotation: moving a line is no change."""
    return {**obj, "metadata": without_source(obj["metadata"])}


def _changed_fields(old: Object, new: Object) -> tuple[str, ...]:
    fields = []
    for key in sorted(set(old) | set(new)):
        if key in ("apiVersion", "kind"):
            continue
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            fields.extend(f"{key}.{sub}" for sub in sorted(set(a) | set(b)) if a.get(sub) != b.get(sub))
        elif a != b:
            fields.append(key)
    return tuple(fields)


def immutable_change(kind: str, old: Object, new: Object) -> str | None:
    """Which of Kueue's immutable fields differ (its CRDs' CEL rules refuse such an update in place)."""
    if kind == "LocalQueue" and old["spec"].get("clusterQueue") != new["spec"].get("clusterQueue"):
        return "spec.clusterQueue"
    if kind == "Topology" and old["spec"].get("levels") != new["spec"].get("levels"):
        return "spec.levels"
    if kind == "ResourceFlavor" and old["spec"].get("topologyName"):
        # "nodeLabels/tolerations/topologyName are immutable when topologyName is set"
        changed = [f for f in ("nodeLabels", "tolerations", "topologyName") if old["spec"].get(f) != new["spec"].get(f)]
        return ", ".join(f"spec.{f}" for f in changed) or None
    return None


def object_changes(cluster: str, base: list[Object], head: list[Object]) -> list[ObjectChange]:
    old = {object_key(o): _without_source(o) for o in base}
    new = {object_key(o): _without_source(o) for o in head}
    changes = []
    for key in list(dict.fromkeys([*new, *old])):
        _, kind, namespace, name = key
        if key not in old:  # a Node is hardware: gpugov labels (and taints) it, never creates it
            changes.append(ObjectChange(cluster, "label" if kind == "Node" else "create", kind, namespace, name))
        elif key not in new:
            # A Namespace may still hold workloads and a Node is hardware gpugov only patches: both are
            # kept (removal.py says what each deploy path does with them).
            changes.append(ObjectChange(cluster, "retain" if kind in KEPT_KINDS else "delete", kind, namespace, name))
        elif old[key] != new[key]:
            fields = _changed_fields(old[key], new[key])
            replace = immutable_change(kind, old[key], new[key]) is not None
            changes.append(ObjectChange(cluster, "replace" if replace else "update", kind, namespace, name, fields))
    return changes


def mig_changes(cluster: str, base: list[Object], head: list[Object]) -> list[MigChange]:
    """Nodes whose MIG geometry changes: the selected config differs, or its content does."""
    def selections(objects: list[Object]) -> dict[str, str | None]:
        return {o["metadata"]["name"]: o["metadata"]["labels"].get(MIG_CONFIG_LABEL) for o in objects
                if o["kind"] == "Node"}

    old_sel, new_sel = selections(base), selections(head)
    old_cfg, new_cfg = compiled_mig_configs(base), compiled_mig_configs(head)
    changes = []
    for node in sorted(set(old_sel) & set(new_sel)):
        before, after = old_sel[node], new_sel[node]
        if before != after:
            changes.append(MigChange(cluster, node, before, after, "layout changed"))
        elif after is not None and old_cfg.get(after) != new_cfg.get(after):
            changes.append(MigChange(cluster, node, before, after, f"config '{after}' changed"))
    return changes


def _risks(plan: Plan, base: Model, head: Model) -> list[Risk]:
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
        if change.resource in NON_ACCELERATOR:
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
        else:  # an Ascend vNPU template (catalog.equivalents)
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


def make_plan(base: Model, head: Model, base_label: str, head_label: str, cluster: str | None = None,
              changed_paths: Sequence[str] = ()) -> Plan:
    """The plan of a change. `changed_paths`: the files it touches (relative to the repository), whose
    ones outside the declaration folders are a risk of their own (GP011)."""
    plan = Plan(base_label, head_label)
    plan.tenants_added = sorted(set(head.tenants) - set(base.tenants))
    plan.tenants_removed = sorted(set(base.tenants) - set(head.tenants))
    plan.departments_added = sorted(set(head.departments) - set(base.departments))
    plan.departments_removed = sorted(set(base.departments) - set(head.departments))
    plan.quotas = quota_changes(base, head)
    plan.capacity = capacity_rows(base, head)
    plan.pools = pool_changes(base, head)
    plan.priorities = priority_changes(base, head)
    plan.moves = moves(base, head)
    plan.weights = weight_changes(base, head)
    clusters = sorted(set(base.cluster_names()) | set(head.cluster_names()))
    for name in clusters if cluster is None else [cluster]:
        old = compile(base, None, name) if name in base.cluster_names() else []
        new = compile(head, None, name) if name in head.cluster_names() else []
        plan.objects.extend(object_changes(name, old, new))
        plan.mig.extend(mig_changes(name, old, new))
    plan.removals = removals(plan.objects)
    plan.risks = _risks(plan, base, head) + declaration_risks(base, head) + outside_risks(changed_paths)
    return plan


def to_json(plan: Plan) -> dict[str, Any]:
    def clean(value: Any) -> Any:
        if isinstance(value, Decimal):
            return format_quantity(value)
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        return value

    data = clean(asdict(plan))
    data["summary"] = {"risks": len(plan.risks), "quota_changes": len(plan.quotas), "object_changes": len(plan.objects)}
    return data
