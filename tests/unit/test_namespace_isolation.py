"""The rest of a tenant's namespace without an apiserver: storage and exposure (gpugov-volumes,
gpugov-service-exposure), the Pod Security default and a child kept by its controller (gpugov-controller-release), for the example org's cluster east evaluated by
tests/helpers/vap_eval.py as alice of nlp-team sends requests into nlp-train. The living sandbox
proves the same with the real apiserver (tests/e2e/test_tenant_escape.py::test_class6_*)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import V1Volume

from gpugov.app.pipeline import validate_repo
from gpugov.compile import compile
from gpugov.compile.admission import DEVICE_SOURCES, PLACEMENT, RELEASE, SERVICE_EXPOSURE, VOLUMES, WORKLOAD_KINDS
from gpugov.declarations.schema import NETWORK_VOLUMES
from gpugov.kube.objects import LABEL_TENANT
from tests.helpers.repos import BASE, REPO
from tests.helpers.vap_eval import Request, evaluate

NS = "nlp-train"
TENANT = ("alice@example.com", ("nlp-team", "system:authenticated"))
PV_CONTROLLER = ("system:kube-controller-manager", ("system:authenticated",))
KUBERAY = ("system:serviceaccount:ray-system:kuberay-operator", ("system:serviceaccounts:ray-system",))
LABELS = {LABEL_TENANT: "nlp"}
# Every source of core/v1 Volume that reaches only what the pod's own namespace holds or makes.
SAFE_VOLUMES = {"configMap", "secret", "emptyDir", "downwardAPI", "projected", "persistentVolumeClaim",
                "ephemeral", "image", "csi"}
EXAMPLE = {"nfs": {"server": "10.0.0.9", "path": "/exports/speech"}, "iscsi": {"targetPortal": "10.0.0.9:3260",
           "iqn": "iqn.2001-04.com.example:storage", "lun": 0}, "hostPath": {"path": "/mnt/shared"}}
ALLOW = """  allow:
    volumes: [nfs, volumeName]
    csiDrivers: [nfs.csi.k8s.io]
    serviceTypes: [NodePort]
    reason: the team serves its evaluation dashboard and reads the lab's shared NFS datasets
"""


def _policies(root: Path) -> list[dict[str, Any]]:
    model = validate_repo(root).model
    assert model is not None
    return compile(model, backend="kueue", cluster="east")


@pytest.fixture(scope="module")
def policies() -> list[dict[str, Any]]:
    return _policies(REPO)


@pytest.fixture(scope="module")
def allowed(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The example org with tenant nlp allowed nfs, a named volume, nfs.csi.k8s.io and NodePorts."""
    root = tmp_path_factory.mktemp("org")
    for folder in ("tenants", "policies", "hardware"):
        shutil.copytree(REPO / folder, root / folder)
    path = root / "tenants" / "nlp.yaml"
    text = path.read_text()
    assert "  namespaces: [nlp-train, nlp-dev]\n" in text
    path.write_text(text.replace("  namespaces: [nlp-train, nlp-dev]\n", "  namespaces: [nlp-train, nlp-dev]\n" + ALLOW))
    return _policies(root)


def denied(policies: list[dict[str, Any]], obj: dict[str, Any], old: dict[str, Any] | None = None,
           who: tuple[str, tuple[str, ...]] = TENANT, namespace: str = NS,
           labels: dict[str, str] | None = LABELS) -> list[str]:
    group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
    resource = {"PersistentVolumeClaim": "persistentvolumeclaims", "Service": "services", "ConfigMap": "configmaps",
                "Secret": "secrets"}.get(obj["kind"]) or next(
        k.resource for k in WORKLOAD_KINDS if k.kind == obj["kind"])
    request = Request("UPDATE" if old is not None else "CREATE", group, resource, namespace, who[0], who[1])
    return evaluate(policies, request, obj, old, labels)


def by(policy: str, messages: list[str]) -> bool:
    return any(m.startswith(policy + ":") for m in messages)


def pod_spec(*volumes: dict[str, Any]) -> dict[str, Any]:
    return {"containers": [{"name": "main", "image": "pause"}], "restartPolicy": "Never", "volumes": list(volumes)}


def in_kind(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A workload of `kind` in nlp-train whose pods are `spec`."""
    meta = {"name": "w", "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "training"}}
    template = {"metadata": {"labels": dict(meta["labels"])}, "spec": spec}
    bodies: dict[str, tuple[str, dict[str, Any]]] = {
        "Pod": ("v1", spec),
        "Job": ("batch/v1", {"suspend": True, "template": template}),
        "CronJob": ("batch/v1", {"schedule": "0 0 * * *", "jobTemplate": {"spec": {"template": template}}}),
        "Deployment": ("apps/v1", {"selector": {"matchLabels": {}}, "template": template}),
        "ReplicaSet": ("apps/v1", {"selector": {"matchLabels": {}}, "template": template}),
        "StatefulSet": ("apps/v1", {"selector": {"matchLabels": {}}, "template": template}),
        "JobSet": ("jobset.x-k8s.io/v1alpha2", {"suspend": True, "replicatedJobs": [
            {"name": "r", "template": {"spec": {"template": template}}}]}),
        "PyTorchJob": ("kubeflow.org/v1", {"pytorchReplicaSpecs": {"Master": {"template": template}}}),
    }
    version, body = bodies[kind]
    return {"apiVersion": version, "kind": kind, "metadata": meta, "spec": body}


KINDS = ("Pod", "Job", "CronJob", "Deployment", "StatefulSet", "JobSet", "PyTorchJob")


def test_every_volume_source_of_the_api_is_either_safe_or_refused() -> None:
    """The class is closed against the API's own list: a new source must be placed on one side."""
    sources = set(V1Volume.attribute_map.values()) - {"name"}
    assert sources == SAFE_VOLUMES | set(NETWORK_VOLUMES), sources ^ (SAFE_VOLUMES | set(NETWORK_VOLUMES))
    assert not SAFE_VOLUMES & set(NETWORK_VOLUMES)


@pytest.mark.parametrize("source", NETWORK_VOLUMES)
def test_network_and_node_storage_is_refused_in_every_kind(policies: list[dict[str, Any]], source: str) -> None:
    volume = {"name": "data", source: EXAMPLE.get(source, {"anything": "x"})}
    for kind in KINDS:
        messages = denied(policies, in_kind(kind, pod_spec(volume)))
        assert by(VOLUMES, messages), (kind, source, messages)
    assert "mounts network or node storage by its address" in denied(policies, in_kind("Pod", pod_spec(volume)))[0]


def test_the_tenants_own_storage_is_admitted(policies: list[dict[str, Any]]) -> None:
    honest = pod_spec(
        {"name": "c", "configMap": {"name": "settings"}}, {"name": "s", "secret": {"secretName": "registry"}},
        {"name": "e", "emptyDir": {}}, {"name": "d", "downwardAPI": {"items": []}},
        {"name": "p", "projected": {"sources": []}}, {"name": "v", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "x", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"],
                                                                     "resources": {"requests": {"storage": "1Gi"}}}}}})
    for kind in KINDS:
        assert not by(VOLUMES, denied(policies, in_kind(kind, honest))), kind
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": NS},
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}}
    assert denied(policies, claim) == []


def test_inline_csi_reaches_only_the_drivers_the_tenant_is_allowed(policies: list[dict[str, Any]],
                                                                   allowed: list[dict[str, Any]]) -> None:
    nfs = {"name": "n", "csi": {"driver": "nfs.csi.k8s.io", "volumeAttributes": {"server": "10.0.0.9",
                                                                               "share": "/exports/speech"}}}
    smb = {"name": "m", "csi": {"driver": "smb.csi.k8s.io", "volumeAttributes": {"source": "//10.0.0.9/share"}}}
    for kind in KINDS:
        messages = denied(policies, in_kind(kind, pod_spec(nfs)))
        assert by(VOLUMES, messages) and "inline CSI volume of driver nfs.csi.k8s.io" in messages[0], (kind, messages)
        assert denied(allowed, in_kind(kind, pod_spec(nfs))) == [], kind
        assert by(VOLUMES, denied(allowed, in_kind(kind, pod_spec(smb)))), kind


def test_a_claim_may_not_name_an_existing_volume_or_another_namespaces_data(policies: list[dict[str, Any]],
                                                                             allowed: list[dict[str, Any]]) -> None:
    spec = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Ti"}}}
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": NS},
             "spec": {**spec, "volumeName": "speech-datasets"}}
    assert by(VOLUMES, denied(policies, claim)) and "claims an existing PersistentVolume" in denied(policies, claim)[0]
    assert denied(allowed, claim) == []
    # the PV controller binds a claim by setting its volumeName: trusted; a bound claim resized by its tenant: admitted
    unbound = {**claim, "spec": spec}
    assert denied(policies, claim, old=unbound, who=PV_CONTROLLER) == []
    resized = {**claim, "spec": {**claim["spec"], "resources": {"requests": {"storage": "2Ti"}}}}
    assert denied(policies, resized, old=claim) == []
    # ... but the tenant may not bind it itself
    assert by(VOLUMES, denied(policies, claim, old=unbound))
    # a StatefulSet's claim templates and an ephemeral volume's template are claims too
    sts = in_kind("StatefulSet", pod_spec())
    sts["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": "d"}, "spec": {**spec, "volumeName": "speech-datasets"}}]
    assert by(VOLUMES, denied(policies, sts))
    ephemeral = {"name": "x", "ephemeral": {"volumeClaimTemplate": {"spec": {**spec, "volumeName": "speech-datasets"}}}}
    for kind in KINDS:
        assert by(VOLUMES, denied(policies, in_kind(kind, pod_spec(ephemeral)))), kind
    foreign = {**claim, "spec": {**spec, "dataSourceRef": {"kind": "PersistentVolumeClaim", "name": "corpus",
                                                           "namespace": "speech-train"}}}
    assert by(VOLUMES, denied(policies, foreign)) and "another namespace" in denied(policies, foreign)[0]


def test_a_declared_network_volume_is_admitted_for_its_tenant_only(allowed: list[dict[str, Any]]) -> None:
    nfs = {"name": "data", "nfs": EXAMPLE["nfs"]}
    assert denied(allowed, in_kind("Job", pod_spec(nfs))) == []
    assert by(VOLUMES, denied(allowed, in_kind("Job", pod_spec({"name": "i", "iscsi": EXAMPLE["iscsi"]}))))
    speech = in_kind("Job", pod_spec(nfs))
    speech["metadata"]["namespace"] = "speech-train"
    assert by(VOLUMES, denied(allowed, speech, namespace="speech-train", labels={LABEL_TENANT: "speech"}))


def test_outside_the_tenant_namespaces_storage_is_not_gpugovs(policies: list[dict[str, Any]]) -> None:
    nfs = in_kind("Pod", pod_spec({"name": "data", "nfs": EXAMPLE["nfs"]}))
    assert not by(VOLUMES, denied(policies, nfs, namespace="monitoring", labels={}))


def service(kind: str = "ClusterIP", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "dash", "namespace": NS},
            "spec": {"type": kind, "ports": [{"port": 80}], "selector": {"app": "dash"}, **spec}}


def test_external_ips_are_refused_to_everyone_in_a_tenant_namespace(policies: list[dict[str, Any]],
                                                                      allowed: list[dict[str, Any]]) -> None:
    """CVE-2020-8554: a Service that claims an address intercepts the cluster's traffic to it."""
    hijack = service(externalIPs=["10.96.0.10"])
    for who in (TENANT, KUBERAY):
        for org in (policies, allowed):
            messages = denied(org, hijack, who=who)
            assert by(SERVICE_EXPOSURE, messages) and "claims externalIPs (10.96.0.10)" in messages[0], messages
    assert by(SERVICE_EXPOSURE, denied(policies, hijack, old=service()))


def test_node_ports_and_load_balancers_only_where_declared(policies: list[dict[str, Any]],
                                                            allowed: list[dict[str, Any]]) -> None:
    assert denied(policies, service()) == [] and denied(policies, service("ExternalName", externalName="a.b")) == []
    for kind in ("NodePort", "LoadBalancer"):
        messages = denied(policies, service(kind))
        assert by(SERVICE_EXPOSURE, messages) and f"is of type {kind}" in messages[0], messages
        assert by(SERVICE_EXPOSURE, denied(policies, service(kind), who=KUBERAY))  # a RayCluster's serviceType
        assert by(SERVICE_EXPOSURE, denied(policies, service(kind), old=service()))
    assert denied(allowed, service("NodePort")) == []
    assert by(SERVICE_EXPOSURE, denied(allowed, service("LoadBalancer")))


def test_tenant_namespaces_enforce_restricted_unless_guardrails_say_why() -> None:
    base = validate_repo(BASE)
    assert base.model is not None and base.model.limits.isolation.pod_security == "restricted"
    namespaces = [o for o in compile(base.model, backend="kueue") if o["kind"] == "Namespace"]
    assert namespaces and all(n["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
                              for n in namespaces)
    root = validate_repo(REPO)
    assert root.model is not None and root.model.limits.isolation.pod_security_reason


# --- release and orphan -------------------------------------------------------------------------

JOB_CONTROLLER = ("system:serviceaccount:kube-system:job-controller", ("system:serviceaccounts",
                                                                       "system:serviceaccounts:kube-system"))
KUEUE = ("system:serviceaccount:kueue-system:kueue-controller-manager", ("system:serviceaccounts:kueue-system",))


def controlled(kind: str, owner_kind: str, labels: dict[str, str]) -> dict[str, Any]:
    """A running child of `owner_kind` as its controller made it."""
    obj = in_kind(kind, pod_spec())
    obj["metadata"]["labels"] = dict(labels)
    obj["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1" if owner_kind == "Job" else "apps/v1",
                                           "kind": owner_kind, "name": "train", "uid": "0c1d", "controller": True,
                                           "blockOwnerDeletion": True}]
    return obj


JOB_POD = {"batch.kubernetes.io/controller-uid": "0c1d", "batch.kubernetes.io/job-name": "train",
           "controller-uid": "0c1d", "job-name": "train", "kueue.x-k8s.io/queue-name": "training"}
CHILDREN = [("Pod", "Job", JOB_POD), ("Pod", "ReplicaSet", {"app": "serve", "pod-template-hash": "5d9f"}),
            ("Pod", "StatefulSet", {"app": "db", "controller-revision-hash": "db-7c", "apps.kubernetes.io/pod-index": "0"}),
            ("ReplicaSet", "Deployment", {"app": "serve", "pod-template-hash": "5d9f"}),
            ("Job", "CronJob", {"kueue.x-k8s.io/queue-name": "training"})]


@pytest.mark.parametrize(("kind", "owner", "labels"), CHILDREN, ids=[f"{k}-of-{o}" for k, o, _ in CHILDREN])
def test_a_tenant_cannot_release_a_child_from_its_controller(policies: list[dict[str, Any]], kind: str, owner: str,
                                                             labels: dict[str, str]) -> None:
    """A label changed, removed or added (a selector may use NotIn or DoesNotExist), or the controller
    reference dropped: the controller would release the child and start another; the child keeps its
    accelerators, no Workload's."""
    before = controlled(kind, owner, labels)
    for key in labels:
        changed = controlled(kind, owner, {**labels, key: "other"})
        assert by(RELEASE, denied(policies, changed, old=before)), key
        removed = controlled(kind, owner, {k: v for k, v in labels.items() if k != key})
        assert by(RELEASE, denied(policies, removed, old=before)), key
    added = controlled(kind, owner, {**labels, "release": "me"})
    messages = denied(policies, added, old=before)
    assert by(RELEASE, messages) and f"belongs to {owner} train: its labels may not change" in messages[0]
    orphan = controlled(kind, owner, labels)
    del orphan["metadata"]["ownerReferences"]
    assert by(RELEASE, denied(policies, orphan, old=before))
    not_controller = controlled(kind, owner, labels)
    not_controller["metadata"]["ownerReferences"][0]["controller"] = False
    assert by(RELEASE, denied(policies, not_controller, old=before))
    # what the controllers do (adopt, label, let go on the owner's orphaning delete) and a tenant's
    # annotation stay admitted
    for who in (JOB_CONTROLLER, KUEUE):
        assert not by(RELEASE, denied(policies, orphan, old=before, who=who))
        assert not by(RELEASE, denied(policies, added, old=before, who=who))
    annotated = controlled(kind, owner, labels)
    annotated["metadata"]["annotations"] = {"note": "checkpoint at step 900"}
    assert not by(RELEASE, denied(policies, annotated, old=before))


def test_a_tenants_own_unowned_objects_keep_their_labels_free(policies: list[dict[str, Any]]) -> None:
    deployment = in_kind("Deployment", pod_spec())
    relabelled = in_kind("Deployment", pod_spec())
    relabelled["metadata"]["labels"]["team"] = "nlp"
    assert not by(RELEASE, denied(policies, relabelled, old=deployment))


# --- the device variables' other sources ---------------------------------------------------------

@pytest.mark.parametrize("kind", ["ConfigMap", "Secret"])
def test_no_configmap_or_secret_carries_a_device_variable(policies: list[dict[str, Any]], kind: str) -> None:
    """`envFrom: [{configMapRef: ...}]` without a prefix brings every key in as a variable, which admission
    cannot read in the pod; so the key is refused where it is written, in the ConfigMap or Secret."""
    for field in ("data", "binaryData") if kind == "ConfigMap" else ("data", "stringData"):
        for variable in ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_MIG_CONFIG_DEVICES", "ASCEND_VISIBLE_DEVICES"):
            source = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "env", "namespace": NS},
                      field: {variable: "all" if field != "data" or kind == "ConfigMap" else "YWxs", "LR": "0.1"}}
            messages = denied(policies, source)
            assert by(DEVICE_SOURCES, messages) and "carries a key named as a device runtime variable" in messages[0]
            assert by(DEVICE_SOURCES, denied(policies, source, old={**source, field: {"LR": "0.1"}}))
    honest = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "env", "namespace": NS},
              "data": {"LR": "0.1", "NVIDIA_DRIVER_CAPABILITIES": "utility"}}
    assert denied(policies, honest) == []


def test_no_volume_at_the_runtimes_device_list_path(policies: list[dict[str, Any]]) -> None:
    """Under the device plugin's volume-mounts strategy the runtime reads a container's devices from the
    mounts under /var/run/nvidia-container-devices: a tenant's own emptyDir there would name them."""
    spec = pod_spec({"name": "d", "emptyDir": {}})
    spec["containers"][0]["volumeMounts"] = [{"name": "d", "mountPath": "/var/run/nvidia-container-devices/all"}]
    for kind in KINDS:
        messages = denied(policies, in_kind(kind, spec))
        assert by(DEVICE_SOURCES, messages), kind
    assert "mounts a volume at /var/run/nvidia-container-devices" in denied(policies, in_kind("Pod", spec))[0]
    spec["containers"][0]["volumeMounts"] = [{"name": "d", "mountPath": "/scratch"}]
    assert not by(DEVICE_SOURCES, denied(policies, in_kind("Pod", spec)))


# --- placement on accelerator nodes only from an admission -----------------------------------------

def test_only_an_admission_places_a_pod_on_a_pool(policies: list[dict[str, Any]]) -> None:
    """A tenant's pod spec that requests no accelerator was accepted on a GPU server when it tolerated the
    pool's taint and selected its nodes itself (and got its GPU from a CUDA image's own ENV). Kueue
    injects a flavor's labels and tolerations at admission, as a trusted controller; a tenant may not."""
    escapes = {
        "pool label": {"nodeSelector": {"gpugov.io/pool": "h100"}},
        "node name": {"nodeSelector": {"kubernetes.io/hostname": "h100-01"}},
        "pool taint": {"tolerations": [{"key": "gpugov.io/pool", "operator": "Equal", "value": "h100",
                                        "effect": "NoSchedule"}]},
        "every taint": {"tolerations": [{"operator": "Exists"}]},
        "required affinity": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpugov.io/pool", "operator": "In",
                                                         "values": ["h100"]}]}]}}}},
        "node field": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                    "values": ["h100-01"]}]}]}}}},
        "preferred affinity": {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "preference": {"matchExpressions": [{"key": "gpugov.io/pool", "operator": "Exists"}]}}]}}},
    }
    for what, extra in escapes.items():
        for kind in KINDS:
            messages = denied(policies, in_kind(kind, {**pod_spec(), **extra}))
            assert by(PLACEMENT, messages), (what, kind, messages)
            assert "requests no accelerator but" in next(m for m in messages if m.startswith(PLACEMENT))
        before = in_kind("Job", pod_spec())
        assert by(PLACEMENT, denied(policies, in_kind("Job", {**pod_spec(), **extra}), old=before)), what
    # honest: an accelerator request through a queue may pin its pool (Kueue's flavor must agree), CPU work
    # may select other nodes, and Kueue's own injection on admission is trusted
    gpu = pod_spec()
    gpu["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    pinned = {**gpu, "nodeSelector": {"gpugov.io/pool": "h100"},
              "tolerations": [{"key": "gpugov.io/pool", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}]}
    for kind in KINDS:
        assert not by(PLACEMENT, denied(policies, in_kind(kind, pinned))), kind
        assert not by(PLACEMENT, denied(policies, in_kind(kind, {**pod_spec(), "nodeSelector": {"disktype": "ssd"}})))
    injected = in_kind("Job", {**pod_spec(), **escapes["pool label"], **escapes["pool taint"]})
    assert not by(PLACEMENT, denied(policies, injected, old=in_kind("Job", pod_spec()), who=KUEUE))
