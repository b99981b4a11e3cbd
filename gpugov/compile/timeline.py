"""The instant compiled objects are for (issue #27): where quotas change with time, every object gpugov
owns says for which span of instants it was compiled (gpugov.io/desired-at, declarations.timeline's
desired_at). A repository without a QuotaGrant or QuotaWindow compiles exactly as before, unmarked."""

from __future__ import annotations

from gpugov.declarations.model import Model
from gpugov.declarations.timeline import desired_at
from gpugov.kube.objects import ANNOTATION_DESIRED_AT, Object


def mark_instant(model: Model, objects: list[Object]) -> None:
    """Annotate `objects` in place with the span `model` holds for; Nodes (gpugov patches their
    labels and taints, it does not own them) stay unmarked."""
    span = desired_at(model)
    if span is None:
        return
    for obj in objects:
        if obj["kind"] != "Node":
            obj["metadata"].setdefault("annotations", {})[ANNOTATION_DESIRED_AT] = span
