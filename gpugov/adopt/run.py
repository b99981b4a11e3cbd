"""One import: convert, write staged, validate, compile back, compare with the input, then commit.

The comparison is the proof the issue asks for: whatever the declarations compile to that
differs from the input's ClusterQueues, Cohorts and LocalQueues becomes a gap in the report,
even where convert did not foresee it.
"""

from __future__ import annotations

from pathlib import Path

from gpugov.adopt.canonical import differences
from gpugov.adopt.convert import convert
from gpugov.adopt.inventory import Inventory, Obj, inventory
from gpugov.adopt.report import ImportReport
from gpugov.adopt.write import check_target, commit, discard, render_all, stage
from gpugov.app.pipeline import validate_repo
from gpugov.compile import compile
from gpugov.findings import Level


def _show(value: object) -> str:
    text = str(value)
    return text if len(text) <= 120 else text[:117] + "..."


def take_over(inv: Inventory, compiled: list[Obj]) -> list[tuple[str, str, str]]:
    """(kind, namespace, name) of every object the input holds that the declarations compile to again:
    the objects apply will write, which it refuses to take over until they carry gpugov's mark."""
    read = {(o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"])
            for group in (inv.flavors, inv.cohorts, inv.cluster_queues, inv.local_queues, inv.priority_classes)
            for o in group.values()}
    return sorted({(o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"]) for o in compiled} & read)


def verify(inv: Inventory, root: Path, cluster: str, report: ImportReport) -> None:
    """Validate the repository at `root` and compare what it compiles to with `inv`, into `report`."""
    validation = validate_repo(root)
    for finding in validation.findings:
        where = finding.location.file if finding.location else "declarations"
        if finding.level is Level.ERROR:
            report.gap(where, finding.rule, f"does not validate: {finding.message}")
        else:
            report.note(where, finding.rule, finding.message)
    if validation.model is None or validation.errors:
        return
    compiled = validation.compiled.get(cluster) or compile(validation.model, cluster=cluster)
    report.take_over = take_over(inv, compiled)
    for diff in differences(inv, inventory(compiled)):
        report.gap(diff.object, diff.field or "(object)",
                   f"the cluster has {_show(diff.before)}, the declarations compile to {_show(diff.after)}")


def import_inventory(inv: Inventory, cluster: str, out: Path, force: bool = False) -> ImportReport:
    """Write the declarations of `inv` to `out` (OutputError when it is not empty and not forced)."""
    check_target(out, force)
    declarations = convert(inv, cluster)
    texts = render_all(declarations.files)
    staging = stage(texts, out)
    try:
        verify(inv, staging, cluster, declarations.report)
        commit(staging, out)
    except BaseException:
        discard(staging)
        raise
    declarations.report.written = list(texts)
    return declarations.report
