"""The import report: what the declarations could not express (gaps) and what import assumed (notes).

A gap is a field of a cluster object whose meaning the written declarations do not carry (or
carry differently); any gap makes `gpugov import` exit 1. A note records an assumption about
something the input did not say (e.g. node counts of a folder without Node objects): nothing
of the input was lost, so notes alone leave the exit code at 0.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

ADOPTED_IN = "policies/clusters.yaml spec.adopt"  # where import declares the take-over


@dataclass(frozen=True, order=True)
class Gap:
    object: str  # "ClusterQueue team-a", "LocalQueue ns/name"
    field: str  # "spec.preemption.withinClusterQueue"
    why: str


@dataclass
class ImportReport:
    gaps: list[Gap] = field(default_factory=list)
    notes: list[Gap] = field(default_factory=list)
    written: list[str] = field(default_factory=list)  # files written, relative to the output folder
    # (kind, namespace, name) the cluster holds and apply will write: the Cluster's spec.adopt
    take_over: list[tuple[str, str, str]] = field(default_factory=list)

    def gap(self, obj: str, path: str, why: str) -> None:
        if (entry := Gap(obj, path, why)) not in self.gaps:
            self.gaps.append(entry)

    def note(self, obj: str, path: str, why: str) -> None:
        if (entry := Gap(obj, path, why)) not in self.notes:
            self.notes.append(entry)

    @property
    def complete(self) -> bool:
        return not self.gaps


def shown(kind: str, namespace: str, name: str) -> str:
    return f"{kind} {namespace + '/' if namespace else ''}{name}"


def render_text(report: ImportReport, out: str) -> str:
    lines = [f"wrote {len(report.written)} files to {out}"]
    if report.gaps:
        lines.append(f"\nnot expressed ({len(report.gaps)}): the declarations differ from the cluster here")
        lines.extend(f"  {g.object}: {g.field}: {g.why}" for g in sorted(report.gaps))
    else:
        lines.append("everything was expressed: compiled back, the declarations give the same scheduler objects")
    if report.notes:
        lines.append(f"\nassumed ({len(report.notes)}):")
        lines.extend(f"  {n.object}: {n.field}: {n.why}" for n in sorted(report.notes))
    if report.take_over:
        lines.append(f"\nto take over ({len(report.take_over)}): adopted in {ADOPTED_IN}; gpugov apply takes them "
                     "over in place (see apply --dry-run first), and from then on prune deletes any of them the "
                     "declarations drop:")
        lines.extend(f"  {shown(*key)}" for key in report.take_over)
    return "\n".join(lines) + "\n"


def render_json(report: ImportReport, out: str) -> str:
    body = {
        "out": out,
        "complete": report.complete,
        "written": report.written,
        "notExpressed": [asdict(g) for g in sorted(report.gaps)],
        "assumed": [asdict(n) for n in sorted(report.notes)],
        "takeOver": [{"kind": k, "namespace": ns, "name": n} for k, ns, n in report.take_over],
        "adoptedIn": ADOPTED_IN if report.take_over else None,
    }
    return json.dumps(body, indent=2) + "\n"
