"""Issue #23 item 9: "did you mean" is case-insensitive and knows GFD's label values; a misspelled
field is named with its likely meaning, and a typo is one error, not two."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.catalog.suggest import closest, closest_model
from tests.helpers.repos import BASE, overlay_repo, write

POOL = """\
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata:
  name: h20
spec:
  cluster: lab
  accelerator: {{model: {model}}}
  {per_node}: 8
  nodeResources: {{cpu: 128, memory: 1Ti}}
  nodes: [{{name: h20-01}}]
"""


@pytest.mark.parametrize(("typed", "meant"), [("h20", "H20"), ("NVIDIA-H20", "H20"), ("h2O", "H20"),
                                              ("nvidia-h100-80gb-hbm3", "H100-80GB"), ("a100-80gb", "A100-80GB")])
def test_model_suggestions_ignore_case_and_know_gfd_labels(typed: str, meant: str) -> None:
    assert closest_model(typed) == meant


def test_nothing_close_suggests_nothing() -> None:
    assert closest_model("quantum-annealer-9000") is None
    assert closest("acceleratorPerNode", ["acceleratorsPerNode", "accelerator", "nodes"]) == "acceleratorsPerNode"


def findings(tmp_path: Path, model: str, per_node: str = "acceleratorsPerNode") -> list[tuple[str, int, str]]:
    root = overlay_repo(tmp_path)
    write(root, "hardware/h20.yaml", POOL.format(model=model, per_node=per_node))
    return [(f.rule, f.location.line, f.message) for f in validate_repo(root).findings
            if f.location and f.location.file == "hardware/h20.yaml"]


def test_an_unknown_model_suggests_the_built_in_one(tmp_path: Path) -> None:
    (found,) = [f for f in findings(tmp_path, "h20") if f[0] == "GG046"] or [None]
    assert found is not None and found[2].endswith("is neither built in nor declared (did you mean H20?)")


def test_a_misspelled_field_is_one_error_with_a_suggestion(tmp_path: Path) -> None:
    found = findings(tmp_path, "H20", per_node="acceleratorPerNode")
    schema = [f for f in found if f[0] == "GG003"]
    assert len(schema) == 1, found
    assert schema[0][1] == 8
    assert schema[0][2].startswith("unknown field 'acceleratorPerNode' in spec of GPUPool (did you mean "
                                   "acceleratorsPerNode?")
    assert BASE.is_dir()
