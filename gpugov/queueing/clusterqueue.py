"""A Kueue ClusterQueue and LocalQueue as the queue views need them: quotas per (flavor,
resource) from the spec, what is reserved and borrowed from the status."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property
from typing import Any

from gpugov.kube.objects import LABEL_TENANT
from gpugov.kube.quantity import QuantityError
from gpugov.queueing.workload import WorkloadError, quantity

FlavorResource = tuple[str, str]


@dataclass(frozen=True)
class Quota:
    nominal: Decimal
    borrowing_limit: Decimal | None = None
    lending_limit: Decimal | None = None

    @property
    def maximum(self) -> Decimal | None:
        """The most the queue may hold here by its own limits (None: only the cohort limits it)."""
        return None if self.borrowing_limit is None else self.nominal + self.borrowing_limit


@dataclass(frozen=True)
class ClusterQueue:
    name: str
    tenant: str
    cohort: str
    strategy: str
    active: bool
    inactive_reason: str
    flavors: tuple[str, ...]  # in the order Kueue tries them
    quotas: Mapping[FlavorResource, Quota]
    reserved: Mapping[FlavorResource, Decimal] = field(default_factory=dict)
    borrowed: Mapping[FlavorResource, Decimal] = field(default_factory=dict)
    pending: int = 0
    admitted: int = 0

    def offers(self, resource: str) -> list[str]:
        """The flavors whose quota covers `resource`, in order."""
        return list(self._offered.get(resource, ()))

    @cached_property  # frozen, so filed once: asked per pending Workload, over 50 flavors each
    def _offered(self) -> dict[str, tuple[str, ...]]:
        of_flavor: dict[str, list[str]] = {}
        for flavor, resource in self.quotas:
            of_flavor.setdefault(flavor, []).append(resource)
        offered: dict[str, list[str]] = {}
        for flavor in self.flavors:
            for resource in of_flavor.get(flavor, ()):
                offered.setdefault(resource, []).append(flavor)
        return {resource: tuple(flavors) for resource, flavors in offered.items()}


@dataclass(frozen=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str


def _quantity(value: Any, where: str) -> Decimal:
    try:
        return quantity(value if value is not None else 0)
    except QuantityError as exc:
        raise WorkloadError(f"{where}: {exc}") from exc


_QUOTAS: dict[tuple[str | None, ...], Quota] = {}  # what a resource entry says -> its record, shared (frozen)
_QUOTAS_MOST = 1 << 16


def _quota(resource: dict[str, Any], where: str) -> Quota:
    """The Quota of one resource entry of a flavor; equal entries (a thousand tenants' queues list the
    same few quotas on every flavor) are one record, made once."""
    said = (resource.get("nominalQuota"), resource.get("borrowingLimit"), resource.get("lendingLimit"))
    try:
        found = _QUOTAS.get(said)  # only texts are filed: 1 or True never finds the "1" they equal
    except TypeError:  # a list or object where Kueue writes a quantity: made, never shared
        found = None
    if found is None:
        where = f"{where} resource {resource.get('name')}"  # only its words when it is not shared
        nominal, borrowing, lending = said
        found = Quota(_quantity(nominal, where), None if borrowing is None else _quantity(borrowing, where),
                      None if lending is None else _quantity(lending, where))
        if len(_QUOTAS) < _QUOTAS_MOST and all(v is None or type(v) is str for v in said):
            _QUOTAS[said] = found
    return found


def cluster_queue(obj: dict[str, Any]) -> ClusterQueue:
    """The record of one raw ClusterQueue; WorkloadError when it is not what Kueue's CRD allows."""
    try:
        return _cluster_queue(obj)
    except (AttributeError, TypeError, ValueError) as exc:  # WorkloadError is a ValueError: keep its words
        name = (obj.get("metadata") or {}).get("name") if isinstance(obj, dict) else None
        raise WorkloadError(exc if isinstance(exc, WorkloadError) else f"ClusterQueue {name}: not what Kueue "
                            f"writes ({type(exc).__name__}: {exc})") from exc


def _cluster_queue(obj: dict[str, Any]) -> ClusterQueue:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    name = str(meta.get("name") or "")
    flavors: list[str] = []
    quotas: dict[FlavorResource, Quota] = {}
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            fname = str(flavor.get("name"))
            flavors.append(fname)
            for r in flavor.get("resources") or []:
                quotas[(fname, str(r.get("name")))] = _quota(r, f"ClusterQueue {name} flavor {fname}")
    reserved: dict[FlavorResource, Decimal] = {}
    borrowed: dict[FlavorResource, Decimal] = {}
    for usage in status.get("flavorsReservation") or []:
        for r in usage.get("resources") or []:
            key = (str(usage.get("name")), str(r.get("name")))
            reserved[key] = _quantity(r.get("total"), f"ClusterQueue {name} status")
            borrowed[key] = _quantity(r.get("borrowed"), f"ClusterQueue {name} status")
    active = next((c for c in status.get("conditions") or [] if c.get("type") == "Active"), None)
    return ClusterQueue(
        name=name,
        tenant=str((meta.get("labels") or {}).get(LABEL_TENANT) or name),
        cohort=str(spec.get("cohortName") or ""),
        strategy=str(spec.get("queueingStrategy") or "BestEffortFIFO"),
        active=active is None or active.get("status") == "True",
        inactive_reason=" ".join(str((active or {}).get("message") or "").split()),
        flavors=tuple(flavors),
        quotas=quotas,
        reserved=reserved,
        borrowed=borrowed,
        pending=int(status.get("pendingWorkloads") or 0),
        admitted=int(status.get("admittedWorkloads") or 0),
    )


def local_queue(obj: dict[str, Any]) -> LocalQueue:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    return LocalQueue(str(meta.get("namespace") or ""), str(meta.get("name") or ""), str(spec.get("clusterQueue") or ""))
