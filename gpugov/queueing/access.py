"""What the caller could not read, said instead of left out.

A tenant reads the queues with the roles gpugov compiles (gpugov.compile.roles): its own
namespaces' Workloads, LocalQueues and their pending workloads, and every ClusterQueue. What the
API server refused is kept as a Denied by the reader (gpugov.cluster.queues); this module turns
those into one line each for the tenants the report shows (the permission, what it hides, which
declaration grants it, whom to ask), one summary line for the rest, and per ClusterQueue how many
admitted and pending workloads are not shown by name (from the ClusterQueue's own status, which
names nobody).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpugov.declarations.model import Model


@dataclass(frozen=True)
class Denied:
    """A read the API server refused: what was asked, and where."""

    verb: str
    resource: str  # plural.group, e.g. workloads.kueue.x-k8s.io
    namespace: str = ""  # "" cluster-wide
    name: str = ""  # one object (a ClusterQueue, a LocalQueue), "" all of them

    @property
    def permission(self) -> str:
        what = f"{self.verb} {self.resource}" + (f" {self.name}" if self.name else "")
        if self.namespace:
            return f"{what} in namespace {self.namespace}"
        return what if self.name else f"{what} (cluster-wide)"

    @property
    def hides(self) -> str:
        if self.resource.startswith("workloads."):
            return "its admitted workloads are counted, not named, and its pending ones are shown without names"
        if self.resource.startswith("localqueues."):
            return "its LocalQueues are not known"
        return "positions in this queue are not shown (gpugov's roles give a tenant's people the pending workloads of its " \
            "LocalQueues, never a ClusterQueue's)"


@dataclass(frozen=True)
class NotShown:
    """Workloads of one ClusterQueue that its status counts but the report cannot name."""

    tenant: str
    cluster_queue: str
    admitted: int
    pending: int


def contacts(model: Model) -> dict[str, str]:
    """tenant -> where its roles are declared and whom to ask for one."""
    found = {}
    for name, tenant in model.tenants.items():
        owners = [*tenant.owners.users, *(f"group {g}" for g in tenant.owners.groups)]
        ask = f"ask its owners ({', '.join(owners)})" if owners else "it names no owner: ask the platform team"
        found[name] = (f"Tenant {name} ({tenant.file}) gives these reads to its owners, members and viewers "
                       f"(spec.owners, spec.members, spec.viewers); {ask}")
    return found


def denial_lines(denied: Iterable[Denied], tenant_of_namespace: dict[str, str], tenant_of_queue: dict[str, str],
                 contact: dict[str, str], shown: set[str], others_shown: bool = True) -> list[str]:
    """One line per refused read of a tenant in `shown`; one summary line for the other tenants when the
    report shows them (`others_shown`)."""
    lines: list[str] = []
    others: dict[str, set[str]] = {}  # permission -> other tenants
    for d in denied:
        tenant = tenant_of_namespace.get(d.namespace, "") if d.namespace else tenant_of_queue.get(d.name, "")
        if tenant not in shown:  # another tenant's, or no declared tenant's: summed up, never named
            others.setdefault(f"{d.verb} {d.resource}", set()).add(tenant or d.namespace or d.name)
            continue
        owner = f" (tenant {tenant})" if tenant else ""
        grant = f"; the {contact[tenant]}" if tenant in contact else ""
        lines.append(f"forbidden: {d.permission}{owner}: {d.hides}{grant}")
    if others and others_shown:
        tenants = set().union(*others.values())
        lines.append(f"forbidden for {len(tenants)} other tenant(s): {', '.join(sorted(others))}: their workloads are "
                     "counted from their ClusterQueues' status, never named")
    return lines
