"""Where a compiled object came from: its source annotation (written by `common.metadata`) read back
as the declaration's location, for the findings that report on compiled or live objects."""

from __future__ import annotations

from gpugov.findings import Location
from gpugov.kube.objects import ANNOTATION_SOURCE, Object


def source_location(obj: Object) -> Location:
    """The first declaration an object came from, from its source annotation."""
    source = obj.get("metadata", {}).get("annotations", {}).get(ANNOTATION_SOURCE, "")
    first = source.split(",")[0]
    file, _, line = first.rpartition(":")
    return Location(file, int(line), 1) if line.isdigit() else Location(source or "<compiled>")
