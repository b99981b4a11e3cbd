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


# -- issue #39 "Names people type": families, variants, GFD labels and NVML names ---------------------

from gpugov.catalog import MODELS  # noqa: E402
from gpugov.catalog.suggest import suggest_model  # noqa: E402


@pytest.mark.parametrize(("typed", "models", "others"), [
    # the cases: never a model of another family (other memory, other MIG profiles)
    ("H100", ("H100-80GB",), ("H100-NVL",)),  # not H200: the plain H100 is the 80GB one
    ("A100", ("A100-40GB", "A100-80GB"), ()),  # not A10: two memory sizes, the name does not choose
    ("A800", ("A800-80GB",), ()),  # not H800
    ("H800-80GB", ("H800",), ()),  # not A800-80GB
    ("910B", ("Ascend-910B",), ()),  # the vendor's short name
    ("NVIDIA H20", ("H20",), ()),  # the NVML name
    # more: NVML names and GFD labels of each kind, variants by memory and form factor
    ("NVIDIA H100 80GB HBM3", ("H100-80GB",), ()),
    ("NVIDIA A100-SXM4-40GB", ("A100-40GB",), ()),
    ("nvidia-a100-80gb-pcie", ("A100-80GB",), ()),
    ("Tesla V100-SXM2-32GB", ("V100-32GB",), ()),
    ("A100 80G", ("A100-80GB",), ()),
    ("a100_40gb", ("A100-40GB",), ()),
    ("H100-PCIe", ("H100-80GB",), ()),
    ("H100 SXM", ("H100-80GB",), ()),
    ("H100 NVL", ("H100-NVL",), ()),
    ("NVIDIA H200 NVL", ("H200",), ()),
    ("V100", ("V100-16GB", "V100-32GB"), ()),
    ("P100", ("P100-16GB",), ()),  # one plain variant in the catalog: its obvious meaning
    ("Ascend910", ("Ascend-910B", "Ascend-910C"), ()),  # the device plugin's label names both
    ("910C", ("Ascend-910C",), ()),
    ("K100", ("Hygon-K100",), ()),
    ("h1OO", ("H100-80GB",), ("H100-NVL",)),
    ("Tesla T4", ("T4",), ()),
])
def test_a_typed_model_means_its_family_and_variant(typed: str, models: tuple[str, ...], others: tuple[str, ...]) -> None:
    hint = suggest_model(typed)
    assert hint is not None, typed
    assert (hint.models, hint.others) == (models, others)


@pytest.mark.parametrize("typed", ["H300", "quantum-annealer-9000", "A2000", "MI250"])
def test_no_family_of_that_name_suggests_none_of_another(typed: str) -> None:
    assert suggest_model(typed) is None


def test_every_catalog_name_label_and_nvml_name_finds_its_model() -> None:
    for name, model in sorted(MODELS.items()):
        assert name in suggest_model(name.lower().replace("-", " ")).models, name  # type: ignore[union-attr]
        for label in model.gfd_products:
            for spelled in (label, label.replace("-", " ")):  # GFD's value and the NVML name
                assert name in suggest_model(spelled).models, spelled  # type: ignore[union-attr]


def test_the_finding_names_the_variants_with_their_memory(tmp_path: Path) -> None:
    (a100,) = [f for f in findings(tmp_path, "A100") if f[0] == "GG046"]
    assert a100[2].endswith("(did you mean one of A100-40GB, A100-80GB? They differ in memory and MIG profiles: "
                            "name the one your nodes have)")
    (h100,) = [f for f in findings(tmp_path / "h100", "H100") if f[0] == "GG046"]
    assert h100[2].endswith("(did you mean H100-80GB? H100 most likely means H100-80GB; the family's other "
                            "variants: H100-NVL (94GB))")


def test_init_answers_an_nvml_name_with_the_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpugov.cli import main

    assert main(["init", str(tmp_path / "org"), "--model", "NVIDIA H20"]) == 2
    err = capsys.readouterr().err
    assert "accelerator model 'NVIDIA H20' is neither built in nor declared (did you mean H20?)" in err
    assert not (tmp_path / "org").exists()
    assert main(["init", str(tmp_path / "org2"), "--model", "H100"]) == 2
    assert "did you mean H100-80GB? H100 most likely means H100-80GB" in capsys.readouterr().err


def test_a_declared_nvml_name_gets_the_hint_too(tmp_path: Path) -> None:
    """An NVML name has spaces, which no model name may have: the schema's error names the model."""
    (found,) = [f for f in findings(tmp_path, "NVIDIA H20") if f[0] == "GG003"]
    assert found[2] == "pool 'h20': accelerator model 'NVIDIA H20' is neither built in nor declared (did you mean H20?)"
