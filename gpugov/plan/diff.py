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
from gpugov.plan.changes import Plan
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
    plan.risks = plan_risks(plan, base, head) + declaration_risks(base, head) + outside_risks(changed_paths)
    plan.risks += timeline_risks(base, head)
    plan.timeline = timeline(head)
    return plan


def _objects(model: Model, cluster: str, compiled: Mapping[str, list[Object]] | None) -> list[Object]:
    """The cluster's objects: validation's compile when it has them, else compiled here."""
    if cluster not in model.cluster_names():
        return []
    if compiled is not None and cluster in compiled:
        return compiled[cluster]
    return compile(model, cluster=cluster)
