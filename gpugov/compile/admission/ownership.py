"""gpugov-workload-ownership (class 1): ownership is not taken on a tenant's word.

Threat model: attack: a Pod or Job names a Job (or any Kueue-managed parent) as its owner, so Kueue's
webhooks and gpugov's own checks skip it; control: only the trusted controllers create or re-parent a
child; test: tests/e2e/test_tenant_escape.py::test_class1_ownership_is_not_taken_on_the_tenants_word."""
from __future__ import annotations

from gpugov.compile.admission.common import PARENT_KINDS, _cel, _not_trusted, _policy, _team, _workload_rules
from gpugov.compile.common import Object, Scope

OWNERSHIP = "gpugov-workload-ownership"


def ownership_policy(scope: Scope) -> Object:
    """Class 1: Kueue's webhooks (and gpugov's own checks before) skip a workload whose
    ownerReferences name a Job or another Kueue-managed parent; only a trusted controller may create
    or re-parent one, whatever the reference says (controller or not, real owner or not)."""
    added = ("object.metadata.ownerReferences.filter(o, o.kind in variables.parents && "
             "(request.operation == 'CREATE' || !has(oldObject.metadata.ownerReferences) || "
             "!oldObject.metadata.ownerReferences.exists(p, p.uid == o.uid)))")
    return _policy(
        scope,
        OWNERSHIP,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _workload_rules(("CREATE", "UPDATE"))},
            "matchConditions": [
                _not_trusted(scope),
                {"name": "names-an-owner", "expression": "has(object.metadata.ownerReferences)"},
            ],
            "variables": [
                {"name": "parents", "expression": _cel(list(PARENT_KINDS))},
                {"name": "claimed", "expression": added},
            ],
            "validations": [
                {
                    "expression": "variables.claimed.size() == 0",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "' names ' + variables.claimed[0].kind + ' ' + variables.claimed[0].name + ' as its owner: only "
                    "the controllers trusted in Guardrails.isolation.trustedControllers create the children of a ' + "
                    "variables.claimed[0].kind + ' (gpugov: a workload goes through its own queue; submit the ' + "
                    f"variables.claimed[0].kind + ' itself with a queue label; ask {_team(scope)})'",
                    "reason": "Forbidden",
                }
            ],
        },
    )
