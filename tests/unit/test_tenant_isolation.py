"""Issue #21 without an apiserver: compile's admission policies for the example org's cluster east,
evaluated by a small VAP evaluator (tests/helpers/vap_eval.py) for requests as a tenant sends them (alice of
nlp-team, in nlp-train) and as the trusted controllers send them. One test per class of escape,
each with several variants, and the honest path of every kind. The living sandbox proves the same
with the real apiserver and Kueue (tests/e2e/test_tenant_escape.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.compile import compile
from gpugov.compile.admission import (
    DEVICE_ACCESS,
    LIFECYCLE,
    NEED_A_QUEUE,
    OWNERSHIP,
    POD_PRIORITY,
    QUEUE_ACCESS,
    WORKLOAD_KINDS,
)
from gpugov.compile.core import pod_security_labels
from tests.helpers.repos import REPO
from tests.helpers.vap_eval import Request, evaluate

NS = "nlp-train"
TENANT = ("alice@example.com", ("nlp-team", "system:authenticated"))
JOB_CONTROLLER = ("system:serviceaccount:kube-system:job-controller", ("system:serviceaccounts",
                                                                       "system:serviceaccounts:kube-system"))
KUEUE = ("system:serviceaccount:kueue-system:kueue-controller-manager", ("system:serviceaccounts:kueue-system",))
GPU = {"nvidia.com/gpu": "8"}
QUEUED = {"kueue.x-k8s.io/queue-name": "training"}


@pytest.fixture(scope="module")
def policies() -> list[dict[str, Any]]:
    model = validate_repo(REPO).model
    assert model is not None
    return compile(model, backend="kueue", cluster="east")


def container(limits: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"name": "main", "image": "pause", **({"resources": {"limits": limits}} if limits else {}), **extra}


def pod_spec(limits: dict[str, str] | None = GPU, **extra: Any) -> dict[str, Any]:
    return {"containers": [container(limits)], "restartPolicy": "Never", **extra}


def pod(labels: dict[str, str] | None = None, spec: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": NS, "labels": labels or {}, **meta},
            "spec": spec if spec is not None else pod_spec()}


def job(labels: dict[str, str] | None = None, spec: dict[str, Any] | None = None, suspend: bool = True,
        **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": NS, "labels": labels if labels is not None else dict(QUEUED), **meta},
            "spec": {"suspend": suspend, "template": {"spec": spec if spec is not None else pod_spec()}}}


def denied(policies: list[dict[str, Any]], obj: dict[str, Any], old: dict[str, Any] | None = None,
           who: tuple[str, tuple[str, ...]] = TENANT, subresource: str = "") -> list[str]:
    group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
    resource = next(k.resource for k in WORKLOAD_KINDS if k.kind == obj["kind"])
    request = Request("UPDATE" if old is not None else "CREATE", group, resource, NS, who[0], who[1], subresource)
    return evaluate(policies, request, obj, old)


def by(policy: str, messages: list[str]) -> bool:
    return any(m.startswith(policy + ":") for m in messages)


def test_class1_ownership_is_not_taken_on_the_tenants_word(policies: list[dict[str, Any]]) -> None:
    """A Pod or Job that names a Job (or any Kueue-managed parent) as owner, controller or not, with
    or without a queue label, is refused when a tenant sends it; the same from the Job controller is
    the honest child of a checked Job and passes."""
    for controller in (True, False):
        for kind in ("Job", "JobSet", "RayCluster", "PyTorchJob", "LeaderWorkerSet", "Workload"):
            owner = [{"apiVersion": "batch/v1", "kind": kind, "name": "admitted", "uid": "u-1", "controller": controller}]
            for obj in (pod(ownerReferences=owner), pod(QUEUED, ownerReferences=owner), job(ownerReferences=owner)):
                messages = denied(policies, obj)
                assert by(OWNERSHIP, messages), (kind, controller, obj["kind"], messages)
                assert f"names {kind} admitted as its owner" in " ".join(messages)
    honest_child = pod(ownerReferences=[{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u-1",
                                         "controller": True}])
    assert denied(policies, honest_child, who=JOB_CONTROLLER) == []
    assert denied(policies, honest_child, who=("system:kube-controller-manager", ("system:authenticated",))) == []
    # re-parenting an existing pod later is the same claim
    plain = pod(QUEUED)
    reparented = copy.deepcopy(plain)
    reparented["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "x", "uid": "u-2"}]
    assert by(OWNERSHIP, denied(policies, reparented, old=plain))
    # the tenant may annotate the Job controller's pod later; a label of it is its controller's
    # (gpugov-controller-release: relabelled, the Job would release it, tests/unit/test_namespace_isolation.py)
    annotated = copy.deepcopy(honest_child)
    annotated["metadata"]["annotations"] = {"team": "nlp"}
    assert denied(policies, annotated, old=honest_child) == []
    relabelled = copy.deepcopy(honest_child)
    relabelled["metadata"]["labels"]["team"] = "nlp"
    assert [m.split(":")[0] for m in denied(policies, relabelled, old=honest_child)] == ["gpugov-controller-release"]
    # a pod owned by another pod (Spark's executors) is no Kueue parent: not this class
    assert not by(OWNERSHIP, denied(policies, pod(QUEUED, ownerReferences=[
        {"apiVersion": "v1", "kind": "Pod", "name": "driver", "uid": "u-3", "controller": True}])))


def test_class2_a_queued_workload_stays_held_after_creation(policies: list[dict[str, Any]]) -> None:
    held = job()
    # the queue label removed (then suspend cleared): refused at the first step
    unlabelled = job(labels={})
    assert by(NEED_A_QUEUE, denied(policies, unlabelled, old=held))
    # suspend cleared by the tenant, label kept
    assert by(LIFECYCLE, denied(policies, job(suspend=False), old=held))
    # the queue moved to an undeclared queue
    assert by(QUEUE_ACCESS, denied(policies, job(labels={"kueue.x-k8s.io/queue-name": "other"}), old=held))
    # Kueue's own labels and annotations: managed label removed, prebuilt workload named
    gated = pod({**QUEUED, "kueue.x-k8s.io/managed": "true"},
                pod_spec(schedulingGates=[{"name": "kueue.x-k8s.io/admission"}]))
    unmanaged = copy.deepcopy(gated)
    del unmanaged["metadata"]["labels"]["kueue.x-k8s.io/managed"]
    assert by(LIFECYCLE, denied(policies, unmanaged, old=gated))
    ungated = copy.deepcopy(gated)
    ungated["spec"]["schedulingGates"] = []
    assert "may not lose its scheduling gate kueue.x-k8s.io/admission" in " ".join(denied(policies, ungated, old=gated))
    annotated = copy.deepcopy(held)
    annotated["metadata"]["annotations"] = {"kueue.x-k8s.io/workload": "other"}
    assert by(LIFECYCLE, denied(policies, annotated, old=held))
    assert by(LIFECYCLE, denied(policies, job({**QUEUED, "kueue.x-k8s.io/prebuilt-workload-name": "w-admitted"})))
    for kind, field in (("JobSet", ("spec", "suspend")), ("PyTorchJob", ("spec", "runPolicy", "suspend"))):
        api = {"JobSet": "jobset.x-k8s.io/v1alpha2", "PyTorchJob": "kubeflow.org/v1"}[kind]
        before = {"apiVersion": api, "kind": kind, "metadata": {"name": "x", "namespace": NS, "labels": QUEUED},
                  "spec": {}}
        target = before["spec"]
        for part in field[1:-1]:
            target = target.setdefault(part, {})
        target[field[-1]] = True
        after = copy.deepcopy(before)
        target = after["spec"]
        for part in field[1:-1]:
            target = target[part]
        target[field[-1]] = False
        assert by(LIFECYCLE, denied(policies, after, old=before)), kind
        assert denied(policies, after, old=before, who=KUEUE) == [], kind
    # honest: Kueue admits (clears suspend, removes its gate); the tenant relabels a priority it may use,
    # moves a suspended job to another declared queue of the namespace, or stops a job
    assert denied(policies, job(suspend=False), old=held, who=KUEUE) == []
    assert denied(policies, ungated, old=gated, who=KUEUE) == []
    assert denied(policies, job({**QUEUED, "kueue.x-k8s.io/priority-class": "batch-low"}), old=held) == []
    assert denied(policies, job(suspend=True), old=job(suspend=False)) == []


def test_class3_no_accelerator_without_a_resource_request(policies: list[dict[str, Any]]) -> None:
    for env in ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_MIG_CONFIG_DEVICES", "ASCEND_VISIBLE_DEVICES"):
        spec = pod_spec(None)
        spec["containers"][0]["env"] = [{"name": env, "value": "all"}]
        assert by(DEVICE_ACCESS, denied(policies, pod(spec=spec))), env
        init = pod_spec(None, initContainers=[container(env=[{"name": env, "value": "all"}])])
        assert by(DEVICE_ACCESS, denied(policies, job(spec=init))), env
    prefixed = pod_spec(None)
    prefixed["containers"][0]["envFrom"] = [{"prefix": "NVIDIA_", "configMapRef": {"name": "devices"}}]
    assert by(DEVICE_ACCESS, denied(policies, pod(spec=prefixed)))
    runtime = pod_spec(None, runtimeClassName="nvidia")
    assert "names a device RuntimeClass" in " ".join(denied(policies, pod(spec=runtime)))
    # kubectl debug: an ephemeral container with the variable
    running = pod(QUEUED, pod_spec(None))
    debugged = copy.deepcopy(running)
    debugged["spec"]["ephemeralContainers"] = [container(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "0"}])]
    assert by(DEVICE_ACCESS, denied(policies, debugged, old=running, subresource="ephemeralcontainers"))
    # honest: a queued GPU pod on the nvidia runtime; a CPU pod; and Pod Security at the declared level
    assert denied(policies, pod(QUEUED, pod_spec(GPU, runtimeClassName="nvidia"))) == []
    assert denied(policies, pod(spec=pod_spec(None))) == []
    model = validate_repo(REPO).model
    namespaces = [o for o in compile(model, backend="kueue", cluster="east")
                  if o["kind"] == "Namespace" and "gpugov.io/tenant" in o["metadata"]["labels"]]
    assert namespaces and all(n["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
                              for n in namespaces)


def test_class3_no_pod_names_its_node(policies: list[dict[str, Any]]) -> None:
    """spec.nodeName skips kube-scheduler, so the nodes' taints and Kueue's topology stop holding: a
    tenant may not set it on a Pod, in a Job's template, in an init-only spec or through any other
    kind; a bound Pod (nodeName set by the scheduler's binding) may still be updated, and the
    controllers' own pods are theirs."""
    for node in ("gpu-h100-001", "cpu-01"):
        assert "names its node (nodeName " + node in " ".join(denied(policies, pod(QUEUED, pod_spec(nodeName=node))))
        assert by(DEVICE_ACCESS, denied(policies, pod(QUEUED, pod_spec(None, nodeName=node))))  # CPU work on a GPU node
        assert by(DEVICE_ACCESS, denied(policies, job(spec=pod_spec(nodeName=node))))
        updated = job(spec=pod_spec())
        assert by(DEVICE_ACCESS, denied(policies, job(spec=pod_spec(nodeName=node)), old=updated))
        for kind in ("Deployment", "StatefulSet", "CronJob", "JobSet", "RayCluster", "LeaderWorkerSet"):
            assert by(DEVICE_ACCESS, denied(policies, _kind_object(kind, pod_spec(nodeName=node), QUEUED))), kind
    bound = pod(QUEUED, pod_spec(nodeName="gpu-h100-001"))
    relabelled = copy.deepcopy(bound)
    relabelled["metadata"]["labels"]["team-note"] = "x"
    assert not by(DEVICE_ACCESS, denied(policies, relabelled, old=bound))
    assert denied(policies, pod(QUEUED, pod_spec(nodeName=""))) == []
    assert denied(policies, pod(spec=pod_spec(nodeName="gpu-h100-001")), who=JOB_CONTROLLER) == []


def test_class2_no_tenant_pod_joins_a_plain_pod_group_or_names_its_role(policies: list[dict[str, Any]]) -> None:
    """Kueue files a plain pod group's pods under the role their kueue.x-k8s.io/role-hash names
    (its webhook keeps one the pod brings), so a tenant's pod may not join a group, and a
    template may not name the role; the trusted controllers' pods may, and an ordinary Pod, a
    Deployment and a StatefulSet without the annotation pass."""
    grouped = {**QUEUED, "kueue.x-k8s.io/pod-group-name": "g"}
    for notes in ({"kueue.x-k8s.io/role-hash": "main", "kueue.x-k8s.io/pod-group-total-count": "2"},
                  {"kueue.x-k8s.io/pod-group-total-count": "2"}):
        assert by(LIFECYCLE, denied(policies, pod(grouped, annotations=notes)))
    assert denied(policies, pod(grouped, annotations={"kueue.x-k8s.io/pod-group-total-count": "2"}),
                  who=JOB_CONTROLLER) == []
    assert denied(policies, pod(QUEUED, annotations={"kueue.x-k8s.io/role-hash": "abc"})) == []  # Kueue's own, one pod
    for kind in ("Deployment", "StatefulSet", "LeaderWorkerSet"):
        named = _kind_object(kind, pod_spec(), QUEUED)
        template = named["spec"]["leaderWorkerTemplate"]["workerTemplate"] if kind == "LeaderWorkerSet" else \
            named["spec"]["template"]
        template.setdefault("metadata", {})["annotations"] = {"kueue.x-k8s.io/role-hash": "main"}
        assert "may not name its pods' role" in " ".join(denied(policies, named)), kind
        assert denied(policies, _kind_object(kind, pod_spec(), QUEUED)) == [], kind
    leader = _kind_object("LeaderWorkerSet", pod_spec(), QUEUED)
    leader["spec"]["leaderWorkerTemplate"]["leaderTemplate"] = {
        "metadata": {"annotations": {"kueue.x-k8s.io/role-hash": "worker"}}, "spec": pod_spec()}
    assert "may not name its pods' role" in " ".join(denied(policies, leader))


def test_class4_pod_priority_is_governed(policies: list[dict[str, Any]]) -> None:
    for name in ("system-node-critical", "system-cluster-critical", "inference-critical", "anything"):
        messages = denied(policies, pod(spec=pod_spec(None, priorityClassName=name)))
        assert by(POD_PRIORITY, messages) and f"priorityClassName {name} without a queue" in " ".join(messages)
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": NS},
                      "spec": {"template": {"spec": pod_spec(None, priorityClassName=name)}}}
        assert by(POD_PRIORITY, denied(policies, deployment))
    queued = denied(policies, job(spec=pod_spec(GPU, priorityClassName="system-node-critical")))
    assert "priorityClassName system-node-critical is not allowed on queue nlp-train/training" in " ".join(queued)
    assert denied(policies, job(spec=pod_spec(GPU, priorityClassName="training-high"))) == []
    assert denied(policies, pod(spec=pod_spec(None))) == []


def _kind_object(kind: str, spec: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    template = {"metadata": {"labels": labels}, "spec": spec}
    shapes: dict[str, tuple[str, dict[str, Any], bool]] = {
        "Deployment": ("apps/v1", {"template": template}, False),
        "StatefulSet": ("apps/v1", {"template": template}, False),
        "DaemonSet": ("apps/v1", {"template": template}, False),
        "CronJob": ("batch/v1", {"jobTemplate": {"metadata": {"labels": labels}, "spec": {"template": {"spec": spec}}}},
                    False),
        "JobSet": ("jobset.x-k8s.io/v1alpha2",
                   {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": {"spec": spec}}}}]}, True),
        "RayJob": ("ray.io/v1", {"rayClusterSpec": {"headGroupSpec": {"template": {"spec": pod_spec(None)}},
                                                   "workerGroupSpecs": [{"template": {"spec": spec}}]}}, True),
        "RayCluster": ("ray.io/v1", {"headGroupSpec": {"template": {"spec": spec}}}, True),
        "PyTorchJob": ("kubeflow.org/v1", {"pytorchReplicaSpecs": {"Master": {"template": {"spec": spec}}}}, True),
        "MPIJob": ("kubeflow.org/v2beta1", {"mpiReplicaSpecs": {"Worker": {"template": {"spec": spec}}}}, True),
        "TrainJob": ("trainer.kubeflow.org/v1alpha1",
                     {"trainer": {"resourcesPerNode": spec["containers"][0].get("resources", {}),
                                  **({"env": spec["containers"][0]["env"]} if "env" in spec["containers"][0] else {})}},
                     True),
        "LeaderWorkerSet": ("leaderworkerset.x-k8s.io/v1",
                            {"leaderWorkerTemplate": {"workerTemplate": {"spec": spec}}}, True),
    }
    api, body, on_object = shapes[kind]
    meta: dict[str, Any] = {"name": "w", "namespace": NS, "labels": labels if on_object else {}}
    return {"apiVersion": api, "kind": kind, "metadata": meta, "spec": body}


KINDS = ("Deployment", "StatefulSet", "DaemonSet", "CronJob", "JobSet", "RayJob", "RayCluster", "PyTorchJob", "MPIJob",
         "TrainJob", "LeaderWorkerSet")


@pytest.mark.parametrize("kind", KINDS)
def test_class5_every_kind_obeys_the_queue_rules(policies: list[dict[str, Any]], kind: str) -> None:
    """The same doors through every kind Kueue integrates (and the ones that only make pods): no
    queue, an undeclared queue, a disallowed priority class, a device variable; the honest object
    with a declared queue passes, and so does its controller's child."""
    assert by(NEED_A_QUEUE, denied(policies, _kind_object(kind, pod_spec(), {})))
    assert by(QUEUE_ACCESS, denied(policies, _kind_object(kind, pod_spec(), {"kueue.x-k8s.io/queue-name": "other"})))
    bad_class = {**QUEUED, "kueue.x-k8s.io/priority-class": "inference-critical"}
    assert "priority class inference-critical is not allowed" in " ".join(
        denied(policies, _kind_object(kind, pod_spec(), bad_class)))
    with_env = pod_spec(None)
    with_env["containers"][0]["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    assert by(DEVICE_ACCESS, denied(policies, _kind_object(kind, with_env, QUEUED)))
    assert denied(policies, _kind_object(kind, pod_spec(), QUEUED)) == []
    assert denied(policies, _kind_object(kind, pod_spec(), {"kueue.x-k8s.io/queue-name": "other"}),
                  who=("system:serviceaccount:jobset-system:jobset-controller-manager",
                       ("system:serviceaccounts:jobset-system",))) == []


def test_pod_security_level_comes_from_guardrails() -> None:
    model = validate_repo(REPO).model
    assert model is not None
    scope = type("S", (), {"model": model})()
    assert pod_security_labels(scope)["pod-security.kubernetes.io/enforce"] == "baseline"  # type: ignore[arg-type]


def test_the_sandbox_admin_is_checked_like_a_tenant(policies: list[dict[str, Any]]) -> None:
    """Cluster admins are not trusted controllers by default: what they submit by hand is checked."""
    admin = ("gpugov-admin", ("system:masters", "system:authenticated"))
    assert by(NEED_A_QUEUE, denied(policies, pod(), who=admin))


@pytest.fixture(scope="module")
def volcano_policies() -> list[dict[str, Any]]:
    model = validate_repo(REPO).model
    assert model is not None
    return compile(model, backend="volcano", cluster="west")


def test_on_volcano_no_pod_podgroup_or_job_outranks_what_its_queues_declare(
        volcano_policies: list[dict[str, Any]]) -> None:
    """Classes 3 and 4 on Volcano: its scheduler preempts by the PriorityClass of a Pod, a PodGroup or a
    Volcano Job's tasks, and the device runtime's variables hand out NPUs and GPUs there too. recsys'
    queues declare batch-low and training-high; llm-pretrain's only training-high."""
    from gpugov.compile.admission import VOLCANO_POD_PRIORITY, VOLCANO_QUEUE_ACCESS

    def refused(namespace: str, resource: str, obj: dict[str, Any]) -> list[str]:
        group = {"pods": "", "podgroups": "scheduling.volcano.sh", "jobs": "batch.volcano.sh"}[resource]
        return evaluate(volcano_policies, Request("CREATE", group, resource, namespace, *TENANT), obj)

    def volcano_pod(namespace: str, **spec: Any) -> dict[str, Any]:
        # In a tenant namespace the pod names its tenant's queue (without one Volcano would put it in its
        # default queue, which gpugov-volcano-queue-access refuses: tests/e2e/test_volcano_contract.py).
        notes = {} if namespace == "default" else {"scheduling.volcano.sh/queue-name": namespace}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace, "annotations": notes},
                "spec": {"schedulerName": "volcano", "containers": [container({"huawei.com/Ascend910": "1"})], **spec}}

    for cls in ("system-node-critical", "system-cluster-critical", "inference-critical", "made-up"):
        assert by(VOLCANO_POD_PRIORITY, refused("recsys", "pods", volcano_pod("recsys", priorityClassName=cls))), cls
        group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                 "metadata": {"name": "g", "namespace": "recsys"}, "spec": {"minMember": 1, "priorityClassName": cls}}
        assert by(VOLCANO_POD_PRIORITY, refused("recsys", "podgroups", group)), cls
        vjob = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j", "namespace": "recsys"},
                "spec": {"tasks": [{"name": "t", "template": {"spec": {"priorityClassName": cls, "containers": []}}}]}}
        assert by(VOLCANO_POD_PRIORITY, refused("recsys", "jobs", vjob)), cls
        assert by(VOLCANO_POD_PRIORITY, refused("default", "pods", volcano_pod("default", priorityClassName=cls))), cls
    message = refused("llm-pretrain", "pods", volcano_pod("llm-pretrain", priorityClassName="batch-low"))
    assert [m for m in message if m.startswith(VOLCANO_POD_PRIORITY)] == [
        f"{VOLCANO_POD_PRIORITY}: Pod llm-pretrain/p may not use priorityClassName batch-low; allowed here: "
        "training-high (gpugov: the classes of the namespace's queues in tenants/, "
        "Guardrails.isolation.podPriorityClasses; ask @example-org/gpu-platform)"], message
    # the honest paths: a declared class of the namespace's queues, or none at all
    assert refused("recsys", "pods", volcano_pod("recsys", priorityClassName="batch-low")) == []
    assert refused("llm-pretrain", "pods", volcano_pod("llm-pretrain", priorityClassName="training-high")) == []
    assert refused("recsys", "pods", volcano_pod("recsys")) == []
    queueless = volcano_pod("recsys")
    queueless["metadata"]["annotations"] = {}
    assert by(VOLCANO_QUEUE_ACCESS, refused("recsys", "pods", queueless))
    # class 3: the device runtime's variables
    env = volcano_pod("recsys")
    env["spec"]["containers"] = [container(env=[{"name": "ASCEND_VISIBLE_DEVICES", "value": "0-7"}])]
    assert by(DEVICE_ACCESS, refused("recsys", "pods", env))


def test_class2_a_running_job_does_not_grow_and_stopped_pods_give_their_devices_back(
        policies: list[dict[str, Any]]) -> None:
    """After admission Kueue unsuspends the Job: raising its parallelism then starts pods the queue never
    admitted (the Job controller is faster than Kueue's suspend). And a pod that Kueue preempts or
    deactivates keeps its devices for its terminationGracePeriodSeconds: capped for accelerator pods."""
    running, suspended = job(suspend=False), job(suspend=True)
    for old in (running, suspended):
        old["spec"]["parallelism"] = 1
    grown = copy.deepcopy(running)
    grown["spec"]["parallelism"] = 8
    assert by(LIFECYCLE, denied(policies, grown, old=running))
    assert "its parallelism may not grow while it runs" in denied(policies, grown, old=running)[0]
    unset = copy.deepcopy(running)
    del unset["spec"]["parallelism"]
    assert by(LIFECYCLE, denied(policies, grown, old=unset))  # unset reads 1, as the Job controller does
    shrunk = copy.deepcopy(grown)
    shrunk["spec"]["parallelism"] = 1
    assert denied(policies, shrunk, old=grown) == []  # scaling down gives back
    while_held = copy.deepcopy(suspended)
    while_held["spec"]["parallelism"] = 8
    assert denied(policies, while_held, old=suspended) == []  # Kueue re-admits it at its new size
    assert denied(policies, grown, old=running, who=KUEUE) == []

    def lingering(seconds: int, limits: dict[str, str] | None = GPU) -> dict[str, Any]:
        return job(spec=pod_spec(limits, terminationGracePeriodSeconds=seconds))

    for obj in (lingering(86400), pod(QUEUED, pod_spec(terminationGracePeriodSeconds=301))):
        message = denied(policies, obj)
        assert by(LIFECYCLE, message) and "at most 300" in " ".join(message), message
    assert denied(policies, lingering(300)) == []
    assert denied(policies, lingering(86400, limits={"cpu": "1"})) == []  # holds no accelerator
    raised = lingering(30)
    later = copy.deepcopy(raised)
    later["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 3600
    assert by(LIFECYCLE, denied(policies, later, old=raised))
