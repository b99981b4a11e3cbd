"""Conformance: every rendered Kueue/Volcano object against the upstream CRD schema and its CEL rules.

The CRDs are the ones the sandbox installs (`gpugov.sandbox.crds.crd_dirs()`): Kueue v0.17.0's and
Volcano v1.14.1's own, which tools/build copies from the Go modules beside the binaries it builds, never
copied here. Without Go (nor built binaries) the tests fail; they never skip.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.compile import compile
from gpugov.sandbox.crds import kueue_crd_dir, volcano_crd_dir
from tests.helpers.crd_conformance import (
    CrdSet,
    Stats,
    compile_rule,
    crd_dirs,
    go_regex,
    split_api_version,
    to_json_schema,
    validate_object,
)
from tests.helpers.repos import REPO

CASES = [("east", "kueue"), ("east", "volcano"), ("west", "kueue"), ("west", "volcano")]
# API groups with no CRD of Kueue's or Volcano's: core objects, skipped on purpose
CORE_KINDS = {
    ("v1", "Namespace"),
    ("v1", "ResourceQuota"),
    ("v1", "ConfigMap"),
    ("v1", "Node"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
    # gpugov's own operations (drift CronJob, agent DaemonSet and their RBAC): built-in kinds
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("batch/v1", "CronJob"),
    ("apps/v1", "DaemonSet"),
    # the admission policies that make queues binding: built-in, proven on the real apiserver (e2e)
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"),
}
EXPECTED_KINDS = {
    "kueue": {"WorkloadPriorityClass", "ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue"},
    "volcano": {"Queue"},
}
EXPECTED_VERSION = {"kueue.x-k8s.io": "v1beta2", "scheduling.volcano.sh": "v1beta1"}


@pytest.fixture(scope="module")
def crds() -> CrdSet:
    folders = crd_dirs()  # tools/build kueue / volcano: quick when cached; raises (never skips) without Go
    loaded = CrdSet.load(folders)
    assert loaded.versions, f"{folders} hold no CustomResourceDefinitions"
    return loaded


@pytest.fixture(scope="module")
def compiled() -> dict[tuple[str, str], list[dict[str, Any]]]:
    result = validate_repo(REPO)
    assert result.model is not None and result.findings == []
    return {(cluster, backend): compile(result.model, backend=backend, cluster=cluster) for cluster, backend in CASES}


def first(objects: list[dict[str, Any]], kind: str, predicate: Any = None) -> dict[str, Any]:
    """A deep copy of the first compiled object of `kind` (matching `predicate`)."""
    for obj in objects:
        if obj["kind"] == kind and (predicate is None or predicate(obj)):
            return copy.deepcopy(obj)
    raise AssertionError(f"compile emitted no {kind} to break")


def assert_reported(errors: list[str], *needles: str) -> None:
    assert any(all(n in e for n in needles) for e in errors), f"expected an error with {needles}, got {errors}"


# ------------------------------------------------------------------------------------------
# 1. everything gpugov renders conforms


@pytest.mark.parametrize(("cluster", "backend"), CASES)
def test_rendered_objects_conform_to_crds(crds, compiled, cluster: str, backend: str) -> None:
    stats = Stats()
    errors: list[str] = []
    emitted: Counter[str] = Counter()
    skipped: set[tuple[str, str]] = set()
    for obj in compiled[cluster, backend]:
        if not crds.covers(obj):
            skipped.add((obj["apiVersion"], obj["kind"]))
            continue
        emitted[obj["kind"]] += 1
        group, version = split_api_version(obj["apiVersion"])
        assert version == EXPECTED_VERSION[group], f"{obj['kind']}/{obj['metadata']['name']}: {obj['apiVersion']}"
        crd = crds.lookup(obj)
        assert crd is not None and not crd.deprecated, f"{obj['apiVersion']} {obj['kind']}"
        errors += validate_object(obj, crds, stats=stats)
    assert errors == [], "\n".join(errors)
    assert stats.unsupported == []
    # nothing was skipped that has (or should have) a CRD
    assert skipped <= CORE_KINDS, skipped - CORE_KINDS
    # every CRD-backed kind compile emits was checked, and the backend's kinds were emitted at all
    assert EXPECTED_KINDS[backend] <= set(emitted), EXPECTED_KINDS[backend] - set(emitted)
    assert stats.objects == emitted
    assert all(count > 0 for count in stats.objects.values())
    if backend == "kueue":
        assert stats.rules_evaluated["ClusterQueue"] > 0
        assert stats.rules_evaluated["ResourceFlavor"] > 0
        assert stats.transition_rules_skipped["LocalQueue"] == emitted["LocalQueue"]


@pytest.mark.parametrize(("cluster", "backend"), CASES)
def test_rerendered_objects_pass_transition_rules(crds, compiled, cluster: str, backend: str) -> None:
    """An unchanged re-render applied over itself (an update) passes the immutability rules too."""
    stats = Stats()
    errors = [
        e
        for obj in compiled[cluster, backend]
        if crds.covers(obj)
        for e in validate_object(obj, crds, old=obj, stats=stats)
    ]
    assert errors == [], "\n".join(errors)
    assert stats.unsupported == [] and not stats.transition_rules_skipped
    if backend == "kueue":
        assert "self == oldSelf" in stats.distinct_rules["LocalQueue"]


def test_every_crd_version_converts(crds) -> None:
    """The schema converter knows every keyword the CRDs use, and every CEL rule parses."""
    for crd in crds.versions.values():
        crd.validator()  # raises on a keyword to_json_schema does not handle
    rules = []

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            rules.extend(r["rule"] for r in node.get("x-kubernetes-validations", []))
            for value in node.values():
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    for crd in crds.versions.values():
        collect(crd.schema)
    assert rules
    unsupported = {rule: compile_rule(rule).unsupported for rule in rules if compile_rule(rule).unsupported}
    assert unsupported == {}
    assert not any("quantity(" in rule for rule in rules)  # no Kubernetes quantity library needed


# ------------------------------------------------------------------------------------------
# 2. the checker catches what the API server would reject


@pytest.fixture(scope="module")
def east_kueue(compiled) -> list[dict[str, Any]]:
    return compiled["east", "kueue"]


def test_borrowing_limit_without_cohort(crds, east_kueue) -> None:
    cq = first(east_kueue, "ClusterQueue")
    cq["spec"].pop("cohortName", None)
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = "1"
    assert_reported(validate_object(cq, crds), "spec:", "borrowingLimit must be nil when cohort is empty")


def test_flavor_resources_must_match_covered_resources(crds, east_kueue) -> None:
    cq = first(east_kueue, "ClusterQueue", lambda o: len(o["spec"]["resourceGroups"][0]["coveredResources"]) > 1)
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()
    assert_reported(
        validate_object(cq, crds),
        "spec.resourceGroups[0]:",
        "flavors must have the same number of resources as the coveredResources",
    )


def test_reclaim_never_with_borrow_within_cohort(crds, east_kueue) -> None:
    cq = first(east_kueue, "ClusterQueue")
    cq["spec"]["preemption"] = {"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}
    assert_reported(
        validate_object(cq, crds), "spec.preemption:", "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"
    )


def test_reclaim_default_is_never(crds, east_kueue) -> None:
    """CEL sees the defaulted object: an omitted reclaimWithinCohort defaults to Never."""
    cq = first(east_kueue, "ClusterQueue")
    cq["spec"]["preemption"] = {"borrowWithinCohort": {"policy": "LowerPriority"}}
    assert_reported(validate_object(cq, crds), "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never")


@pytest.mark.parametrize("labels", [None, {}])
def test_topology_flavor_needs_node_labels(crds, east_kueue, labels) -> None:
    rf = first(east_kueue, "ResourceFlavor", lambda o: "topologyName" in o["spec"])
    if labels is None:
        del rf["spec"]["nodeLabels"]  # absent: the rule errors ("no such key"), which rejects too
    else:
        rf["spec"]["nodeLabels"] = labels
    assert_reported(validate_object(rf, crds), "spec:", "at least one nodeLabel is required when topology is set")


def test_unknown_field_is_reported(crds, east_kueue) -> None:
    cq = first(east_kueue, "ClusterQueue")
    cq["spec"]["borrowingLimits"] = {"nvidia.com/gpu": 4}
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominal"] = "1"
    errors = validate_object(cq, crds)
    assert_reported(errors, "ClusterQueue/", "spec: unknown field(s) 'borrowingLimits'")
    assert_reported(errors, "spec.resourceGroups[0].flavors[0].resources[0]: unknown field(s) 'nominal'")


def test_volcano_queue_weight_minimum(crds, compiled) -> None:
    queue = first(compiled["east", "volcano"], "Queue")
    queue["spec"]["weight"] = 0
    assert_reported(validate_object(queue, crds), "Queue/", "spec.weight:", "minimum of 1")


def test_wrong_enum_value(crds, east_kueue) -> None:
    cq = first(east_kueue, "ClusterQueue")
    cq["spec"]["queueingStrategy"] = "FIFO"
    assert_reported(validate_object(cq, crds), "spec.queueingStrategy:", "'FIFO' is not one of")


def test_hostname_must_be_the_lowest_topology_level(crds, east_kueue) -> None:
    topology = first(east_kueue, "Topology", lambda o: len(o["spec"]["levels"]) > 1)
    levels = topology["spec"]["levels"]
    topology["spec"]["levels"] = [{"nodeLabel": "kubernetes.io/hostname"}] + [
        level for level in levels if level["nodeLabel"] != "kubernetes.io/hostname"
    ]
    assert_reported(
        validate_object(topology, crds),
        "spec.levels:",
        "the kubernetes.io/hostname label can only be used at the lowest level of topology",
    )


def test_bad_quantity_and_types(crds, compiled, east_kueue) -> None:
    queue = first(compiled["east", "volcano"], "Queue", lambda o: "deserved" in o["spec"])
    queue["spec"]["deserved"]["nvidia.com/gpu"] = "4 GPUs"
    queue["spec"]["reclaimable"] = "yes"
    queue["spec"]["weight"] = 2.0
    errors = validate_object(queue, crds)
    assert_reported(errors, "spec.deserved[nvidia.com/gpu]:", "'4 GPUs' does not match")
    assert_reported(errors, "spec.reclaimable:", "is not of type 'boolean'")
    assert_reported(errors, "spec.weight:", "is not of type 'integer'")
    cq = first(east_kueue, "ClusterQueue")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "4\n"
    assert_reported(validate_object(cq, crds), "nominalQuota:", "does not match")  # RE2 `$` is end of text


def test_duplicate_list_map_keys_and_metadata(crds, east_kueue) -> None:
    cq = first(east_kueue, "ClusterQueue")
    flavors = cq["spec"]["resourceGroups"][0]["flavors"]
    flavors.append(copy.deepcopy(flavors[0]))
    cq["metadata"]["labels"]["gpugov.io/cost-center"] = "CC 1010"
    cq["metadata"]["namespace"] = "default"
    errors = validate_object(cq, crds)
    assert_reported(errors, "spec.resourceGroups[0].flavors:", "duplicate entry")
    assert_reported(errors, "metadata.labels[gpugov.io/cost-center]:", "not a valid label value")
    assert_reported(errors, "metadata.namespace:", "cluster-scoped")
    lq = first(east_kueue, "LocalQueue")
    del lq["metadata"]["namespace"]
    assert_reported(validate_object(lq, crds), "metadata.namespace: required for a namespaced resource")


def test_transition_rules_on_update(crds, east_kueue) -> None:
    old = first(east_kueue, "LocalQueue")
    new = copy.deepcopy(old)
    new["spec"]["clusterQueue"] = "elsewhere"
    assert validate_object(new, crds) == []  # a create: the immutability rule is not evaluated
    assert_reported(validate_object(new, crds, old=old), "spec.clusterQueue:", "field is immutable")
    rf_old = first(east_kueue, "ResourceFlavor", lambda o: "topologyName" in o["spec"])
    rf_new = copy.deepcopy(rf_old)
    rf_new["spec"]["nodeLabels"] = {"other": "label"}
    assert_reported(validate_object(rf_new, crds, old=rf_old), "nodeLabels are immutable when topologyName is set")


def test_unsupported_rule_never_passes_silently() -> None:
    doc = {
        "kind": "CustomResourceDefinition",
        "spec": {
            "group": "example.gpugov.io",
            "names": {"kind": "Thing"},
            "scope": "Cluster",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": {
                                    "type": "object",
                                    "properties": {"size": {"x-kubernetes-int-or-string": True}},
                                    "x-kubernetes-validations": [
                                        {"rule": "quantity(self.size).isGreaterThan(quantity('1'))", "message": "big"},
                                        {"rule": "self.size == oldSelf.size", "message": "immutable"},
                                        {"rule": "has(self.size)", "messageExpression": "'size is ' + 'missing'"},
                                    ],
                                },
                            },
                        }
                    },
                }
            ],
        },
    }
    crds = CrdSet([("thing.yaml", doc)])
    stats = Stats()
    thing = {"apiVersion": "example.gpugov.io/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": {"size": "2"}}
    errors = validate_object(thing, crds, stats=stats)
    assert_reported(errors, "Thing/t: Thing spec: unsupported CEL rule", "cel-python lacks: isGreaterThan, quantity")
    assert len(stats.unsupported) == 1 and stats.transition_rules_skipped["Thing"] == 1
    errors = validate_object({**thing, "spec": {}}, crds)
    assert_reported(errors, "spec: size is missing")
    assert validate_object({**thing, "apiVersion": "example.gpugov.io/v2"}, crds) == [
        "no CRD defines apiVersion 'example.gpugov.io/v2' kind 'Thing'"
    ]


# ------------------------------------------------------------------------------------------
# helpers


def test_the_crds_are_the_modules_the_sandbox_runs(crds) -> None:
    """Kueue's and Volcano's own CRDs, as the sandbox installs them; nothing from beside the checkout."""
    kueue, volcano = crd_dirs()
    assert (kueue, volcano) == (kueue_crd_dir(), volcano_crd_dir())
    for folder in (kueue, volcano):
        assert not folder.resolve().is_relative_to(REPO.parent / "shared")
    assert {"kueue.x-k8s.io", "scheduling.volcano.sh", "batch.volcano.sh"} <= crds.groups
    assert all(not crd.source.startswith("..") for crd in crds.versions.values())


def test_schema_conversion_details() -> None:
    quantity = {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": "^x$",
        "x-kubernetes-int-or-string": True,
    }
    assert to_json_schema(quantity) == {"anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": "^x$"}
    closed = to_json_schema({"type": "object", "properties": {"a": {"type": "string", "nullable": True}}})
    assert closed == {
        "type": "object",
        "properties": {"a": {"type": ["string", "null"]}},
        "additionalProperties": False,
    }
    preserved = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "x-kubernetes-preserve-unknown-fields": True,
    }
    assert "additionalProperties" not in to_json_schema(preserved)
    assert go_regex("^(?i)[a-z]+$") == r"^(?i:[a-z]+\Z)"
    assert go_regex(r"^[$]\$$") == r"^[$]\$\Z"
