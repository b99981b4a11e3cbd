"""gpugov-pod-priority (class 4): a workload without a queue names only the PriorityClasses of
Guardrails.isolation.podPriorityClasses.

Threat model: attack: `priorityClassName: system-node-critical` or an undeclared class, so that
kube-scheduler's preemption evicts protected pods; control: this policy (with a queue:
gpugov-queue-access); test: tests/e2e/test_tenant_escape.py::test_class4_pod_priority_is_governed."""
from __future__ import annotations

from gpugov.compile.admission.common import (
    _cel,
    _labels_expr,
    _not_trusted,
    _pod_specs_expr,
    _policy,
    _team,
    _workload_rules,
)
from gpugov.compile.common import Object, Scope
from gpugov.kube.names import (
    KUEUE_QUEUE_LABEL,
)

POD_PRIORITY = "gpugov-pod-priority"


def pod_priority_policy(scope: Scope) -> Object:
    """Class 4: a pod's PriorityClass decides kube-scheduler's preemption on the node, whatever Kueue
    decided. A workload with a queue may name only its queue's classes (gpugov-queue-access); one
    without may name only Guardrails.isolation.podPriorityClasses (default none), never
    system-node-critical or an undeclared class."""
    allowed = sorted(scope.model.limits.isolation.pod_priority_classes)
    return _policy(
        scope,
        POD_PRIORITY,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _workload_rules(("CREATE", "UPDATE"))},
            "matchConditions": [
                _not_trusted(scope),
                {"name": "no-queue", "expression": f"!('{KUEUE_QUEUE_LABEL}' in {_labels_expr()})"},
            ],
            "variables": [
                {"name": "allowed", "expression": _cel(allowed)},
                {"name": "podSpecs", "expression": _pod_specs_expr()},
                {
                    "name": "named",
                    "expression": "variables.podSpecs.filter(ps, has(ps.priorityClassName) && "
                    "!(ps.priorityClassName in variables.allowed)).map(ps, ps.priorityClassName)",
                },
            ],
            "validations": [
                {
                    "expression": "variables.named.size() == 0",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "' may not use priorityClassName ' + variables.named[0] + ' without a queue; allowed: ' + "
                    "(variables.allowed.size() == 0 ? '(none)' : variables.allowed.join(', ')) + ' (gpugov: "
                    "Guardrails.isolation.podPriorityClasses; a queue\\'s classes are declared on the queue in "
                    f"tenants/; ask {_team(scope)})'",
                    "reason": "Forbidden",
                }
            ],
        },
    )
