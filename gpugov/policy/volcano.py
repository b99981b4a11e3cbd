"""What a Volcano cluster cannot keep is said at the declaration that promises it (GG064).

Read from vc-scheduler v1.14 (pkg/scheduler/plugins): the allocate action lets a later job that
fits pass an earlier one (StrictFIFO); the capacity plugin's preemptive check lets a queue reclaim
only while its allocation stays within its deserved, so a borrower never preempts in another queue
(borrowWithinCohort), and it reads no queue weight (fairSharing.weight); the proportion plugin reads
weights but has no hierarchy, so compile makes no queue for a department and a department's weight
goes nowhere. A promise listed in SchedulingPolicy spec.volcano.notKept is one the organisation
has said Volcano clusters do not keep: nothing is reported for it.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpugov.compile.common import Scope, select
from gpugov.compile.volcano import tenant_queue
from gpugov.declarations.model import Department, Model, Tenant
from gpugov.findings import Finding, Level, make, rule
from gpugov.i18n import Text
from gpugov.kube.quantity import parse_quantity
from gpugov.policy.checks import check

VOLCANO_CANNOT_KEEP = rule(
    "GG064",
    "volcano-cannot-keep",
    Level.WARNING,
    "A declaration promises what a Volcano cluster cannot keep: queueingStrategy StrictFIFO (Volcano's "
    "allocate action lets a later job that fits pass one that does not), borrowWithinCohort (under the "
    "capacity plugin a queue above its deserved never preempts in another queue) or fairSharing.weight (the "
    "capacity plugin reads no weight; the proportion plugin makes no queue for a department).",
    "For StrictFIFO use BestEffortFIFO. Keep borrowWithinCohort and fairSharing.weight for the Kueue clusters "
    "and say that Volcano clusters do not keep them: list them in SchedulingPolicy spec.volcano.notKept.",
)

_ROOT = ""  # the parent of a queue at the top of Volcano's tree


def _volcano_scopes(model: Model) -> list[Scope]:
    return [select(model, cluster=name) for name in model.cluster_names() if model.cluster(name).backend == "volcano"]


@check
def check_volcano_can_keep(model: Model) -> Iterator[Finding]:
    scopes = _volcano_scopes(model)
    if not scopes:
        return
    policy = model.policy
    if policy.declared and policy.queueing_strategy == "StrictFIFO":
        yield make(
            VOLCANO_CANNOT_KEEP,
            Text("queueingStrategy StrictFIFO is not kept on Volcano cluster(s) {clusters}: a later job that fits "
                 "is scheduled before an earlier one that does not",
                 clusters=", ".join(scope.cluster.name for scope in scopes)),
            policy.at("queueingStrategy"),
        )
    if "borrowWithinCohort" not in policy.volcano_not_kept:
        yield from _borrowing_not_kept(model, scopes)
    if "fairSharing.weight" not in policy.volcano_not_kept:
        yield from _weights_not_kept(model, scopes)


def _borrowing_not_kept(model: Model, scopes: list[Scope]) -> Iterator[Finding]:
    """Where a tenant on a capacity-plugin cluster can go above its deserved and another queue is there
    to preempt in, borrowWithinCohort promises a preemption that never happens: the borrower waits."""
    policy = model.policy
    if policy.borrow_within_cohort == "Never" or policy.volcano_plugin != "capacity":
        return
    for scope in scopes:
        borrowers = [name for name, tenant in scope.tenants.items() if _can_borrow(scope, tenant)]
        if not borrowers or len(scope.tenants) < 2:
            continue
        where = policy.at("preemption", "borrowWithinCohort", "policy") if policy.declared \
            else scope.cluster.at("backend")
        yield make(
            VOLCANO_CANNOT_KEEP,
            Text("borrowWithinCohort {policy} is not kept on Volcano cluster '{cluster}': under the capacity plugin "
                 "a queue above its deserved ({tenants}) never preempts in another queue, its job waits",
                 policy=policy.borrow_within_cohort, cluster=scope.cluster.name, tenants=", ".join(borrowers)),
            where,
        )


def _can_borrow(scope: Scope, tenant: Tenant) -> bool:
    """Whether the Queue compile makes for the tenant leaves room above its deserved for an accelerator
    (a capability above it, or none)."""
    queue, deserved, _ = tenant_queue(scope, tenant, hierarchical=True)
    capability = queue["spec"].get("capability", {})
    return any(resource not in capability or parse_quantity(capability[resource]) > amount
               for resource, amount in deserved.items())


def _weights_not_kept(model: Model, scopes: list[Scope]) -> Iterator[Finding]:
    """Declared weights that decide nothing on a Volcano cluster, one finding per declaration."""
    clusters: dict[tuple[str, str], list[str]] = {}
    holders: dict[tuple[str, str], Department | Tenant] = {}
    for scope in scopes:
        for holder in _ignored_weights(model, scope):
            key = (holder.KIND, holder.name)
            holders[key] = holder
            clusters.setdefault(key, []).append(scope.cluster.name)
    for key in sorted(holders):
        holder = holders[key]
        reason = Text("the capacity plugin reads no queue weight") if model.policy.volcano_plugin == "capacity" \
            else Text("the proportion plugin makes no queue for a department")
        yield make(
            VOLCANO_CANNOT_KEEP,
            Text("fairSharing.weight {weight} of {kind} '{name}' is not kept on Volcano cluster(s) {clusters}: "
                 "{reason}", weight=holder.weight, kind=holder.KIND, name=holder.name,
                 clusters=", ".join(clusters[key]), reason=reason),
            holder.at("fairSharing", "weight"),
        )


def _ignored_weights(model: Model, scope: Scope) -> list[Department | Tenant]:
    if model.policy.volcano_plugin != "capacity":
        return [d for _, d in sorted(scope.departments.items()) if d.weight not in (None, 1)]
    siblings: dict[str, list[Department | Tenant]] = {}
    for department in scope.departments.values():
        siblings.setdefault(department.parent or _ROOT, []).append(department)
    for tenant in scope.tenants.values():
        siblings.setdefault(tenant.department or _ROOT, []).append(tenant)
    ignored: list[Department | Tenant] = []
    for group in siblings.values():
        # Only where siblings' weights differ would a weight decide anything.
        if len({queue.weight or 1 for queue in group}) > 1:
            ignored.extend(queue for queue in group if queue.weight is not None)
    return ignored
