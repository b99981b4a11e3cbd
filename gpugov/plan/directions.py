"""The one table of which way each declaration field moves a tenant's power.

Every field of every declaration kind (plan/fields.py reads them from the JSON Schemas) has a
direction: WIDENS (some change gives someone more: `when` says which), NARROWS (no change of it
gives anyone more) or NEUTRAL (no effect on power: descriptions). Who pays (a cost centre, a pool's
price) widens on any change: the usage ledger bills by it, and a tenant's reviewers alone must not move a bill. A WIDENS
field names the plan risk (GP rule) that reports it. tests/unit/test_plan_directions.py walks the
schemas and fails on a field this table lacks, and changes every WIDENS field in its widening
direction to see the plan report that rule.

`when`, for a WIDENS field:
- up: a number (or quantity) goes up, or appears (a boolean: false -> true);
- up-or-unset: as up, and also unset where unset means unlimited (borrowingLimit, lendingLimit);
- down: a number goes down, a boolean true -> false (requireOwner, preemptible);
- added: a list gains an element, a map an entry, an array of objects an element;
- removed: a list loses an element, an array of objects an element (reservedNamespaces, taints);
- changed: any change (owners, a cluster's image, a pool's model).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gpugov.findings import Rule
from gpugov.plan.risks import (
    BILLING_CHANGED,
    BORROWING_RAISED,
    CLUSTER_CHANGED,
    DEPARTMENT_CHANGED,
    FAIR_SHARE_RAISED,
    GUARDRAIL_LOOSENED,
    HARDWARE_CHANGED,
    LENDING_RAISED,
    NAMESPACE_ADOPTED,
    NAMESPACE_CLAIMED,
    OBJECTS_ADOPTED,
    OWNERS_CHANGED,
    POOL_GAINS_NODE,
    PRIORITY_RAISED,
    PROTECTED_PRIORITY,
    QUEUE_WIDENED,
    QUOTA_RAISED,
    SCHEDULING_CHANGED,
)
from gpugov.plan.timeline import TIMELINE_WIDENED


class Direction(Enum):
    WIDENS = "widens"
    NARROWS = "narrows"
    NEUTRAL = "neutral"


WHENS = ("up", "up-or-unset", "down", "added", "removed", "changed")


@dataclass(frozen=True)
class Field:
    direction: Direction
    when: str | None = None
    rule: Rule | None = None


NEUTRAL = Field(Direction.NEUTRAL)
NARROWS = Field(Direction.NARROWS)


def widens(when: str, rule: Rule) -> Field:
    assert when in WHENS, when
    return Field(Direction.WIDENS, when, rule)


# Rules an older, dedicated check of plan/diff.py reports with its own wording (the department
# move, the fair-sharing weight, a non-preemptible class): widening.py does not repeat them.
# The quota timeline (plan/timeline.py) reports a grant or window that widens as one GP030 row.
REPORTED_ELSEWHERE = (DEPARTMENT_CHANGED.id, FAIR_SHARE_RAISED.id, PROTECTED_PRIORITY.id, TIMELINE_WIDENED.id)

_METADATA = {"metadata.labels.*": NEUTRAL, "metadata.annotations.*": NEUTRAL}


def _quotas(prefix: str = "spec.quotas[]") -> dict[str, Field]:
    return {
        prefix: widens("added", QUOTA_RAISED),
        f"{prefix}.resources.*.nominal": widens("up", QUOTA_RAISED),
        f"{prefix}.resources.*.borrowingLimit": widens("up-or-unset", BORROWING_RAISED),
        f"{prefix}.resources.*.lendingLimit": widens("up-or-unset", LENDING_RAISED),
    }


_OWNERS = {
    "spec.owners.users": widens("changed", OWNERS_CHANGED),
    "spec.owners.groups": widens("changed", OWNERS_CHANGED),
    "spec.owners.reviewers": widens("changed", OWNERS_CHANGED),
}

_HW = HARDWARE_CHANGED
# Who pays: the usage ledger bills a tenant's hours to its costCenter (else its department's) at its pool's
# price. Moving a bill to another team is not the tenant's call, so any change is the platform team's.
_BILLING = widens("changed", BILLING_CHANGED)


def _reclaim() -> dict[str, Field]:
    """spec.reclaim (Guardrails' and a tenant's): a policy that reclaims later or less loosens a guardrail.
    A duration is no quantity, so any change of one is asked about."""
    fields = {
        "maxRuntime.default": widens("changed", GUARDRAIL_LOOSENED),
        "maxRuntime.priorityClasses.*": widens("changed", GUARDRAIL_LOOSENED),
        "idle.metric": widens("changed", GUARDRAIL_LOOSENED),
        "idle.belowPercent": widens("down", GUARDRAIL_LOOSENED),
        "idle.window": widens("changed", GUARDRAIL_LOOSENED),
        "idle.grace": widens("changed", GUARDRAIL_LOOSENED),
        "idle.action": widens("changed", GUARDRAIL_LOOSENED),
        "idle.exempt.priorityClasses": widens("added", GUARDRAIL_LOOSENED),
        "idle.exempt.queues": widens("added", GUARDRAIL_LOOSENED),
        "idle.exempt.nonPreemptible": widens("up", GUARDRAIL_LOOSENED),
        "snooze.maximum": widens("changed", GUARDRAIL_LOOSENED),
    }
    return {f"spec.reclaim.{name}": entry for name, entry in fields.items()}

# spec.budget (Tenant and Department): more hours or money, a longer period, fewer alerts or no hold give
# more. Removing the whole budget is a change of each of its fields (fields.py walks leaves); an amount
# unset is no limit (up-or-unset), so dropping a budget, or moving it from one unit to the other, is asked.
_BUDGET = {
    "spec.budget.acceleratorHours": widens("up-or-unset", QUOTA_RAISED),
    "spec.budget.cost": widens("up-or-unset", QUOTA_RAISED),
    "spec.budget.period": widens("changed", GUARDRAIL_LOOSENED),  # month <-> week: more hours a month, or sooner back
    "spec.budget.alerts": widens("removed", GUARDRAIL_LOOSENED),
    "spec.budget.action": widens("changed", GUARDRAIL_LOOSENED),  # hold -> none lets admissions run on
}

DIRECTIONS: dict[str, dict[str, Field]] = {
    "Tenant": {
        **_METADATA,
        "spec.description": NEUTRAL,
        "spec.costCenter": _BILLING,
        "spec.department": widens("changed", DEPARTMENT_CHANGED),
        **_OWNERS,
        "spec.members.users": widens("added", OWNERS_CHANGED),
        "spec.members.groups": widens("added", OWNERS_CHANGED),
        "spec.viewers.users": widens("added", OWNERS_CHANGED),
        "spec.viewers.groups": widens("added", OWNERS_CHANGED),
        "spec.clusters": widens("changed", CLUSTER_CHANGED),  # an empty list means every pool's cluster
        "spec.namespaces": widens("added", NAMESPACE_CLAIMED),
        "spec.adoptNamespaces": widens("added", NAMESPACE_ADOPTED),
        "spec.queues[]": widens("added", QUEUE_WIDENED),
        "spec.queues[].priorityClasses": widens("added", QUEUE_WIDENED),
        **_quotas(),
        "spec.fairSharing.weight": widens("up", FAIR_SHARE_RAISED),
        # which pool a workload lands on, and whether it borrows or preempts there rather than trying the next
        "spec.flavorFungibility.whenCanBorrow": widens("changed", SCHEDULING_CHANGED),
        "spec.flavorFungibility.whenCanPreempt": widens("changed", SCHEDULING_CHANGED),
        "spec.flavorFungibility.preference": widens("changed", SCHEDULING_CHANGED),
        **_reclaim(),
        **_BUDGET,
        # beyond gpugov's namespace default: network volumes, inline CSI drivers, NodePort/LoadBalancer
        "spec.allow.volumes": widens("added", GUARDRAIL_LOOSENED),
        "spec.allow.csiDrivers": widens("added", GUARDRAIL_LOOSENED),
        "spec.allow.serviceTypes": widens("added", GUARDRAIL_LOOSENED),
        "spec.allow.reason": NEUTRAL,  # words for the reviewers
    },
    "Department": {
        **_METADATA,
        "spec.description": NEUTRAL,
        "spec.costCenter": _BILLING,
        "spec.parent": widens("changed", DEPARTMENT_CHANGED),
        **_OWNERS,
        **_quotas(),
        "spec.fairSharing.weight": widens("up", FAIR_SHARE_RAISED),
        **_BUDGET,
    },
    "PriorityClass": {
        **_METADATA,
        "spec.description": NEUTRAL,
        "spec.value": widens("up", PRIORITY_RAISED),
        "spec.preemptible": widens("down", PROTECTED_PRIORITY),
    },
    "SchedulingPolicy": {
        **_METADATA,
        "spec.queueingStrategy": widens("changed", SCHEDULING_CHANGED),
        "spec.preemption.reclaimWithinCohort": widens("changed", SCHEDULING_CHANGED),
        "spec.preemption.withinClusterQueue": widens("changed", SCHEDULING_CHANGED),
        "spec.preemption.borrowWithinCohort.policy": widens("changed", SCHEDULING_CHANGED),
        "spec.preemption.borrowWithinCohort.maxPriorityThreshold": widens("changed", SCHEDULING_CHANGED),
        "spec.volcano.plugin": widens("changed", SCHEDULING_CHANGED),
        "spec.volcano.notKept": widens("added", SCHEDULING_CHANGED),  # silences GG064 for what it names
    },
    "Guardrails": {
        **_METADATA,
        "spec.capacityRatio": widens("up", GUARDRAIL_LOOSENED),
        "spec.poolCapacityRatios.*": widens("changed", GUARDRAIL_LOOSENED),  # unset: capacityRatio, up or down
        "spec.maxQuotaChangePerPullRequest": widens("up-or-unset", GUARDRAIL_LOOSENED),
        "spec.requireOwner": widens("down", GUARDRAIL_LOOSENED),
        "spec.requireCostCenter": widens("down", GUARDRAIL_LOOSENED),
        "spec.platformTeam": widens("changed", GUARDRAIL_LOOSENED),
        "spec.reservedNamespaces": widens("removed", GUARDRAIL_LOOSENED),
        "spec.idle.utilizationBelowPercent": NEUTRAL,  # what the idle report calls idle
        "spec.idle.window": NEUTRAL,
        # When `gpugov profile` advises: words for the users, no power.
        "spec.profile.lowActivityBelowPercent": NEUTRAL,
        "spec.profile.adviseIdleSharePercent": NEUTRAL,
        "spec.profile.hostIOBytesPerSecond": NEUTRAL,
        "spec.profile.memoryHeadroomPercent": NEUTRAL,
        "spec.isolation.podSecurity": widens("changed", GUARDRAIL_LOOSENED),
        "spec.isolation.podSecurityReason": NEUTRAL,  # words for the reviewers
        "spec.isolation.trustedControllers.users": widens("added", GUARDRAIL_LOOSENED),
        "spec.isolation.trustedControllers.groups": widens("added", GUARDRAIL_LOOSENED),
        "spec.isolation.podPriorityClasses": widens("changed", GUARDRAIL_LOOSENED),
        "spec.isolation.deviceRuntimeClasses": widens("changed", GUARDRAIL_LOOSENED),
        "spec.isolation.maxTerminationGracePeriodSeconds": widens("up", GUARDRAIL_LOOSENED),
        **_reclaim(),
    },
    "Cluster": {
        **_METADATA,
        "spec.description": NEUTRAL,
        "spec.backend": widens("changed", CLUSTER_CHANGED),
        # every flavor topology-aware or none: Kueue's TAS checks that a job's pods fit the nodes (issue #40)
        "spec.topologyAwareScheduling": widens("changed", CLUSTER_CHANGED),
        "spec.migConfig.name": widens("changed", CLUSTER_CHANGED),
        "spec.migConfig.namespace": widens("changed", CLUSTER_CHANGED),
        "spec.operations.image": widens("changed", CLUSTER_CHANGED),  # runs with the drift ServiceAccount's rights
        "spec.operations.namespace": widens("changed", CLUSTER_CHANGED),
        "spec.operations.driftSchedule": widens("changed", CLUSTER_CHANGED),  # a rarer drift check sees less
        "spec.operations.agent": widens("up", CLUSTER_CHANGED),  # a DaemonSet on every GPU node
        "spec.operations.prometheus": widens("changed", CLUSTER_CHANGED),  # the metric reclaim deactivates on
        "spec.operations.reclaimSchedule": widens("changed", CLUSTER_CHANGED),  # how often reclaim acts
        "spec.operations.budgetSchedule": widens("changed", CLUSTER_CHANGED),  # how soon a spent budget holds
        "spec.identity.kubeSystemUID": widens("changed", CLUSTER_CHANGED),  # which cluster apply may write to
        # which ClusterPolicy refuses NVIDIA_VISIBLE_DEVICES, and how devices reach a container (issue #38)
        "spec.gpuOperator.clusterPolicy": widens("changed", CLUSTER_CHANGED),
        "spec.gpuOperator.deviceListStrategy": widens("changed", CLUSTER_CHANGED),
        "spec.pruneLimit.objects": widens("up", CLUSTER_CHANGED),  # how much apply may delete at once (unset: default)
        "spec.pruneLimit.fraction": widens("up", CLUSTER_CHANGED),
        "spec.adopt[]": widens("added", OBJECTS_ADOPTED),  # apply takes over an object it did not make
    },
    "GPUPool": {
        **_METADATA,
        "spec.description": NEUTRAL,
        "spec.pricePerAcceleratorHour": _BILLING,  # what the ledger charges per accelerator-hour
        "spec.currency": _BILLING,  # the price's currency
        "spec.cluster": widens("changed", _HW),
        "spec.accelerator.model": widens("changed", _HW),
        "spec.accelerator.productLabel": widens("changed", _HW),
        "spec.acceleratorsPerNode": widens("up", _HW),
        "spec.nodeResources.cpu": widens("up", _HW),
        "spec.nodeResources.memory": widens("up", _HW),
        "spec.nodes[]": widens("added", POOL_GAINS_NODE),
        "spec.nodes[].labels.*": widens("changed", _HW),
        "spec.nodes[].migLayout": widens("changed", _HW),
        "spec.nodes[].vnpuLayout": widens("changed", _HW),
        "spec.nodeSelector.matchLabels.*": widens("changed", _HW),  # fewer labels select more nodes
        "spec.nodeCount": widens("up", _HW),
        "spec.taints[]": widens("removed", _HW),  # an untainted node takes anyone's pods
        "spec.taints[].value": widens("changed", _HW),
        "spec.topology.levels": widens("changed", _HW),
        "spec.migLayouts.*.*": widens("changed", _HW),
        "spec.vnpuLayouts.*.*": widens("changed", _HW),
        "spec.sharing.hami.deviceSplitCount": widens("up", _HW),
        "spec.sharing.hami.deviceMemoryScaling": widens("up", _HW),
        "spec.sharing.hami.deviceCoreScaling": widens("up", _HW),
        "spec.sharing.hami.deviceMemory": widens("up", _HW),
    },
    "AcceleratorModel": {
        **_METADATA,
        "spec.description": NEUTRAL,
        "spec.sources.*": NEUTRAL,
        **{f"spec.{name}": widens("changed", _HW) for name in (
            "vendor", "resource", "memory", "productLabel.key", "productLabel.values", "pciVendorId", "pciDeviceIds",
            "mig.geometry", "mig.profiles.*.slot", "mig.profiles.*.max", "hami.count", "hami.memory",
            "hami.memoryUnit", "hami.cores", "hami.coresPerDevice", "vnpu.aiCores", "vnpu.aiCpus",
            "vnpu.templates.*.resource", "vnpu.templates.*.aiCores", "vnpu.templates.*.aiCpus",
            "vnpu.templates.*.memory")},
    },
}

# A grant or window raises a tenant's quota for a while: whatever changes in one is asked about, but
# who approved it and why (reviewed in the same pull request).
_TIMELINE = widens("changed", TIMELINE_WIDENED)
DIRECTIONS["QuotaGrant"] = {
    **_METADATA, "spec.reason": NEUTRAL, "spec.approvedBy": NEUTRAL,
    **{f"spec.{name}": _TIMELINE for name in ("tenant", "pool", "from", "until")},
    "spec.resources.*": widens("up", TIMELINE_WIDENED),
}
DIRECTIONS["QuotaWindow"] = {
    **_METADATA, "spec.reason": NEUTRAL, "spec.approvedBy": NEUTRAL,
    **{f"spec.{name}": _TIMELINE for name in ("pool", "donor.tenant", "donor.department", "recipient.tenant",
                                              "recipient.department", "weekdays", "start", "end", "timeZone")},
    "spec.resources.*": widens("up", TIMELINE_WIDENED),
}

# A field the table lacks (a schema that grew before the table did) widens on any change: the
# plan asks rather than stays quiet. tests/unit/test_plan_directions.py keeps this from happening.
FALLBACK_RULE: dict[str, Rule] = {
    "Tenant": OWNERS_CHANGED, "Department": OWNERS_CHANGED, "PriorityClass": PRIORITY_RAISED,
    "SchedulingPolicy": SCHEDULING_CHANGED, "Guardrails": GUARDRAIL_LOOSENED, "Cluster": CLUSTER_CHANGED,
    "GPUPool": _HW, "AcceleratorModel": _HW, "QuotaGrant": TIMELINE_WIDENED, "QuotaWindow": TIMELINE_WIDENED,
    "Fleet": CLUSTER_CHANGED,
}

# A fleet (issue #43): who dispatches where and with which credentials is a cluster's setting; a tenant
# added or a fleet quota raised lets it hold more on the workers together.
_FLEET = widens("changed", CLUSTER_CHANGED)
DIRECTIONS["Fleet"] = {
    **_METADATA, "spec.description": NEUTRAL,
    **{f"spec.{name}": _FLEET for name in ("manager", "kueueNamespace", "managerUser", "workers[].kubeconfigSecret")},
    "spec.workers[]": widens("added", CLUSTER_CHANGED),
    "spec.tenants[]": widens("added", QUOTA_RAISED),
    **{f"spec.tenants[].quota.{name}": widens("up", QUOTA_RAISED) for name in ("accelerators", "cpu", "memory")},
}

def direction(kind: str, field: str) -> Field:
    found = DIRECTIONS.get(kind, {}).get(field)
    return found if found is not None else widens("changed", FALLBACK_RULE.get(kind, GUARDRAIL_LOOSENED))
