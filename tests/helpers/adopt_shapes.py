"""The hand-written Kueue shapes gpugov import is proven on, as platform teams write them.

Each shape is one folder's worth of YAML (the objects and the Nodes they run on). The unit tests
import them from a folder; tests/e2e/test_adopt.py applies each to the living sandbox and imports
it from there. RUNS names, per shape, the LocalQueue a Job is admitted through and whether it asks
for a GPU (the CPU-only shape runs a CPU Job).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from gpugov.kube.canonical import NAMESPACE_NAME_LABEL

GFD_NODE = """
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{node-pool: {pool}, nvidia.com/gpu.product: {product}}}
status:
  allocatable: {{nvidia.com/gpu: "8", cpu: "128", memory: 1Ti}}
"""

FLAT = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
spec:
  nodeLabels: {node-pool: h100}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a-cq}
spec:
  namespaceSelector:
    matchExpressions:
    - {key: kubernetes.io/metadata.name, operator: In, values: [team-a, team-a-dev]}
  flavorFungibility: {whenCanBorrow: TryNextFlavor}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 32}
      - {name: memory, nominalQuota: 128Gi}
      - {name: nvidia.com/gpu, nominalQuota: 4}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-b-cq}
spec:
  namespaceSelector:
    matchLabels: {kubernetes.io/metadata.name: team-b}
  flavorFungibility: {whenCanBorrow: TryNextFlavor}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: "16"}
      - {name: memory, nominalQuota: "68719476736"}
      - {name: nvidia.com/gpu, nominalQuota: "4"}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: user-queue, namespace: team-a}
spec: {clusterQueue: team-a-cq}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: user-queue, namespace: team-b}
spec: {clusterQueue: team-b-cq}
""" + "---" + GFD_NODE.format(name="gpu-1", pool="h100", product="NVIDIA-H100-80GB-HBM3")

COHORT_TREE = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: a100}
spec:
  nodeLabels: {node-pool: a100}
  nodeTaints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
  tolerations: [{key: nvidia.com/gpu, operator: Equal, value: present, effect: NoSchedule}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: org-root}
spec:
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: a100
      resources: [{name: nvidia.com/gpu, nominalQuota: 2}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: research}
spec:
  parentName: org-root
  fairSharing: {weight: "3"}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: nlp}
spec:
  cohortName: research
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: nlp}}
  queueingStrategy: StrictFIFO
  preemption:
    reclaimWithinCohort: Any
    withinClusterQueue: LowerPriority
    borrowWithinCohort: {policy: LowerPriority}
  flavorFungibility: {whenCanBorrow: TryNextFlavor}
  fairSharing: {weight: "2"}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu, cpu, memory]
    flavors:
    - name: a100
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 8, borrowingLimit: 4, lendingLimit: 2}
      - {name: cpu, nominalQuota: 64000m}
      - {name: memory, nominalQuota: 512Gi, lendingLimit: 0}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: vision}
spec:
  cohortName: research
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: vision}}
  queueingStrategy: StrictFIFO
  preemption:
    reclaimWithinCohort: Any
    withinClusterQueue: LowerPriority
    borrowWithinCohort: {policy: LowerPriority}
  flavorFungibility: {whenCanBorrow: TryNextFlavor}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu, cpu, memory]
    flavors:
    - name: a100
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 4, borrowingLimit: 0}
      - {name: cpu, nominalQuota: 32}
      - {name: memory, nominalQuota: 256Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: nlp-jobs, namespace: nlp}
spec: {clusterQueue: nlp}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: vision-jobs, namespace: vision}
spec: {clusterQueue: vision}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
description: Deadline-bound.
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: low}
value: 10
""" + "---" + GFD_NODE.format(name="a100-1", pool="a100", product="NVIDIA-A100-SXM4-80GB") + "---" + GFD_NODE.format(
    name="a100-2", pool="a100", product="NVIDIA-A100-SXM4-80GB")

SEVERAL_FLAVORS = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100-spot}
spec: {nodeLabels: {node-pool: h100}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: a100-ondemand}
spec: {nodeLabels: {node-pool: a100}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: training}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: training}}
  flavorFungibility: {whenCanBorrow: TryNextFlavor}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu, cpu, memory]
    flavors:
    - name: h100-spot
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 8}
      - {name: cpu, nominalQuota: 96}
      - {name: memory, nominalQuota: 1Ti}
    - name: a100-ondemand
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 8}
      - {name: cpu, nominalQuota: 64}
      - {name: memory, nominalQuota: 512Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: default, namespace: training}
spec: {clusterQueue: training}
""" + "---" + GFD_NODE.format(name="h100-1", pool="h100", product="NVIDIA-H100-80GB-HBM3") + "---" + GFD_NODE.format(
    name="a100-1", pool="a100", product="NVIDIA-A100-SXM4-80GB")

CPU_ONLY = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: cpu-nodes}
spec: {nodeLabels: {node-role: cpu}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: etl}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: etl}}
  flavorFungibility: {whenCanBorrow: TryNextFlavor}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: cpu-nodes
      resources:
      - {name: cpu, nominalQuota: 200}
      - {name: memory, nominalQuota: 800Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: etl, namespace: etl}
spec: {clusterQueue: etl}
---
apiVersion: v1
kind: Node
metadata:
  name: cpu-1
  labels: {node-role: cpu}
status:
  allocatable: {cpu: "64", memory: 256Gi}
"""

V1BETA1 = """
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: gpu}
spec: {nodeLabels: {node-pool: h100}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: Cohort
metadata: {name: ml}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: ml-cq}
spec:
  cohort: ml
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ml}}
  preemption: {reclaimWithinCohort: LowerPriority}
  flavorFungibility: {whenCanBorrow: TryNextFlavor}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu, cpu, memory]
    flavors:
    - name: gpu
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 4, lendingLimit: 1}
      - {name: cpu, nominalQuota: 32}
      - {name: memory, nominalQuota: 128Gi}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: ml-queue, namespace: ml}
spec: {clusterQueue: ml-cq}
""" + "---" + GFD_NODE.format(name="h100-1", pool="h100", product="NVIDIA-H100-80GB-HBM3")

# Names in no gpugov scheme: queue names unlike their tenants, dotted flavor labels, a cohort named like a team.
FOREIGN_NAMES = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: rf-gpu-pool-01}
spec: {nodeLabels: {cloud.example.com/instance-type: p5.48xlarge}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq-0042-prod}
spec:
  cohortName: shared-pool-x
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: proj-0042}}
  flavorFungibility: {whenCanBorrow: TryNextFlavor}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu, cpu, memory]
    flavors:
    - name: rf-gpu-pool-01
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 16}
      - {name: cpu, nominalQuota: 190}
      - {name: memory, nominalQuota: 1900Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq-main, namespace: proj-0042}
spec: {clusterQueue: cq-0042-prod}
""" + "".join("---" + GFD_NODE.format(name=f"ip-10-0-0-{i}.ec2.internal", pool="unused", product="NVIDIA-H100-80GB-HBM3")
              .replace("node-pool: unused", "cloud.example.com/instance-type: p5.48xlarge") for i in (11, 12))

# A cohort's slack ClusterQueue (no namespaceSelector, no LocalQueue) holds the capacity; the team's queue holds
# none of its own and runs on what it borrows (issue #40: kept on import as a Tenant with namespaces: []).
LENDING = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: gpu-nodes}
spec: {nodeLabels: {node-pool: h100}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: shared}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: slack}
spec:
  cohortName: shared
  flavorFungibility: {whenCanBorrow: TryNextFlavor}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu, cpu, memory]
    flavors:
    - name: gpu-nodes
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 8}
      - {name: cpu, nominalQuota: 96}
      - {name: memory, nominalQuota: 1Ti}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: borrower}
spec:
  cohortName: shared
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: borrower}}
  flavorFungibility: {whenCanBorrow: TryNextFlavor}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu, cpu, memory]
    flavors:
    - name: gpu-nodes
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 0}
      - {name: cpu, nominalQuota: 0}
      - {name: memory, nominalQuota: 0}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: jobs, namespace: borrower}
spec: {clusterQueue: borrower}
""" + "---" + GFD_NODE.format(name="h100-1", pool="h100", product="NVIDIA-H100-80GB-HBM3")

# Kueue's own flavor fungibility (no flavorFungibility: whenCanBorrow MayStopSearch), and one that stops at a flavor
# where it must preempt: kept as the tenants' spec.flavorFungibility (issue #40), not rewritten to gpugov's.
# (Namespaces of their own: the e2e sandbox releases a shape's namespaces but cannot wait for their deletion.)
STOP_SEARCH = SEVERAL_FLAVORS.replace("  flavorFungibility: {whenCanBorrow: TryNextFlavor}\n", "").replace(
    "training", "search") + """---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: serving}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: serving}}
  flavorFungibility: {whenCanBorrow: MayStopSearch, whenCanPreempt: MayStopSearch}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu, cpu, memory]
    flavors:
    - name: a100-ondemand
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 4}
      - {name: cpu, nominalQuota: 32}
      - {name: memory, nominalQuota: 256Gi}
    - name: h100-spot
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 4}
      - {name: cpu, nominalQuota: 32}
      - {name: memory, nominalQuota: 256Gi}
"""

# Kueue's own "default-flavor": a ResourceFlavor without nodeLabels, matching every node (issue #40: a GPUPool with
# nodeSelector {}, compiled back to a flavor without nodeLabels); a CPU-only node beside the GPU node is not counted.
EVERY_NODE = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cluster-queue}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: homogeneous}}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 96}
      - {name: memory, nominalQuota: 768Gi}
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: user-queue, namespace: homogeneous}
spec: {clusterQueue: cluster-queue}
---
apiVersion: v1
kind: Node
metadata:
  name: cpu-1
  labels: {node-role: cpu}
status:
  allocatable: {cpu: "64", memory: 256Gi}
""" + "---" + GFD_NODE.format(name="gpu-1", pool="any", product="NVIDIA-H100-80GB-HBM3")

SHAPES = {
    "flat": FLAT,
    "cohort-tree": COHORT_TREE,
    "several-flavors": SEVERAL_FLAVORS,
    "cpu-only": CPU_ONLY,
    "v1beta1": V1BETA1,
    "foreign-names": FOREIGN_NAMES,
    "lending": LENDING,
    "stop-search": STOP_SEARCH,
    "every-node": EVERY_NODE,
}


@dataclass(frozen=True)
class Run:
    """The Job a shape keeps running through the round trip."""

    namespace: str
    queue: str
    gpu: bool = True


RUNS = {
    "flat": Run("team-a", "user-queue"),
    "cohort-tree": Run("nlp", "nlp-jobs"),
    "several-flavors": Run("training", "default"),
    "cpu-only": Run("etl", "etl", gpu=False),
    "v1beta1": Run("ml", "ml-queue"),
    "foreign-names": Run("proj-0042", "lq-main"),
    "lending": Run("borrower", "jobs"),  # admitted on capacity borrowed from the slack queue
    "stop-search": Run("search", "default"),
    "every-node": Run("homogeneous", "user-queue"),  # admitted to the flavor without nodeLabels
}


def documents(shape: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(SHAPES[shape]) if d]


def namespaces(shape: str) -> list[str]:
    """The namespaces a shape's queues name: their LocalQueues' and those their selectors pick by name."""
    found: set[str] = set()
    for doc in documents(shape):
        if doc["kind"] == "LocalQueue":
            found.add(doc["metadata"]["namespace"])
        selector = (doc.get("spec") or {}).get("namespaceSelector") or {} if doc["kind"] == "ClusterQueue" else {}
        found.update(v for k, v in (selector.get("matchLabels") or {}).items() if k == NAMESPACE_NAME_LABEL)
        for expression in selector.get("matchExpressions") or []:
            if expression["key"] == NAMESPACE_NAME_LABEL and expression["operator"] == "In":
                found.update(expression["values"])
    return sorted(found)


def kwok_nodes(shape: str) -> list[dict[str, Any]]:
    """The shape's Nodes as a kubelet would report them (capacity, pods), tainted as the flavors selecting them say."""
    docs = documents(shape)
    flavors = [d.get("spec") or {} for d in docs if d["kind"] == "ResourceFlavor"]
    nodes = []
    for doc in (d for d in docs if d["kind"] == "Node"):
        name, labels = doc["metadata"]["name"], dict(doc["metadata"].get("labels") or {})
        resources = {**doc["status"]["allocatable"], "pods": "110"}
        taints = [t for f in flavors if (f.get("nodeLabels") or {}).items() <= labels.items()
                  for t in f.get("nodeTaints") or []]
        nodes.append({"metadata": {"name": name, "labels": {**labels, "kubernetes.io/hostname": name}},
                      "spec": {"taints": taints} if taints else {},
                      "status": {"capacity": resources, "allocatable": resources}})
    return nodes
