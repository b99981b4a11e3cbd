"""plan: what a change to the declarations does, for the pull-request reviewer.

make_plan puts a plan together: both revisions went through the same load -> model -> compile
road (app/revision.py), and it reuses the objects validation compiled. differ.py compares their
models and compiled objects, assess.py and widening.py weigh the changes as risks, changes.py
holds what a plan is made of, serialize.py writes it as JSON. Nothing here re-derives desired state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpugov.compile import Object, compile
from gpugov.declarations.model import Model
from gpugov.plan.assess import plan_risks
from gpugov.plan.changes import FleetMember, ObjectChange, Plan
from gpugov.plan.differ import (
    capacity_rows,
    mig_changes,
    moves,
    object_changes,
    pool_changes,
    priority_changes,
    quota_changes,
    reach_changes,
    removals,
    weight_changes,
)
from gpugov.plan.timeline import timeline, timeline_risks
from gpugov.plan.widening import declaration_risks, outside_risks


def make_plan(base: Model, head: Model, base_label: str, head_label: str, cluster: str | None = None,
              changed_paths: Sequence[str] = (), *, base_objects: Mapping[str, list[Object]] | None = None,
              head_objects: Mapping[str, list[Object]] | None = None) -> Plan:
    """The plan of a change. `changed_paths`: the files it touches (relative to the repository), whose
    ones outside the declaration folders are a risk of their own (GP011). `base_objects`/`head_objects`:
    each cluster's objects at its declared backend, when validation compiled them already."""
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
        old = _objects(base, name, base_objects)
        new = _objects(head, name, head_objects)
        plan.objects.extend(object_changes(name, old, new))
        plan.mig.extend(mig_changes(name, old, new))
        plan.reach.extend(reach_changes(name, old, new))
    plan.removals = removals(plan.objects)
    plan.fleets = fleet_members(base, head, plan.objects)
    plan.risks = plan_risks(plan, base, head) + declaration_risks(base, head) + outside_risks(changed_paths)
    plan.risks += timeline_risks(base, head)
    plan.timeline = timeline(head)
    return plan


def fleet_members(base: Model, head: Model, objects: Sequence[ObjectChange]) -> list[FleetMember]:
    """Each member of each fleet (the head's, then the base's), in the order to apply them: the workers in
    declared order (one the change adds or drops included), then the manager, with what changes on each;
    none where the change touches no member's objects."""
    members: list[FleetMember] = []
    for name in sorted(set(base.fleets) | set(head.fleets)):
        order: list[tuple[str, str]] = []
        for model in (head, base):
            fleet = model.fleets.get(name)
            if fleet is None:
                continue
            for cluster, role in [*((w, "worker") for w in fleet.worker_names()), (fleet.manager, "manager")]:
                if cluster not in [c for c, _ in order]:
                    order.append((cluster, role))
        for cluster, role in order:
            counts: dict[str, int] = {}
            for change in objects:
                if change.cluster == cluster:
                    counts[change.action] = counts.get(change.action, 0) + 1
            members.append(FleetMember(name, cluster, role, counts))
    return members if any(m.counts for m in members) else []


def _objects(model: Model, cluster: str, compiled: Mapping[str, list[Object]] | None) -> list[Object]:
    """The cluster's objects: validation's compile when it has them, else compiled here."""
    if cluster not in model.cluster_names():
        return []
    if compiled is not None and cluster in compiled:
        return compiled[cluster]
    return compile(model, cluster=cluster)
