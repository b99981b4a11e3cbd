"""Priority classes and the scheduling policy are coherent."""

from __future__ import annotations

from collections.abc import Iterator

from gpugov.declarations.model import Model
from gpugov.findings import Finding, Level, make, rule
from gpugov.i18n import Text
from gpugov.policy.checks import check

DUPLICATE_VALUE = rule(
    "GG060",
    "priority-value-duplicate",
    Level.ERROR,
    "Two priority classes have the same value, so their order is undefined.",
    "Give every priority class its own value.",
)
PROTECTED_BELOW_PREEMPTIBLE = rule(
    "GG061",
    "non-preemptible-below-preemptible",
    Level.ERROR,
    "A non-preemptible priority class has a lower value than a preemptible one, so priority-based preemption "
    "could still evict it.",
    "Give non-preemptible classes the highest values.",
)
PREEMPTION_CONFLICT = rule(
    "GG062",
    "preemption-policy-conflict",
    Level.ERROR,
    "reclaimWithinCohort is Never while borrowWithinCohort.policy is not Never (Kueue rejects this).",
    "Set borrowWithinCohort.policy to Never, or allow reclaiming within the cohort.",
)

PROTECTED_BORROWS = rule(
    "GG063",
    "non-preemptible-borrows",
    Level.ERROR,
    "A tenant whose queues admit a non-preemptible priority class declares a borrowingLimit above 0 while the "
    "cohort reclaims with Any: Kueue reclaims from any workload of a borrowing ClusterQueue, so that work "
    "could be evicted.",
    "Drop the borrowingLimit (such tenants never borrow), run the non-preemptible queue as a tenant of its own, "
    "or set reclaimWithinCohort to LowerPriority.",
)
@check
def check_protected_tenants_do_not_borrow(model: Model) -> Iterator[Finding]:
    for name in sorted(model.tenants):
        tenant = model.tenants[name]
        if not model.never_borrows(tenant):
            continue
        classes = ", ".join(model.protected_classes(tenant))
        for quota in tenant.quotas:
            for rq in quota.resources:
                if rq.borrowing_limit:
                    yield make(
                        PROTECTED_BORROWS,
                        Text("tenant '{tenant}' runs non-preemptible {classes} and may borrow {key} in pool '{pool}': "
                             "a lender reclaiming its quota could evict that work", tenant=tenant.name, classes=classes,
                             key=rq.key, pool=quota.pool),
                        tenant.at("quotas", quota.index, "resources", rq.key, "borrowingLimit"),
                    )


@check
def check_priorities(model: Model) -> Iterator[Finding]:
    by_value: dict[int, str] = {}
    for name in sorted(model.priority_classes, key=lambda n: (model.priority_classes[n].origin, n)):
        pc = model.priority_classes[name]
        if pc.value in by_value:
            other = model.priority_classes[by_value[pc.value]]
            yield make(
                DUPLICATE_VALUE,
                Text("priority classes '{first}' and '{second}' both have value {value}", first=other.name,
                     second=pc.name, value=pc.value),
                pc.at("value"),
                other.at("value"),
            )
        else:
            by_value[pc.value] = name
    preemptible = [pc for pc in model.priority_classes.values() if pc.preemptible]
    if preemptible:
        highest = max(preemptible, key=lambda pc: pc.value)
        for pc in model.priority_classes.values():
            if not pc.preemptible and pc.value <= highest.value:
                yield make(
                    PROTECTED_BELOW_PREEMPTIBLE,
                    Text("non-preemptible '{protected}' ({protected_value}) is not above preemptible '{preemptible}' "
                         "({preemptible_value})", protected=pc.name, protected_value=pc.value,
                         preemptible=highest.name, preemptible_value=highest.value),
                    pc.at("value"),
                    highest.at("value"),
                )
    policy = model.policy
    if policy.declared and policy.reclaim_within_cohort == "Never" and policy.borrow_within_cohort != "Never":
        yield make(
            PREEMPTION_CONFLICT,
            Text("reclaimWithinCohort=Never needs borrowWithinCohort.policy=Never"),
            policy.at("preemption", "reclaimWithinCohort"),
        )
