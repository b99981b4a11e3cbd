"""gpugov-service-exposure: a tenant's Services expose only what is declared.

Threat model: attack: a Service that claims externalIPs (CVE-2020-8554), a NodePort or LoadBalancer;
control: this policy in the tenant namespaces for every writer (Tenant.allow.serviceTypes), doctor
DR043; test: tests/unit/test_namespace_isolation.py::test_external_ips_are_refused_to_everyone_in_a_tenant_namespace,
tests/e2e/test_tenant_escape.py::test_class7_the_rest_of_the_namespace_is_refused."""
from __future__ import annotations

from gpugov.compile.admission.common import _in_namespace, _policy, _team, allowances
from gpugov.compile.common import Object, Scope

SERVICE_EXPOSURE = "gpugov-service-exposure"


def service_exposure_policy(scope: Scope) -> Object:
    """A tenant's Services expose only what is declared: never externalIPs (CVE-2020-8554: a Service
    that claims an address it does not own intercepts the cluster's traffic to it), and NodePort or
    LoadBalancer only where Tenant.allow.serviceTypes says so. Checked for everyone who writes a
    Service in a tenant namespace, trusted controllers too: KubeRay and the like create a tenant's
    Services from what the tenant wrote (a RayCluster's serviceType)."""
    _, _, types = allowances(scope)
    where = "'Service ' + request.namespace + '/' + object.metadata.name + "
    return _policy(
        scope,
        SERVICE_EXPOSURE,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["services"]}]},
            "variables": [{"name": "allowedTypes", "expression": _in_namespace(types)}],
            "validations": [
                {
                    "expression": "!has(object.spec.externalIPs) || object.spec.externalIPs.size() == 0",
                    "messageExpression": where + "' claims externalIPs (' + object.spec.externalIPs.join(', ') + "
                    "'): a Service may not take traffic for an address it does not own (CVE-2020-8554; gpugov: "
                    f"never admitted in a tenant namespace; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": "!has(object.spec.type) || object.spec.type in ['ClusterIP', 'ExternalName'] || "
                    "object.spec.type in variables.allowedTypes",
                    "messageExpression": where + "' is of type ' + object.spec.type + ', which exposes the "
                    "tenant outside the cluster; allowed here: ' + (variables.allowedTypes.size() == 0 ? "
                    "'ClusterIP' : 'ClusterIP, ' + variables.allowedTypes.join(', ')) + ' (gpugov: "
                    f"Tenant.allow.serviceTypes in tenants/, with a reason; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
            ],
        },
    )
