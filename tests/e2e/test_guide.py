"""The guide's sample Jobs work on a real cluster (issue #30): on the living sandbox (kube-apiserver with
compile's admission policies, Kueue v0.17, the scheduler, KWOK), every pool's sample Job of a tenant, as
`gpugov guide` prints it, is admitted by Kueue to that pool's flavor and runs on a node of that pool."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from gpugov.app.revision import valid_revision
from gpugov.guide import render, tenant_facts
from gpugov.kube.names import KUEUE_API
from gpugov.kube.objects import LABEL_POOL
from gpugov.sandbox.cluster import Sandbox
from gpugov.sandbox.kwok import RUN_FOR_ANNOTATION
from tests.helpers.repos import REPO
from tests.helpers.waiting import condition, wait_for

pytestmark = pytest.mark.e2e

TENANTS = ("vision", "inference")  # each holds accelerators in both pools of cluster east (h100, a100-mig)


def guide_jobs(tenant: str) -> list[tuple[str, dict[str, Any]]]:
    """(pool, Job) for every YAML block of the tenant's guide on cluster east, in the guide's order."""
    revision = valid_revision(REPO)
    assert revision.model is not None
    facts = tenant_facts(revision.model, revision.compiled, tenant)
    jobs = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", render(facts), re.DOTALL)]
    return [(pool.pool, job) for pool, job in zip(facts.pools, jobs, strict=True) if pool.cluster == "east"]


def workload_of(dynamic: DynamicClient, namespace: str, job: str) -> dict[str, Any]:
    workloads = dynamic.resources.get(api_version=KUEUE_API, kind="Workload").get(namespace=namespace).to_dict()
    return next((w for w in workloads.get("items", [])
                 if any(o.get("kind") == "Job" and o.get("name") == job
                        for o in w["metadata"].get("ownerReferences", []))), {})


@pytest.mark.parametrize("tenant", TENANTS)
def test_every_pool_sample_of_the_guide_is_admitted_to_its_pool(living: Sandbox, living_org: list[dict[str, Any]],
                                                                tenant: str) -> None:
    api = living.cp.api_client()
    batch, core, dynamic = client.BatchV1Api(api), client.CoreV1Api(api), DynamicClient(api)
    jobs = guide_jobs(tenant)
    assert {pool for pool, _ in jobs} == {"h100", "a100-mig"}
    created = []
    try:
        for _, job in jobs:
            submitted = copy.deepcopy(job)
            # The one addition to the guide's manifest: KWOK completes a pod that says how long it runs.
            submitted["spec"]["template"].setdefault("metadata", {})["annotations"] = {RUN_FOR_ANNOTATION: "2s"}
            batch.create_namespaced_job(job["metadata"]["namespace"], submitted)  # admission policies pass it
            created.append(job)
        for pool, job in jobs:
            namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]

            def admitted(namespace: str = namespace, name: str = name) -> bool:
                return condition(workload_of(dynamic, namespace, name), "Admitted").get("status") == "True"

            wait_for(admitted, f"{namespace}/{name} admitted", timeout=90)
            workload = workload_of(dynamic, namespace, name)
            flavors = set(workload["status"]["admission"]["podSetAssignments"][0]["flavors"].values())
            assert flavors == {pool}, (name, flavors)

            def finished(namespace: str = namespace, name: str = name) -> bool:
                status = batch.read_namespaced_job(name, namespace).status
                return bool(status and status.succeeded)

            wait_for(finished, f"{namespace}/{name} finished", timeout=90)
            pods = core.list_namespaced_pod(namespace, label_selector=f"job-name={name}").items
            node = core.read_node(pods[0].spec.node_name)
            assert node.metadata.labels.get(LABEL_POOL) == pool, (name, node.metadata.name)
    finally:
        for job in created:
            batch.delete_namespaced_job(job["metadata"]["name"], job["metadata"]["namespace"],
                                        propagation_policy="Background")
