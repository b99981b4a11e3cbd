"""Node taints: gpugov replaces its own and keeps everyone else's (the list is atomic for SSA)."""

from __future__ import annotations

from gpugov.apply import TAINTS_ANNOTATION, merged_taints, taint_annotation, without_taints

ADMIN = {"key": "maintenance", "value": "planned", "effect": "PreferNoSchedule"}
POOL = {"key": "gpugov.io/pool", "value": "h100", "effect": "NoSchedule"}


def test_declared_taints_join_the_others() -> None:
    assert merged_taints([ADMIN], "", [POOL]) == [ADMIN, POOL]
    assert merged_taints([ADMIN, POOL], "gpugov.io/pool=h100:NoSchedule", [POOL]) == [ADMIN, POOL]


def test_a_changed_value_replaces_gpugovs_taint() -> None:
    new = {**POOL, "value": "h100-sxm"}
    assert merged_taints([POOL, ADMIN], "gpugov.io/pool=h100:NoSchedule", [new]) == [ADMIN, new]


def test_a_taint_gpugov_no_longer_declares_is_removed_others_stay() -> None:
    assert merged_taints([ADMIN, POOL], "gpugov.io/pool=h100:NoSchedule", []) == [ADMIN]
    # without the record, a taint that is not gpugov's is never touched
    assert merged_taints([ADMIN, POOL], "", []) == [ADMIN, POOL]


def test_the_ssa_body_carries_labels_and_the_record_not_the_taints() -> None:
    patch = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": {"a": "b"}},
             "spec": {"taints": [POOL]}}
    body = without_taints(patch)
    assert "spec" not in body and body["metadata"]["labels"] == {"a": "b"}
    assert body["metadata"]["annotations"][TAINTS_ANNOTATION] == taint_annotation(patch) == "gpugov.io/pool=h100:NoSchedule"
    assert "annotations" not in patch["metadata"]  # the compiled object is left as it was
