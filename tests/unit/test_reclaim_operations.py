"""Issue #26 in the cluster: the gpugov-reclaim CronJob compile emits beside drift's, only where an idle
policy and the cluster's Prometheus are declared, with the least RBAC reclaim needs. The living sandbox
runs gpugov reclaim as this ServiceAccount (tests/e2e/test_reclaim.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.cli import build_parser
from gpugov.compile import compile
from gpugov.compile.operations import RECLAIM

CLUSTER = """apiVersion: gpugov.io/v1alpha1
kind: Cluster
metadata: {name: lab}
spec:
  backend: kueue
  operations:
    image: registry.example.com/gpugov:1
    agent: false
"""
PROMETHEUS = "    prometheus: http://prometheus.monitoring:9090\n"
POOL = """apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata: {name: whole}
spec:
  cluster: lab
  accelerator: {model: H100-80GB}
  acceleratorsPerNode: 8
  nodeResources: {cpu: 64, memory: 512Gi}
  nodes: [{name: whole-1}]
"""
GUARDRAILS = """apiVersion: gpugov.io/v1alpha1
kind: Guardrails
metadata: {name: default}
spec:
  requireCostCenter: false
  reclaim:
    maxRuntime: {default: 1d}
"""
IDLE = "  reclaim:\n    idle: {window: 1h, grace: 30m, action: deactivate}\n"


def tenant(name: str, namespaces: list[str], extra: str = "") -> str:
    queues = ", ".join(f"{{name: main, namespace: {ns}}}" for ns in namespaces)
    return f"""apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata: {{name: {name}}}
spec:
  owners: {{users: [{name}@example.com]}}
  namespaces: [{", ".join(namespaces)}]
  queues: [{queues}]
  quotas: [{{pool: whole, resources: {{accelerators: 4}}}}]
{extra}"""


def compiled(tmp_path: Path, *, cluster: str = CLUSTER + PROMETHEUS, alpha: str = IDLE,
             backend: str = "kueue") -> list[dict[str, Any]]:
    files = {
        "policies/clusters.yaml": cluster.replace("backend: kueue", f"backend: {backend}"),
        "policies/guardrails.yaml": GUARDRAILS,
        "hardware/pools.yaml": POOL,
        "tenants/teams.yaml": tenant("alpha", ["alpha", "alpha-dev"], alpha) + "---\n" + tenant("beta", ["beta"]),
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    result = validate_repo(tmp_path)
    assert result.model is not None and not result.errors, result.errors
    return compile(result.model, backend=backend)


def reclaim_part(objects: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects
            if o["metadata"]["name"].startswith(RECLAIM)}


def test_the_reclaim_cronjob_runs_reclaim_with_the_least_rbac(tmp_path: Path) -> None:
    part = reclaim_part(compiled(tmp_path))
    assert sorted(part) == [
        ("ClusterRole", "", "gpugov-reclaim-actor"), ("ClusterRole", "", "gpugov-reclaim-reader"),
        ("ClusterRoleBinding", "", "gpugov-reclaim-reader"), ("CronJob", "gpugov-system", "gpugov-reclaim"),
        ("RoleBinding", "alpha", "gpugov-reclaim-actor"), ("RoleBinding", "alpha-dev", "gpugov-reclaim-actor"),
        ("ServiceAccount", "gpugov-system", "gpugov-reclaim")]
    # reads everywhere (everything is read before anything is decided) ...
    assert part[("ClusterRole", "", "gpugov-reclaim-reader")]["rules"] == [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    # ... writes only where an idle policy applies: beta declares none, so no binding in its namespace
    assert part[("ClusterRole", "", "gpugov-reclaim-actor")]["rules"] == [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["patch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]
    service_account = {"kind": "ServiceAccount", "name": RECLAIM, "namespace": "gpugov-system"}
    for key in (("ClusterRoleBinding", "", "gpugov-reclaim-reader"), ("RoleBinding", "alpha", "gpugov-reclaim-actor")):
        assert part[key]["subjects"] == [service_account]
        assert part[key]["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                        "name": key[2]}

    cronjob = part[("CronJob", "gpugov-system", "gpugov-reclaim")]
    assert cronjob["spec"]["schedule"] == "*/5 * * * *" and cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == RECLAIM
    (container,) = pod["containers"]
    assert container["image"] == "registry.example.com/gpugov:1"
    args = build_parser().parse_args(container["args"])
    assert args.func.__name__ == "cmd_reclaim" and args.apply is True
    assert (args.repo, args.cluster, args.prometheus) == ("/config", "lab", "http://prometheus.monitoring:9090")
    # the notify state is a file in the pod's own emptyDir: the root filesystem is read-only, no ConfigMap
    state = {e["name"]: e["value"] for e in container["env"]}["GPUGOV_NOTIFY_STATE"]
    (mount,) = container["volumeMounts"]
    assert state.startswith(mount["mountPath"] + "/")
    assert {"name": mount["name"], "emptyDir": {"sizeLimit": "1Mi"}} in pod["volumes"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"secretRef": {"name": "gpugov-notify", "optional": True}} in container["envFrom"]


def test_the_schedule_is_declared_on_the_cluster(tmp_path: Path) -> None:
    cluster = CLUSTER + PROMETHEUS + '    reclaimSchedule: "7 * * * *"\n'
    part = reclaim_part(compiled(tmp_path, cluster=cluster))
    assert part[("CronJob", "gpugov-system", "gpugov-reclaim")]["spec"]["schedule"] == "7 * * * *"


@pytest.mark.parametrize("case", ["no idle policy", "no prometheus"])
def test_no_reclaim_cronjob_without_an_idle_policy_or_a_prometheus(tmp_path: Path, case: str) -> None:
    objects = compiled(tmp_path, alpha="" if case == "no idle policy" else IDLE,
                       cluster=CLUSTER if case == "no prometheus" else CLUSTER + PROMETHEUS)
    assert reclaim_part(objects) == {}
    assert any(o["kind"] == "CronJob" and o["metadata"]["name"] == "gpugov-drift" for o in objects)


def test_a_prometheus_that_is_not_a_url_is_refused(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies/clusters.yaml").write_text(CLUSTER + "    prometheus: prometheus.monitoring:9090\n")
    result = validate_repo(tmp_path)
    assert any("prometheus" in f.message for f in result.errors), result.errors


def test_on_volcano_the_reclaim_cronjob_reads_and_patches_jobs_instead_of_workloads(tmp_path: Path) -> None:
    """gpugov.reclaim.volcano: the subjects are the tenants' batch/v1 Jobs, patched only where an idle policy
    applies (the tenant cannot undo the patch: gpugov-volcano-reclaim, tests/e2e/test_volcano_budget_reclaim.py)."""
    part = reclaim_part(compiled(tmp_path, backend="volcano"))
    assert part[("ClusterRole", "", "gpugov-reclaim-reader")]["rules"] == [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    # Volcano Jobs are aborted by Volcano's AbortJob Command, created in the tenants' namespaces only
    assert part[("ClusterRole", "", "gpugov-reclaim-actor")]["rules"] == [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["patch"]},
        {"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"], "verbs": ["patch"]},
        {"apiGroups": ["bus.volcano.sh"], "resources": ["commands"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]
    assert sorted(k[1] for k in part if k[0] == "RoleBinding") == ["alpha", "alpha-dev"]
