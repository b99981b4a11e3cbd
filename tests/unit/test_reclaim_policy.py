"""Issue #26, declarations and admission: the reclaim block (Guardrails defaults, a tenant's over them),
and the max-runtime ValidatingAdmissionPolicy evaluated by tests/helpers/vap_eval.py for requests as a
tenant sends them. The living sandbox proves the policy with the real apiserver (tests/e2e/test_reclaim.py)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.compile import compile
from gpugov.compile.admission import MAX_RUNTIME
from gpugov.declarations.model import Model
from gpugov.kube.names import KUEUE_MAX_EXEC_TIME_LABEL, KUEUE_PRIORITY_LABEL, KUEUE_QUEUE_LABEL
from tests.helpers.repos import overlay_repo, write
from tests.helpers.vap_eval import Request, evaluate

GUARDRAILS = """apiVersion: gpugov.io/v1alpha1
kind: Guardrails
metadata:
  name: default
spec:
  capacityRatio: 1.0
  platformTeam: ["@lab/platform"]
  reclaim:
    maxRuntime:
      default: 3d
      priorityClasses: {batch: 24h}
    idle: {window: 2h, grace: 30m, action: deactivate, exempt: {queues: [serve]}}
"""
ALPHA_RECLAIM = """  reclaim:
    maxRuntime:
      priorityClasses: {batch: 90m}
    idle: {belowPercent: 10}
    snooze: {maximum: 4h}
"""
TENANT = ("alice@example.com", ("alpha-team", "system:authenticated"))
JOB_CONTROLLER = ("system:serviceaccount:kube-system:job-controller", ("system:serviceaccounts:kube-system",))


def _repo(tmp_path: Path, guardrails: str | None = GUARDRAILS, alpha: str = "") -> Path:
    root = overlay_repo(tmp_path)
    if guardrails is not None:
        write(root, "policies/guardrails.yaml", guardrails)
    if alpha:
        path = root / "tenants/alpha.yaml"
        path.write_text(path.read_text() + alpha)
    return root


def _model(root: Path) -> Model:
    result = validate_repo(root)
    assert result.findings == [], [str(f) for f in result.findings]
    assert result.model is not None
    return result.model


def test_guardrails_defaults_and_a_tenant_override_merge_field_by_field(tmp_path: Path) -> None:
    model = _model(_repo(tmp_path, alpha=ALPHA_RECLAIM))
    alpha = model.reclaim_policy(model.tenants["alpha"])
    beta = model.reclaim_policy(model.tenants["beta"])
    assert alpha is not None and beta is not None and alpha.idle is not None and beta.idle is not None
    # beta: the Guardrails' block, schema defaults for what it leaves out
    assert (beta.max_runtime_default, beta.max_runtime) == (3 * 86400, {"batch": 86400})
    assert (beta.idle.metric, beta.idle.below_percent, beta.idle.window, beta.idle.grace, beta.idle.action) == (
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE", Decimal(5), 7200, 1800, "deactivate")
    assert beta.idle.exempt_queues == ("serve",) and beta.snooze_maximum == 8 * 3600
    # alpha: its own fields over the Guardrails', the rest inherited
    assert (alpha.max_runtime_default, alpha.max_runtime) == (3 * 86400, {"batch": 5400})
    assert (alpha.idle.below_percent, alpha.idle.window, alpha.idle.action) == (Decimal(10), 7200, "deactivate")
    assert alpha.snooze_maximum == 4 * 3600


def test_no_reclaim_declared_means_no_policy_and_no_admission_object(tmp_path: Path) -> None:
    model = _model(_repo(tmp_path, guardrails=None))
    assert all(model.reclaim_policy(t) is None for t in model.tenants.values())
    names = {o["metadata"]["name"] for o in compile(model, backend="kueue", cluster="lab")}
    assert MAX_RUNTIME not in names
    # maxRuntime-less reclaim (idle only) compiles no max-runtime policy either
    idle_only = GUARDRAILS.replace("    maxRuntime:\n      default: 3d\n      priorityClasses: {batch: 24h}\n", "")
    model = _model(_repo(tmp_path / "idle", guardrails=idle_only))
    assert MAX_RUNTIME not in {o["metadata"]["name"] for o in compile(model, backend="kueue", cluster="lab")}


@pytest.fixture()
def policies(tmp_path: Path) -> list[dict[str, Any]]:
    return compile(_model(_repo(tmp_path, alpha=ALPHA_RECLAIM)), backend="kueue", cluster="lab")


def job(namespace: str, queue: str, pc: str | None = None, seconds: str | None = None) -> dict[str, Any]:
    labels = {KUEUE_QUEUE_LABEL: queue}
    if pc is not None:
        labels[KUEUE_PRIORITY_LABEL] = pc
    if seconds is not None:
        labels[KUEUE_MAX_EXEC_TIME_LABEL] = seconds
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": namespace, "labels": labels},
            "spec": {"suspend": True, "template": {"spec": {"containers": [
                {"name": "main", "image": "pause", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                "restartPolicy": "Never"}}}}


def refused(policies: list[dict[str, Any]], obj: dict[str, Any], who: tuple[str, tuple[str, ...]] = TENANT) -> list[str]:
    request = Request("CREATE", "batch", "jobs", obj["metadata"]["namespace"], who[0], who[1])
    return [m for m in evaluate(policies, request, obj) if m.startswith(MAX_RUNTIME + ":")]


def test_a_job_asking_more_than_its_class_allows_is_refused_naming_the_limit(policies: list[dict[str, Any]]) -> None:
    over = refused(policies, job("alpha", "main", "batch", "5401"))
    assert over == [f"{MAX_RUNTIME}: Job alpha/train asks {KUEUE_MAX_EXEC_TIME_LABEL}=5401: queue alpha/main "
                    "(priority class batch) allows at most 5400 seconds (90m, reclaim.maxRuntime)"]
    assert refused(policies, job("alpha", "main", "batch", "5400")) == []
    assert refused(policies, job("alpha", "main", "batch", "60")) == []
    # beta inherits the Guardrails' limits: its serving class is not listed, so the default (3d) holds
    assert refused(policies, job("beta", "serve", "serving", str(3 * 86400))) == []
    message = refused(policies, job("beta", "serve", "serving", str(3 * 86400 + 1)))
    assert len(message) == 1 and "allows at most 259200 seconds (3d, reclaim.maxRuntime)" in message[0]


def test_a_job_without_the_label_is_refused_telling_which_label_to_set(policies: list[dict[str, Any]]) -> None:
    missing = refused(policies, job("alpha", "main", "batch"))
    assert missing == [f"{MAX_RUNTIME}: Job alpha/train has no {KUEUE_MAX_EXEC_TIME_LABEL} label: queue alpha/main "
                       "(priority class batch) allows at most 5400 seconds (90m, reclaim.maxRuntime); set the label "
                       "to at most 5400"]
    no_class = refused(policies, job("beta", "serve"))
    assert len(no_class) == 1 and "allows at most 259200 seconds (3d" in no_class[0]


def test_malformed_values_and_trusted_controllers(policies: list[dict[str, Any]]) -> None:
    for value in ("1h", "-5", "99999999999", ""):
        assert refused(policies, job("alpha", "main", "batch", value)), value
    # the Job controller's requests (and namespaces without a declared limit) are not this policy's
    assert refused(policies, job("alpha", "main", "batch", "999999"), who=JOB_CONTROLLER) == []
    assert refused(policies, job("gamma", "main", "batch", "999999")) == []


def test_split_max_runtime_policies_refuse_as_the_single_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the CEL budget the limits are split over one policy a shard of namespaces (see
    tests/unit/test_admission_scale.py); each namespace keeps its own limit."""
    from gpugov.compile.admission import common as admission  # where the shards are cut

    model = _model(_repo(tmp_path, alpha=ALPHA_RECLAIM))
    single = compile(model, backend="kueue", cluster="lab")
    monkeypatch.setattr(admission, "CEL_BUDGET", 1)
    split = compile(model, backend="kueue", cluster="lab")
    names = [o["metadata"]["name"] for o in split if o["kind"] == "ValidatingAdmissionPolicy"
             and o["metadata"]["name"].startswith(MAX_RUNTIME)]
    assert len(names) >= 2 and MAX_RUNTIME not in names, names
    for obj in (job("alpha", "main", "batch", "5401"), job("alpha", "main", "batch", "5400"), job("alpha", "main", "batch"),
                job("beta", "serve", "serving", str(3 * 86400 + 1)), job("beta", "serve"), job("gamma", "main", "batch", "1")):
        one = [m.split(": ", 1)[1] for m in refused(single, obj)]
        many = [m.split(": ", 1)[1] for m in evaluate(split, Request("CREATE", "batch", "jobs", obj["metadata"]["namespace"],
                                                                      *TENANT), obj) if m.startswith(MAX_RUNTIME)]
        assert one == many, (obj["metadata"], one, many)
    assert refused(single, job("alpha", "main", "batch", "5401"))  # the comparison covers refusals too


def _wrapped(kind: str, inner: dict[str, Any]) -> tuple[Request, dict[str, Any]]:
    """The job's labels and pod template carried by a parent whose children a trusted controller
    creates (the CronJob controller's Jobs, the ReplicaSet controller's Pods): where its children's
    labels come from is where the maximum runtime must be checked."""
    meta, template = inner["metadata"], inner["spec"]["template"]
    base = {"metadata": {"name": "train", "namespace": meta["namespace"]}}
    if kind == "CronJob":
        return (Request("CREATE", "batch", "cronjobs", meta["namespace"], *TENANT),
                {**base, "apiVersion": "batch/v1", "kind": "CronJob", "spec": {"schedule": "* * * * *", "jobTemplate": {
                    "metadata": {"labels": meta["labels"]}, "spec": inner["spec"]}}})
    resource = {"Deployment": "deployments", "StatefulSet": "statefulsets", "ReplicaSet": "replicasets"}[kind]
    return (Request("CREATE", "apps", resource, meta["namespace"], *TENANT),
            {**base, "apiVersion": "apps/v1", "kind": kind, "spec": {"replicas": 1, "template": {
                "metadata": {"labels": meta["labels"]}, "spec": {**template["spec"], "restartPolicy": "Always"}}}})


@pytest.mark.parametrize("kind", ["CronJob", "Deployment", "StatefulSet", "ReplicaSet"])
def test_a_parent_whose_children_a_controller_creates_cannot_carry_them_past_the_limit(
        policies: list[dict[str, Any]], kind: str) -> None:
    """The controllers are trusted, so their children are not checked: the parent's template is.
    A CronJob's Jobs or a Deployment's Pods without the label (or over the limit) would run unbounded."""
    def denials(obj: dict[str, Any]) -> list[str]:
        request, wrapped = _wrapped(kind, obj)
        return [m for m in evaluate(policies, request, wrapped) if m.startswith(MAX_RUNTIME + ":")]

    missing = denials(job("alpha", "main", "batch"))
    assert len(missing) == 1 and f"{kind} alpha/train has no {KUEUE_MAX_EXEC_TIME_LABEL} label" in missing[0], missing
    over = denials(job("alpha", "main", "batch", "5401"))
    assert len(over) == 1 and "allows at most 5400 seconds (90m" in over[0], over
    assert denials(job("alpha", "main", "batch", "5400")) == []
    assert denials(job("gamma", "main", "batch", "999999")) == []  # no limit declared there
