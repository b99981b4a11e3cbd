"""Every field of every declaration kind has a direction, and every widening change is a risk.

The schema walk reads the JSON Schemas (the package's and the files under schemas/), so a field
added to any kind without a direction in gpugov/plan/directions.py fails here. Then, for every field
declared WIDENS, a change in its widening direction must raise the table's rule and the opposite
change must not; finally the changes the review gate exists for run through `gpugov plan` on a real
git repository of the example org.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpugov.declarations.schema import SPECS, kind_schema
from gpugov.plan.directions import DIRECTIONS, REPORTED_ELSEWHERE, WHENS, Direction
from gpugov.plan.fields import ELEMENT_KEYS, schema_fields
from gpugov.plan.widening import field_risks, widened
from tests.helpers.repos import REPO, write
from tests.unit.test_plan import edit, make_repo, plan_json

KINDS = sorted(SPECS)


def test_every_field_of_every_kind_has_a_direction() -> None:
    missing = [f"{kind}: {field}" for kind in KINDS for field in schema_fields(kind)
               if field not in DIRECTIONS.get(kind, {})]
    assert not missing, "fields without a direction in gpugov/plan/directions.py:\n" + "\n".join(missing)


def test_the_table_names_only_fields_the_schemas_have() -> None:
    stale = [f"{kind}: {field}" for kind, fields in DIRECTIONS.items() for field in fields
             if field not in schema_fields(kind)]
    assert not stale and set(DIRECTIONS) == set(KINDS)


def test_every_widening_field_says_when_and_which_rule() -> None:
    for kind, fields in DIRECTIONS.items():
        for field, entry in fields.items():
            if entry.direction is Direction.WIDENS:
                assert entry.when in WHENS and entry.rule is not None, f"{kind} {field}"
            else:
                assert entry.when is None and entry.rule is None, f"{kind} {field}"


# The fields that give nobody more power, each argued: text, and what the idle report calls idle.
# Who pays (costCenter, a pool's price) is not here: a tenant's own reviewers must not move its bill (GP027).
# Declaring another field neutral means adding it here, where a reviewer sees it.
NEUTRAL = {"AcceleratorModel:spec.description", "AcceleratorModel:spec.sources.*", "Cluster:spec.description",
           "Department:spec.description", "GPUPool:spec.description", "Guardrails:spec.idle.utilizationBelowPercent",
           "Guardrails:spec.idle.window", "PriorityClass:spec.description", "Tenant:spec.description",
           # when `gpugov profile` advises: words for the users
           "Guardrails:spec.profile.lowActivityBelowPercent", "Guardrails:spec.profile.adviseIdleSharePercent",
           "Guardrails:spec.profile.hostIOBytesPerSecond", "Guardrails:spec.profile.memoryHeadroomPercent",
           # why tenant namespaces enforce less than restricted, why a tenant may do more: words for the reviewers
           "Guardrails:spec.isolation.podSecurityReason", "Tenant:spec.allow.reason",
           # who approved a grant or window, and why: words for the reviewers, never in an object
           "QuotaGrant:spec.reason", "QuotaGrant:spec.approvedBy", "QuotaWindow:spec.reason",
           "QuotaWindow:spec.approvedBy",
           # what a fleet is for: words for the readers
           "Fleet:spec.description"}


def test_only_the_argued_fields_widen_nothing() -> None:
    quiet = {f"{kind}:{field}" for kind, fields in DIRECTIONS.items() for field, entry in fields.items()
             if entry.direction is not Direction.WIDENS and not field.startswith("metadata.")}
    assert quiet == NEUTRAL


def test_declaration_metadata_labels_and_annotations_reach_no_object(tmp_path: Path) -> None:
    """Why metadata.labels.* and metadata.annotations.* are neutral: compile never reads them."""
    import shutil

    from gpugov.app.desired import desired_state
    from tests.helpers.repos import BASE

    shutil.copytree(BASE, tmp_path / "org")
    before = desired_state(tmp_path / "org").objects
    edit(tmp_path / "org", "tenants/alpha.yaml", "  name: alpha\n",
         "  name: alpha\n  labels: {tier: gold}\n  annotations: {gpugov.io/adopt: argocd}\n")
    assert desired_state(tmp_path / "org").objects == before


@pytest.mark.parametrize("path", sorted((REPO / "schemas").glob("*.json")), ids=lambda p: p.name)
def test_every_field_of_the_schema_files_has_a_direction(path: Path) -> None:
    """schemas/*.json, what editors and readers of the repository see, walked as well (gpugov itself
    validates with the package's schemas, never with these files, which a pull request could edit)."""
    schema = json.loads(path.read_text())
    kind = schema["properties"]["kind"]["const"]
    missing = [field for field in schema_fields(kind, schema) if field not in DIRECTIONS[kind]]
    assert not missing, f"{path.name}: fields without a direction: {missing}"


# -- every WIDENS field, changed in its widening direction, is a risk of its rule ----------------------

UNSET = object()


def _branch(schema: dict[str, Any]) -> dict[str, Any]:
    for branch in schema.get("anyOf", ()):
        if "properties" in branch:
            return branch
    return schema


def _leaf_kind(schema: dict[str, Any]) -> str:
    if schema.get("type") == "array":
        return "list"
    if "enum" in schema:
        return "enum"
    if schema.get("type") == "boolean":
        return "bool"
    if schema.get("type") in ("integer", "number") or any(b.get("type") == "number" for b in schema.get("anyOf", ())):
        return "number"
    return "string"


def _values(when: str, leaf: dict[str, Any], entry: bool) -> tuple[Any, Any]:
    """(before, after) for a change of `leaf` in the direction `when`."""
    shape = _leaf_kind(leaf)
    if shape == "list":
        return {"added": (["a"], ["a", "b"]), "removed": (["a", "b"], ["a"])}.get(when, (["a"], ["b"]))
    sample = {"enum": leaf.get("enum", ["x"])[0], "bool": True, "number": 1, "string": "a"}[shape]
    if when in ("added", "removed") and entry:
        return (UNSET, sample) if when == "added" else (sample, UNSET)
    if shape == "bool":
        return {"up": (False, True), "down": (True, False)}.get(when, (True, False))
    if shape == "enum":
        return leaf["enum"][0], leaf["enum"][1]
    if shape == "string":
        return ("a", UNSET) if when == "removed" else (UNSET, "a") if when == "added" else ("a", "b")
    return {"up": (1, 2), "up-or-unset": (1, UNSET), "down": (2, 1), "added": (UNSET, 1),
            "removed": (1, UNSET)}.get(when, (1, 2))


def documents(kind: str, field: str, when: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two versions of a declaration of `kind` that differ only at `field`, in direction `when`."""
    segments = field.split(".")
    docs: list[dict[str, Any]] = [{}, {}]
    cursors: list[Any] = list(docs)
    node = kind_schema(kind)
    prefix = ""
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        node = _branch(node)
        if seg.endswith("[]"):
            name = seg[:-2]
            prefix = f"{prefix}.{name}" if prefix else name
            items = node["properties"][name]["items"]
            element = {key: "k" for key in ELEMENT_KEYS[f"{prefix}[]"]}
            if last:  # the element itself: present on one side only
                added = when != "removed"
                cursors[0][name] = [] if added else [element]
                cursors[1][name] = [dict(element)] if added else []
                return docs[0], docs[1]
            for side in (0, 1):
                cursors[side][name] = [dict(element)]
                cursors[side] = cursors[side][name][0]
            node = items
            prefix += "[]"
            continue
        key, sub = ("x", node["additionalProperties"]) if seg == "*" else (seg, node["properties"][seg])
        prefix = f"{prefix}.{seg}" if prefix else seg
        if last:
            before, after = _values(when, _branch(sub) if "properties" in _branch(sub) else sub, seg == "*")
            for side, value in ((0, before), (1, after)):
                if value is not UNSET:
                    cursors[side][key] = value
            return docs[0], docs[1]
        for side in (0, 1):
            cursors[side] = cursors[side].setdefault(key, {})
        node = sub
    raise AssertionError(field)


WIDENING = [(kind, field) for kind in KINDS for field, entry in DIRECTIONS[kind].items()
            if entry.direction is Direction.WIDENS]


@pytest.mark.parametrize(("kind", "field"), WIDENING, ids=[f"{k}:{f}" for k, f in WIDENING])
def test_a_widening_change_of_every_widening_field_is_a_risk(kind: str, field: str) -> None:
    entry = DIRECTIONS[kind][field]
    before, after = documents(kind, field, entry.when or "changed")
    assert entry.rule is not None
    risks = field_risks(kind, "x", before, after)
    if entry.rule.id in REPORTED_ELSEWHERE:
        # plan/diff.py's own check words these (test_plan.py and the real-repository tests below)
        assert risks == [] and widened(entry.when or "changed", 1, 2 if entry.when != "down" else 0)
        return
    assert [r.rule for r in risks] == [entry.rule.id], (before, after, risks)
    if entry.when != "changed":  # the opposite change narrows: no risk
        assert field_risks(kind, "x", after, before) == [], (after, before)


def test_widened_reads_unset_limits_as_unlimited() -> None:
    assert widened("up-or-unset", 4, None) and widened("up-or-unset", 4, 5)
    assert not widened("up-or-unset", None, 4) and not widened("up-or-unset", 5, 4)
    assert widened("up", None, "1Gi") and widened("up", "512Mi", "1Gi") and not widened("up", "1Gi", "1024Mi")
    assert widened("added", ("a",), ("a", "b")) and not widened("added", ("a", "b"), ("b",))
    assert widened("removed", ("a", "b"), ("b",)) and widened("down", True, False)


# -- the changes the gate exists for, through `gpugov plan` on a real repository -----------------------

def rules(capsys: pytest.CaptureFixture[str], repo: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for r in plan_json(capsys, repo)["risks"]:
        found.setdefault(r["rule"], []).append(r["message"])
    return found


def _add_department(repo: Path, name: str) -> None:
    path = repo / "tenants/departments.yaml"
    path.write_text(path.read_text() + f"---\napiVersion: gpugov.io/v1alpha1\nkind: Department\n"
                    f"metadata:\n  name: {name}\nspec: {{}}\n")


CASES = {
    "namespace-claimed": (None, lambda r: edit(r, "tenants/alpha.yaml", "namespaces: [alpha]",
                                               "namespaces: [alpha, argocd]"),
                          "GP012", "Tenant alpha: spec.namespaces adds argocd: its RoleBindings give the tenant's owners"),
    "namespace-adopted": (lambda r: edit(r, "tenants/alpha.yaml", "namespaces: [alpha]", "namespaces: [alpha, argocd]"),
                          lambda r: edit(r, "tenants/alpha.yaml", "namespaces: [alpha, argocd]",
                                         "namespaces: [alpha, argocd]\n  adoptNamespaces: [argocd]"),
                          "GP013", "Tenant alpha: spec.adoptNamespaces adds argocd: gpugov apply takes over"),
    "quota-raised": (None, lambda r: edit(r, "tenants/alpha.yaml", "1g.10gb: 14", "1g.10gb: 15"),
                     "GP014", "Tenant alpha: spec.quotas[pool=a100].resources.1g.10gb.nominal 14 -> 15"),
    "borrowing-unbounded": (None, lambda r: edit(r, "tenants/alpha.yaml", "borrowingLimit: 4, ", ""),
                            "GP015", "Tenant alpha: spec.quotas[pool=h100].resources.accelerators.borrowingLimit "
                            "4 -> unset"),
    "borrowing-raised": (None, lambda r: edit(r, "tenants/alpha.yaml", "borrowingLimit: 4", "borrowingLimit: 6"),
                         "GP015", "Tenant alpha: spec.quotas[pool=h100].resources.accelerators.borrowingLimit 4 -> 6"),
    "lending-raised": (None, lambda r: edit(r, "tenants/alpha.yaml", "lendingLimit: 4", "lendingLimit: 6"),
                       "GP016", "Tenant alpha: spec.quotas[pool=h100].resources.accelerators.lendingLimit 4 -> 6"),
    "priority-class-added": (None, lambda r: write(r, "policies/urgent.yaml", "apiVersion: gpugov.io/v1alpha1\n"
                                                   "kind: PriorityClass\nmetadata:\n  name: urgent\nspec:\n"
                                                   "  value: 500\n"),
                             "GP021", "new PriorityClass urgent (spec.value 500)"),
    "priority-raised": (None, lambda r: edit(r, "policies/priorities.yaml", "value: 100\n", "value: 900\n"),
                        "GP017", "PriorityClass batch: spec.value 100 -> 900"),
    "made-non-preemptible": (lambda r: write(r, "policies/mid.yaml", "apiVersion: gpugov.io/v1alpha1\n"
                                             "kind: PriorityClass\nmetadata:\n  name: mid\nspec:\n  value: 500\n"),
                             lambda r: edit(r, "policies/mid.yaml", "  value: 500\n",
                                            "  value: 500\n  preemptible: false\n"),
                             "GP004", "non-preemptible priority class mid changes"),
    "queue-added": (None, lambda r: edit(r, "tenants/alpha.yaml", "    - {name: main, namespace: alpha, "
                                         "priorityClasses: [batch]}", "    - {name: main, namespace: alpha, "
                                         "priorityClasses: [batch]}\n    - {name: more, namespace: alpha}"),
                    "GP018", "Tenant alpha: spec.queues[namespace=alpha,name=more] added"),
    "node-taken": (lambda r: edit(r, "hardware/h100.yaml", "    - name: h100-b\n",
                                  "    - name: h100-b\n    - name: spare\n"),
                   lambda r: (edit(r, "hardware/h100.yaml", "    - name: spare\n", ""),
                              edit(r, "hardware/a100.yaml", "    - name: a100-b\n", "    - name: a100-b\n"
                                   "    - name: spare\n")),
                   "GP019", "GPUPool a100 gains node spare, taken from pool h100"),
    "fair-sharing": (None, lambda r: edit(r, "tenants/alpha.yaml", "  costCenter: CC-1\n",
                                          "  costCenter: CC-1\n  fairSharing: {weight: 2}\n"),
                     "GP009", "tenant alpha: fairSharing weight goes from 1 to 2"),
    "owners": (None, lambda r: edit(r, "tenants/beta.yaml", "owners: {groups: [beta-team]}",
                                    "owners: {groups: [beta-team, everyone]}"),
               "GP020", "Tenant beta: spec.owners.groups adds everyone"),
    "department": (lambda r: _add_department(r, "ops"),
                   lambda r: edit(r, "tenants/alpha.yaml", "department: rnd", "department: ops"),
                   "GP008", "tenant alpha moves from department rnd to ops"),
    "guardrails-deleted": (None, lambda r: (r / "policies/guardrails.yaml").unlink(),
                           "GP022", "Guardrails default: spec.platformTeam removes @lab/platform"),
    "taint-removed": (lambda r: edit(r, "hardware/h100.yaml", "  nodeResources:",
                                     "  taints: [{key: gpu, value: h100, effect: NoSchedule}]\n  nodeResources:"),
                      lambda r: edit(r, "hardware/h100.yaml", "  taints: [{key: gpu, value: h100, effect: NoSchedule}]\n",
                                     ""),
                      "GP025", "GPUPool h100: spec.taints[key=gpu,effect=NoSchedule] removed"),
    "objects-adopted": (None, lambda r: edit(r, "policies/clusters.yaml", "backend: kueue",
                                             "backend: kueue\n  adopt: [{kind: ClusterQueue, name: alpha}]"),
                        "GP026", "Cluster lab: spec.adopt[kind=ClusterQueue,name=alpha] added: gpugov apply takes"),
    "cost-center-moved": (None, lambda r: edit(r, "tenants/alpha.yaml", "  costCenter: CC-1", "  costCenter: CC-2"),
                          "GP027", "Tenant alpha: spec.costCenter CC-1 -> CC-2"),
    "cost-center-dropped": (lambda r: edit(r, "policies/guardrails.yaml", "capacityRatio: 1.0",
                                           "capacityRatio: 1.0\n  requireCostCenter: false"), lambda r: edit(r, "tenants/alpha.yaml", "  costCenter: CC-1\n", ""),
                            "GP027", "Tenant alpha: spec.costCenter CC-1 -> unset"),
    "department-pays": (None, lambda r: edit(r, "tenants/departments.yaml", "spec: {}", "spec: {costCenter: CC-9}"),
                        "GP027", "Department rnd: spec.costCenter unset -> CC-9"),
    "price-lowered": (lambda r: edit(r, "hardware/h100.yaml", "  nodeResources:",
                                     "  pricePerAcceleratorHour: 2.5\n  nodeResources:"),
                      lambda r: edit(r, "hardware/h100.yaml", "pricePerAcceleratorHour: 2.5", "pricePerAcceleratorHour: 0.1"),
                      "GP027", "GPUPool h100: spec.pricePerAcceleratorHour 2.5 -> 0.1"),
    "cluster-image": (lambda r: edit(r, "policies/clusters.yaml", "backend: kueue",
                                     "backend: kueue\n  operations: {image: 'registry.example.com/gpugov:1'}"),
                      lambda r: edit(r, "policies/clusters.yaml", "gpugov:1", "gpugov:evil"),
                      "GP024", "Cluster lab: spec.operations.image registry.example.com/gpugov:1 -> "
                      "registry.example.com/gpugov:evil"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_plan_reports_each_widening_change(tmp_path: Path, capsys, case: str) -> None:
    prepare, change, rule, message = CASES[case]
    repo = make_repo(tmp_path, change, prepare)
    found = rules(capsys, repo)
    assert any(m.startswith(message) for m in found.get(rule, [])), found


def test_narrowing_changes_are_no_risk(tmp_path: Path, capsys) -> None:
    def narrow(repo: Path) -> None:
        edit(repo, "tenants/beta.yaml", "namespaces: [beta, beta-dev]", "namespaces: [beta]")
        edit(repo, "tenants/alpha.yaml", "borrowingLimit: 4", "borrowingLimit: 2")
        edit(repo, "policies/priorities.yaml", "value: 100\n", "value: 50\n")
        edit(repo, "tenants/alpha.yaml", "  costCenter: CC-1", "  costCenter: CC-1\n  description: narrower")

    repo = make_repo(tmp_path, narrow)
    found = rules(capsys, repo)
    assert set(found) <= {"GP001"}, found  # the lower borrowing limit is a quota decrease, nothing widens


def test_a_new_tenant_is_one_risk_that_lists_what_it_claims(tmp_path: Path, capsys) -> None:
    gamma = ("apiVersion: gpugov.io/v1alpha1\nkind: Tenant\nmetadata:\n  name: gamma\nspec:\n  department: rnd\n"
             "  owners: {users: [g@example.com]}\n  costCenter: CC-3\n  namespaces: [gamma, monitoring]\n")
    repo = make_repo(tmp_path, lambda r: write(r, "tenants/gamma.yaml", gamma))
    found = rules(capsys, repo)
    assert list(found) == ["GP021"] and len(found["GP021"]) == 1
    assert found["GP021"][0].startswith("new Tenant gamma (") and "spec.namespaces [gamma, monitoring]" in found["GP021"][0]
    assert "gpugov apply refuses any of its namespaces that exists on the cluster without being gpugov's" in \
        found["GP021"][0]
