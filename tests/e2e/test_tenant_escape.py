"""Issue #21, classes 1 to 5, and the rest of the namespace (7) and a pod's controller (8): a tenant who
tries to escape its queues, on the living sandbox.

Cluster east of the example org is applied (the `living_org` fixture): the real kube-apiserver
1.36 with gpugov's ValidatingAdmissionPolicies and Pod Security labels, the real Kueue v0.17.0
(manageJobsWithoutQueueName with the tenant namespaces as managedJobsNamespaceSelector, as the
sandbox configures it), kube-controller-manager and kube-scheduler, KWOK GPU servers. Every
escape is sent as alice@example.com of group nlp-team, an owner of tenant nlp, through
impersonation: the API server authorizes it with exactly the roles gpugov binds. The honest
paths run as the same tenant, and the controllers' children as the identities the controllers
have (Guardrails.isolation.trustedControllers).

Each test tries several variants of one class. Before the fix (the tree at the commit before
issue #21's controls) every escape below was accepted: see the README's threat model.
The other workload kinds (class 5) are proven on their real CRDs from the Go module cache
(JobSet, KubeRay, Kubeflow training-operator and Trainer, LeaderWorkerSet), admission side only:
no controller of theirs runs here.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from gpugov.app.pipeline import validate_repo
from gpugov.cli import main
from gpugov.cluster.apply import apply_objects
from gpugov.cluster.impersonate import impersonate
from gpugov.sandbox import crds as crd_mod
from gpugov.sandbox import samples
from gpugov.sandbox.cluster import Sandbox
from tests.e2e.conftest import skip_or_fail
from tests.helpers.repos import REPO

pytestmark = pytest.mark.e2e

NS = "nlp-train"
TENANT = ("alice@example.com", ["nlp-team"])
JOB_CONTROLLER = ("system:serviceaccount:kube-system:job-controller", ["system:serviceaccounts:kube-system"])
# A framework controller's ServiceAccount; system:masters only for RBAC (the sandbox installs no
# JobSet roles): trust comes from its ServiceAccount group, which gpugov's policies name.
JOBSET_CONTROLLER = ("system:serviceaccount:jobset-system:jobset-controller-manager",
                     ["system:serviceaccounts:jobset-system", "system:masters"])
QUEUE = "kueue.x-k8s.io/queue-name"
GPU = "nvidia.com/gpu"
H100 = {"gpugov.io/pool": "h100"}
EVERYWHERE = [{"operator": "Exists"}]

# name of the CRD file -> (module glob under GOMODCACHE, path inside it)
WORKLOAD_CRDS = {
    "jobsets.jobset.x-k8s.io": ("sigs.k8s.io/jobset@v*", "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"),
    "leaderworkersets.leaderworkerset.x-k8s.io": (
        "sigs.k8s.io/lws@v*", "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml"),
    "rayjobs.ray.io": ("github.com/ray-project/kuberay/ray-operator@v*", "config/crd/bases/ray.io_rayjobs.yaml"),
    "rayclusters.ray.io": ("github.com/ray-project/kuberay/ray-operator@v*", "config/crd/bases/ray.io_rayclusters.yaml"),
    "pytorchjobs.kubeflow.org": ("github.com/kubeflow/training-operator@v*",
                                 "manifests/base/crds/kubeflow.org_pytorchjobs.yaml"),
    "trainjobs.trainer.kubeflow.org": ("github.com/kubeflow/trainer/v2@v*",
                                       "manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml"),
}


def as_tenant(living: Sandbox, who: tuple[str, list[str]] = TENANT) -> client.ApiClient:
    return impersonate(living.cp.api_client(), who[0], who[1])


def refused(call: Callable[[], Any]) -> str:
    """The API server's message when ``call()`` is refused; fails if it is accepted."""
    try:
        call()
    except ApiException as exc:
        # 404: Kueue's pod webhook looks up a claimed controller by name and fails when it is not there
        assert exc.status in (400, 403, 404, 422), exc
        return str(json.loads(exc.body).get("message", exc.body))
    raise AssertionError("the API server accepted it")


def gpu_container(gpus: int = 1, **extra: Any) -> dict[str, Any]:
    requests = {GPU: str(gpus), "cpu": "1", "memory": "1Gi"}
    return {"name": "main", "image": samples.IMAGE, "resources": {"requests": requests, "limits": requests}, **extra}


def cpu_container(**extra: Any) -> dict[str, Any]:
    requests = {"cpu": "1", "memory": "1Gi"}
    return {"name": "main", "image": samples.IMAGE, "resources": {"requests": requests, "limits": requests}, **extra}


def pod(name: str, containers: list[dict[str, Any]], labels: dict[str, str] | None = None,
        **spec: Any) -> dict[str, Any]:
    """A Pod; one that asks for GPUs pins pool h100 (as the tenant guide shows), CPU work may not
    (gpugov-pool-placement: only an admission places a pod on a pool)."""
    gpus = any(GPU in (c.get("resources") or {}).get("limits", {}) for c in containers)
    placement = {"nodeSelector": H100, "tolerations": EVERYWHERE} if gpus else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": containers, "restartPolicy": "Never", **placement, **spec}}


def unique(prefix: str) -> str:
    return f"esc-{prefix}-{uuid.uuid4().hex[:6]}"


def gpu_job(name: str, pods: int = 1, gpus: int = 1, queue: str | None = "training", **meta: Any) -> dict[str, Any]:
    sample = samples.SampleJob("nlp", NS, name, queue or "", "nlp", "", GPU)
    manifest = samples.job_manifest(sample, run_for=None, pods=pods, amount=gpus, priority_class="batch-low")
    if queue is None:
        del manifest["metadata"]["labels"][QUEUE]
        del manifest["metadata"]["labels"][samples.PRIORITY_LABEL]
    manifest["metadata"].update(meta)
    return manifest


def workload_of(api: client.ApiClient, owner_uid: str) -> dict[str, Any]:
    workloads = DynamicClient(api).resources.get(api_version=samples.KUEUE_API, kind="Workload")
    for item in workloads.get(namespace=NS).to_dict().get("items", []):
        if any(o.get("uid") == owner_uid for o in item["metadata"].get("ownerReferences", [])):
            return dict(item)
    return {}


def eventually(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def cluster(living: Sandbox, living_org: list[dict[str, Any]]) -> Iterator[Sandbox]:
    """The living sandbox with the example org, a RuntimeClass `nvidia` (as the GPU Operator
    installs it), an undeclared PriorityClass, and this module's objects removed afterwards."""
    admin = living.cp.api_client()
    node = client.NodeV1Api(admin)
    scheduling = client.SchedulingV1Api(admin)
    for create in (lambda: node.create_runtime_class({"metadata": {"name": "nvidia"}, "handler": "nvidia"}),
                   lambda: scheduling.create_priority_class({"metadata": {"name": "sneaky-high"}, "value": 900000000})):
        try:
            create()
        except ApiException as exc:
            if exc.status != 409:
                raise
    yield living
    batch, core, apps = client.BatchV1Api(admin), client.CoreV1Api(admin), client.AppsV1Api(admin)
    for job in batch.list_namespaced_job(NS).items:
        if job.metadata.name.startswith("esc-"):
            batch.delete_namespaced_job(job.metadata.name, NS, propagation_policy="Background")
    for deployment in apps.list_namespaced_deployment(NS).items:
        if deployment.metadata.name.startswith("esc-"):
            apps.delete_namespaced_deployment(deployment.metadata.name, NS)
    for item in core.list_namespaced_pod(NS).items:
        if item.metadata.name.startswith("esc-"):
            try:
                core.delete_namespaced_pod(item.metadata.name, NS, grace_period_seconds=0)
            except ApiException as exc:
                if exc.status != 404:  # a Job's pod, gone with its Job
                    raise


def test_class1_ownership_is_not_taken_on_the_tenants_word(cluster: Sandbox) -> None:
    """A Pod (or Job) that names a Job as its owner was skipped by gpugov's accelerator check and
    by Kueue's pod webhook (the Job's controllerRef: `FindAncestorJobManagedByKueue` looks the owner
    up by name only): made the child of the tenant's own admitted Job it ran 8 GPUs with no
    admission of its own. Now only the trusted controllers create children; the owner reference
    of a tenant is refused, controller or not, real or fake, with or without a queue label."""
    tenant, admin = as_tenant(cluster), cluster.cp.api_client()
    core, batch = client.CoreV1Api(tenant), client.BatchV1Api(tenant)
    parent = batch.create_namespaced_job(NS, gpu_job(unique("parent")))
    eventually(lambda: workload_of(admin, parent.metadata.uid).get("status", {}).get("admission"), "parent admitted")
    real = {"apiVersion": "batch/v1", "kind": "Job", "name": parent.metadata.name, "uid": parent.metadata.uid}
    fake = {**real, "name": "does-not-exist", "uid": str(uuid.uuid4())}
    for owner in (real, fake):
        for controller in (True, False):
            reference = [{**owner, "controller": controller, "blockOwnerDeletion": True}]
            for labels in ({}, {QUEUE: "training"}):
                child = pod(unique("child"), [gpu_container(8)], labels)
                child["metadata"]["ownerReferences"] = reference
                message = refused(lambda child=child: core.create_namespaced_pod(NS, child))
                assert (f"names Job {owner['name']} as its owner" in message or "without a queue" in message
                        or (owner is fake and controller and "not found" in message)), message
            job = gpu_job(unique("childjob"), gpus=8)
            job["metadata"]["ownerReferences"] = reference
            message = refused(lambda job=job: batch.create_namespaced_job(NS, job))
            assert "as its owner" in message or (owner is fake and controller and "not found" in message), message
    # re-parenting a queued pod of the tenant later is the same claim
    plain = core.create_namespaced_pod(NS, pod(unique("plain"), [cpu_container()], {QUEUE: "training"}))
    patch = {"metadata": {"ownerReferences": [{**real, "controller": False}]}}
    assert "as its owner" in refused(lambda: core.patch_namespaced_pod(plain.metadata.name, NS, patch))
    # honest: the Job controller's own pods of the parent run, and a child sent as the job
    # controller's identity passes gpugov's policies
    eventually(lambda: [p for p in client.CoreV1Api(admin).list_namespaced_pod(
        NS, label_selector=f"job-name={parent.metadata.name}").items if p.status.phase == "Running"], "parent's pod")
    controller_child = pod(unique("ctl"), [gpu_container(1)])
    controller_child["metadata"]["ownerReferences"] = [{**real, "controller": True}]
    client.CoreV1Api(as_tenant(cluster, JOB_CONTROLLER)).create_namespaced_pod(NS, controller_child, dry_run="All")


def test_class2_a_queued_workload_stays_held_after_creation(cluster: Sandbox) -> None:
    """Checks made only on CREATE left windows: the queue label removed from a queued Job, then
    `suspend: false`; Kueue's scheduling gate removed from a gated Pod; Kueue's own labels edited;
    a prebuilt Workload named. Each step is refused now; Kueue still admits and starts the job."""
    tenant, admin = as_tenant(cluster), cluster.cp.api_client()
    core, batch = client.CoreV1Api(tenant), client.BatchV1Api(tenant)
    # 64 GPUs: more than nlp may ever hold (16 nominal + 16 borrowed), so it stays queued
    queued = batch.create_namespaced_job(NS, gpu_job(unique("queued"), pods=8, gpus=8))
    eventually(lambda: workload_of(admin, queued.metadata.uid), "its Workload")
    name = queued.metadata.name
    assert "held by Kueue" in refused(lambda: batch.patch_namespaced_job(name, NS, {"spec": {"suspend": False}}))
    assert "without a queue" in refused(
        lambda: batch.patch_namespaced_job(name, NS, {"metadata": {"labels": {QUEUE: None}}}))
    both = refused(lambda: batch.patch_namespaced_job(
        name, NS, {"metadata": {"labels": {QUEUE: None}}, "spec": {"suspend": False}}))
    assert "without a queue" in both or "held by Kueue" in both, both  # whichever policy answers first
    assert "is not declared for namespace" in refused(
        lambda: batch.patch_namespaced_job(name, NS, {"metadata": {"labels": {QUEUE: "dev"}}}))
    assert "may not change" in refused(lambda: batch.patch_namespaced_job(
        name, NS, {"metadata": {"annotations": {"kueue.x-k8s.io/workload-slice-replacement-for": "x"}}}))
    assert batch.read_namespaced_job(name, NS).spec.suspend is True
    prebuilt = gpu_job(unique("prebuilt"))
    prebuilt["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] = workload_of(
        admin, queued.metadata.uid)["metadata"]["name"]
    assert "prebuilt Workload" in refused(lambda: batch.create_namespaced_job(NS, prebuilt))
    # a Pod through Kueue's pod integration: gated, labelled managed
    # 40 GPUs: beyond nlp's ceiling, so Kueue keeps it gated
    gated = core.create_namespaced_pod(NS, pod(unique("gated"), [gpu_container(40)], {QUEUE: "training"}))
    gated = eventually(lambda: core.read_namespaced_pod(gated.metadata.name, NS), "gated pod")
    gates = [g.name for g in gated.spec.scheduling_gates or []]
    if not gates:  # admitted at once (quota free): nothing to remove
        pytest.fail(f"Kueue did not gate {gated.metadata.name}: {gated.metadata.labels}")
    assert "may not lose its scheduling gate" in refused(lambda: core.patch_namespaced_pod(
        gated.metadata.name, NS, [{"op": "remove", "path": "/spec/schedulingGates"}]))
    assert "may not change" in refused(lambda: core.patch_namespaced_pod(
        gated.metadata.name, NS, {"metadata": {"labels": {"kueue.x-k8s.io/managed": None}}}))
    # the second line: a queue-less Job in a tenant namespace is held by Kueue, never run
    cpu_only = gpu_job(unique("noqueue"), queue=None)
    cpu_only["spec"]["template"]["spec"]["containers"] = [cpu_container()]
    held = batch.create_namespaced_job(NS, cpu_only)
    time.sleep(3)
    assert batch.read_namespaced_job(held.metadata.name, NS).spec.suspend is True
    assert not client.CoreV1Api(admin).list_namespaced_pod(NS, label_selector=f"job-name={held.metadata.name}").items
    # honest: the tenant changes the priority to one its queue allows, stops and deletes its job
    batch.patch_namespaced_job(name, NS, {"metadata": {"labels": {samples.PRIORITY_LABEL: "training-high"}}})
    batch.delete_namespaced_job(name, NS, propagation_policy="Background")


def test_class2_a_running_job_does_not_grow_and_stopped_pods_give_their_devices_back(cluster: Sandbox) -> None:
    """Once Kueue admits and unsuspends a Job, raising its parallelism made the Job controller start
    pods the queue never admitted, before Kueue's reconciler saw the mismatch and suspended the Job;
    and the pods Kueue stops (preemption, reclaim, a hold's drain) keep their devices for their
    terminationGracePeriodSeconds, which a tenant set to a day. Both are refused now."""
    tenant, admin = as_tenant(cluster), cluster.cp.api_client()
    batch = client.BatchV1Api(tenant)
    job = batch.create_namespaced_job(NS, gpu_job(unique("grow")))
    eventually(lambda: batch.read_namespaced_job(job.metadata.name, NS).spec.suspend is False, "Kueue to start it")
    name = job.metadata.name
    assert "its parallelism may not grow while it runs" in refused(
        lambda: batch.patch_namespaced_job(name, NS, {"spec": {"parallelism": 4}}))
    assert not [p for p in client.CoreV1Api(admin).list_namespaced_pod(NS, label_selector=f"job-name={name}").items
                if p.metadata.deletion_timestamp is None][1:]  # still the one pod it was admitted for
    # honest: a running Job may shrink (Kueue keeps it admitted for fewer pods); to grow, submit it again
    batch.patch_namespaced_job(name, NS, {"spec": {"parallelism": 0}})
    batch.delete_namespaced_job(name, NS, propagation_policy="Background")
    lingering = gpu_job(unique("linger"))
    lingering["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 86400
    message = refused(lambda: batch.create_namespaced_job(NS, lingering))
    assert "terminationGracePeriodSeconds 86400" in message and "at most 300" in message


def group_pod(name: str, group: str, gpus: int, count: int, **annotations: str) -> dict[str, Any]:
    manifest = pod(name, [gpu_container(gpus)], {QUEUE: "training", "kueue.x-k8s.io/pod-group-name": group})
    manifest["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-group-total-count": str(count), **annotations}
    return manifest


def test_class2_a_pod_group_runs_no_more_than_it_was_admitted_for(cluster: Sandbox) -> None:
    """Kueue builds a plain pod group's Workload from its first pod of each role and takes a pod's
    role from its `kueue.x-k8s.io/role-hash` annotation when the pod carries one (its webhook keeps
    it): a tenant's 1-GPU and 4-GPU pods under one role were admitted for 2 GPUs and both ran (5).
    Kueue's webhook writes the annotation on every pod it gates, before gpugov's policy reads it, so
    a tenant may no longer create a pod that joins a group, nor name the role in a template; the
    trusted controllers still may."""
    tenant = as_tenant(cluster)
    core, apps = client.CoreV1Api(tenant), client.AppsV1Api(tenant)
    for forged in ({"kueue.x-k8s.io/role-hash": "main"}, {}):
        group = unique("grp")
        for name, gpus in ((f"{group}-a", 1), (f"{group}-b", 4)):
            manifest = group_pod(name, group, gpus, 2, **forged)
            message = refused(lambda manifest=manifest: core.create_namespaced_pod(NS, manifest))
            assert "may not join a pod group" in message, message
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": unique("roledep")},
                  "spec": {"selector": {"matchLabels": {"app": "x"}},
                           "template": {"metadata": {"labels": {"app": "x", QUEUE: "training"},
                                                     "annotations": {"kueue.x-k8s.io/role-hash": "main"}},
                                        "spec": {"containers": [gpu_container(4)]}}}}
    assert "may not name its pods' role" in refused(lambda: apps.create_namespaced_deployment(NS, deployment))
    # a trusted controller (here the Job controller's identity) still forms groups
    trusted = client.CoreV1Api(as_tenant(cluster, JOB_CONTROLLER))
    trusted.create_namespaced_pod(NS, group_pod(unique("ctl"), unique("grp"), 1, 1), dry_run="All")


def test_class3_no_accelerator_without_a_resource_request(cluster: Sandbox) -> None:
    """The device runtime hands GPUs through the environment or the `nvidia` RuntimeClass, and
    privileged containers or /dev mounts reach them directly: none of these needs a GPU request,
    so no queue and no quota saw them. Now the variables and the RuntimeClass (without a GPU
    request) are refused by gpugov-device-access, and privileged, hostPath and host namespaces
    by the tenant namespace's Pod Security level (Guardrails.isolation.podSecurity: baseline)."""
    tenant = as_tenant(cluster)
    core, batch, apps = client.CoreV1Api(tenant), client.BatchV1Api(tenant), client.AppsV1Api(tenant)
    queued = {QUEUE: "training"}
    env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    for variant in (
        pod(unique("env"), [cpu_container(env=env)], queued),
        pod(unique("envmig"), [cpu_container(env=[{"name": "NVIDIA_MIG_CONFIG_DEVICES", "value": "all"}])], queued),
        pod(unique("init"), [cpu_container()], queued, initContainers=[cpu_container(name="init", env=env)]),
        pod(unique("prefix"), [cpu_container(envFrom=[{"prefix": "NVIDIA_", "configMapRef": {"name": "x"}}])], queued),
    ):
        assert "device runtime variable" in refused(lambda variant=variant: core.create_namespaced_pod(NS, variant))
    runtime = pod(unique("runtime"), [cpu_container()], queued, runtimeClassName="nvidia")
    assert "names a device RuntimeClass" in refused(lambda: core.create_namespaced_pod(NS, runtime))
    job = gpu_job(unique("envjob"))
    job["spec"]["template"]["spec"]["containers"] = [cpu_container(env=env)]
    assert "device runtime variable" in refused(lambda: batch.create_namespaced_job(NS, job))
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": unique("envdep")},
                  "spec": {"selector": {"matchLabels": {"app": "x"}},
                           "template": {"metadata": {"labels": {"app": "x", **queued}},
                                        "spec": {"containers": [cpu_container(env=env)]}}}}
    assert "device runtime variable" in refused(lambda: apps.create_namespaced_deployment(NS, deployment))
    labels = client.CoreV1Api(cluster.cp.api_client()).read_namespace(NS).metadata.labels
    assert labels.get("pod-security.kubernetes.io/enforce") == "baseline", labels
    for variant in (
        pod(unique("priv"), [cpu_container(securityContext={"privileged": True})], queued),
        pod(unique("dev"), [cpu_container(volumeMounts=[{"name": "dev", "mountPath": "/dev/nvidia0"}])], queued,
            volumes=[{"name": "dev", "hostPath": {"path": "/dev/nvidia0"}}]),
        pod(unique("hostpid"), [cpu_container()], queued, hostPID=True),
        pod(unique("caps"), [cpu_container(securityContext={"capabilities": {"add": ["SYS_ADMIN"]}})], queued),
    ):
        assert "violates PodSecurity" in refused(lambda variant=variant: core.create_namespaced_pod(NS, variant))
    # kubectl debug: an ephemeral container with the variable (refused by RBAC or by the policy)
    running = core.create_namespaced_pod(NS, pod(unique("debugged"), [cpu_container()], queued))
    body = {"spec": {"ephemeralContainers": [{"name": "debug", "image": samples.IMAGE, "env": env}]}}
    message = refused(lambda: core.patch_namespaced_pod_ephemeralcontainers(running.metadata.name, NS, body))
    assert "device runtime variable" in message or "forbidden" in message, message
    # spec.nodeName skips kube-scheduler and the nodes' taints: on a Pod, a Job's template, a Deployment's
    node = client.CoreV1Api(cluster.cp.api_client()).list_node(label_selector="gpugov.io/pool=h100").items[0].metadata.name
    # (a bare Pod already was refused: Kueue's pod webhook gates it, and a gated pod may not name a node)
    for variant in (pod(unique("nodename"), [gpu_container(1)], queued, nodeName=node),
                    pod(unique("cpunode"), [cpu_container()], queued, nodeName=node)):
        message = refused(lambda variant=variant: core.create_namespaced_pod(NS, variant))
        assert "names its node" in message or "cannot be set until all schedulingGates" in message, message
    job = gpu_job(unique("nodejob"))
    job["spec"]["template"]["spec"]["nodeName"] = node
    assert "names its node" in refused(lambda: batch.create_namespaced_job(NS, job))
    deployment["metadata"]["name"] = unique("nodedep")
    deployment["spec"]["template"]["spec"] = {"containers": [gpu_container(1)], "nodeName": node}
    assert "names its node" in refused(lambda: apps.create_namespaced_deployment(NS, deployment))
    # The runtime's device-list path (where gpugov's own agent asks for every device, compile.operations):
    # no tenant volume may sit there, whatever its source or depth, nor a key named as a device variable.
    for path in ("/var/run/nvidia-container-devices/all", "/var/run/nvidia-container-devices",
                 "/var/run/nvidia-container-devices/GPU-0"):
        for source in ({"emptyDir": {}}, {"configMap": {"name": "x"}}):
            mounted = pod(unique("devlist"), [cpu_container(volumeMounts=[{"name": "v", "mountPath": path}])],
                          queued, volumes=[{"name": "v", **source}])
            message = refused(lambda mounted=mounted: core.create_namespaced_pod(NS, mounted))
            assert "mounts a volume at /var/run/nvidia-container-devices" in message, message
    for kind, create in (("ConfigMap", core.create_namespaced_config_map), ("Secret", core.create_namespaced_secret)):
        body = {"metadata": {"name": unique("devvar")}, "data": {"NVIDIA_VISIBLE_DEVICES": "YWxs"}}
        message = refused(lambda body=body, create=create: create(NS, body))
        assert "carries a key named as a device runtime variable" in message, (kind, message)
    # honest: a queued GPU pod on the nvidia RuntimeClass
    honest = pod(unique("honest"), [gpu_container(1)], queued, runtimeClassName="nvidia")
    core.create_namespaced_pod(NS, honest, dry_run="All")


def test_class4_pod_priority_is_governed(cluster: Sandbox) -> None:
    """Only WorkloadPriorityClasses were governed: a pod could name system-node-critical or any
    PriorityClass and kube-scheduler's preemption then evicted protected pods on its node. Now a
    workload without a queue may name only Guardrails.isolation.podPriorityClasses (none), one
    with a queue only its queue's classes, through every kind that carries pods."""
    tenant = as_tenant(cluster)
    core, batch, apps = client.CoreV1Api(tenant), client.BatchV1Api(tenant), client.AppsV1Api(tenant)
    for name in ("system-node-critical", "system-cluster-critical", "sneaky-high"):
        bare = pod(unique("prio"), [cpu_container()], priorityClassName=name)
        assert f"priorityClassName {name} without a queue" in refused(lambda bare=bare: core.create_namespaced_pod(NS, bare))
        queued = pod(unique("prioq"), [gpu_container(1)], {QUEUE: "training"}, priorityClassName=name)
        assert f"priorityClassName {name} is not allowed on queue {NS}/training" in refused(
            lambda queued=queued: core.create_namespaced_pod(NS, queued))
        job = gpu_job(unique("prioj"))
        job["spec"]["template"]["spec"]["priorityClassName"] = name
        assert "is not allowed on queue" in refused(lambda job=job: batch.create_namespaced_job(NS, job))
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": unique("priod")},
                      "spec": {"selector": {"matchLabels": {"app": "x"}},
                               "template": {"metadata": {"labels": {"app": "x"}},
                                            "spec": {"containers": [cpu_container()], "priorityClassName": name}}}}
        assert "without a queue" in refused(lambda deployment=deployment: apps.create_namespaced_deployment(NS, deployment))
        cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": unique("prioc")},
                "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {
                    "containers": [cpu_container()], "restartPolicy": "Never", "priorityClassName": name}}}}}}
        assert "without a queue" in refused(lambda cron=cron: batch.create_namespaced_cron_job(NS, cron))
    # honest: no priorityClassName (the queue's WorkloadPriorityClass orders the workload)
    core.create_namespaced_pod(NS, pod(unique("noprio"), [cpu_container()]), dry_run="All")


def _modcache() -> Path:
    try:
        out = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as exc:
        skip_or_fail(f"e2e: no Go module cache for the workload CRDs: {exc}")
        raise
    return Path(out)


@pytest.fixture(scope="module")
def workload_crds(cluster: Sandbox) -> list[str]:
    """The real CRDs of JobSet, LeaderWorkerSet, KubeRay, Kubeflow (from the Go module cache, where
    `tools/build kueue` leaves them: Kueue v0.17.0 depends on each), installed on the sandbox."""
    modcache, found = _modcache(), []
    for name, (glob, path) in WORKLOAD_CRDS.items():
        modules = sorted(modcache.glob(glob))
        files = [m / path for m in modules if (m / path).is_file()]
        if not files:
            skip_or_fail(f"e2e: CRD {name} not in the Go module cache ({glob}/{path}); run tools/build kueue")
        crd = yaml.safe_load(files[-1].read_text())
        crd["metadata"] = {"name": crd["metadata"]["name"]}
        crd.pop("status", None)
        found.append(crd)
    names = crd_mod.apply_crds(cluster.cp.dynamic_client(), found)
    crd_mod.wait_established(cluster.cp.api_client(), names)
    return names


def _workload(kind: str, spec: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    """One object of `kind` whose pods run `spec`, labelled where Kueue reads its queue."""
    template = {"spec": spec}
    shapes: dict[str, tuple[str, dict[str, Any]]] = {
        "JobSet": ("jobset.x-k8s.io/v1alpha2", {"replicatedJobs": [
            {"name": "w", "replicas": 1, "template": {"spec": {"template": template}}}]}),
        "RayJob": ("ray.io/v1", {"entrypoint": "python x.py", "rayClusterSpec": {
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [cpu_container()]}}},
            "workerGroupSpecs": [{"groupName": "w", "replicas": 1, "minReplicas": 1, "maxReplicas": 1,
                                  "rayStartParams": {}, "template": template}]}}),
        "RayCluster": ("ray.io/v1", {"headGroupSpec": {"rayStartParams": {}, "template": template}}),
        "PyTorchJob": ("kubeflow.org/v1", {"pytorchReplicaSpecs": {"Master": {
            "replicas": 1, "template": {"spec": {**spec, "containers": [{**c, "name": "pytorch"}
                                                                        for c in spec["containers"]]}}}}}),
        "TrainJob": ("trainer.kubeflow.org/v1alpha1", {"runtimeRef": {"name": "torch-distributed"}, "trainer": {
            "resourcesPerNode": spec["containers"][0].get("resources", {}),
            **({"env": spec["containers"][0]["env"]} if "env" in spec["containers"][0] else {})}}),
        "LeaderWorkerSet": ("leaderworkerset.x-k8s.io/v1", {"replicas": 1, "leaderWorkerTemplate": {
            "size": 1, "workerTemplate": template}}),
        "Deployment": ("apps/v1", {"selector": {"matchLabels": {"app": "w"}},
                                   "template": {"metadata": {"labels": {"app": "w", **labels}}, "spec": spec}}),
        "StatefulSet": ("apps/v1", {"serviceName": "w", "selector": {"matchLabels": {"app": "w"}},
                                    "template": {"metadata": {"labels": {"app": "w", **labels}}, "spec": spec}}),
    }
    api_version, body = shapes[kind]
    on_object = kind not in ("Deployment", "StatefulSet")  # those: the pod template's labels
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": unique(kind.lower()), "labels": labels if on_object else {}}, "spec": body}


def _kind_obeys_the_rules(dynamic: DynamicClient, kind: str, gpu_spec: dict[str, Any], env_spec: dict[str, Any],
                          queued: dict[str, str]) -> None:
    serving = kind in ("Deployment", "StatefulSet", "LeaderWorkerSet", "RayCluster")  # restartPolicy Always
    spec = {**gpu_spec, "restartPolicy": "Always"} if serving else gpu_spec
    env = {**env_spec, "restartPolicy": "Always"} if serving else env_spec
    resource = dynamic.resources.get(api_version=_workload(kind, spec, {})["apiVersion"], kind=kind)

    def create(obj: dict[str, Any], dry: bool = False) -> Any:
        return resource.create(body=obj, namespace=NS, **({"query_params": [("dryRun", "All")]} if dry else {}))

    assert "without a queue" in refused(lambda: create(_workload(kind, spec, {}))), kind
    assert "is not declared for namespace" in refused(lambda: create(_workload(kind, spec, {QUEUE: "elsewhere"}))), kind
    assert "priority class inference-critical is not allowed" in refused(lambda: create(
        _workload(kind, spec, {**queued, samples.PRIORITY_LABEL: "inference-critical"}))), kind
    assert "device runtime variable" in refused(lambda: create(_workload(kind, env, queued))), kind
    create(_workload(kind, spec, queued), dry=True)  # the honest form is accepted


def test_class5_every_kind_obeys_the_queue_rules(cluster: Sandbox, workload_crds: list[str]) -> None:
    """Only batch/v1 Jobs and Pods were checked: a JobSet, RayJob, PyTorchJob, TrainJob,
    LeaderWorkerSet, Deployment or StatefulSet asked for GPUs with no queue, an undeclared queue or
    a forbidden priority. Each kind now obeys the same rules, and its honest form is accepted."""
    dynamic = DynamicClient(as_tenant(cluster))
    gpu_spec = {"containers": [gpu_container(1)], "restartPolicy": "Never"}
    env_spec = {"containers": [cpu_container(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])],
                "restartPolicy": "Never"}
    queued = {QUEUE: "training"}
    for kind in ("Deployment", "StatefulSet", "JobSet", "RayJob", "RayCluster", "PyTorchJob", "TrainJob",
                 "LeaderWorkerSet"):
        _kind_obeys_the_rules(dynamic, kind, gpu_spec, env_spec, queued)
    # the honest child of a framework's controller (a JobSet's Job, created by JobSet's identity)
    jobset = dynamic.resources.get(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet").create(
        body=_workload("JobSet", gpu_spec, queued), namespace=NS)
    child = gpu_job(unique("jschild"), queue=None)
    child["metadata"]["ownerReferences"] = [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                                              "name": jobset.metadata.name, "uid": jobset.metadata.uid,
                                              "controller": True}]
    client.BatchV1Api(as_tenant(cluster, JOBSET_CONTROLLER)).create_namespaced_job(NS, child, dry_run="All")
    child["metadata"]["labels"][QUEUE] = "training"  # so that only the owner reference is wrong
    assert "as its owner" in refused(lambda: client.BatchV1Api(as_tenant(cluster)).create_namespaced_job(NS, child))
    dynamic.resources.get(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet").delete(
        name=jobset.metadata.name, namespace=NS)


def until_refused(call: Callable[[], Any], timeout: float = 15.0) -> str:
    """refused(call), asked again while the API server does not enforce a policy applied a moment ago
    (`living_org` waits for the probed policies only). Every call is a server-side dry run or refused."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            call()
        except ApiException as exc:
            assert exc.status in (400, 403, 404, 422), exc
            return str(json.loads(exc.body).get("message", exc.body))
        assert time.monotonic() < deadline, "the API server accepted it"
        time.sleep(0.5)


def test_class7_the_rest_of_the_namespace_is_refused(cluster: Sandbox) -> None:
    """The tenant namespaces enforce Pod Security baseline here (the example org says why), which lets a
    pod mount any NFS export or iSCSI target as any uid, and an owner may create any Service: one that
    claims externalIPs takes the cluster's traffic to that address (CVE-2020-8554), a NodePort or
    LoadBalancer opens the namespace outside the cluster. Each is refused now, as alice; the tenant's
    own storage and a ClusterIP Service are not. Every request is a server-side dry run."""
    tenant = as_tenant(cluster)
    core, batch, apps = client.CoreV1Api(tenant), client.BatchV1Api(tenant), client.AppsV1Api(tenant)
    nfs = {"name": "data", "nfs": {"server": "10.0.0.9", "path": "/exports/speech"}}
    iscsi = {"name": "data", "iscsi": {"targetPortal": "10.0.0.9:3260", "iqn": "iqn.2001-04.com.example:t", "lun": 0}}
    csi = {"name": "data", "csi": {"driver": "nfs.csi.k8s.io", "volumeAttributes": {"server": "10.0.0.9",
                                                                                   "share": "/exports/speech"}}}
    for volume in (nfs, iscsi):
        plain = pod(unique("nfs"), [cpu_container()], {QUEUE: "training"}, volumes=[volume])
        assert "mounts network or node storage" in until_refused(
            lambda plain=plain: core.create_namespaced_pod(NS, plain, dry_run="All"))
        job = gpu_job(unique("nfsjob"))
        job["spec"]["template"]["spec"]["volumes"] = [volume]
        assert "mounts network or node storage" in until_refused(
            lambda job=job: batch.create_namespaced_job(NS, job, dry_run="All"))
    inline = pod(unique("csi"), [cpu_container()], {QUEUE: "training"}, volumes=[csi])
    assert "inline CSI volume of driver nfs.csi.k8s.io" in until_refused(
        lambda: core.create_namespaced_pod(NS, inline, dry_run="All"))
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": unique("claim")},
             "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Ti"}}}}
    named = {**claim, "spec": {**claim["spec"], "volumeName": "speech-datasets"}}
    assert "claims an existing PersistentVolume" in until_refused(
        lambda: core.create_namespaced_persistent_volume_claim(NS, named, dry_run="All"))
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": unique("sts")},
           "spec": {"selector": {"matchLabels": {"app": "x"}}, "serviceName": "x",
                    "template": {"metadata": {"labels": {"app": "x", QUEUE: "training"}},
                                 "spec": {"containers": [cpu_container()]}},
                    "volumeClaimTemplates": [{"metadata": {"name": "d"}, "spec": named["spec"]}]}}
    assert "claims an existing PersistentVolume" in until_refused(
        lambda: apps.create_namespaced_stateful_set(NS, sts, dry_run="All"))

    def service(kind: str, **spec: Any) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": unique("svc")},
                "spec": {"type": kind, "ports": [{"port": 80}], "selector": {"app": "dash"}, **spec}}

    assert "claims externalIPs (10.96.0.10)" in until_refused(lambda: core.create_namespaced_service(
        NS, service("ClusterIP", externalIPs=["10.96.0.10"]), dry_run="All"))
    for kind in ("NodePort", "LoadBalancer"):
        assert f"is of type {kind}" in until_refused(
            lambda kind=kind: core.create_namespaced_service(NS, service(kind), dry_run="All"))
    # honest: the tenant's own claim, its own volumes, a ClusterIP Service
    core.create_namespaced_persistent_volume_claim(NS, claim, dry_run="All")
    own = pod(unique("own"), [cpu_container()], {QUEUE: "training"}, volumes=[
        {"name": "c", "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}}, {"name": "e", "emptyDir": {}}])
    core.create_namespaced_pod(NS, own, dry_run="All")
    core.create_namespaced_service(NS, service("ClusterIP"), dry_run="All")


def test_class8_a_pod_stays_its_controllers(cluster: Sandbox) -> None:
    """The owner role may patch a running pod's labels. The Job controller claims its pods by their
    controller-uid label: relabelled, a pod is released (its ownerReference removed) and the Job starts
    a replacement, while the released pod runs on with its GPU and no Workload counts it. A tenant's
    change of a controlled pod's labels or ownerReferences is refused now; the same relabel sent by a
    trusted identity (which the policy leaves alone, as it left everyone before) shows what it did."""
    tenant, admin = as_tenant(cluster), cluster.cp.api_client()
    batch, core = client.BatchV1Api(tenant), client.CoreV1Api(tenant)
    job = batch.create_namespaced_job(NS, gpu_job(unique("held")))
    selector = f"batch.kubernetes.io/controller-uid={job.metadata.uid}"
    running = eventually(lambda: [p for p in client.CoreV1Api(admin).list_namespaced_pod(
        NS, label_selector=selector).items if p.status.phase == "Running"], "the Job's pod Running", timeout=90)
    name = running[0].metadata.name
    for patch in ({"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "released"}}},
                  {"metadata": {"labels": {"job-name": None}}}, {"metadata": {"labels": {"note": "added"}}}):
        assert "its labels may not change" in until_refused(
            lambda patch=patch: core.patch_namespaced_pod(name, NS, patch, dry_run="All"))
    assert "ownerReferences may not change" in until_refused(lambda: core.patch_namespaced_pod(
        name, NS, [{"op": "remove", "path": "/metadata/ownerReferences"}], dry_run="All"))
    core.patch_namespaced_pod(name, NS, {"metadata": {"annotations": {"note": "still mine"}}})  # honest
    # what the relabel did: the Job controller lets the pod go and starts another; the released pod keeps its GPU
    trusted = client.CoreV1Api(impersonate(admin, "system:kube-controller-manager", ["system:masters"]))
    trusted.patch_namespaced_pod(name, NS, {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "released",
                                                                    "controller-uid": "released"}}})
    released = eventually(lambda: (lambda p: p if not p.metadata.owner_references else None)(
        client.CoreV1Api(admin).read_namespaced_pod(name, NS)), "the pod released by its Job", timeout=60)
    replacement = eventually(lambda: [p for p in client.CoreV1Api(admin).list_namespaced_pod(
        NS, label_selector=selector).items if p.metadata.name != name], "the Job's replacement pod", timeout=60)
    assert released.status.phase == "Running" and released.spec.node_name
    assert released.spec.containers[0].resources.limits[GPU] == "1" and replacement
    client.CoreV1Api(admin).delete_namespaced_pod(name, NS, grace_period_seconds=0)
    batch.delete_namespaced_job(job.metadata.name, NS, propagation_policy="Background")


def test_class9_only_an_admission_places_a_pod_on_a_pool(cluster: Sandbox) -> None:
    """A pod that requests no GPU, tolerates the pool's taint and selects its nodes was accepted and ran on
    a GPU server (where a CUDA image's own NVIDIA_VISIBLE_DEVICES=all reaches the devices). Refused now,
    in a Pod and a Job template; Kueue's own injection of the flavor on admission still places the
    tenant's queued GPU Job (the honest path of every test here)."""
    core, batch = client.CoreV1Api(as_tenant(cluster)), client.BatchV1Api(as_tenant(cluster))
    taint = [{"key": "gpugov.io/pool", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}]
    for extra in ({"nodeSelector": H100, "tolerations": taint}, {"tolerations": EVERYWHERE},
                  {"nodeSelector": {"kubernetes.io/hostname": "h100-01"}, "tolerations": taint}):
        plain = pod(unique("cpu"), [cpu_container()], {QUEUE: "training"}, **extra)
        assert "requests no accelerator but" in until_refused(
            lambda plain=plain: core.create_namespaced_pod(NS, plain, dry_run="All"))
        job = gpu_job(unique("cpujob"))
        job["spec"]["template"]["spec"].update({"containers": [cpu_container()], **extra})
        assert "requests no accelerator but" in until_refused(
            lambda job=job: batch.create_namespaced_job(NS, job, dry_run="All"))


def test_honest_deployment_runs_through_the_pod_integration(cluster: Sandbox) -> None:
    """A tenant's Deployment whose pod template carries the queue label: its ReplicaSet's pods
    (created by the controller manager) are gated by Kueue, admitted through the queue and run."""
    apps = client.AppsV1Api(as_tenant(cluster))
    name = unique("serve")
    apps.create_namespaced_deployment(NS, {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                                           "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                                                    "template": {"metadata": {"labels": {"app": name, QUEUE: "training"}},
                                                                 "spec": {"containers": [gpu_container(1)]}}}})
    core = client.CoreV1Api(cluster.cp.api_client())
    running = eventually(lambda: [p for p in core.list_namespaced_pod(NS, label_selector=f"app={name}").items
                                  if p.status.phase == "Running"], "the Deployment's pod Running", timeout=90)
    assert running[0].spec.node_name and not running[0].spec.scheduling_gates
    # a bound pod (nodeName set by the scheduler) may still be updated by its tenant (its labels are its
    # ReplicaSet's: test_class8_a_pod_stays_its_controllers)
    client.CoreV1Api(as_tenant(cluster)).patch_namespaced_pod(running[0].metadata.name, NS,
                                                              {"metadata": {"annotations": {"note": "annotated"}}})
    apps.delete_namespaced_deployment(name, NS)


def test_honest_sample_jobs_of_make_demo_still_run(cluster: Sandbox, living_org: list[dict[str, Any]]) -> None:
    """`make demo`'s sample Jobs, one per tenant, each submitted as an owner of its tenant."""
    model = validate_repo(REPO).model
    assert model is not None
    jobs = samples.sample_jobs(living_org)
    assert jobs
    for job in jobs:
        owners = model.tenants[job.tenant].owners
        who = (owners.users[0] if owners.users else f"someone@{job.tenant}", list(owners.groups))
        client.BatchV1Api(as_tenant(cluster, who)).create_namespaced_job(job.namespace, samples.job_manifest(job, "2s"))
    admin = cluster.cp.api_client()
    seen = samples.wait(admin, jobs, until="finished", timeout=180)
    assert all(o.finished for o in seen), samples.table(seen)
    for job in jobs:
        client.BatchV1Api(admin).delete_namespaced_job(job.name, job.namespace, propagation_policy="Background")


def _doctor(capsys: pytest.CaptureFixture[str], sandbox: Sandbox) -> dict[str, dict[str, Any]]:
    main(["doctor", str(REPO), "--cluster", "east", "--kubeconfig", str(sandbox.cp.kubeconfig), "--format", "json"])
    out = capsys.readouterr().out
    return {c["id"]: c for c in json.loads(out)["checks"]}


def test_doctor_fails_where_a_control_is_missing(cluster: Sandbox, living_org: list[dict[str, Any]],
                                                 workload_crds: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """gpugov doctor on the sandbox: the tenant isolation checks pass; a tenant namespace
    relabelled privileged (DR041), a policy's trust widened by hand (DR042), Kueue's Configuration
    without manageJobsWithoutQueueName (DR004) or without the integrations of the workload CRDs
    installed here (DR040) each fail; restored, they pass."""
    admin = cluster.cp.api_client()
    core = client.CoreV1Api(admin)
    checks = _doctor(capsys, cluster)
    assert checks["DR041"]["status"] == "pass" and checks["DR042"]["status"] == "pass", checks
    core.patch_namespace(NS, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}})
    try:
        failed = _doctor(capsys, cluster)["DR041"]
        assert failed["status"] == "fail" and "nlp-train (enforce privileged)" in failed["message"]
    finally:
        core.patch_namespace(NS, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "baseline"}}})
    policies = client.AdmissionregistrationV1Api(admin)
    widened = policies.read_validating_admission_policy("gpugov-workload-ownership")
    widened.spec.match_conditions[0].expression = "false"
    policies.replace_validating_admission_policy("gpugov-workload-ownership", widened)
    try:
        failed = _doctor(capsys, cluster)["DR042"]
        assert failed["status"] == "fail" and "gpugov-workload-ownership" in failed["message"]
    finally:
        assert not apply_objects(admin, [o for o in living_org if o["metadata"]["name"] == "gpugov-workload-ownership"
                                         and o["kind"] == "ValidatingAdmissionPolicy"]).missing
    assert _doctor(capsys, cluster)["DR042"]["status"] == "pass"
    running = yaml.safe_load((cluster.cp.workdir / "kueue" / "config.yaml").read_text())
    body = {"metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
            "data": {"controller_manager_config.yaml": yaml.safe_dump(running)}}
    core.create_namespaced_config_map("kueue-system", body)
    try:
        checks = _doctor(capsys, cluster)
        assert checks["DR004"]["status"] == "pass", checks["DR004"]
        # the sandbox's Kueue runs batch/job and pod only, and this module installed JobSet's CRD
        assert checks["DR040"]["status"] == "fail", checks["DR040"]
        assert "jobset.x-k8s.io/jobset (CRD jobsets.jobset.x-k8s.io installed)" in checks["DR040"]["message"]
        frameworks = ["batch/job", "pod", "jobset.x-k8s.io/jobset", "leaderworkerset.x-k8s.io/leaderworkerset",
                      "ray.io/rayjob", "ray.io/raycluster", "kubeflow.org/pytorchjob", "trainer.kubeflow.org/trainjob"]
        body["data"]["controller_manager_config.yaml"] = yaml.safe_dump({**running, "integrations": {
            "frameworks": frameworks}})
        core.replace_namespaced_config_map("kueue-manager-config", "kueue-system", body)
        assert _doctor(capsys, cluster)["DR040"]["status"] == "pass"
        body["data"]["controller_manager_config.yaml"] = yaml.safe_dump({**running, "manageJobsWithoutQueueName": False})
        core.replace_namespaced_config_map("kueue-manager-config", "kueue-system", body)
        assert _doctor(capsys, cluster)["DR004"]["status"] == "fail"
    finally:
        core.delete_namespaced_config_map("kueue-manager-config", "kueue-system")

