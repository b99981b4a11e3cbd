"""`gpugov import --kubeconfig` on the living sandbox: the round trip the issue (#25) asks for.

One living sandbox for the module holds, written by hand as platform teams write them (applied
under the field manager `kubectl`, never labelled by gpugov), two shapes side by side:

- a two-level cohort tree (org-root -> research -> nlp, vision) with borrowing and lending
  limits, a cohort holding quota of its own and a fair-sharing weight;
- a flat list of queues without a cohort (team-a-cq, team-b-cq: quantities spelled "4",
  "68719476736"), and a queue with several flavors (training: h100 then a100);

on KWOK nodes with GPU Feature Discovery labels, and a Job admitted and running in nlp. Then:
import from the cluster, validate, drift (no semantic drift of any ClusterQueue, Cohort or
LocalQueue: only what gpugov adds), the documented take-over step, apply --dry-run (nothing
written), apply (gpugov owns the fields), drift clean, and the Job's Workload still admitted with
the same UID, never evicted, its pod still running.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from gpugov.cli import main
from gpugov.kube.names import KUEUE_API, KUEUE_QUEUE_LABEL
from gpugov.kube.objects import LABEL_TENANT, MANAGED_BY, MANAGER
from gpugov.sandbox.cluster import Sandbox
from gpugov.sandbox.nodes import create_nodes
from tests.helpers.waiting import condition, wait_for

pytestmark = pytest.mark.e2e

CLUSTER = "lab"
NAMESPACES = ("nlp", "vision", "training", "team-a", "team-b")
COMMON = """
  preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}
  flavorFungibility: {whenCanBorrow: TryNextFlavor}
"""
HAND_WRITTEN = f"""
apiVersion: {KUEUE_API}
kind: ResourceFlavor
metadata: {{name: h100}}
spec: {{nodeLabels: {{node-pool: h100}}}}
---
apiVersion: {KUEUE_API}
kind: ResourceFlavor
metadata: {{name: a100}}
spec: {{nodeLabels: {{node-pool: a100}}}}
---
apiVersion: {KUEUE_API}
kind: Cohort
metadata: {{name: org-root}}
spec:
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors: [{{name: a100, resources: [{{name: nvidia.com/gpu, nominalQuota: 2}}]}}]
---
apiVersion: {KUEUE_API}
kind: Cohort
metadata: {{name: research}}
spec: {{parentName: org-root, fairSharing: {{weight: "3"}}}}
---
apiVersion: {KUEUE_API}
kind: ClusterQueue
metadata: {{name: nlp}}
spec:
  cohortName: research
  namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: nlp}}}}{COMMON}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {{name: cpu, nominalQuota: 64000m}}
      - {{name: memory, nominalQuota: 512Gi, lendingLimit: 0}}
      - {{name: nvidia.com/gpu, nominalQuota: 8, borrowingLimit: 4, lendingLimit: 2}}
---
apiVersion: {KUEUE_API}
kind: ClusterQueue
metadata: {{name: vision}}
spec:
  cohortName: research
  namespaceSelector:
    matchExpressions: [{{key: kubernetes.io/metadata.name, operator: In, values: [vision]}}]{COMMON}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu, cpu, memory]
    flavors:
    - name: a100
      resources:
      - {{name: nvidia.com/gpu, nominalQuota: 4, borrowingLimit: 0}}
      - {{name: cpu, nominalQuota: 32}}
      - {{name: memory, nominalQuota: 256Gi}}
---
apiVersion: {KUEUE_API}
kind: ClusterQueue
metadata: {{name: training}}
spec:
  namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: training}}}}{COMMON}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu, cpu, memory]
    flavors:
    - name: h100
      resources:
      - {{name: nvidia.com/gpu, nominalQuota: 8}}
      - {{name: cpu, nominalQuota: 96}}
      - {{name: memory, nominalQuota: 1Ti}}
    - name: a100
      resources:
      - {{name: nvidia.com/gpu, nominalQuota: 2}}
      - {{name: cpu, nominalQuota: 16}}
      - {{name: memory, nominalQuota: 128Gi}}
---
apiVersion: {KUEUE_API}
kind: ClusterQueue
metadata: {{name: team-a-cq}}
spec:
  namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: team-a}}}}{COMMON}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: h100
      resources:
      - {{name: cpu, nominalQuota: "16"}}
      - {{name: memory, nominalQuota: "68719476736"}}
      - {{name: nvidia.com/gpu, nominalQuota: "4"}}
---
apiVersion: {KUEUE_API}
kind: ClusterQueue
metadata: {{name: team-b-cq}}
spec:
  namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: team-b}}}}{COMMON}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: h100
      resources:
      - {{name: cpu, nominalQuota: 16}}
      - {{name: memory, nominalQuota: 64Gi}}
      - {{name: nvidia.com/gpu, nominalQuota: 4}}
---
apiVersion: {KUEUE_API}
kind: WorkloadPriorityClass
metadata: {{name: high}}
value: 1000
""" + "".join(f"""---
apiVersion: {KUEUE_API}
kind: LocalQueue
metadata: {{name: {queue}, namespace: {namespace}}}
spec: {{clusterQueue: {target}}}
""" for namespace, queue, target in (("nlp", "nlp-jobs", "nlp"), ("vision", "vision-jobs", "vision"),
                                    ("training", "default", "training"), ("team-a", "user-queue", "team-a-cq"),
                                    ("team-b", "user-queue", "team-b-cq")))
PRODUCTS = {"h100": "NVIDIA-H100-80GB-HBM3", "a100": "NVIDIA-A100-SXM4-80GB"}
SCHEDULER_KINDS = ("ClusterQueue", "Cohort", "LocalQueue")


def gfd_node(name: str, pool: str) -> dict[str, Any]:
    """A GPU server as GPU Feature Discovery labels it, with 8 devices."""
    resources = {"nvidia.com/gpu": "8", "cpu": "128", "memory": "1Ti", "pods": "110"}
    return {"metadata": {"name": name, "labels": {"node-pool": pool, "kubernetes.io/hostname": name,
                                                  "nvidia.com/gpu.product": PRODUCTS[pool], "nvidia.com/gpu.count": "8"}},
            "status": {"capacity": resources, "allocatable": resources}}


def job(namespace: str, queue: str, name: str) -> dict[str, Any]:
    requests = {"nvidia.com/gpu": "1", "cpu": "1", "memory": "1Gi"}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": {KUEUE_QUEUE_LABEL: queue}},
            "spec": {"suspend": True, "parallelism": 1, "completions": 1, "backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                                          "resources": {"requests": requests, "limits": requests}}]}}}}


@pytest.fixture(scope="module")
def lab(sandbox_binaries: dict[str, Path]) -> Iterator[Sandbox]:
    """A living sandbox of its own holding the hand-written objects, the nodes and one running Job."""
    with Sandbox() as sandbox:
        api = sandbox.cp.api_client()
        create_nodes(api, [gfd_node(f"{pool}-{i}", pool) for pool in PRODUCTS for i in (1, 2)], kwok=True)
        core = client.CoreV1Api(api)
        for namespace in NAMESPACES:
            # The sandbox's Kueue manages Jobs only in namespaces with a gpugov.io/tenant label
            # (gpugov.sandbox.kueue: managedJobsNamespaceSelector); a cluster's own Kueue would have its own.
            core.create_namespace({"metadata": {"name": namespace, "labels": {LABEL_TENANT: namespace}}})
        dynamic = DynamicClient(api)
        for obj in yaml.safe_load_all(HAND_WRITTEN):
            resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            dynamic.server_side_apply(resource, body=obj, namespace=obj["metadata"].get("namespace"),
                                      field_manager="kubectl")
        client.BatchV1Api(api).create_namespaced_job("nlp", job("nlp", "nlp-jobs", "train"))
        try:
            wait_for(lambda: running(api) is not None, "the Job in nlp to be admitted and its pod to run", timeout=120)
        except AssertionError as exc:  # say why: the Workload's conditions and the pods' phases
            pods = [(p.metadata.name, p.status.phase, p.spec.node_name) for p in client.CoreV1Api(api).list_namespaced_pod("nlp").items]
            raise AssertionError(f"{exc}: {(workload(api) or {}).get('status')}, pods {pods}") from None
        yield sandbox
        problems = sandbox.problems()
    assert not problems, "\n".join(problems)


def workload(api: client.ApiClient) -> dict[str, Any] | None:
    items = DynamicClient(api).resources.get(api_version=KUEUE_API, kind="Workload").get(namespace="nlp").to_dict()
    return next(iter(items["items"]), None)


def running(api: client.ApiClient) -> tuple[str, str] | None:
    """(Workload UID, pod UID) while the nlp Job is admitted and its pod runs."""
    found = workload(api)
    if found is None or condition(found, "Admitted").get("status") != "True":
        return None
    pods = client.CoreV1Api(api).list_namespaced_pod("nlp").items
    if len(pods) != 1 or pods[0].status.phase != "Running":
        return None
    return found["metadata"]["uid"], pods[0].metadata.uid


def gpugov(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def drift(capsys: pytest.CaptureFixture[str], sandbox: Sandbox, repo: Path) -> tuple[int, list[dict[str, Any]]]:
    code, out, err = gpugov(capsys, "drift", str(repo), "--cluster", CLUSTER, "--kubeconfig", str(sandbox.cp.kubeconfig),
                            "--format", "json")
    assert out.strip(), err
    return code, [f for f in json.loads(out)["findings"] if f["level"] != "info"]


def resource_versions(api: client.ApiClient) -> dict[str, str]:
    dynamic, found = DynamicClient(api), {}
    for kind in (*SCHEDULER_KINDS, "ResourceFlavor"):
        for obj in dynamic.resources.get(api_version=KUEUE_API, kind=kind).get().to_dict()["items"]:
            meta = obj["metadata"]
            found[f"{kind} {meta.get('namespace', '')}/{meta['name']}"] = meta["resourceVersion"]
    return found


def test_import_drift_and_take_over_keep_the_running_workload(lab: Sandbox, tmp_path: Path, capsys) -> None:
    api, kubeconfig = lab.cp.api_client(), str(lab.cp.kubeconfig)
    before = running(api)
    assert before is not None
    repo = tmp_path / "repo"

    code, out, err = gpugov(capsys, "import", "--kubeconfig", kubeconfig, "--cluster", CLUSTER, "--out", str(repo),
                            "--format", "json")
    assert code == 0, out + err
    report = json.loads(out)
    assert report["complete"] and report["notExpressed"] == [], report
    clusters = yaml.safe_load((repo / "policies" / "clusters.yaml").read_text())
    kube_system = client.CoreV1Api(api).read_namespace("kube-system").metadata.uid
    assert clusters["spec"]["identity"] == {"kubeSystemUID": kube_system}  # pinned to the cluster it read
    tenant = yaml.safe_load((repo / "tenants" / "nlp.yaml").read_text())["spec"]
    assert tenant["department"] == "research" and tenant["namespaces"] == ["nlp"]
    assert (gpugov(capsys, "validate", str(repo))[0]) == 0

    # Drift straight after import. What it may report is only what gpugov adds to the cluster:
    # - objects missing: a Topology per pool (gpugov makes every flavor topology-aware), the tenant
    #   admission policies and their bindings, the tenant roles;
    # - on Namespaces, ClusterQueues, Cohorts, LocalQueues and ResourceFlavors: gpugov's own labels
    #   (managed-by, tenant, department, pool; metadata.*), and on a ResourceFlavor its topologyName.
    # Nothing of what decides admission: every spec field of every ClusterQueue, Cohort and LocalQueue
    # matches (matchLabels against matchExpressions, "4" against 4, left-out defaults).
    code, findings = drift(capsys, lab, repo)
    added_kinds = {"Topology", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ClusterRole",
                   "ClusterRoleBinding", "Role", "RoleBinding"}
    changed = [f for f in findings if f["rule"] == "GD002"]
    assert {f["object"].split()[0] for f in changed} >= {"ClusterQueue", "LocalQueue", "Cohort"}  # labels differ
    for finding in findings:
        kind = finding["object"].split()[0]
        if finding["rule"] == "GD001":
            assert kind in added_kinds, finding
            continue
        assert finding["rule"] == "GD002", finding
        allowed = ("metadata.", "spec.topologyName") if kind == "ResourceFlavor" else ("metadata.",)
        assert all(field.startswith(allowed) for field in finding["fields"].split(",")), finding
    assert code == 1

    # The take-over is declared, not a manual step: the Cluster adopts (spec.adopt) exactly the objects
    # the cluster holds and the declarations compile to again, and apply takes over those and nothing else
    # that lacks gpugov's mark (gpugov.cluster.ownership).
    take_over = {(t["kind"], t["namespace"], t["name"]) for t in report["takeOver"]}
    assert {(k, "", n) for k, n in (("ClusterQueue", "nlp"), ("Cohort", "research"), ("ResourceFlavor", "a100"))} <= take_over
    assert ("LocalQueue", "team-a", "user-queue") in take_over and report["adoptedIn"].startswith("policies/clusters.yaml")
    assert {(e["kind"], e.get("namespace", ""), e["name"]) for e in clusters["spec"]["adopt"]} == take_over
    assert "kubectl" not in json.dumps(report)  # no manual labelling step
    versions = resource_versions(api)

    # Without its entry, the same hand-made ClusterQueue is refused: nothing written.
    unadopted = tmp_path / "unadopted"
    shutil.copytree(repo, unadopted)
    clusters_file = unadopted / "policies" / "clusters.yaml"
    doc = yaml.safe_load(clusters_file.read_text())
    doc["spec"]["adopt"] = [e for e in doc["spec"]["adopt"] if (e["kind"], e["name"]) != ("ClusterQueue", "nlp")]
    clusters_file.write_text(yaml.safe_dump(doc))
    code, out, err = gpugov(capsys, "apply", str(unadopted), "--cluster", CLUSTER, "--kubeconfig", kubeconfig)
    assert code == 2 and "refusing to take over 1 object(s)" in err and "ClusterQueue nlp " in err, out + err
    assert resource_versions(api) == versions

    code, out, err = gpugov(capsys, "apply", str(repo), "--cluster", CLUSTER, "--kubeconfig", kubeconfig, "--dry-run")
    assert code == 0, out + err
    assert "nothing was changed" in out
    for kind, namespace, name in take_over:
        assert f"adopting {kind} {namespace + '/' if namespace else ''}{name} (Cluster spec.adopt)" in out, out
    assert resource_versions(api) == versions  # a dry run writes nothing
    dynamic = DynamicClient(api)

    code, out, err = gpugov(capsys, "apply", str(repo), "--cluster", CLUSTER, "--kubeconfig", kubeconfig)
    assert code == 0, out + err
    queue = dynamic.resources.get(api_version=KUEUE_API, kind="ClusterQueue").get(name="nlp").to_dict()
    assert "gpugov" in {m["manager"] for m in queue["metadata"]["managedFields"]}
    assert queue["metadata"]["labels"][MANAGED_BY] == MANAGER  # gpugov's now: prune owns it from here on
    code, findings = drift(capsys, lab, repo)
    assert (code, findings) == (0, [])

    # The admitted workload went through all of it untouched: same Workload, never evicted, pod running.
    assert running(api) == before
    found = workload(api)
    assert found is not None and condition(found, "Evicted").get("status") != "True"
    assert condition(found, "Preempted").get("status") != "True"
