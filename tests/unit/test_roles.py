"""gpugov's own tenant roles (gpugov.compile.roles): least privilege, rule by rule, and their bindings
compiled from spec.owners, spec.members and spec.viewers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.compile import compile
from gpugov.compile.roles import (
    MEMBER,
    OWNER,
    PERSONAS,
    QUEUE_READER,
    RULES,
    VIEWER,
    WORKLOAD_KINDS,
    queue_reader_rules,
    role_name,
)
from gpugov.declarations.model import Model
from tests.helpers.repos import REPO

WRITES = {"create", "update", "patch", "delete", "deletecollection"}
# Verbs that reach past RBAC itself: acting as someone else, granting what one does not hold.
NEVER_VERBS = {"*", "impersonate", "escalate", "bind", "approve", "sign"}
# (group, resource) no tenant persona may touch with any verb.
NEVER_RESOURCES = {
    ("", "serviceaccounts/token"),
    ("", "resourcequotas"),
    ("", "limitranges"),
    ("", "namespaces"),
    ("", "nodes"),
    ("", "nodes/proxy"),
    ("", "pods/ephemeralcontainers"),
    ("authentication.k8s.io", "tokenreviews"),
    ("certificates.k8s.io", "certificatesigningrequests"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"),
    ("visibility.kueue.x-k8s.io", "clusterqueues/pendingworkloads"),  # names other tenants' workloads
}
NEVER_GROUPS = {"*", "rbac.authorization.k8s.io", "admissionregistration.k8s.io", "apiextensions.k8s.io",
                "certificates.k8s.io"}
# (group, resource) a persona may read but never write.
READ_ONLY = {("", "serviceaccounts"), ("kueue.x-k8s.io", "localqueues"), ("kueue.x-k8s.io", "workloads"),
             ("kueue.x-k8s.io", "clusterqueues"), ("kueue.x-k8s.io", "cohorts"),
             ("kueue.x-k8s.io", "resourceflavors"), ("kueue.x-k8s.io", "workloadpriorityclasses"),
             ("scheduling.k8s.io", "priorityclasses"), ("", "events"), ("events.k8s.io", "events")}


def grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """Every (group, resource, verb) the rules grant."""
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def violations(persona: str, rules: list[dict[str, Any]]) -> list[str]:
    """What in `rules` a tenant persona must never hold (one line each)."""
    found = []
    for index, rule in enumerate(rules):
        if set(rule) - {"apiGroups", "resources", "verbs"}:
            found.append(f"rule {index}: only apiGroups, resources and verbs (no resourceNames, no nonResourceURLs)")
        for group in rule["apiGroups"]:
            if group in NEVER_GROUPS:
                found.append(f"rule {index}: api group {group!r}")
            for resource in rule["resources"]:
                if "*" in resource:
                    found.append(f"rule {index}: wildcard resource {resource!r}")
                if (group, resource) in NEVER_RESOURCES:
                    found.append(f"rule {index}: {resource} of {group!r}")
                for verb in rule["verbs"]:
                    if verb in NEVER_VERBS:
                        found.append(f"rule {index}: verb {verb} on {resource}")
                    if verb in WRITES and (group, resource) in READ_ONLY:
                        found.append(f"rule {index}: {verb} on {resource} of {group!r}")
                    if resource == "secrets" and (persona != OWNER or verb in ("get", "list", "watch")):
                        found.append(f"rule {index}: {verb} on secrets for {persona}")
    return found


@pytest.mark.parametrize("backend", ["kueue", "volcano"])
@pytest.mark.parametrize("persona", [*PERSONAS, "queue-reader"])
def test_no_role_holds_a_forbidden_verb_or_resource(persona: str, backend: str) -> None:
    rules = queue_reader_rules(backend) if persona == "queue-reader" else RULES[persona](backend)
    assert rules and violations(persona, rules) == []


def test_volcano_roles_name_volcanos_kinds(model: Model) -> None:
    objects = compile(model, backend="volcano", cluster="east")
    roles = {o["metadata"]["name"]: grants(o["rules"]) for o in objects if o["kind"] == "ClusterRole"}
    assert ("batch.volcano.sh", "jobs", "create") in roles[role_name(MEMBER)]
    assert ("scheduling.volcano.sh", "queues", "list") in roles[QUEUE_READER]
    assert not {g for g in roles[role_name(OWNER)] | roles[QUEUE_READER] if "kueue" in g[0]}


@pytest.mark.parametrize(("persona", "rule", "why"), [
    (MEMBER, {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}, "get on secrets for member"),
    (OWNER, {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}, "list on secrets for owner"),
    (OWNER, {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"]}, "verb impersonate"),
    (OWNER, {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]},
     "serviceaccounts/token"),
    (OWNER, {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["escalate"]},
     "api group 'rbac.authorization.k8s.io'"),
    (OWNER, {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings"], "verbs": ["bind"]},
     "verb bind"),
    (VIEWER, {"apiGroups": ["batch"], "resources": ["*"], "verbs": ["get"]}, "wildcard resource"),
    (OWNER, {"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["patch"]}, "resourcequotas"),
    (OWNER, {"apiGroups": [""], "resources": ["limitranges"], "verbs": ["delete"]}, "limitranges"),
    (OWNER, {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues"], "verbs": ["update"]},
     "update on localqueues"),
    (OWNER, {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["patch"]}, "namespaces"),
    (MEMBER, {"apiGroups": ["*"], "resources": ["pods"], "verbs": ["get"]}, "api group '*'"),
])
def test_the_table_test_catches_each_forbidden_grant(persona: str, rule: dict[str, Any], why: str) -> None:
    """The walker above is a real check: each forbidden grant added to a real role is reported."""
    assert any(why in line for line in violations(persona, [*RULES[persona](), rule]))


def test_personas_nest_and_differ_where_argued() -> None:
    viewer, member, owner = (grants(RULES[p]()) for p in (VIEWER, MEMBER, OWNER))
    assert viewer < member < owner
    assert not {g for g in viewer if g[2] in WRITES}  # a viewer writes nothing
    assert {("batch", "jobs", "create"), ("", "pods", "create"), ("", "configmaps", "create"),
            ("", "pods/exec", "create")} <= member - viewer
    assert owner - member == {("", r, v) for r in ("secrets", "services", "persistentvolumeclaims")
                              for v in ("create", "update", "patch", "delete")}
    # Every Kueue-integrated kind can be submitted by a member and read by a viewer.
    for group, resources in WORKLOAD_KINDS:
        for resource in resources:
            assert (group, resource, "create") in member and (group, resource, "list") in viewer
    # What `gpugov queue` needs in the namespace: Workloads, LocalQueues and their pending workloads.
    assert {("kueue.x-k8s.io", "workloads", "list"), ("kueue.x-k8s.io", "localqueues", "list"),
            ("visibility.kueue.x-k8s.io", "localqueues/pendingworkloads", "get")} <= viewer
    # ... and cluster-wide, the quota facts.
    assert {("kueue.x-k8s.io", r, "list") for r in ("clusterqueues", "cohorts", "resourceflavors",
                                                     "workloadpriorityclasses")} <= grants(queue_reader_rules())


@pytest.fixture(scope="module")
def model() -> Model:
    result = validate_repo(REPO)
    assert result.model is not None and not result.errors, result.errors
    return result.model


def test_bindings_follow_the_declarations(model: Model) -> None:
    objects = compile(model, backend="kueue", cluster="east")
    roles = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterRole"}
    assert {role_name(p) for p in PERSONAS} | {QUEUE_READER} <= set(roles)
    for name in [*(role_name(p) for p in PERSONAS), QUEUE_READER]:
        assert roles[name]["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpugov"
    vision = {o["metadata"]["name"]: o for o in objects
              if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == "vision"}
    assert set(vision) == {"gpugov-tenant-owners", "gpugov-tenant-members", "gpugov-tenant-viewers"}
    assert {(s["kind"], s["name"]) for s in vision["gpugov-tenant-members"]["subjects"]} == {
        ("User", "erin@example.com"), ("Group", "vision-researchers")}
    assert [s["name"] for s in vision["gpugov-tenant-viewers"]["subjects"]] == ["research-leads"]
    assert {o["roleRef"]["name"] for o in vision.values()} == {role_name(p) for p in PERSONAS}
    assert all(o["metadata"]["labels"]["gpugov.io/tenant"] == "vision" for o in vision.values())
    # No binding of the built-in edit (or any role but gpugov's) anywhere.
    refs = {o["roleRef"]["name"] for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")}
    assert "edit" not in refs and "admin" not in refs
    # A tenant that declares no members gets no members' binding.
    inference = {o["metadata"]["name"] for o in objects
                 if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == "inference"}
    assert inference == {"gpugov-tenant-owners"}
    # Everyone of vision reads the quota facts, through one ClusterRoleBinding of its own.
    queue = next(o for o in objects if o["kind"] == "ClusterRoleBinding" and o["metadata"]["name"] == "gpugov-tenant-vision")
    assert queue["roleRef"]["name"] == QUEUE_READER
    assert {s["name"] for s in queue["subjects"]} == {"bob@example.com", "vision-team", "erin@example.com",
                                                      "vision-researchers", "research-leads"}


def test_members_and_viewers_default_to_nobody(tmp_path: Path) -> None:
    from gpugov.declarations.schema import defaulted

    spec = defaulted("Tenant", {"namespaces": ["a"]})
    assert spec["members"] == {"users": [], "groups": []} and spec["viewers"] == {"users": [], "groups": []}
