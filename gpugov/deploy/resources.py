"""One compiled object -> one pulumi-kubernetes resource, its fields passed through unchanged.

Built-in kinds get their typed class (Nodes a NodePatch: gpugov patches the labels and
taints it owns and never owns or deletes a Node; the provider does not check that the Node
exists, so a patch for a node missing from the cluster would create it: keep pools' node
lists current, see README); Kueue and Volcano kinds get a
CustomResource that carries every top-level field of the object, not only `spec`.
"""

from __future__ import annotations

import re
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes import _utilities as k8s_utilities

from gpugov.compile.common import Object

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")

# Built-in kinds whose object gpugov only patches, never owns.
PATCHES = {("v1", "Node"): "NodePatch"}


class DeployError(Exception):
    """A compiled object has no Pulumi mapping (a kind compile gained but deploy does not know)."""


class CustomObject(k8s.apiextensions.CustomResource):
    """A CustomResource with all of its object's top-level fields.

    pulumi-kubernetes 4.25's Python CustomResource takes only `spec`, while e.g. Kueue's
    WorkloadPriorityClass keeps `value` and `description` at the top level. The provider
    turns a custom resource's inputs into the object as they are, so the extra fields are
    passed as inputs; only `api_version` needs its wire name."""

    def __init__(self, resource_name: str, obj: Object, opts: pulumi.ResourceOptions | None = None) -> None:
        props: dict[str, Any] = {"api_version": obj["apiVersion"], "kind": obj["kind"], "metadata": obj["metadata"]}
        props.update((key, value) for key, value in obj.items() if key not in ("apiVersion", "kind", "metadata"))
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=k8s_utilities.get_version()))
        # Skip CustomResource.__init__ (fixed argument list); register like it does.
        pulumi.CustomResource.__init__(
            self, f"kubernetes:{obj['apiVersion']}:{obj['kind']}", resource_name, props, opts
        )

    def translate_input_property(self, prop: str) -> str:
        # Used for a plain-dict props bag: every other key already has its Kubernetes name.
        return "apiVersion" if prop == "api_version" else prop


def _group_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def is_builtin(api_version: str) -> bool:
    """Core and *.k8s.io groups, and the unqualified ones (apps, batch, policy, ...)."""
    group, _ = _group_version(api_version)
    return "." not in group or group.endswith(".k8s.io")


def typed_class(api_version: str, kind: str) -> Any:
    """The SDK's class for a built-in kind: k8s.<group's first label or core>.<version>.<Kind>."""
    group, version = _group_version(api_version)
    module = getattr(getattr(k8s, group.split(".")[0] if group else "core", None), version, None)
    cls = getattr(module, PATCHES.get((api_version, kind), kind), None)
    if cls is None:
        raise DeployError(f"pulumi-kubernetes has no class for {api_version} {kind}")
    return cls


def kubernetes_resource(name: str, obj: Object, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """The pulumi-kubernetes resource for `obj`, its fields as compile wrote them."""
    if (obj["apiVersion"], obj["kind"]) == ("nvidia.com/v1", "ClusterPolicy"):
        # A CustomResource would own (and on destroy delete) the operator's ClusterPolicy.
        raise DeployError("the GPU Operator's ClusterPolicy is patched by gpugov apply (env entries merged by "
                          "name), not by Pulumi: run gpugov apply for spec.gpuOperator")
    if not is_builtin(obj["apiVersion"]):
        return CustomObject(name, obj, opts)
    cls = typed_class(obj["apiVersion"], obj["kind"])
    # Typed constructors take snake_case keywords; nested dicts keep their Kubernetes names.
    return cls(name, opts=opts, **{_CAMEL.sub("_", key).lower(): value for key, value in obj.items()})  # type: ignore[no-any-return]


__all__ = ["PATCHES", "CustomObject", "DeployError", "is_builtin", "kubernetes_resource", "typed_class"]
