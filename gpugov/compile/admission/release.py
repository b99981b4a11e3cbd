"""gpugov-controller-release: a controlled object stays its controller's.

Threat model: attack: relabel a running pod (or a Deployment's ReplicaSet, a CronJob's Job) or drop its
ownerReferences, so that its controller releases it and starts a replacement while it keeps its
devices, no Workload's; control: this policy on UPDATE (drift GD027 reports a pod released anyway);
test: tests/unit/test_namespace_isolation.py::test_a_tenant_cannot_release_a_child_from_its_controller,
tests/e2e/test_tenant_escape.py::test_class8_a_pod_stays_its_controllers."""
from __future__ import annotations

from gpugov.compile.admission.common import _guarded, _not_trusted, _policy, _team, _workload_rules
from gpugov.compile.common import Object, Scope

RELEASE = "gpugov-controller-release"


def release_policy(scope: Scope) -> Object:
    """A controlled object stays its controller's: a controller (the Job controller, a ReplicaSet, a
    StatefulSet, Kueue, JobSet, KubeRay...) claims its children by label selector and ownerReference, and
    releases a child whose labels no longer match, then starts a replacement; the released pod keeps its
    devices and is no Workload's. So on UPDATE of an object that has a controller reference, a tenant
    changes neither its labels (any label: a selector may use any key, with NotIn or DoesNotExist too) nor
    its ownerReferences. The trusted controllers (who set them) are left alone."""
    return _policy(
        scope,
        RELEASE,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _workload_rules(("UPDATE",))},
            "matchConditions": [
                _not_trusted(scope),
                {"name": "controlled", "expression": "has(oldObject.metadata.ownerReferences) && "
                 "oldObject.metadata.ownerReferences.exists(o, has(o.controller) && o.controller)"},
            ],
            "variables": [
                {"name": "controller", "expression": "oldObject.metadata.ownerReferences.filter(o, "
                 "has(o.controller) && o.controller)[0]"},
                {"name": "oldLabels", "expression": _guarded("oldObject", "metadata.labels", "{}")},
                {"name": "newLabels", "expression": _guarded("object", "metadata.labels", "{}")},
            ],
            "validations": [
                {
                    "expression": "variables.oldLabels == variables.newLabels",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "' belongs to ' + variables.controller.kind + ' ' + variables.controller.name + ': its labels "
                    "may not change, since its controller claims it by them and would release it, keeping its "
                    "accelerators outside any queue (gpugov: change the ' + variables.controller.kind + "
                    f"'\\'s template instead; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": "has(object.metadata.ownerReferences) && "
                    "object.metadata.ownerReferences == oldObject.metadata.ownerReferences",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "' belongs to ' + variables.controller.kind + ' ' + variables.controller.name + ': its "
                    "ownerReferences may not change (an orphan keeps its accelerators outside any queue; gpugov: "
                    f"delete the ' + variables.controller.kind + ' to stop it; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
            ],
        },
    )
