"""Issue #27 in the cluster: the gpugov-budget CronJob compile emits where a budget is declared, and its
least RBAC. The requests are not listed by hand: the CronJob's own command runs against a recording fake
API, and each request it made must be allowed by the rules compile bound to its ServiceAccount (and each
rule must be used by one)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.cli import build_parser, main
from gpugov.compile import compile
from gpugov.compile.operations import BUDGET, BUDGET_STATE, DRIFT, NOTIFY_SECRET
from gpugov.manifests.kustomize import in_cluster_objects
from gpugov.usage.budget import period_of
from tests.helpers.fake_kube import Reply, fake_kube
from tests.unit.test_budget import BUDGETED, LAB, SSAR_PATH, Receiver, live_queue, receiver, workload  # noqa: F401
from tests.unit.test_usage_unit import ORG

CLUSTER = """apiVersion: gpugov.io/v1alpha1
kind: Cluster
metadata: {name: lab}
spec:
  backend: kueue
  operations:
    image: registry.example.com/gpugov:1
    agent: false
"""
NAMESPACE = "gpugov-system"
# Granted to every authenticated user by Kubernetes' default ClusterRole system:basic-user: gpugov asks
# whether it may list every Workload (a SelfSubjectAccessReview) before it reads them.
BASIC_USER = [{"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews"], "verbs": ["create"]}]


def repo(tmp_path: Path, lab: str = BUDGETED, cluster: str = CLUSTER) -> Path:
    for rel, text in {**ORG, "tenants/lab.yaml": lab, "policies/clusters.yaml": cluster}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def compiled(root: Path, backend: str = "kueue") -> list[dict[str, Any]]:
    result = validate_repo(root)
    assert result.model is not None and not result.errors, result.errors
    return compile(result.model, backend=backend)


def named(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def bound_rules(objects: list[dict[str, Any]], account: str) -> list[tuple[str | None, dict[str, Any]]]:
    """(namespace or None for everywhere, rule) of every ClusterRole bound to the ServiceAccount."""
    roles = {o["metadata"]["name"]: o["rules"] for o in objects if o["kind"] == "ClusterRole"}
    found = []
    for binding in objects:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        if {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE} not in binding["subjects"]:
            continue
        where = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        found += [(where, rule) for rule in roles[binding["roleRef"]["name"]]]
    return found


def verb_of(method: str, name: str) -> str:
    return {"GET": "get" if name else "list", "PATCH": "patch", "POST": "create", "PUT": "update",
            "DELETE": "delete"}[method]


def allowing(rules: list[tuple[str | None, dict[str, Any]]], method: str, path: str) -> list[int]:
    """The indexes of the rules that allow the request, as the RBAC authorizer reads them."""
    match = re.fullmatch(r"/(?:api/v1|apis/(?P<group>[^/]+)/[^/]+)(?:/namespaces/(?P<namespace>[^/]+))?"
                         r"/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?", path)
    assert match is not None, path
    group, namespace, plural, name = match["group"] or "", match["namespace"], match["plural"], match["name"] or ""
    verb = verb_of(method, name)
    return [i for i, (where, rule) in enumerate(rules)
            if (where is None or where == namespace) and group in rule["apiGroups"] and plural in rule["resources"]
            and verb in rule["verbs"] and (not rule.get("resourceNames") or name in rule["resourceNames"])]


def test_the_budget_cronjob_runs_gpugov_budget_with_drifts_notify_settings(tmp_path: Path) -> None:
    objects = compiled(repo(tmp_path))
    cronjob = named(objects, "CronJob", BUDGET)
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["serviceAccountName"] == BUDGET and container["image"] == "registry.example.com/gpugov:1"
    args = build_parser().parse_args(container["args"])
    assert (args.func.__name__, args.apply, args.cluster, args.repo) == ("cmd_budget", True, "lab", "/config")
    drift = named(objects, "CronJob", DRIFT)["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["envFrom"] == drift["envFrom"] == [{"secretRef": {"name": NOTIFY_SECRET, "optional": True}}]
    assert container["env"] == [{"name": "GPUGOV_NOTIFY_STATE", "value": f"configmap:{NAMESPACE}/{BUDGET_STATE}"}]
    assert named(objects, "ConfigMap", BUDGET_STATE)["metadata"]["namespace"] == NAMESPACE
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    # the kustomize base packages it with the other in-cluster parts
    packaged = {(o["kind"], o["metadata"]["name"]) for o in in_cluster_objects(objects)}
    assert {("CronJob", BUDGET), ("ServiceAccount", BUDGET), ("ConfigMap", BUDGET_STATE)} <= packaged


def test_no_budget_cronjob_without_a_budget_or_an_image(tmp_path: Path) -> None:
    def budget_objects(objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return sorted((o["kind"], o["metadata"]["name"]) for o in objects if o["metadata"]["name"].startswith(BUDGET))

    assert budget_objects(compiled(repo(tmp_path / "plain", lab=LAB))) == []
    assert budget_objects(compiled(repo(tmp_path / "image", cluster=CLUSTER.replace(
        "  operations:\n    image: registry.example.com/gpugov:1\n    agent: false\n", "")))) == []
    # on Volcano its own: Commands (CloseQueue, OpenQueue) in the operations namespace only
    assert budget_objects(compiled(repo(tmp_path / "volcano", cluster=CLUSTER.replace("kueue", "volcano")),
                                   backend="volcano")) == [
        ("ClusterRole", BUDGET), ("ClusterRole", f"{BUDGET}-commands"), ("ClusterRole", BUDGET_STATE),
        ("ClusterRoleBinding", BUDGET), ("ConfigMap", BUDGET_STATE), ("CronJob", BUDGET),
        ("RoleBinding", f"{BUDGET}-commands"), ("RoleBinding", BUDGET_STATE), ("ServiceAccount", BUDGET)]
    assert budget_objects(compiled(repo(tmp_path / "budget"))) == [
        ("ClusterRole", BUDGET), ("ClusterRole", BUDGET_STATE), ("ClusterRoleBinding", BUDGET),
        ("ConfigMap", BUDGET_STATE), ("CronJob", BUDGET), ("RoleBinding", BUDGET_STATE), ("ServiceAccount", BUDGET)]


def test_the_rbac_allows_exactly_what_gpugov_budget_requests(tmp_path: Path, receiver: tuple[Receiver, str],  # noqa: F811
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    _, url = receiver
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(proxy, raising=False)
    root = repo(tmp_path / "repo")
    objects = compiled(root)
    container = named(objects, "CronJob", BUDGET)["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    for variable in container["env"]:
        monkeypatch.setenv(variable["name"], variable["value"])
    monkeypatch.setenv("GPUGOV_NOTIFY", "webhook")  # what the optional Secret would hold
    monkeypatch.setenv("GPUGOV_WEBHOOK_URL", url + "/hook")
    now = datetime.now(UTC)
    start = max(now - timedelta(hours=2), period_of("month", now).since)
    scenarios = [  # alpha over its hold budget (Hold), then a new period (gpugov budget releases its Hold)
        ([workload("big", "alpha", start, 8)], {"alpha": live_queue("alpha", "None"), "beta": live_queue("beta", "None")}),
        ([], {"alpha": live_queue("alpha", "Hold", "gpugov-budget"), "beta": live_queue("beta", "None")}),
    ]
    requests: list[tuple[str, str]] = []
    for workloads, queues in scenarios:
        with fake_kube() as kube:
            def answer(method: str, path: str, workloads: list[Any] = workloads,
                       queues: dict[str, Any] = queues) -> Reply | None:
                if method == "GET" and path == "/apis/kueue.x-k8s.io/v1beta2/workloads":
                    return Reply.of(200, {"kind": "WorkloadList", "apiVersion": "kueue.x-k8s.io/v1beta2",
                                          "metadata": {}, "items": workloads})
                if method == "POST" and path == SSAR_PATH:
                    return Reply.of(201, {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                                          "spec": {}, "status": {"allowed": True}})
                if "/clusterqueues/" in path:
                    return Reply.of(200, queues[path.rsplit("/", 1)[1]])
                if method == "PATCH" and path.endswith(f"/configmaps/{BUDGET_STATE}"):
                    return Reply.of(200, {"kind": "ConfigMap", "apiVersion": "v1",
                                          "metadata": {"name": BUDGET_STATE, "namespace": NAMESPACE}})
                return None

            kube.answer = answer
            args = [root.as_posix() if a == "/config" else a for a in container["args"]]
            assert main([*args, "--kubeconfig", str(kube.kubeconfig(tmp_path))]) in (0, 1)
            requests += kube.requests
    kinds = {(m, p.rsplit("/", 1)[1]) for m, p in requests}
    assert {("GET", "workloads"), ("PATCH", "alpha"), ("GET", "beta"), ("GET", BUDGET_STATE),
            ("PATCH", BUDGET_STATE)} <= kinds, requests  # it did hold, release and remember what it told

    rules = bound_rules(objects, BUDGET)
    every = [*rules, *((None, rule) for rule in BASIC_USER)]
    used: set[int] = set()
    for method, path in requests:
        allowed = allowing(every, method, path)
        assert allowed, f"{method} {path} is not allowed to the {BUDGET} ServiceAccount"
        used.update(allowed)
    assert used >= set(range(len(rules))), [rules[i] for i in range(len(rules)) if i not in used]  # no rule unused
    # The check can fail: what gpugov budget never needs is refused.
    for method, path in [("PATCH", "/apis/kueue.x-k8s.io/v1beta2/cohorts/lab"),
                         ("PATCH", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/someone-else"),
                         ("PATCH", "/apis/kueue.x-k8s.io/v1beta2/namespaces/alpha/workloads/big"),
                         ("GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps/gpugov-drift-notify-state"),
                         ("PATCH", f"/api/v1/namespaces/alpha/configmaps/{BUDGET_STATE}")]:
        assert allowing(every, method, path) == [], (method, path)


def test_queues_are_named_and_only_the_tenants(tmp_path: Path) -> None:
    objects = compiled(repo(tmp_path))
    rules = [rule for _, rule in bound_rules(objects, BUDGET)]
    queues = next(rule for rule in rules if rule["resources"] == ["clusterqueues"])
    tenant_queues = sorted(o["metadata"]["name"] for o in objects if o["kind"] == "ClusterQueue"
                           and "gpugov.io/tenant" in o["metadata"]["labels"])
    assert queues["resourceNames"] == tenant_queues == ["alpha", "beta"] and queues["verbs"] == ["get", "patch"]
