"""A Cluster's spec.adopt names only objects the declarations compile to for that cluster.

apply takes over exactly the adopted objects it writes (gpugov.cluster.ownership); an entry that
names nothing it writes would be a silent no-op today and a take-over of some unrelated object the
day a declaration happens to compile to that name. So it is an error where it is written. This
check reads compile's output, not the model alone: which objects a cluster gets (tenant queues,
department cohorts, pool flavors and topologies, priority classes) is compile's knowledge, and the
validation pipeline (gpugov.app.pipeline) compiles each cluster anyway for the conformance checks.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpugov.declarations.model import Cluster
from gpugov.findings import Finding, Level, make, rule
from gpugov.i18n import Text
from gpugov.kube.objects import Object

UNKNOWN_ADOPTED = rule(
    "GG160",
    "adopt-unknown-object",
    Level.ERROR,
    "A Cluster's spec.adopt names an object the declarations do not compile to for that cluster (wrong kind, "
    "name or namespace, a LocalQueue without its namespace, or a namespace on a cluster-scoped kind).",
    "Adopt only objects gpugov writes: fix the entry (`gpugov render --cluster C` lists them), or remove it.",
)


def _key(obj: Object) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace") or "", meta["name"]


def check_adoption(cluster: Cluster, objects: Iterable[Object]) -> list[Finding]:
    """GG160 at each spec.adopt entry of `cluster` that names none of `objects` (its compiled objects)."""
    if not cluster.adopt:
        return []
    compiled = {_key(obj) for obj in objects}
    findings = []
    for index, entry in enumerate(cluster.adopt):
        if (entry.kind, entry.namespace, entry.name) in compiled:
            continue
        same_name = sorted(f"{kind} {ns + '/' if ns else ''}{name}" for kind, ns, name in compiled
                           if kind == entry.kind and name == entry.name)
        fields = {"cluster": cluster.name, "entry": entry, "same": ", ".join(same_name)}
        findings.append(make(
            UNKNOWN_ADOPTED,
            Text("cluster '{cluster}' adopts {entry}, which the declarations do not compile to for it (it compiles to "
                 "{same})", **fields) if same_name else
            Text("cluster '{cluster}' adopts {entry}, which the declarations do not compile to for it", **fields),
            cluster.at("adopt", index),
        ))
    return findings
