"""A small ValidatingAdmissionPolicy evaluator on cel-python, for unit tests without an apiserver.

It evaluates what the apiserver does for one request against compile's policies: the policy's
resourceRules (group, resource, operation), its matchConditions, its variables in order and its
validations, with `object`, `oldObject`, `request` (operation, namespace, userInfo) and
`variables`; the message of the first failing validation. A policy whose bindings are in the list
applies where one of them selects the request's namespace (by its name or by the labels given: the
tenant namespaces carry `gpugov.io/tenant`); one given without bindings applies everywhere. The e2e suite
proves the same on a real apiserver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import celpy
from celpy import celtypes

_ENV = celpy.Environment()
_PROGRAMS: dict[str, Any] = {}


def _join(values: Any, sep: Any = None) -> celtypes.StringType:
    return celtypes.StringType(str(sep or "").join(str(v) for v in values))


FUNCTIONS = {"join": _join}


def _program(text: str) -> Any:
    if text not in _PROGRAMS:
        _PROGRAMS[text] = _ENV.program(_ENV.compile(text), functions=FUNCTIONS)
    return _PROGRAMS[text]


def _eval(text: str, activation: dict[str, Any]) -> Any:
    result = _program(text).evaluate(activation)
    if isinstance(result, celpy.CELEvalError):
        raise RuntimeError(f"{text[:120]}...: {result}")
    return result


@dataclass(frozen=True)
class Request:
    operation: str  # CREATE | UPDATE
    group: str
    resource: str
    namespace: str
    user: str
    groups: tuple[str, ...] = ()
    subresource: str = ""


def _selects(binding: dict[str, Any], namespace: str, labels: dict[str, str] | None = None) -> bool:
    """Whether the binding's namespaceSelector takes `namespace`, of `labels` (its name label added)."""
    selector = binding["spec"].get("matchResources", {}).get("namespaceSelector")
    if not selector:
        return True
    assert set(selector) == {"matchExpressions"}, selector
    labels = {**(labels or {}), "kubernetes.io/metadata.name": namespace}
    for expression in selector["matchExpressions"]:
        key, operator = expression["key"], expression["operator"]
        if operator == "Exists":
            found = key in labels
        elif operator == "DoesNotExist":
            found = key not in labels
        else:
            found = (labels.get(key) in expression["values"]) == (operator == "In")
        if not found:
            return False
    return True


def _matches(policy: dict[str, Any], request: Request) -> bool:
    resource = f"{request.resource}/{request.subresource}" if request.subresource else request.resource
    for rule in policy["spec"]["matchConstraints"]["resourceRules"]:
        if (request.group in rule["apiGroups"] and resource in rule["resources"]
                and request.operation in rule["operations"]):
            return True
    return False


def evaluate(policies: list[dict[str, Any]], request: Request, obj: dict[str, Any],
             old: dict[str, Any] | None = None, labels: dict[str, str] | None = None) -> list[str]:
    """The messages of every policy that denies the request (empty: admitted); `labels` are the
    namespace's (a binding may select on them)."""
    denials = []
    bindings: dict[str, list[dict[str, Any]]] = {}
    for binding in policies:
        if binding["kind"] == "ValidatingAdmissionPolicyBinding":
            bindings.setdefault(binding["spec"]["policyName"], []).append(binding)
    for policy in policies:
        if policy["kind"] != "ValidatingAdmissionPolicy" or not _matches(policy, request):
            continue
        bound = bindings.get(policy["metadata"]["name"])
        if bound is not None and not any(_selects(b, request.namespace, labels) for b in bound):
            continue
        activation: dict[str, Any] = {
            "object": celpy.json_to_cel(obj),
            "oldObject": celpy.json_to_cel(old) if old is not None else None,
            "request": celpy.json_to_cel({
                "operation": request.operation, "namespace": request.namespace,
                "userInfo": {"username": request.user, "groups": list(request.groups)},
            }),
        }
        spec = policy["spec"]
        if not all(bool(_eval(c["expression"], activation)) for c in spec.get("matchConditions", [])):
            continue
        variables: dict[str, Any] = {}
        activation["variables"] = celtypes.MapType({})
        for variable in spec.get("variables", []):
            variables[variable["name"]] = _eval(variable["expression"], activation)
            activation["variables"] = celtypes.MapType({celtypes.StringType(k): v for k, v in variables.items()})
        for validation in spec["validations"]:
            if not bool(_eval(validation["expression"], activation)):
                denials.append(f"{policy['metadata']['name']}: {_eval(validation['messageExpression'], activation)}")
                break
    return denials
