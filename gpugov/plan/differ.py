"""The differs: the changes between two revisions, from their models (quotas, capacity, pools,
priority classes, departments and weights) and from their compiled objects (object and MIG changes,
and what each tenant's queue can reach, gpugov.reach)."""

from __future__ import annotations

from decimal import Decimal

from gpugov.compile import Object, object_key
from gpugov.compile.mig import compiled_mig_configs
from gpugov.compile.nodes import MIG_CONFIG_LABEL
from gpugov.declarations.model import Model, ResourceQuota, Tenant
from gpugov.i18n import Text
from gpugov.kube.objects import without_source
from gpugov.kube.resources import is_accelerator
from gpugov.plan.changes import (
    QUOTA_FIELDS,
    CapacityRow,
    MigChange,
    Move,
    ObjectChange,
    PoolChange,
    PriorityChange,
    QuotaChange,
    ReachChange,
    Removal,
    WeightChange,
)
from gpugov.plan.removal import KEPT_KINDS, PLURAL, WHAT_EACH_PATH_DOES, category
from gpugov.reach import FR, spec_quotas, tenant_maxima


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
    old = {object_key(o): o for o in base}
    new = {object_key(o): o for o in head}
    changes = []
    for key in list(dict.fromkeys([*new, *old])):
        _, kind, namespace, name = key
        if key not in old:  # a Node is hardware: gpugov labels (and taints) it, never creates it
            changes.append(ObjectChange(cluster, "label" if kind == "Node" else "create", kind, namespace, name))
        elif key not in new:
            # A Namespace may still hold workloads and a Node is hardware gpugov only patches: both are
            # kept (removal.py says what each deploy path does with them).
            changes.append(ObjectChange(cluster, "retain" if kind in KEPT_KINDS else "delete", kind, namespace, name))
        elif old[key] != new[key] and (was := _without_source(old[key])) != (now := _without_source(new[key])):
            # equal objects are equal without their source too: only the others are copied to compare
            fields = _changed_fields(was, now)
            replace = immutable_change(kind, was, now) is not None
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
    layout = Text("layout changed")  # the reason: English in JSON, the reader's language in the comment
    for node in sorted(set(old_sel) & set(new_sel)):
        before, after = old_sel[node], new_sel[node]
        if before != after:
            changes.append(MigChange(cluster, node, before, after, layout))
        elif after is not None and old_cfg.get(after) != new_cfg.get(after):
            reason = Text("config '{config}' changed", config=after)
            changes.append(MigChange(cluster, node, before, after, reason))
    return changes


def reach_changes(cluster: str, base: list[Object], head: list[Object]) -> list[ReachChange]:
    """Per tenant, pool and accelerator resource, where Kueue's maximum for its queue changes (gpugov.reach
    over each revision's compiled ClusterQueues and Cohorts; nothing on Volcano, which has none)."""
    only = _reach_pairs(base, head)
    if only is not None and not only:
        return []
    before = tenant_maxima(base, keep=is_accelerator, only=only)
    after = tenant_maxima(head, keep=is_accelerator, only=only)
    changes = []
    for tenant in sorted(set(before) | set(after)):
        old, new = before.get(tenant, {}), after.get(tenant, {})
        if old == new:
            continue
        for pool, resource in sorted(set(old) | set(new)):
            most_before, most_after = old.get((pool, resource)), new.get((pool, resource))
            if most_before != most_after and (most_before or most_after):
                changes.append(ReachChange(cluster, tenant, pool, resource, most_before, most_after))
    return changes


def _quota_objects(objects: list[Object]) -> dict[tuple[str, str], Object]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects if o.get("kind") in ("ClusterQueue", "Cohort")}


def _reach_pairs(base: list[Object], head: list[Object]) -> set[FR] | None:
    """The (flavor, resource) pairs whose reach a change can move, None when it may move any.

    Each pair's quota arithmetic is its own: when the same ClusterQueues and Cohorts exist on both
    sides and the changed ones differ only in their quotas (same cohort, labels and everything
    else), only the pairs whose quotas differ can reach differently; a new, removed or moved queue
    or a changed Cohort may move any."""
    old, new = _quota_objects(base), _quota_objects(head)
    if old.keys() != new.keys():
        return None
    pairs: set[FR] = set()
    for key, before in old.items():
        after = new[key]
        if before == after:
            continue
        if key[0] != "ClusterQueue" or _without_groups(before) != _without_groups(after):
            return None
        was, now = spec_quotas(before["spec"], key[1]), spec_quotas(after["spec"], key[1])
        pairs.update(fr for fr in was.keys() | now.keys() if was.get(fr) != now.get(fr))
    return pairs


def _without_groups(obj: Object) -> Object:
    """The object without its quotas and its provenance annotations (which no reach reads)."""
    return {**obj, "metadata": without_source(obj["metadata"]),
            "spec": {k: v for k, v in (obj.get("spec") or {}).items() if k != "resourceGroups"}}
