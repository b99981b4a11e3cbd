"""gpugov-device-env-sources: the device variable's other sources.

Threat model: attack: an `envFrom` without a prefix from a ConfigMap or Secret that carries
NVIDIA_VISIBLE_DEVICES, a volume at the runtime's device-list path (the volume-mounts strategy);
control: this policy in the tenant namespaces (and on the nodes, the toolkit's settings that doctor
DR018 checks); test: tests/unit/test_namespace_isolation.py::test_no_configmap_or_secret_carries_a_device_variable,
::test_no_volume_at_the_runtimes_device_list_path."""
from __future__ import annotations

from gpugov.compile.admission.common import (
    DEVICE_ENV,
    _cel,
    _containers,
    _not_trusted,
    _pod_specs_expr,
    _policy,
    _team,
    _workload_rules,
)
from gpugov.compile.common import Object, Scope

DEVICE_SOURCES = "gpugov-device-env-sources"


# Where the NVIDIA container runtime reads a container's device list under the device plugin's
# volume-mounts strategy: a tenant's own volume mounted there would name devices itself.
DEVICE_LIST_MOUNT = "/var/run/nvidia-container-devices"


def device_sources_policy(scope: Scope) -> Object:
    """What gpugov-device-access cannot see in a pod spec: a device variable that arrives through an
    `envFrom` without a prefix from a ConfigMap or Secret of the namespace (refused where it is written:
    no ConfigMap or Secret of a tenant namespace carries a key named as a device variable), and a volume
    mounted at the runtime's device-list path (the device plugin's volume-mounts strategy)."""
    keys = ("(has(object.data) && object.data.exists(k, k in variables.deviceEnv)) || (object.kind == 'ConfigMap' && "
            "has(object.binaryData) && object.binaryData.exists(k, k in variables.deviceEnv)) || (object.kind == "
            "'Secret' && has(object.stringData) && object.stringData.exists(k, k in variables.deviceEnv))")
    mounts = (f"({_containers('ps', ephemeral=True)}).exists(c, has(c.volumeMounts) && c.volumeMounts.exists(m, "
              f"m.mountPath.startsWith('{DEVICE_LIST_MOUNT}')))")
    where = "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
    return _policy(
        scope,
        DEVICE_SOURCES,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [
                *_workload_rules(("CREATE", "UPDATE"), subresources=("ephemeralcontainers",)),
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["configmaps", "secrets"]}]},
            "matchConditions": [_not_trusted(scope)],
            "variables": [
                {"name": "deviceEnv", "expression": _cel(list(DEVICE_ENV))},
                {"name": "podSpecs", "expression": _pod_specs_expr()},
            ],
            "validations": [
                {
                    "expression": f"!(object.kind in ['ConfigMap', 'Secret']) || !({keys})",
                    "messageExpression": where + "' carries a key named as a device runtime variable (' + "
                    "variables.deviceEnv.join(', ') + '): an envFrom without a prefix would hand accelerators to a "
                    f"container without a resource request (gpugov: request accelerators through a queue; ask "
                    f"{_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": f"!variables.podSpecs.exists(ps, {mounts})",
                    "messageExpression": where + f"' mounts a volume at {DEVICE_LIST_MOUNT}, where the container "
                    "runtime reads the devices the device plugin allocated (gpugov: request accelerators through a "
                    f"queue; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
            ],
        },
    )
