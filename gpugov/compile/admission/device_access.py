"""gpugov-device-access (class 3): no accelerator without a resource request.

Threat model: attack: the device runtimes' variables, a device RuntimeClass on a workload that requests
no accelerator, a pod template that names its node; control: this policy on every kind (Pod Security
covers privileged containers, hostPath and host namespaces); test:
tests/e2e/test_tenant_escape.py::test_class3_no_accelerator_without_a_resource_request."""
from __future__ import annotations

from gpugov.compile.admission.common import (
    DEVICE_ENV,
    _asks,
    _cel,
    _containers,
    _not_trusted,
    _pod_specs_expr,
    _policy,
    _team,
    _workload_rules,
    accelerator_resources,
)
from gpugov.compile.common import Object, Scope

DEVICE_ACCESS = "gpugov-device-access"


def device_access_policy(scope: Scope) -> Object:
    """Class 3: the side doors to accelerators and nodes that need no resource request, which Pod
    Security (privileged, hostPath, host namespaces: the namespace's enforce level) does not cover:
    the device runtimes' environment variables and their RuntimeClasses on a workload that requests
    no accelerator, and a pod spec that names its node (spec.nodeName skips kube-scheduler, so the
    nodes' NoSchedule taints, which keep CPU work off the accelerator servers, and the topology Kueue
    assigned stop holding; no controller of a tenant's kinds sets it in a template, and on a Pod
    only the scheduler's binding does, after creation). Ephemeral containers (kubectl debug) are
    checked too."""
    isolation = scope.model.limits.isolation
    env = f"({_containers('ps', ephemeral=True)}).exists(c, has(c.env) && c.env.exists(e, e.name in variables.deviceEnv))"
    env_from = (f"({_containers('ps', ephemeral=True)}).exists(c, has(c.envFrom) && c.envFrom.exists(f, has(f.prefix) "
                "&& f.prefix != '' && variables.deviceEnv.exists(n, n.startsWith(f.prefix))))")
    runtime = (f"has(ps.runtimeClassName) && ps.runtimeClassName in variables.deviceRuntimes && "
               f"!({_containers('ps')}).exists(c, {_asks()})")
    return _policy(
        scope,
        DEVICE_ACCESS,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _workload_rules(("CREATE", "UPDATE"), subresources=("ephemeralcontainers",))},
            "matchConditions": [_not_trusted(scope)],
            "variables": [
                {"name": "accelerators", "expression": _cel(accelerator_resources(scope))},
                {"name": "deviceEnv", "expression": _cel(list(DEVICE_ENV))},
                {"name": "deviceRuntimes", "expression": _cel(sorted(isolation.device_runtime_classes))},
                {"name": "podSpecs", "expression": _pod_specs_expr()},
            ],
            "validations": [
                {
                    "expression": f"!variables.podSpecs.exists(ps, {env} || {env_from})",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "' sets a device runtime variable (' + variables.deviceEnv.join(', ') + '), which hands "
                    "accelerators to a container without a resource request (gpugov: request accelerators through a "
                    f"queue; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": f"!variables.podSpecs.exists(ps, {runtime})",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "' names a device RuntimeClass (' + variables.deviceRuntimes.join(', ') + ') but requests no "
                    "accelerator (gpugov: Guardrails.isolation.deviceRuntimeClasses are for workloads that request "
                    f"accelerators through a queue; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    # A Pod's UPDATE keeps the node its binding set (nodeName cannot change by UPDATE).
                    "expression": "(object.kind == 'Pod' && request.operation == 'UPDATE') || "
                    "variables.podSpecs.all(ps, !has(ps.nodeName) || ps.nodeName == '')",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "' names its node (nodeName ' + variables.podSpecs.filter(ps, has(ps.nodeName) && ps.nodeName "
                    "!= '')[0].nodeName + '), which skips the scheduler and with it the nodes\\' taints: a tenant\\'s "
                    "pods are placed by kube-scheduler on the nodes their queue admitted them to (gpugov: leave "
                    f"nodeName out and ask for a pool through the queue; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
            ],
        },
    )
