"""gpugov import keeps a ClusterQueue's scheduling fields (issue #40): flavorFungibility becomes the Tenant's
spec.flavorFungibility, so compile writes back what the cluster had instead of gpugov's choice."""

from __future__ import annotations

from pathlib import Path

import yaml

from gpugov.adopt import import_inventory, inventory
from gpugov.adopt.canonical import cluster_queue_view
from gpugov.app.pipeline import validate_repo
from gpugov.compile import compile

QUEUES = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: on-demand}
spec: {nodeLabels: {capacity: on-demand}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: spot}
spec: {nodeLabels: {capacity: spot}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: ml}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: {name}}
spec:
  cohortName: ml
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: {name}}}
  {fungibility}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: on-demand
      resources:
      - {name: cpu, nominalQuota: 32}
      - {name: memory, nominalQuota: 256Gi}
      - {name: nvidia.com/gpu, nominalQuota: 4}
    - name: spot
      resources:
      - {name: cpu, nominalQuota: 32}
      - {name: memory, nominalQuota: 256Gi}
      - {name: nvidia.com/gpu, nominalQuota: 4}
"""
SHAPES = {
    "kueue-default": ("", {"whenCanBorrow": "MayStopSearch"}),  # Kueue's default: stop at the first that fits
    "gpugov-default": ("flavorFungibility: {whenCanBorrow: TryNextFlavor}", None),
    "stop-on-both": ("flavorFungibility: {whenCanBorrow: MayStopSearch, whenCanPreempt: MayStopSearch, "
                     "preference: PreemptionOverBorrowing}",
                     {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch",
                      "preference": "PreemptionOverBorrowing"}),
}


def test_flavor_fungibility_is_declared_as_the_cluster_has_it(tmp_path: Path) -> None:
    objects = []
    for name, (fungibility, _) in SHAPES.items():
        text = QUEUES.replace("{name}", name).replace("{fungibility}", fungibility)
        objects += [d for d in yaml.safe_load_all(text) if d["kind"] == "ClusterQueue" or name == "kueue-default"]
    inv = inventory(objects)
    report = import_inventory(inv, "lab", tmp_path / "repo")
    assert report.gaps == [], report.gaps
    validation = validate_repo(tmp_path / "repo")
    assert validation.model is not None and not validation.errors, [f.message for f in validation.errors]
    compiled = {o["metadata"]["name"]: o for o in compile(validation.model, cluster="lab") if o["kind"] == "ClusterQueue"}
    for name, (_, declared) in SHAPES.items():
        tenant = yaml.safe_load((tmp_path / "repo" / "tenants" / f"{name}.yaml").read_text())["spec"]
        assert tenant.get("flavorFungibility") == declared, name
        assert cluster_queue_view(compiled[name])["flavorFungibility"] == \
            cluster_queue_view(inv.cluster_queues[name])["flavorFungibility"], name
    assert compiled["gpugov-default"]["spec"]["flavorFungibility"] == {"whenCanBorrow": "TryNextFlavor"}


def test_a_changed_fungibility_is_a_difference_import_reports() -> None:
    from gpugov.adopt.canonical import differences

    before = inventory(list(yaml.safe_load_all(QUEUES.replace("{name}", "a").replace("{fungibility}", ""))))
    after = inventory(list(yaml.safe_load_all(QUEUES.replace("{name}", "a").replace(
        "{fungibility}", "flavorFungibility: {whenCanBorrow: TryNextFlavor}"))))
    assert [(d.object, d.field) for d in differences(before, after)] == [("ClusterQueue a", "spec.flavorFungibility")]


LENDING = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: gpu}
spec: {nodeLabels: {pool: gpu}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: slack}
spec:
  cohortName: ml
  flavorFungibility: {whenCanBorrow: TryNextFlavor}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: gpu
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: memory, nominalQuota: 512Gi}
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohortName: ml
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: team-a}}
  flavorFungibility: {whenCanBorrow: TryNextFlavor}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: gpu
      resources:
      - {name: cpu, nominalQuota: 0}
      - {name: memory, nominalQuota: 0}
      - {name: nvidia.com/gpu, nominalQuota: 0}
"""


def test_a_lending_queue_without_namespaces_is_kept_not_dropped(tmp_path: Path) -> None:
    """The slack ClusterQueue of a cohort (no namespaceSelector, no LocalQueue) holds the capacity its
    cohort borrows: it becomes a Tenant with `namespaces: []` in that department, compiled back as it was."""
    inv = inventory(list(yaml.safe_load_all(LENDING)))
    report = import_inventory(inv, "lab", tmp_path / "repo")
    assert report.gaps == [], report.gaps
    assert ("ClusterQueue", "", "slack") in report.take_over
    slack = yaml.safe_load((tmp_path / "repo" / "tenants" / "slack.yaml").read_text())["spec"]
    assert (slack["department"], slack["namespaces"]) == ("ml", [])
    validation = validate_repo(tmp_path / "repo")
    assert validation.model is not None and not validation.findings, [f.message for f in validation.findings]
    compiled = {o["metadata"]["name"]: o for o in compile(validation.model, cluster="lab") if o["kind"] == "ClusterQueue"}
    assert "namespaceSelector" not in compiled["slack"]["spec"]  # null: it admits from no namespace
    assert cluster_queue_view(compiled["slack"]) == cluster_queue_view(inv.cluster_queues["slack"])
    assert not [o for o in compile(validation.model, cluster="lab")
                if o["kind"] in ("Namespace", "LocalQueue", "RoleBinding") and "slack" in str(o["metadata"])]


def test_a_lending_queue_needs_a_cohort_and_a_tenant_without_namespaces_a_department(tmp_path: Path) -> None:
    alone = LENDING.replace("  cohortName: ml\n  flavorFungibility", "  flavorFungibility", 1)
    report = import_inventory(inventory(list(yaml.safe_load_all(alone))), "lab", tmp_path / "repo")
    assert {(g.object, g.field) for g in report.gaps} == {("ClusterQueue slack", "spec.namespaceSelector"),
                                                         ("ClusterQueue slack", "(object)")}
    assert any("a lending queue" in g.why for g in report.gaps)
    tenant = tmp_path / "repo" / "tenants" / "orphan.yaml"
    tenant.write_text("apiVersion: gpugov.io/v1alpha1\nkind: Tenant\nmetadata: {name: orphan}\nspec: {namespaces: []}\n")
    errors = validate_repo(tmp_path / "repo").errors
    assert [(f.rule, f.location.file if f.location else None) for f in errors] == [("GG003", "tenants/orphan.yaml")]
    assert "'department' is a required property" in errors[0].message
