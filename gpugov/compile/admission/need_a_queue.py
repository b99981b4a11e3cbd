"""gpugov-accelerators-need-a-queue: every accelerator goes through a queue, for every kind that carries pods.

Threat model: attack: request accelerators without a queue label, or drop the label later; control:
this policy on CREATE and UPDATE (only the trusted controllers' children are left to their parent's
check); test: tests/e2e/test_contract.py::test_accelerator_work_without_a_queue_is_refused,
tests/e2e/test_tenant_escape.py::test_class2_a_queued_workload_stays_held_after_creation."""
from __future__ import annotations

from gpugov.compile.admission.common import (
    WORKLOAD_KINDS,
    _asks,
    _cel,
    _containers,
    _labels_expr,
    _not_trusted,
    _pod_specs_expr,
    _policy,
    _team,
    _workload_rules,
    accelerator_resources,
)
from gpugov.compile.common import Object, Scope
from gpugov.kube.names import (
    KUEUE_QUEUE_LABEL,
)

NEED_A_QUEUE = "gpugov-accelerators-need-a-queue"


def need_a_queue_policy(scope: Scope) -> Object:
    """Every accelerator goes through a queue, for every kind that carries pods, on CREATE and on
    UPDATE (a queued workload cannot lose its queue label later). Only the trusted controllers'
    children are left to their parent's check: an ownerReference a tenant writes exempts nothing."""
    queued = tuple(k for k in WORKLOAD_KINDS if k.queued)
    return _policy(
        scope,
        NEED_A_QUEUE,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _workload_rules(("CREATE", "UPDATE"), queued)},
            "matchConditions": [
                _not_trusted(scope),
                {"name": "no-queue", "expression": f"!('{KUEUE_QUEUE_LABEL}' in {_labels_expr()})"},
                # on UPDATE only the loss of the queue label: a tenant may still label its Job's pods
                {"name": "created-or-unqueued", "expression": "request.operation == 'CREATE' || "
                 f"'{KUEUE_QUEUE_LABEL}' in {_labels_expr('oldObject')}"},
            ],
            "variables": [
                {"name": "accelerators", "expression": _cel(accelerator_resources(scope))},
                {"name": "podSpecs", "expression": _pod_specs_expr(queued)},
            ],
            "validations": [
                {
                    "expression": f"!variables.podSpecs.exists(ps, ({_containers('ps')}).exists(c, {_asks()}))",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    f"' requests accelerators without a queue: label it {KUEUE_QUEUE_LABEL}=<queue> (gpugov: every "
                    f"accelerator goes through a queue; the queues of each namespace are declared in tenants/; "
                    f"ask {_team(scope)})'",
                    "reason": "Forbidden",
                }
            ],
        },
    )
