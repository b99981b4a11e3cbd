"""Component resources: the organisation, its GPU pools and its tenants.

The organisation walks compile's objects in apply order and hands each to its owner (see
layout.owner): a tenant's objects to its Tenant, a pool's to its GpuPool, the rest to
itself. Each object becomes exactly one child resource, with `depends_on` on the objects it
names (so cohorts, parents, flavors and namespaces exist before their users and are
deleted after them). Namespaces are retained on delete: they may still hold workloads.
"""

from __future__ import annotations

import pulumi

from gpugov.deploy.layout import OPERATIONS, POOL, TENANT, mig_config_key, owner, references, resource_name
from gpugov.deploy.resources import kubernetes_resource
from gpugov.kube.objects import Key, Object, object_key

PACKAGE = "gpugov:index"


def describe(key: Key) -> str:
    _, kind, namespace, name = key
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


class Component(pulumi.ComponentResource):
    """A group of compiled objects, each a child resource of this component."""

    TYPE = f"{PACKAGE}:Component"

    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        self.resources: dict[Key, pulumi.CustomResource] = {}

    def add(
        self, obj: Object, depends_on: list[pulumi.Resource], provider: pulumi.ProviderResource
    ) -> pulumi.CustomResource:
        opts = pulumi.ResourceOptions(
            parent=self,
            provider=provider,
            depends_on=depends_on,
            retain_on_delete=obj["kind"] == "Namespace",
        )
        resource = kubernetes_resource(resource_name(obj), obj, opts)
        self.resources[object_key(obj)] = resource
        return resource

    def finish(self) -> None:
        self.register_outputs({"objects": [describe(key) for key in self.resources]})


class GpuPool(Component):
    """A pool's ResourceFlavor and Topology (Kueue) and its node label/taint patches."""

    TYPE = f"{PACKAGE}:GpuPool"


class Tenant(Component):
    """A tenant's namespaces, RoleBindings, ResourceQuotas (Volcano), its queue and LocalQueues."""

    TYPE = f"{PACKAGE}:Tenant"


class Operations(Component):
    """gpugov running in the cluster: its namespace, the drift CronJob and its read-only
    RBAC, the NVML agent DaemonSet."""

    TYPE = f"{PACKAGE}:Operations"


class Organisation(Component):
    """One cluster's share of the organisation: cohorts or parent queues, priority classes,
    the MIG ConfigMap, a GpuPool / Tenant component per pool and tenant, and Operations."""

    TYPE = f"{PACKAGE}:Organisation"

    def __init__(
        self,
        name: str,
        objects: list[Object],
        provider: pulumi.ProviderResource,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(name, opts)
        self.name = name
        self.pools: dict[str, GpuPool] = {}
        self.tenants: dict[str, Tenant] = {}
        self.operations: Operations | None = None
        created: dict[Key, pulumi.CustomResource] = {}
        mig_config = mig_config_key(objects)
        for obj in objects:  # apply order: whatever an object names was created before it
            depends_on: list[pulumi.Resource] = [created[k] for k in references(obj, mig_config) if k in created]
            created[object_key(obj)] = self._owner(obj).add(obj, depends_on, provider)
        for component in [*self.pools.values(), *self.tenants.values(), *filter(None, [self.operations])]:
            component.finish()
        self.finish()

    def _owner(self, obj: Object) -> Component:
        kind, name = owner(obj)
        child = pulumi.ResourceOptions(parent=self)
        if kind == POOL:
            if name not in self.pools:
                self.pools[name] = GpuPool(name, child)
            return self.pools[name]
        if kind == TENANT:
            if name not in self.tenants:
                self.tenants[name] = Tenant(name, child)
            return self.tenants[name]
        if kind == OPERATIONS:
            if self.operations is None:
                self.operations = Operations(self.name, child)
            return self.operations
        return self


__all__ = ["Component", "GpuPool", "Operations", "Organisation", "Tenant"]
