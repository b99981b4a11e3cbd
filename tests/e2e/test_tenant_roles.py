"""Issue #21, class 6: the role a tenant holds, tried as the tenant on the living sandbox.

Cluster east of the example org is applied (the `living_org` fixture) with the roles gpugov compiles
from the declarations: vision's owner bob@example.com (group vision-team), member erin@example.com
(group vision-researchers) and viewer group research-leads; speech's owners, group speech-team.
Every request below is sent as one of those users, through impersonation (Impersonate-User and
Impersonate-Group on the admin's connection, as `kubectl --as` does), so the real API server's RBAC
authorizer decides, on the real Kueue v0.17.0 controller and its visibility API.

Before the fix compile bound owners to the built-in `edit`: the first test binds a user exactly
so (the RoleBinding compile emitted) and shows the escapes that gave (every Secret, a token for a
ServiceAccount, impersonating one), then the same requests as the owner gpugov binds today, refused.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpugov.cluster.impersonate import impersonate
from gpugov.sandbox import samples
from gpugov.sandbox.cluster import Sandbox
from tests.helpers.repos import REPO
from tests.helpers.waiting import condition, wait_for

pytestmark = pytest.mark.e2e

KUEUE = ("kueue.x-k8s.io", "v1beta2")
RUN = "roles"  # prefix of this module's jobs
OWNER = ("bob@example.com", ["vision-team"])
MEMBER = ("erin@example.com", ["vision-researchers"])
VIEWER = ("lee@example.com", ["research-leads"])
SPEECH_OWNER = ("sam@example.com", ["speech-team"])
LEGACY = ("legacy-owner@example.com", [])  # bound to `edit` as compile did before the fix


def as_user(living: Sandbox, who: tuple[str, list[str]]) -> client.ApiClient:
    return impersonate(living.cp.api_client(), who[0], who[1])


def status_of(call: Any) -> int:
    """The HTTP status of one API call: 2xx when done, the API's refusal otherwise."""
    try:
        call()
    except ApiException as exc:
        return int(exc.status)
    return 200


def allowed(api: client.ApiClient, who: tuple[str, list[str]], verb: str, resource: str, namespace: str = "vision",
            group: str = "", subresource: str = "", name: str = "") -> bool:
    """The API server's authorizer, asked about `who` (a SubjectAccessReview, as the admin)."""
    attributes = {"verb": verb, "resource": resource, "group": group, "namespace": namespace,
                  "subresource": subresource, "name": name}
    review = client.AuthorizationV1Api(api).create_subject_access_review({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": who[0], "groups": [*who[1], "system:authenticated"],
                 "resourceAttributes": {k: v for k, v in attributes.items() if v}}})
    return bool(review.status.allowed)


def gpugov(living: Sandbox, who: tuple[str, list[str]] | None, *args: str) -> subprocess.CompletedProcess[str]:
    identity = ["--as", who[0], *(f"--as-group={g}" for g in who[1])] if who else []
    return subprocess.run([sys.executable, "-m", "gpugov", *args, ".", "--cluster", "east", "--kubeconfig",
                           str(living.cp.kubeconfig), *identity], capture_output=True, text=True, cwd=REPO,
                          timeout=300)


def job(name: str, namespace: str, queue: str, pods: int, gpus: int) -> dict[str, Any]:
    sample = samples.SampleJob(namespace, namespace, f"{RUN}-{name}", queue, namespace, "", "nvidia.com/gpu")
    return samples.job_manifest(sample, run_for=None, pods=pods, amount=gpus, priority_class="training-high")


def workload_of(api: client.ApiClient, namespace: str, job_name: str) -> dict[str, Any]:
    items = client.CustomObjectsApi(api).list_namespaced_custom_object(*KUEUE, namespace, "workloads")["items"]
    for w in items:
        if any(o.get("kind") == "Job" and o.get("name") == job_name for o in w["metadata"].get("ownerReferences", [])):
            return w
    return {}


def admitted(api: client.ApiClient, namespace: str, job_name: str) -> bool:
    return condition(workload_of(api, namespace, job_name), "Admitted").get("status") == "True"


@pytest.fixture(scope="module")
def scenario(living: Sandbox, living_org: list[dict[str, Any]]) -> Iterator[client.ApiClient]:
    """A Secret the tenant must not read, and speech's own admitted job (submitted by speech's owner)."""
    admin = living.cp.api_client()
    core = client.CoreV1Api(admin)
    core.create_namespaced_secret("vision", {"metadata": {"name": f"{RUN}-platform-credential"},
                                             "stringData": {"token": "not-for-tenants"}})
    speech = client.BatchV1Api(as_user(living, SPEECH_OWNER))
    speech.create_namespaced_job("speech", job("speech-secret-project", "speech", "default", 1, 1))
    wait_for(lambda: admitted(admin, "speech", f"{RUN}-speech-secret-project"), "speech's job to be admitted")
    yield admin
    batch = client.BatchV1Api(admin)
    for namespace in ("vision", "speech"):
        for item in batch.list_namespaced_job(namespace).items:
            if item.metadata.name.startswith(f"{RUN}-"):
                batch.delete_namespaced_job(item.metadata.name, namespace, propagation_policy="Foreground")
    core.delete_namespaced_secret(f"{RUN}-platform-credential", "vision")
    # Only this module's: the living sandbox is shared, and other modules' Workloads are theirs to clean.
    wait_for(lambda: not [w for ns in ("vision", "speech") for w in client.CustomObjectsApi(admin)
                          .list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"]
                          if any(o.get("name", "").startswith(f"{RUN}-") for o in w["metadata"].get("ownerReferences", []))],
             "the module's Workloads to be gone", timeout=120)


def test_impersonation_is_who_the_server_sees(living: Sandbox, scenario: client.ApiClient) -> None:
    """The harness itself: the API server authenticates the impersonated user and groups, not the admin."""
    review = client.AuthenticationV1Api(as_user(living, MEMBER)).create_self_subject_review(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    info = review.status.user_info
    assert info.username == "erin@example.com" and "vision-researchers" in info.groups


def test_the_built_in_edit_let_an_owner_escape_and_gpugovs_owner_role_refuses_it(
        living: Sandbox, scenario: client.ApiClient) -> None:
    rbac = client.RbacAuthorizationV1Api(scenario)
    legacy = {"metadata": {"name": f"{RUN}-legacy-owners", "namespace": "vision"},
              "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
              "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": LEGACY[0]}]}
    rbac.create_namespaced_role_binding("vision", legacy)
    try:
        # The escapes, as the owner bound to `edit` (compile's output before the fix).
        wait_for(lambda: allowed(scenario, LEGACY, "get", "secrets"), "the legacy binding to take effect", 10)
        old = client.CoreV1Api(as_user(living, LEGACY))
        secret = old.read_namespaced_secret(f"{RUN}-platform-credential", "vision")
        assert secret.data["token"]  # every Secret of the namespace
        token = old.create_namespaced_service_account_token("default", "vision", {"spec": {"expirationSeconds": 600}})
        assert token.status.token  # a token to act as the namespace's ServiceAccount, outside any pod
        assert allowed(scenario, LEGACY, "impersonate", "serviceaccounts")
        # The same requests, as the owner gpugov binds now.
        owner = client.CoreV1Api(as_user(living, OWNER))
        assert status_of(lambda: owner.read_namespaced_secret(f"{RUN}-platform-credential", "vision")) == 403
        assert status_of(lambda: owner.list_namespaced_secret("vision")) == 403
        assert status_of(lambda: owner.create_namespaced_service_account_token(
            "default", "vision", {"spec": {"expirationSeconds": 600}})) == 403
        assert not allowed(scenario, OWNER, "impersonate", "serviceaccounts")
        # ... who still places a credential for its jobs (write-only Secrets), and removes it.
        owned = {"metadata": {"name": f"{RUN}-hf-token"}, "stringData": {"token": "mine"}}
        assert status_of(lambda: owner.create_namespaced_secret("vision", owned)) == 200
        assert status_of(lambda: owner.delete_namespaced_secret(f"{RUN}-hf-token", "vision")) == 200
        # Before the fix `gpugov queue` as that owner was a 403 on ClusterQueues; now it reads.
        before = gpugov(living, LEGACY, "queue", "--tenant", "vision")
        assert before.returncode == 3 and "forbidden: list clusterqueues.kueue.x-k8s.io (cluster-wide)" in before.stderr
        assert "gpugov-tenant-queue-reader" in before.stderr
        after = gpugov(living, OWNER, "queue", "--tenant", "vision")
        assert after.returncode in (0, 1), after.stderr
    finally:
        rbac.delete_namespaced_role_binding(f"{RUN}-legacy-owners", "vision")


# (verb, resource, group, subresource, namespace) -> which personas hold it: the live authorizer's answers.
TABLE: list[tuple[tuple[str, str, str, str, str], set[str]]] = [
    (("get", "secrets", "", "", "vision"), set()),
    (("list", "secrets", "", "", "vision"), set()),
    (("watch", "secrets", "", "", "vision"), set()),
    (("create", "secrets", "", "", "vision"), {"owner"}),
    (("create", "serviceaccounts", "", "token", "vision"), set()),
    (("impersonate", "serviceaccounts", "", "", "vision"), set()),
    (("create", "serviceaccounts", "", "", "vision"), set()),
    (("create", "rolebindings", "rbac.authorization.k8s.io", "", "vision"), set()),
    (("escalate", "roles", "rbac.authorization.k8s.io", "", "vision"), set()),
    (("bind", "clusterroles", "rbac.authorization.k8s.io", "", ""), set()),
    (("update", "resourcequotas", "", "", "vision"), set()),
    (("delete", "limitranges", "", "", "vision"), set()),
    (("patch", "namespaces", "", "", ""), set()),
    (("update", "localqueues", "kueue.x-k8s.io", "", "vision"), set()),
    (("patch", "workloads", "kueue.x-k8s.io", "", "vision"), set()),
    (("update", "workloads", "kueue.x-k8s.io", "status", "vision"), set()),
    (("update", "clusterqueues", "kueue.x-k8s.io", "", ""), set()),
    (("create", "jobs", "batch", "", "speech"), set()),  # another tenant's namespace
    (("list", "workloads", "kueue.x-k8s.io", "", "speech"), set()),
    (("create", "jobs", "batch", "", "vision"), {"owner", "member"}),
    (("create", "pods", "", "", "vision"), {"owner", "member"}),
    (("create", "jobsets", "jobset.x-k8s.io", "", "vision"), {"owner", "member"}),
    (("create", "configmaps", "", "", "vision"), {"owner", "member"}),
    (("create", "services", "", "", "vision"), {"owner"}),
    (("list", "workloads", "kueue.x-k8s.io", "", "vision"), {"owner", "member", "viewer"}),
    (("get", "localqueues", "visibility.kueue.x-k8s.io", "pendingworkloads", "vision"), {"owner", "member", "viewer"}),
    (("get", "clusterqueues", "visibility.kueue.x-k8s.io", "pendingworkloads", ""), set()),
    (("list", "clusterqueues", "kueue.x-k8s.io", "", ""), {"owner", "member", "viewer"}),
    (("list", "cohorts", "kueue.x-k8s.io", "", ""), {"owner", "member", "viewer"}),
    (("list", "pods", "", "log", "vision"), {"owner", "member", "viewer"}),
]


def test_each_persona_holds_exactly_what_its_role_argues(scenario: client.ApiClient) -> None:
    personas = {"owner": OWNER, "member": MEMBER, "viewer": VIEWER}
    wrong = []
    for (verb, resource, group, sub, namespace), holders in TABLE:
        for persona, who in personas.items():
            got = allowed(scenario, who, verb, resource, namespace, group, sub)
            if got != (persona in holders):
                wrong.append(f"{persona} {verb} {resource}/{sub} of {group!r} in {namespace!r}: {got}")
    assert wrong == []


def test_owner_and_member_submit_the_sample_job_and_it_is_admitted(living: Sandbox, scenario: client.ApiClient) -> None:
    for who, name in ((MEMBER, "member-sample"), (OWNER, "owner-sample")):
        client.BatchV1Api(as_user(living, who)).create_namespaced_job("vision", job(name, "vision", "training", 1, 1))
    for name in ("member-sample", "owner-sample"):
        wait_for(lambda n=name: admitted(scenario, "vision", f"{RUN}-{n}"), f"{name} to be admitted")
    # The member follows its job: the Workload, its pods, their events.
    member = as_user(living, MEMBER)
    assert workload_of(member, "vision", f"{RUN}-member-sample")
    wait_for(lambda: any(p.spec.node_name for p in client.CoreV1Api(member).list_namespaced_pod(
        "vision", label_selector=f"job-name={RUN}-member-sample").items), "the member's pod to be bound")
    assert client.CoreV1Api(member).list_namespaced_event("vision").items is not None


def test_a_viewer_reads_and_cannot_create(living: Sandbox, scenario: client.ApiClient) -> None:
    viewer = as_user(living, VIEWER)
    assert status_of(lambda: client.BatchV1Api(viewer).list_namespaced_job("vision")) == 200
    assert status_of(lambda: client.CustomObjectsApi(viewer).list_namespaced_custom_object(
        *KUEUE, "vision", "workloads")) == 200
    assert status_of(lambda: client.BatchV1Api(viewer).create_namespaced_job(
        "vision", job("viewer-try", "vision", "training", 1, 1))) == 403
    assert status_of(lambda: client.CoreV1Api(viewer).create_namespaced_config_map(
        "vision", {"metadata": {"name": f"{RUN}-viewer-try"}})) == 403
    assert status_of(lambda: client.CoreV1Api(viewer).list_namespaced_config_map("vision")) == 403
    assert status_of(lambda: client.CoreV1Api(viewer).list_namespaced_secret("vision")) == 403
    assert status_of(lambda: client.BatchV1Api(viewer).list_namespaced_job("speech")) == 403


def test_gpugov_queue_as_a_member_shows_its_jobs_and_no_foreign_names(living: Sandbox,
                                                                      scenario: client.ApiClient) -> None:
    member = client.BatchV1Api(as_user(living, MEMBER))
    member.create_namespaced_job("vision", job("queued-run", "vision", "training", 1, 8))
    member.create_namespaced_job("vision", job("never-fits", "vision", "training", 3, 8))
    wait_for(lambda: admitted(scenario, "vision", f"{RUN}-queued-run"), "the member's 8-GPU job to be admitted")
    wait_for(lambda: condition(workload_of(scenario, "vision", f"{RUN}-never-fits"), "QuotaReserved").get("message"),
             "Kueue to evaluate the job that never fits")
    # speech's job, which the member may not list, is counted from speech's ClusterQueue status
    # (admittedWorkloads, pendingWorkloads): Kueue writes it a second or more after the Workload was admitted
    # (UpdatesBatchPeriod), later than the Workload's own Admitted condition the fixture waited for.
    custom = client.CustomObjectsApi(scenario)
    speech_admitted = sum(condition(w, "Admitted").get("status") == "True"
                          and condition(w, "Finished").get("status") != "True"
                          for w in custom.list_namespaced_custom_object(*KUEUE, "speech", "workloads")["items"])
    wait_for(lambda: (custom.get_cluster_custom_object(*KUEUE, "clusterqueues", "speech").get("status") or {}).get(
        "admittedWorkloads") == speech_admitted, "speech's ClusterQueue status to count its admitted workloads")

    result = gpugov(living, MEMBER, "queue", "--tenant", "vision", "--format", "json")
    assert result.returncode == 1, result.stderr  # never-fits: a finding, not a wait
    data = json.loads(result.stdout)
    shown = {w["job"]: w for w in data["workloads"]}
    assert shown[f"{RUN}-queued-run"]["state"] == "admitted"
    assert shown[f"{RUN}-never-fits"]["state"] == "pending" and shown[f"{RUN}-never-fits"]["reason"] == "never-fits"
    assert shown[f"{RUN}-never-fits"]["position"] is not None  # from its LocalQueue's pending workloads
    assert data["forbidden"] == [] and data["not_shown"] == []  # its own tenant: nothing withheld

    everyone = gpugov(living, MEMBER, "queue")
    assert everyone.returncode == 1, everyone.stderr
    assert f"{RUN}-queued-run" in everyone.stdout
    assert "speech-secret-project" not in everyone.stdout  # another tenant's job: never named
    # ... but not silently dropped either: counted from speech's ClusterQueue, the refusal said.
    assert "not shown: tenant speech (ClusterQueue speech): 1 admitted and 0 pending" in everyone.stdout
    summary = next(line for line in everyone.stdout.splitlines() if line.startswith("forbidden for "))
    assert "list workloads.kueue.x-k8s.io" in summary and summary.endswith("never named")

    asked = gpugov(living, MEMBER, "queue", "--tenant", "speech")
    assert asked.returncode == 0, asked.stderr
    assert ("forbidden: list workloads.kueue.x-k8s.io in namespace speech (tenant speech): its admitted workloads "
            "are counted, not named") in asked.stdout
    assert "Tenant speech (tenants/speech.yaml) gives these reads" in asked.stdout
    assert "ask its owners (group speech-team)" in asked.stdout
    assert "speech-secret-project" not in asked.stdout

    why = gpugov(living, MEMBER, "why", f"vision/{RUN}-never-fits")
    assert why.returncode == 1 and "can never fit as declared" in why.stdout, why.stderr
    denied = gpugov(living, MEMBER, "why", f"speech/{RUN}-speech-secret-project")
    assert denied.returncode == 3 and "forbidden: list workloads.kueue.x-k8s.io there" in denied.stderr
    assert "ask its owners (group speech-team)" in denied.stderr

    # A viewer reads the same report, and may not submit into it.
    viewer = gpugov(living, VIEWER, "queue", "--tenant", "vision", "--format", "json")
    assert viewer.returncode == 1, viewer.stderr
    assert {f"{RUN}-queued-run", f"{RUN}-never-fits"} <= {w["job"] for w in json.loads(viewer.stdout)["workloads"]}


def test_a_read_taken_away_is_reported_not_dropped(living: Sandbox, scenario: client.ApiClient) -> None:
    """The issue's case: a user with every queue read (ClusterQueues, LocalQueues, the visibility API's pending
    workloads) but no Workload read asks about vision. Before, vision's admitted job silently vanished from the
    report (exit 0, no line); now it is counted from the ClusterQueue and the missing permission named."""
    rbac = client.RbacAuthorizationV1Api(scenario)
    name = f"{RUN}-queues-only"
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues"], "verbs": ["list"]},
        {"apiGroups": ["visibility.kueue.x-k8s.io"], "resources": ["clusterqueues/pendingworkloads"], "verbs": ["get"]}]})
    subjects = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "quinn@example.com"}]
    for binding, role in ((name, name), (f"{name}-facts", "gpugov-tenant-queue-reader")):
        rbac.create_cluster_role_binding({"metadata": {"name": binding}, "subjects": subjects, "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}})
    try:
        client.BatchV1Api(scenario).create_namespaced_job("vision", job("counted", "vision", "training", 1, 1))
        wait_for(lambda: admitted(scenario, "vision", f"{RUN}-counted"), "the counted job to be admitted")
        custom = client.CustomObjectsApi(scenario)
        running = sum(condition(w, "Admitted").get("status") == "True" and not condition(w, "Finished")
                      for w in custom.list_namespaced_custom_object(*KUEUE, "vision", "workloads")["items"])
        wait_for(lambda: custom.get_cluster_custom_object(*KUEUE, "clusterqueues", "vision")["status"].get(
            "admittedWorkloads") == running, "vision's ClusterQueue status to count its admitted workloads")
        result = gpugov(living, ("quinn@example.com", []), "queue", "--tenant", "vision")
        assert result.returncode in (0, 1), result.stderr
        assert f"{RUN}-counted" not in result.stdout
        assert f"not shown: tenant vision (ClusterQueue vision): {running} admitted" in result.stdout
        assert "forbidden: list workloads.kueue.x-k8s.io in namespace vision (tenant vision)" in result.stdout
        assert "ask its owners (bob@example.com, group vision-team)" in result.stdout
        # Holding only the compiled queue facts, the report still reads: the same counts, no LocalQueue either.
        rbac.delete_cluster_role_binding(name)
        facts_only = gpugov(living, ("quinn@example.com", []), "queue", "--tenant", "vision")
        assert facts_only.returncode in (0, 1), facts_only.stderr
        assert f"not shown: tenant vision (ClusterQueue vision): {running} admitted" in facts_only.stdout
        assert "forbidden: list localqueues.kueue.x-k8s.io in namespace vision (tenant vision)" in facts_only.stdout
    finally:
        for binding in (name, f"{name}-facts"):
            with contextlib.suppress(ApiException):
                rbac.delete_cluster_role_binding(binding)
        rbac.delete_cluster_role(name)


def test_doctor_fails_where_a_tenant_role_control_is_missing(living: Sandbox, living_org: list[dict[str, Any]],
                                                             scenario: client.ApiClient) -> None:
    """DR050 and DR051 on the living cluster: pass as applied; fail with a binding of `edit` left in a tenant
    namespace (what an upgrade without prune leaves) and with a tenant role's binding gone."""
    from gpugov.cluster.apply import apply_objects

    def doctor() -> dict[str, dict[str, Any]]:
        result = gpugov(living, None, "doctor", "--format", "json")
        assert result.returncode in (0, 1, 3), result.stderr
        return {c["id"]: c for c in json.loads(result.stdout)["checks"]}

    checks = doctor()
    assert (checks["DR050"]["status"], checks["DR051"]["status"]) == ("pass", "pass"), checks["DR050"]
    rbac = client.RbacAuthorizationV1Api(scenario)
    rbac.create_namespaced_role_binding("vision", {
        "metadata": {"name": "gpugov-owners"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "vision-team"}]})
    rbac.delete_namespaced_role_binding("gpugov-tenant-viewers", "vision")
    try:
        checks = doctor()
        assert checks["DR051"]["status"] == "fail" and "RoleBinding vision/gpugov-owners -> edit" in checks["DR051"]["message"]
        assert checks["DR050"]["status"] == "fail" and "RoleBinding vision/gpugov-tenant-viewers" in checks["DR050"]["message"]
    finally:
        rbac.delete_namespaced_role_binding("gpugov-owners", "vision")
        viewers = [o for o in living_org if o["kind"] == "RoleBinding" and o["metadata"]["name"] == "gpugov-tenant-viewers"
                   and o["metadata"]["namespace"] == "vision"]
        assert not apply_objects(scenario, viewers).missing
    assert doctor()["DR051"]["status"] == "pass"
