"""gpugov reclaim on Volcano, the pure part: which batch/v1 Jobs are subjects and what gpugov writes on
them (the real scheduler, apiserver and admission policy: tests/e2e/test_volcano_budget_reclaim.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gpugov.app.pipeline import validate_repo
from gpugov.cluster.volcano_reclaim import job_patch
from gpugov.compile import compile
from gpugov.compile.admission import VOLCANO_RECLAIM
from gpugov.kube.objects import ANNOTATION_RECLAIM_DEACTIVATED, ANNOTATION_RECLAIM_WARNED
from gpugov.reclaim.decide import DEACTIVATE, WARN, Decision, decide
from gpugov.reclaim.volcano import volcano_candidates
from tests.unit.test_reclaim_operations import compiled

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def batch_job(name: str, namespace: str = "alpha", *, suspend: bool = False, annotations: dict[str, str] | None = None,
              queue: str | None = None, priority: str | None = None) -> dict[str, Any]:
    template: dict[str, Any] = {"metadata": {"annotations": {"scheduling.volcano.sh/queue-name": queue}} if queue
                                else {}, "spec": {"schedulerName": "volcano"}}
    if priority:
        template["spec"]["priorityClassName"] = priority
    return {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "annotations": annotations or {}},
            "spec": {"suspend": suspend, "template": template}}


def pod(name: str, owner: str, *, namespace: str = "alpha", scheduled: datetime = T0, phase: str = "Running",
        scheduler: str = "volcano") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace,
                         "ownerReferences": [{"kind": "Job", "name": owner, "uid": f"uid-{owner}", "controller": True}]},
            "spec": {"schedulerName": scheduler, "nodeName": "whole-1"},
            "status": {"phase": phase, "conditions": [{"type": "PodScheduled", "status": "True",
                                                       "lastTransitionTime": f"{scheduled:%Y-%m-%dT%H:%M:%SZ}"}]}}


def test_running_volcano_jobs_of_tenants_with_a_policy_are_subjects(tmp_path: Path) -> None:
    compiled(tmp_path, backend="volcano")
    model = validate_repo(tmp_path).model
    assert model is not None
    warned = f"{T0 + timedelta(minutes=5):%Y-%m-%dT%H:%M:%SZ}"
    jobs = [batch_job("train", annotations={ANNOTATION_RECLAIM_WARNED: warned}, queue="alpha"),
            batch_job("reclaimed", suspend=True), batch_job("waiting"), batch_job("other", namespace="beta"),
            batch_job("kube")]
    pods = [pod("train-a", "train", scheduled=T0 + timedelta(seconds=30)), pod("train-b", "train"),
            pod("reclaimed-a", "reclaimed"), pod("waiting-a", "waiting", phase="Pending"),
            pod("other-a", "other", namespace="beta"), pod("kube-a", "kube", scheduler="default-scheduler")]
    # suspended, not yet running and not scheduled by volcano: no subject; beta's job is one (Guardrails
    # declare a reclaim policy for every tenant), which the decision leaves alone: beta has no idle policy
    found, other = volcano_candidates(model, jobs, pods)
    assert other.subject.key == "beta/other" and other.policy.idle is None
    subject = found.subject
    assert (subject.key, subject.tenant, subject.queue, subject.pods) == ("alpha/train", "alpha", "alpha",
                                                                          ("train-a", "train-b"))
    assert subject.admitted_at == T0 and subject.warned_at == T0 + timedelta(minutes=5)
    assert (found.namespace, found.name, found.uid) == ("alpha", "train", "uid-train")


def test_a_volcano_job_running_is_a_subject_under_its_own_key(tmp_path: Path) -> None:
    from gpugov.cluster.volcano_reclaim import abort_command

    compiled(tmp_path, backend="volcano")
    model = validate_repo(tmp_path).model
    assert model is not None
    vcjob = {"metadata": {"name": "train", "namespace": "alpha", "uid": "uid-train"},
             "spec": {"queue": "alpha", "priorityClassName": ""}, "status": {"state": {"phase": "Running"}}}
    aborted = {"metadata": {"name": "gone", "namespace": "alpha", "uid": "uid-gone"},
               "spec": {"queue": "alpha"}, "status": {"state": {"phase": "Aborted"}}}
    (found,) = volcano_candidates(model, [], [pod("train-main-0", "train"), pod("gone-main-0", "gone")],
                                  [vcjob, aborted])
    assert (found.subject.key, found.kind, found.subject.pods) == ("alpha/vcjob/train", "VolcanoJob", ("train-main-0",))
    command = abort_command(found, "idle")
    assert (command["action"], command["metadata"]["namespace"], command["target"]["name"],
            command["target"]["kind"], command["target"]["apiVersion"]) == (
        "AbortJob", "alpha", "train", "Job", "batch.volcano.sh/v1alpha1")


def test_a_deactivation_suspends_the_job_and_says_volcano_frees_the_cards() -> None:
    from gpugov.declarations.model import IdlePolicy

    policy = IdlePolicy("DCGM_FI_DEV_GPU_UTIL", __import__("decimal").Decimal(5), 60, 60, "deactivate", (), (), True)
    from gpugov.reclaim.decide import Subject

    subject = Subject("alpha/train", "alpha", "alpha", "", False, T0, ("train-a",), warned_at=T0 + timedelta(minutes=2))
    now = T0 + timedelta(minutes=4)
    samples = {"train-a": [(T0 + timedelta(seconds=s), 0.5) for s in range(0, 241, 10)]}
    decision = decide(subject, policy, samples, now, timedelta(seconds=10), 3600, volcano=True)
    assert decision.action == DEACTIVATE and "Volcano Job aborted" in decision.why and "suspended" in decision.why
    assert "Kueue" in decide(subject, policy, samples, now, timedelta(seconds=10), 3600).why
    assert job_patch(decision, now) == {"spec": {"suspend": True}, "metadata": {"annotations": {
        ANNOTATION_RECLAIM_DEACTIVATED: "2026-12-01T10:04:00Z"}}}
    warn = Decision("alpha/train", "alpha", "idle", WARN, "")
    assert job_patch(warn, now) == {"metadata": {"annotations": {ANNOTATION_RECLAIM_WARNED: "2026-12-01T10:04:00Z"}}}


def test_the_reclaim_policy_is_compiled_for_the_tenant_namespaces_of_a_volcano_cluster() -> None:
    from tests.helpers.repos import REPO

    model = validate_repo(REPO).model
    assert model is not None
    objects = compile(model, cluster="west")
    policy = next(o for o in objects if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] == VOLCANO_RECLAIM)
    binding = next(o for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"
                   and o["metadata"]["name"] == VOLCANO_RECLAIM)
    assert binding["spec"]["matchResources"]["namespaceSelector"] == {
        "matchExpressions": [{"key": "gpugov.io/tenant", "operator": "Exists"}]}
    assert [c["name"] for c in policy["spec"]["matchConditions"]] == ["not-a-trusted-controller",
                                                                       "not-gpugov-reclaim-or-an-administrator"]
    assert "system:serviceaccount:gpugov-system:gpugov-reclaim" in policy["spec"]["matchConditions"][1]["expression"]
    assert not any(o["metadata"]["name"] == VOLCANO_RECLAIM for o in compile(model, cluster="east"))
