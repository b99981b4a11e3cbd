"""One import: convert, write staged, validate, compile back, compare with the input, then commit.

The comparison is the proof the issue asks for: whatever the declarations compile to that
differs from the input's ClusterQueues, Cohorts and LocalQueues (or Volcano Queues and scheduler
configuration) becomes a gap in the report,
even where convert did not foresee it. The objects the input holds and the declarations compile
to again are the ones apply will write over: the Cluster declaration adopts exactly those
(spec.adopt), and the repository is validated once more with them.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gpugov.adopt.canonical import differences
from gpugov.adopt.convert import convert
from gpugov.adopt.inventory import VOLCANO_CONF, Inventory, Obj, inventory, mig_parted_config
from gpugov.adopt.report import ImportReport
from gpugov.adopt.write import check_target, commit, discard, render, render_all, stage
from gpugov.app.pipeline import validate_repo
from gpugov.compile import compile
from gpugov.compile.nodes import MIG_CONFIG_LABEL
from gpugov.findings import Finding, Level


def _show(value: object) -> str:
    text = str(value)
    return text if len(text) <= 120 else text[:117] + "..."


CLUSTER_FILE = "policies/clusters.yaml"  # where convert writes the Cluster declaration


class InvalidImport(Exception):
    """The repository import would write does not validate (`gpugov validate` errors): nothing was written."""

    def __init__(self, out: Path, errors: list[Finding], report: ImportReport) -> None:
        super().__init__(f"{out}: the imported repository does not validate ({len(errors)} error(s)): nothing was "
                         "written")
        self.errors = errors
        self.report = report


def take_over(inv: Inventory, compiled: list[Obj]) -> list[tuple[str, str, str]]:
    """(kind, namespace, name) of every object the input holds that the declarations compile to again:
    the objects apply will write, which it takes over only where the Cluster's spec.adopt names them."""
    read = {(o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"])
            for group in (inv.flavors, inv.cohorts, inv.cluster_queues, inv.local_queues, inv.priority_classes,
                          inv.topologies, inv.mig_parted, inv.volcano_queues, inv.pod_priority_classes,
                          {"conf": inv.volcano_conf} if inv.volcano_conf else {})
            for o in group.values()}
    return sorted({(o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"]) for o in compiled} & read)


def verify(inv: Inventory, root: Path, cluster: str, report: ImportReport) -> list[Finding]:
    """Validate the repository at `root` and compare what it compiles to with `inv`, into `report`.
    The validation's errors, which stop the import (warnings become notes)."""
    validation = validate_repo(root)
    for finding in validation.findings:
        if finding.level is not Level.ERROR:
            report.note(finding.location.file if finding.location else "declarations", finding.rule, finding.message)
    if validation.model is None or validation.errors:
        return list(validation.errors)
    compiled = validation.compiled.get(cluster) or compile(validation.model, cluster=cluster)
    report.take_over = take_over(inv, compiled)
    explained = {g.object for g in report.gaps if g.field == "(object)"}  # not imported, and convert said why
    for diff in differences(inv, inventory(compiled)):
        if not diff.field and diff.object in explained:
            continue
        report.gap(diff.object, diff.field or "(object)",
                   f"the cluster has {_show(diff.before)}, the declarations compile to {_show(diff.after)}")
    compare_mig(inv, compiled, report)
    compare_volcano_conf(inv, compiled, report)
    return []


def compare_volcano_conf(inv: Inventory, compiled: list[Obj], report: ImportReport) -> None:
    """Where the scheduler configuration apply would write differs from the one the cluster runs."""
    from gpugov.adopt.volcano import conf_differences

    mine = next((o for o in compiled if o["kind"] == "ConfigMap" and VOLCANO_CONF in (o.get("data") or {})), None)
    if mine is None or inv.volcano_conf is None:
        return
    have = inv.volcano_conf["metadata"]
    meta = mine["metadata"]
    label = f"ConfigMap {meta.get('namespace')}/{meta['name']}"
    if (have.get("namespace"), have["name"]) != (meta.get("namespace"), meta["name"]):
        report.gap(f"ConfigMap {have.get('namespace')}/{have['name']}", "metadata.name", f"the scheduler reads this "
                   f"one; gpugov writes {label}, which this scheduler does not read")
        return
    for where, before, after in conf_differences(inv.volcano_conf["data"][VOLCANO_CONF], mine["data"][VOLCANO_CONF]):
        report.gap(label, f"data[{VOLCANO_CONF}].{where}", f"the cluster has {_show(before)}, the declarations "
                   f"compile to {_show(after)}")


def compare_mig(inv: Inventory, compiled: list[Obj], report: ImportReport) -> None:
    """Where apply would change a node's MIG layout: its nvidia.com/mig.config label, or the mig-parted config
    that label names (mig-manager re-partitions the node's GPUs on either)."""
    for obj in compiled:
        meta = obj["metadata"]
        if obj["kind"] == "Node" and MIG_CONFIG_LABEL in (meta.get("labels") or {}):
            want = meta["labels"][MIG_CONFIG_LABEL]
            have = ((inv.nodes.get(meta["name"]) or {}).get("metadata", {}).get("labels") or {}).get(MIG_CONFIG_LABEL)
            if inv.nodes_known and have != want:
                report.gap(f"Node {meta['name']}", f"metadata.labels[{MIG_CONFIG_LABEL}]", f"the cluster has "
                           f"{have or 'none'}, the declarations compile to {want}: mig-manager would re-partition its "
                           "GPUs")
        if obj["kind"] == "ConfigMap" and (config := mig_parted_config(obj)) is not None:
            held = inv.mig_parted.get((meta.get("namespace") or "default", meta["name"]))
            if held is None:
                continue
            before, after = held["mig-parted"]["mig-configs"], config["mig-configs"]
            for name in sorted(set(before) | set(after)):
                if before.get(name) != after.get(name):
                    report.gap(f"ConfigMap {meta.get('namespace')}/{meta['name']}", f"mig-configs[{name}]",
                               f"the cluster has {_show(before.get(name, 'absent'))}, the declarations compile to "
                               f"{_show(after.get(name, 'absent'))}")


def adopt_entries(take: list[tuple[str, str, str]]) -> list[Obj]:
    """The Cluster's spec.adopt for the objects to take over (a namespace only where the kind has one)."""
    return [{"kind": kind, **({"namespace": namespace} if namespace else {}), "name": name}
            for kind, namespace, name in take]


def declare_adoption(files: dict[str, list[Obj]], staging: Path, take: list[tuple[str, str, str]]) -> None:
    """Write `take` as the spec.adopt of the Cluster declaration, in `files` and in the staged repository."""
    documents = files[CLUSTER_FILE]
    documents[0]["spec"]["adopt"] = adopt_entries(take)
    (staging / CLUSTER_FILE).write_text(render(CLUSTER_FILE, documents), encoding="utf-8")


class BothBackends(Exception):
    """The input holds both Kueue's and Volcano's queues, and no backend was chosen (exit 2)."""


def backend_of(inv: Inventory, backend: str | None) -> str:
    """The scheduler the import reads: the one asked for, else the one whose queues the input holds."""
    if backend:
        return backend
    if inv.has_kueue and inv.has_volcano:
        raise BothBackends("the input holds both Kueue objects (ClusterQueues, ResourceFlavors) and Volcano Queues; "
                           "a Cluster declaration has one backend: choose it with --backend kueue or --backend volcano")
    return "volcano" if inv.has_volcano or (inv.volcano_conf is not None and not inv.has_kueue) else "kueue"


def only(inv: Inventory, backend: str) -> tuple[Inventory, list[str]]:
    """`inv` without the other scheduler's queues, and those queues (Volcano's own root and default aside)."""
    if backend == "volcano":
        kueue = [f"{o['kind']} {n}" for group in (inv.flavors, inv.cluster_queues, inv.cohorts, inv.priority_classes,
                                                   inv.topologies) for n, o in sorted(group.items())]
        kueue += [f"LocalQueue {ns}/{n}" for ns, n in sorted(inv.local_queues)]
        return replace(inv, flavors={}, cluster_queues={}, cohorts={}, local_queues={}, priority_classes={},
                       topologies={}), kueue
    volcano = [f"Queue {n}" for n in sorted(inv.volcano_queues) if n not in ("root", "default")]
    return replace(inv, volcano_queues={}, podgroups={}, volcano_conf=None), volcano


def import_inventory(inv: Inventory, cluster: str, out: Path, force: bool = False,
                     backend: str | None = None) -> ImportReport:
    """Write the declarations of `inv` to `out` (OutputError when it is not empty and not forced).

    Never a repository that does not validate: the files are staged beside `out` and validated with
    `gpugov validate`'s validate_repo first; on any error the staging is removed, `out` (an existing
    one too) is left as it was, and InvalidImport carries the findings."""
    check_target(out, force)
    chosen = backend_of(inv, backend)
    inv, others = only(inv, chosen)
    if chosen == "volcano":
        from gpugov.adopt.volcano import convert_volcano

        declarations = convert_volcano(inv, cluster)
    else:
        declarations = convert(inv, cluster)
    for label in others:
        declarations.report.gap(label, "(object)", f"the other scheduler's: the Cluster is imported with backend "
                                f"{chosen}, so this is not declared (apply leaves it alone, gpugov does not govern it)")
    texts = render_all(declarations.files)
    staging = stage(texts, out)
    report = declarations.report
    try:
        errors = verify(inv, staging, cluster, report)
        if not errors and report.take_over:
            declare_adoption(declarations.files, staging, report.take_over)
            errors = verify(inv, staging, cluster, report)  # the repository as written, spec.adopt included (GG160)
        if errors:
            raise InvalidImport(out, errors, report)
        commit(staging, out)
    except BaseException:
        discard(staging)
        raise
    declarations.report.written = list(texts)
    return declarations.report
