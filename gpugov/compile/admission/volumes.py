"""gpugov-volumes: a tenant's pods keep to their own storage.

Threat model: attack: mount an NFS export (iscsi, cephfs, rbd, hostPath...) as any uid, an inline CSI
volume of a network driver, a claim that names an existing PersistentVolume or takes another
namespace's data; control: this policy in the tenant namespaces, lifted per tenant by Tenant.allow;
Pod Security restricted by default; test: tests/unit/test_namespace_isolation.py,
tests/e2e/test_tenant_escape.py::test_class7_the_rest_of_the_namespace_is_refused."""
from __future__ import annotations

from gpugov.compile.admission.common import (
    _in_namespace,
    _not_trusted,
    _pod_specs_expr,
    _policy,
    _team,
    _workload_rules,
    allowances,
)
from gpugov.compile.common import Object, Scope
from gpugov.declarations.schema import NETWORK_VOLUMES, PREBOUND_CLAIM

VOLUMES = "gpugov-volumes"


def _claims_expr() -> str:
    """The claim specs a workload or PVC brings: a PVC's own (on UPDATE only once its volumeName is
    newly set by the sender: the PV controller binds it, and is trusted), a StatefulSet's
    volumeClaimTemplates, and every pod spec's ephemeral volumes' templates."""
    pvc = ("(object.kind == 'PersistentVolumeClaim' ? (request.operation == 'CREATE' || "
           "!has(oldObject.spec.volumeName) || oldObject.spec.volumeName == '' ? [object.spec] : []) : [])")
    sts = ("(object.kind == 'StatefulSet' && has(object.spec.volumeClaimTemplates) ? "
           "object.spec.volumeClaimTemplates.map(t, t.spec) : [])")
    ephemeral = ("variables.podSpecs.exists(ps, has(ps.volumes) && ps.volumes.exists(v, has(v.ephemeral) && "
                 "has(v.ephemeral.volumeClaimTemplate) && has(v.ephemeral.volumeClaimTemplate.spec) && "
                 "has(v.ephemeral.volumeClaimTemplate.spec.volumeName) && "
                 "v.ephemeral.volumeClaimTemplate.spec.volumeName != ''))")
    return f"{pvc} + {sts} + ({ephemeral} ? [{{'volumeName': 'ephemeral'}}] : [])"


def volumes_policy(scope: Scope) -> Object:
    """A tenant's pods keep to their own storage: no volume source that reaches network or node storage
    by address (nfs, iscsi, cephfs, rbd, glusterfs, hostPath... every source of core/v1 Volume but
    configMap, secret, emptyDir, downwardAPI, projected, persistentVolumeClaim, ephemeral, image and
    csi), no inline CSI volume of a driver the tenant is not allowed (nfs.csi.k8s.io reaches any
    export), and no claim that names an existing PersistentVolume (spec.volumeName: another team's
    released volume) or takes its data from another namespace (dataSourceRef.namespace), in every
    kind's pod specs, a StatefulSet's claim templates and a PVC itself; Tenant.allow lifts each.
    Pod Security restricted refuses the inline network sources too, baseline does not."""
    volumes, drivers, _ = allowances(scope)
    kinds = (*_workload_rules(("CREATE", "UPDATE")),
             {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
              "resources": ["persistentvolumeclaims"]})
    sources = " && ".join(f"(!has(v.{name}) || '{name}' in variables.allowedVolumes)" for name in NETWORK_VOLUMES)
    where = "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
    allow = ("(gpugov: Tenant.allow in tenants/ says what a tenant may do beyond the default, with a reason; "
             f"ask {_team(scope)})'")
    return _policy(
        scope,
        VOLUMES,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": list(kinds)},
            "matchConditions": [_not_trusted(scope)],
            "variables": [
                {"name": "allowedVolumes", "expression": _in_namespace(volumes)},
                {"name": "allowedDrivers", "expression": _in_namespace(drivers)},
                {"name": "podSpecs", "expression": _pod_specs_expr()},
                {"name": "claims", "expression": _claims_expr()},
            ],
            "validations": [
                {
                    "expression": f"variables.podSpecs.all(ps, !has(ps.volumes) || ps.volumes.all(v, {sources}))",
                    "messageExpression": where + "' mounts network or node storage by its address ("
                    f"{', '.join(NETWORK_VOLUMES)}), which reaches data beyond the tenant\\'s own claims; allowed "
                    "here: ' + (variables.allowedVolumes.size() == 0 ? '(none)' : "
                    "variables.allowedVolumes.join(', ')) + ' " + allow,
                    "reason": "Forbidden",
                },
                {
                    "expression": "variables.podSpecs.all(ps, !has(ps.volumes) || ps.volumes.all(v, !has(v.csi) || "
                    "v.csi.driver in variables.allowedDrivers))",
                    "messageExpression": where + "' names an inline CSI volume of driver ' + "
                    "variables.podSpecs.filter(ps, has(ps.volumes) && ps.volumes.exists(v, has(v.csi) && "
                    "!(v.csi.driver in variables.allowedDrivers)))[0].volumes.filter(v, has(v.csi) && "
                    "!(v.csi.driver in variables.allowedDrivers))[0].csi.driver + ', which the tenant is not "
                    "allowed (an inline CSI volume reaches whatever its attributes name); allowed here: ' + "
                    "(variables.allowedDrivers.size() == 0 ? '(none)' : variables.allowedDrivers.join(', ')) + ' "
                    + allow,
                    "reason": "Forbidden",
                },
                {
                    "expression": f"'{PREBOUND_CLAIM}' in variables.allowedVolumes || variables.claims.all(c, "
                    "!has(c.volumeName) || c.volumeName == '')",
                    "messageExpression": where + "' claims an existing PersistentVolume by name (volumeName), "
                    "which may hold another team\\'s data: let the claim get its own volume from a StorageClass "
                    + allow,
                    "reason": "Forbidden",
                },
                {
                    "expression": "variables.claims.all(c, !has(c.dataSourceRef) || !has(c.dataSourceRef.namespace) "
                    "|| c.dataSourceRef.namespace == '' || c.dataSourceRef.namespace == request.namespace)",
                    "messageExpression": where + "' takes a claim\\'s data from another namespace "
                    "(dataSourceRef.namespace) " + allow,
                    "reason": "Forbidden",
                },
            ],
        },
    )
