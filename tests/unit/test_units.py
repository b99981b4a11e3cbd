"""Unit tests: quantities, MIG geometry, loader locations, compiled-object conformance."""

from __future__ import annotations

import copy
from decimal import Decimal

import pytest

from gpugov.catalog import MODELS, layout_fits, mig_resource_name
from gpugov.declarations.loader import LoadError, parse_documents
from gpugov.kube.quantity import QuantityError, format_quantity, parse_quantity, quantities_equal
from gpugov.policy.conformance import check_objects


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (8, Decimal(8)),
        ("8", Decimal(8)),
        ("8000m", Decimal(8)),
        ("64Gi", Decimal(64 * 2**30)),
        ("1.5", Decimal("1.5")),
        ("2Ti", Decimal(2 * 2**40)),
        ("1e3", Decimal(1000)),
        ("500m", Decimal("0.5")),
        ("3k", Decimal(3000)),
    ],
)
def test_parse_quantity(text: object, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("bad", ["8 GB", "", "Gi", True, None, "1.2.3", "-x"])
def test_parse_quantity_rejects(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)


def test_format_quantity_is_canonical() -> None:
    assert format_quantity(Decimal(8)) == "8"
    assert format_quantity(parse_quantity("4096Gi")) == "4Ti"
    assert format_quantity(parse_quantity("1.5")) == "1500m"
    assert format_quantity(Decimal(1000)) == "1000"
    assert quantities_equal("8", 8) and quantities_equal("8000m", "8") and not quantities_equal("8", "9")


@pytest.mark.parametrize(
    ("model", "mix", "fits"),
    [
        ("A100-80GB", {"1g.10gb": 7}, True),
        ("A100-80GB", {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}, True),
        ("A100-80GB", {"4g.40gb": 1, "3g.40gb": 1}, True),
        ("A100-80GB", {"3g.40gb": 2}, True),
        ("A100-80GB", {"2g.20gb": 3, "1g.10gb": 1}, True),
        ("A100-80GB", {"1g.20gb": 4}, True),
        ("A100-80GB", {"7g.80gb": 1, "1g.10gb": 1}, False),
        ("A100-80GB", {"1g.10gb": 8}, False),
        ("A100-80GB", {"1g.20gb": 3, "2g.20gb": 1, "1g.10gb": 1}, False),
        ("A100-80GB", {"1g.10gb+me": 1, "1g.10gb": 6}, True),
        ("A100-40GB", {"1g.10gb": 4}, True),
        ("A100-40GB", {"1g.10gb": 5}, False),
        ("H200", {"3g.71gb": 1, "2g.35gb": 1, "1g.18gb": 2}, True),
        ("A30", {"2g.12gb": 1, "1g.6gb": 2}, True),
        ("A30", {"2g.12gb": 2, "1g.6gb": 1}, False),
    ],
)
def test_mig_layouts(model: str, mix: dict[str, int], fits: bool) -> None:
    accelerator = MODELS[model]
    assert (layout_fits(accelerator.mig_geometry, accelerator.mig_profiles, mix) is None) is fits


def test_profile_names_are_keyed_on_the_model() -> None:
    assert MODELS["A100-80GB"].mig_profiles["1g.10gb"].max_count == 7
    assert MODELS["A100-40GB"].mig_profiles["1g.10gb"].max_count == 4
    assert mig_resource_name("1g.10gb+me") == "nvidia.com/mig-1g.10gb.me"
    assert MODELS["Ascend-910B"].resource == "huawei.com/Ascend910" and not MODELS["Ascend-910B"].mig_capable


def test_loader_keeps_locations_and_rejects_duplicates() -> None:
    (doc,) = parse_documents("a:\n  b:\n    - x\n    - {c: 1}\n", "f.yaml")
    assert doc.data == {"a": {"b": ["x", {"c": 1}]}}
    assert str(doc.locate(("a", "b", 1, "c"))) == "f.yaml:4:11"
    assert str(doc.locate(("a", "b", 1, "c"), key=True)) == "f.yaml:4:8"
    assert str(doc.locate(("a", "missing"))) == "f.yaml:2:3"
    with pytest.raises(LoadError) as err:
        list(parse_documents("a: 1\nb: 2\na: 3\n", "f.yaml"))
    assert err.value.finding.rule == "GG002" and str(err.value.finding.location) == "f.yaml:3:1"


def test_loader_supports_anchors_and_merge_keys() -> None:
    (doc,) = parse_documents("base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  y: 3\n", "f.yaml")
    assert doc.data["other"] == {"x": 1, "y": 3}


CQ = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue",
    "metadata": {"name": "t", "annotations": {"gpugov.io/source": "tenants/t.yaml:3"}},
    "spec": {
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu", "cpu"],
                "flavors": [
                    {
                        "name": "a",
                        "resources": [
                            {"name": "nvidia.com/gpu", "nominalQuota": "1"},
                            {"name": "cpu", "nominalQuota": "1"},
                        ],
                    }
                ],
            }
        ]
    },
}


def test_conformance_accepts_a_good_queue() -> None:
    assert check_objects([CQ]) == []


def test_conformance_flavor_resource_order() -> None:
    bad = copy.deepcopy(CQ)
    bad["spec"]["resourceGroups"][0]["flavors"][0]["resources"].reverse()
    (finding,) = check_objects([bad])
    assert finding.rule == "GG081" and str(finding.location) == "tenants/t.yaml:3:1"


def test_conformance_resource_and_flavor_in_two_groups() -> None:
    bad = copy.deepcopy(CQ)
    bad["spec"]["resourceGroups"].append(copy.deepcopy(bad["spec"]["resourceGroups"][0]))
    assert sorted(f.rule for f in check_objects([bad])) == ["GG082", "GG082", "GG083"]


def test_conformance_limits_and_duplicates() -> None:
    big = copy.deepcopy(CQ)
    group = big["spec"]["resourceGroups"][0]
    group["flavors"] = [
        {"name": f"f{i}", "resources": copy.deepcopy(group["flavors"][0]["resources"])} for i in range(65)
    ]
    assert {f.rule for f in check_objects([big])} == {"GG080"}
    assert [f.rule for f in check_objects([CQ, CQ])] == ["GG084", "GG084"]
