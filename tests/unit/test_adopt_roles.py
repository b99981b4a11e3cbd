"""gpugov import reads a tenant's owners, members and viewers back from gpugov's tenant RoleBindings (issue #40):
on the example org's cluster east as `gpugov apply` left it, the imported tenants compile back to the same
RoleBindings and per-tenant ClusterRoleBindings, so drift finds nothing to change on them; what gpugov cannot
bind again (a ServiceAccount subject, namespaces bound unlike each other) is listed with what apply would do.
Guardrails.platformTeam comes back from the team gpugov's admission messages name, so the policies compile the same,
and the Cluster's spec.operations from gpugov's CronJobs and agent DaemonSet, so apply deletes none of them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from gpugov.adopt import import_inventory, inventory
from gpugov.app.pipeline import validate_repo
from gpugov.compile import compile
from gpugov.compile.common import ANNOTATION_SOURCE
from gpugov.kube.objects import object_key
from tests.helpers.repos import REPO
from tests.unit.test_adopt_mig import example_east

TENANT_BINDINGS = ("RoleBinding", "ClusterRoleBinding")


def _bindings(objects: list[dict[str, Any]], kinds: tuple[str, ...] = TENANT_BINDINGS,
              prefix: str = "gpugov-tenant-") -> dict[Any, Any]:
    """gpugov's tenant bindings (or other objects of `kinds`), without the source line each is traced to."""
    found = {}
    for obj in objects:
        if obj["kind"] in kinds and obj["metadata"]["name"].startswith(prefix):
            obj = copy.deepcopy(obj)
            obj["metadata"]["annotations"].pop(ANNOTATION_SOURCE, None)
            found[object_key(obj)] = obj
    return found


def test_the_example_orgs_owners_members_and_viewers_come_back(tmp_path: Path) -> None:
    compiled, held = example_east()
    out = tmp_path / "repo"
    report = import_inventory(inventory(held, nodes_known=True), "east", out)
    assert report.gaps == []
    vision = yaml.safe_load((out / "tenants" / "vision.yaml").read_text())["spec"]
    declared = yaml.safe_load((REPO / "tenants" / "vision.yaml").read_text())["spec"]
    assert vision["owners"] == {k: v for k, v in declared["owners"].items() if k in ("users", "groups")}
    assert (vision["members"], vision["viewers"]) == (declared["members"], declared["viewers"])
    validation = validate_repo(out)
    assert validation.model is not None and not validation.errors
    again = _bindings(compile(validation.model, backend="kueue", cluster="east"))
    original = _bindings(compiled)
    assert len(original) > 10 and again == original


def test_bindings_gpugov_cannot_write_again_are_listed(tmp_path: Path) -> None:
    _, held = example_east()
    for obj in held:
        meta = obj["metadata"]
        if obj["kind"] == "RoleBinding" and (meta.get("namespace"), meta["name"]) == ("vision", "gpugov-tenant-members"):
            obj["subjects"].append({"kind": "ServiceAccount", "name": "ci", "namespace": "vision"})
        if obj["kind"] == "RoleBinding" and (meta.get("namespace"), meta["name"]) == ("nlp-dev", "gpugov-tenant-owners"):
            obj["subjects"].append({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "dev@example.com"})
    out = tmp_path / "repo"
    report = import_inventory(inventory(held, nodes_known=True), "east", out)
    gaps = {(g.object, g.field): g.why for g in report.gaps}
    assert "ServiceAccount ci" in gaps[("RoleBinding vision/gpugov-tenant-members", "subjects")]
    # nlp's two namespaces: the owner added in nlp-dev would be bound in nlp-train too
    assert "dev@example.com" in gaps[("RoleBinding nlp-train/gpugov-tenant-owners", "subjects")]
    assert ("RoleBinding nlp-dev/gpugov-tenant-owners", "subjects") not in gaps
    nlp = yaml.safe_load((out / "tenants" / "nlp.yaml").read_text())["spec"]
    assert "dev@example.com" in nlp["owners"]["users"]


def test_the_platform_team_comes_back_from_the_admission_messages(tmp_path: Path) -> None:
    compiled, held = example_east()
    out = tmp_path / "repo"
    import_inventory(inventory(held, nodes_known=True), "east", out)
    guardrails = yaml.safe_load((out / "policies" / "guardrails.yaml").read_text())["spec"]
    declared = yaml.safe_load((REPO / "policies" / "guardrails.yaml").read_text())["spec"]
    assert guardrails["platformTeam"] == declared["platformTeam"]
    validation = validate_repo(out)
    assert validation.model is not None and not validation.errors
    policies = ("ValidatingAdmissionPolicy",)
    again = _bindings(compile(validation.model, backend="kueue", cluster="east"), policies, "gpugov-")
    assert len(again) > 5 and again == _bindings(compiled, policies, "gpugov-")
    # Without gpugov's policies on the cluster there is no team to read: none is declared.
    plain = tmp_path / "plain"
    import_inventory(inventory([o for o in held if o["kind"] != "ValidatingAdmissionPolicy"], nodes_known=True),
                     "east", plain)
    assert "platformTeam" not in yaml.safe_load((plain / "policies" / "guardrails.yaml").read_text())["spec"]


OPERATION_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "RoleBinding", "ConfigMap",
                   "CronJob", "DaemonSet")


def test_the_operations_come_back_from_the_cronjobs_and_the_agent(tmp_path: Path) -> None:
    compiled, held = example_east()
    out = tmp_path / "repo"
    assert import_inventory(inventory(held, nodes_known=True), "east", out).gaps == []
    cluster = yaml.safe_load((out / "policies" / "clusters.yaml").read_text())["spec"]
    assert cluster["operations"] == {"image": "registry.example.com/platform/gpugov-config:main"}  # the rest default
    validation = validate_repo(out)
    assert validation.model is not None and not validation.errors
    again = compile(validation.model, backend="kueue", cluster="east")
    operations = _bindings(compiled, OPERATION_KINDS, "gpugov-")
    assert {k[1] for k in operations} >= {"CronJob", "DaemonSet", "ServiceAccount", "ClusterRole"}
    assert _bindings(again, OPERATION_KINDS, "gpugov-") == operations


def test_schedules_the_agent_and_reclaims_prometheus_are_read_as_they_run(tmp_path: Path) -> None:
    _, held = example_east()
    drift = next(o for o in held if o["kind"] == "CronJob" and o["metadata"]["name"] == "gpugov-drift")
    drift["spec"]["schedule"] = "0 * * * *"
    reclaim = copy.deepcopy(drift)
    reclaim["metadata"]["name"] = "gpugov-reclaim"
    reclaim["spec"]["schedule"] = "*/7 * * * *"
    reclaim["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"] = [
        "reclaim", "/config", "--cluster", "east", "--prometheus", "http://prometheus.monitoring:9090", "--apply"]
    held = [o for o in held if o["kind"] != "DaemonSet"] + [reclaim]
    out = tmp_path / "repo"
    import_inventory(inventory(held, nodes_known=True), "east", out)
    cluster = yaml.safe_load((out / "policies" / "clusters.yaml").read_text())["spec"]
    assert cluster["operations"] == {"image": "registry.example.com/platform/gpugov-config:main",
                                     "driftSchedule": "0 * * * *", "agent": False, "reclaimSchedule": "*/7 * * * *",
                                     "prometheus": "http://prometheus.monitoring:9090"}
    # a cluster gpugov runs nothing on declares no operations
    plain = tmp_path / "plain"
    import_inventory(inventory([o for o in held if o["kind"] not in ("CronJob", "DaemonSet")], nodes_known=True),
                     "east", plain)
    assert "operations" not in yaml.safe_load((plain / "policies" / "clusters.yaml").read_text())["spec"]
