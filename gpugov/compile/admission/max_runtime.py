"""gpugov-max-runtime: a queued workload carries its maximum runtime (Guardrails.reclaim.maxRuntime, a
tenant's reclaim), one policy a shard past CEL_BUDGET.

Threat model: attack: run past the maximum runtime through a parent (a CronJob, a Deployment) or by
raising or removing the label after creation; control: this policy on CREATE and UPDATE of each kind's
template labels; test: tests/e2e/test_reclaim.py::test_a_tenant_cannot_carry_work_past_its_maximum_runtime."""
from __future__ import annotations

from typing import Any

from gpugov.compile.admission.common import (
    WORKLOAD_KINDS,
    _binding,
    _cel,
    _cut,
    _labels_expr,
    _names_selector,
    _not_trusted,
    _policy,
    _workload_rules,
)
from gpugov.compile.common import Object, Scope
from gpugov.kube.names import (
    KUEUE_MAX_EXEC_TIME_LABEL,
    KUEUE_PRIORITY_LABEL,
    KUEUE_QUEUE_LABEL,
)

MAX_RUNTIME = "gpugov-max-runtime"


# Every kind that runs: Kueue reads the max-exec-time label where it reads the queue label (the object's
# own labels, or the pod template's that every pod of a Deployment gets). A CronJob's Jobs and a
# Deployment's Pods are created by trusted controllers and not checked themselves, so their parent's
# template is: checking only the kinds Kueue integrates let those children run unbounded.
MAX_RUNTIME_KINDS = tuple(k for k in WORKLOAD_KINDS if k.queued)


def _shown(seconds: int) -> str:
    """A limit in the largest unit that divides it: 86400 -> 1d, 5400 -> 90m."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def max_runtimes(scope: Scope) -> dict[str, dict[str, int]]:
    """namespace -> priority class ('*': a job naming no listed class) -> the most seconds a job there may
    ask for (issue #26: Guardrails.reclaim.maxRuntime, a tenant's over it); namespaces without a limit left out."""
    limits: dict[str, dict[str, int]] = {}
    for name in sorted(scope.tenants):
        tenant = scope.tenants[name]
        policy = scope.model.reclaim_policy(tenant)
        if policy is None or (policy.max_runtime_default is None and not policy.max_runtime):
            continue
        per_class = dict(policy.max_runtime)
        if policy.max_runtime_default is not None:
            per_class["*"] = policy.max_runtime_default
        for namespace in tenant.namespaces:
            limits[namespace] = per_class
    return limits


def max_runtime_policy(scope: Scope, limits: dict[str, dict[str, int]], name: str = MAX_RUNTIME) -> Object:
    """A job in a namespace with a declared maximum runtime must carry Kueue's max-exec-time label, at
    most that limit: Kueue then deactivates it once it has run that long. Refused, never defaulted: the
    built kube-apiserver serves no MutatingAdmissionPolicy (alpha, off by default), so the message says
    which label to set and to what."""
    label = KUEUE_MAX_EXEC_TIME_LABEL
    labels = _labels_expr(kinds=MAX_RUNTIME_KINDS)
    shown = {ns: {pc: _shown(sec) for pc, sec in per.items()} for ns, per in limits.items()}
    return _policy(
        scope,
        name,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _workload_rules(("CREATE", "UPDATE"), MAX_RUNTIME_KINDS)},
            "matchConditions": [
                _not_trusted(scope),
                {"name": "limited-namespace", "expression": f"request.namespace in {_cel(sorted(limits))}"},
                {"name": "has-queue", "expression": f"'{KUEUE_QUEUE_LABEL}' in {labels}"},
            ],
            "variables": [
                {"name": "limits", "expression": _cel(limits)},
                {"name": "shown", "expression": _cel(shown)},
                {"name": "labels", "expression": labels},
                {"name": "priorityClass", "expression": f"'{KUEUE_PRIORITY_LABEL}' in variables.labels ? "
                 f"variables.labels['{KUEUE_PRIORITY_LABEL}'] : ''"},
                {"name": "perClass", "expression": "variables.limits[request.namespace]"},
                {"name": "key", "expression": "variables.priorityClass in variables.perClass ? "
                 "variables.priorityClass : '*'"},
                {"name": "limit", "expression": "variables.key in variables.perClass ? "
                 "variables.perClass[variables.key] : -1"},
                {"name": "what", "expression": "'queue ' + request.namespace + '/' + "
                 f"variables.labels['{KUEUE_QUEUE_LABEL}'] + (variables.priorityClass == '' ? '' : "
                 "' (priority class ' + variables.priorityClass + ')') + ' allows at most ' + "
                 "string(variables.limit) + ' seconds (' + (variables.limit < 0 ? '' : "
                 "variables.shown[request.namespace][variables.key]) + ', reclaim.maxRuntime)'"},
                {"name": "asked", "expression": f"'{label}' in variables.labels ? variables.labels['{label}'] : ''"},
            ],
            "validations": [
                {
                    "expression": f"variables.limit < 0 || '{label}' in variables.labels",
                    "messageExpression": f"object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    f"' has no {label} label: ' + variables.what + '; set the label to at most ' + "
                    "string(variables.limit)",
                    "reason": "Forbidden",
                },
                {
                    "expression": f"variables.limit < 0 || !('{label}' in variables.labels) || "
                    "(variables.asked.matches('^[0-9]{1,10}$') && int(variables.asked) <= variables.limit)",
                    "messageExpression": f"object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    f"' asks {label}=' + variables.asked + ': ' + variables.what",
                    "reason": "Forbidden",
                },
            ],
        },
    )


def _max_runtime_objects(scope: Scope, not_system: dict[str, Any]) -> list[Object]:
    """The max-runtime policy, only where a reclaim policy declares a maximum runtime; past CEL_BUDGET,
    one a shard of the limited namespaces, each bound to its own."""
    limits = max_runtimes(scope)
    shards = _cut({ns: 2 * len(_cel({ns: per})) for ns, per in limits.items()})  # limits and how they read
    if len(shards) <= 1:
        return [max_runtime_policy(scope, limits), _binding(scope, MAX_RUNTIME, not_system)] if limits else []
    objects: list[Object] = []
    for number, shard in enumerate(shards, start=1):
        name = f"{MAX_RUNTIME}-{number}"
        objects += [max_runtime_policy(scope, {ns: limits[ns] for ns in shard}, name),
                    _binding(scope, name, _names_selector("In", shard))]
    return objects
