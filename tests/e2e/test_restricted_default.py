"""Pod Security restricted, the tenant namespaces' default: the base example tree (Guardrails at their
defaults) on a living sandbox of its own. The sample Jobs, submitted by each tenant's owner as a user
writes them, pass restricted and finish; a pod that runs as root is refused, and Guardrails below
restricted need a reason (GG102, tests/unit/test_namespace_isolation.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpugov.app.pipeline import validate_repo
from gpugov.cluster.impersonate import impersonate
from gpugov.compile import compile
from gpugov.sandbox import samples
from tests.e2e.conftest import own_org_sandbox
from tests.helpers.repos import BASE

pytestmark = pytest.mark.e2e


def test_sample_jobs_run_under_the_restricted_default_and_a_root_pod_does_not(tmp_path: Path) -> None:
    files = {str(p.relative_to(BASE)): p.read_text() for p in BASE.rglob("*.yaml")}
    model = validate_repo(BASE).model
    assert model is not None and model.limits.isolation.pod_security == "restricted"
    objects = compile(model, backend="kueue")
    owner_of = model.tenant_of_namespace()
    with own_org_sandbox(tmp_path / "org", files) as admin:
        levels = {o["metadata"]["name"]: o["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
                  for o in objects if o["kind"] == "Namespace" and "gpugov.io/tenant" in o["metadata"]["labels"]}
        assert levels and set(levels.values()) == {"restricted"}
        jobs = samples.sample_jobs(objects)
        assert jobs

        def owner(namespace: str) -> client.ApiClient:
            owners = model.tenants[owner_of[namespace]].owners
            user = owners.users[0] if owners.users else f"someone@{owner_of[namespace]}"
            return impersonate(client.ApiClient(admin.configuration), user, list(owners.groups))

        for job in jobs:
            client.BatchV1Api(owner(job.namespace)).create_namespaced_job(job.namespace, samples.job_manifest(job, "2s"))
        seen = samples.wait(admin, jobs, until="finished", timeout=180)
        assert all(o.finished for o in seen), samples.table(seen)
        root = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "root", "labels": {samples.QUEUE_LABEL: jobs[0].queue}},
                "spec": {"containers": [{"name": "main", "image": samples.IMAGE}]}}
        with pytest.raises(ApiException) as refused:
            client.CoreV1Api(owner(jobs[0].namespace)).create_namespaced_pod(jobs[0].namespace, root, dry_run="All")
        assert 'violates PodSecurity "restricted:latest"' in json.loads(refused.value.body)["message"]
