"""Drift rules: what differs between the declarations (via compile) and the live cluster."""

from __future__ import annotations

from gpugov.findings import Level, rule

INCOMPLETE = rule("GD000", "check-incomplete", Level.ERROR,
                  "Drift could not read the cluster (or Prometheus, or an agent) completely, so nothing was compared.",
                  "The message names the request that failed: check the endpoint, the credentials (RBAC) and that "
                  "Kueue or Volcano is installed.")
OBJECT_MISSING = rule("GD001", "object-missing", Level.ERROR,
                      "A desired object is not in the cluster.", "Apply the declarations: pulumi up or gpugov apply.")
OBJECT_CHANGED = rule("GD002", "object-changed", Level.ERROR,
                      "A field gpugov owns differs from the declaration (the field manager that changed it is named).",
                      "Change the declaration in Git instead, then apply; or apply to restore it.")
OBJECT_NOT_DESIRED = rule("GD003", "object-not-desired", Level.WARNING,
                          "An object labelled managed-by gpugov is no longer declared.",
                          "Delete it (after draining queues), or declare it again.")
NODE_MISSING = rule("GD010", "node-missing", Level.ERROR,
                    "A node declared in a pool is not in the cluster.", "Bring the server back or remove it from the pool.")
NODE_NOT_READY = rule("GD011", "node-not-ready", Level.ERROR,
                      "A pool's node is not Ready.", "Check the kubelet and the GPU driver on the node.")
NODE_LABEL = rule("GD012", "node-label-drift", Level.ERROR,
                  "A node lacks a label gpugov sets (pool, topology, nvidia.com/mig.config) or has another value.",
                  "Apply the node patches, and find who relabelled the node.")
NODE_TAINT = rule("GD013", "node-taint-missing", Level.ERROR,
                  "A node lacks a taint its pool declares.", "Apply the node patches.")
GPU_PRODUCT = rule("GD014", "gpu-product-mismatch", Level.ERROR,
                   "The node's GPU model (nvidia.com/gpu.product from GPU Feature Discovery) is not the pool's model.",
                   "Move the node to the right pool, or fix the pool's accelerator model.")
GPU_COUNT = rule("GD015", "gpu-count-mismatch", Level.ERROR,
                 "The node reports another number of accelerators than the pool declares per node.",
                 "A GPU may have fallen off the bus: check nvidia-smi and the device plugin.")
MIG_STATE = rule("GD016", "mig-config-failed", Level.ERROR,
                 "nvidia.com/mig.config.state is not success: mig-manager did not apply the declared layout.",
                 "Read the nvidia-mig-manager logs on the node; pods may hold the GPUs.")
MIG_ALLOCATABLE = rule("GD017", "mig-allocatable-mismatch", Level.ERROR,
                       "The node's allocatable MIG (or whole-GPU) resources do not match its declared layout.",
                       "Check mig-manager and the device plugin (mixed strategy) on the node.")
OVER_QUOTA = rule("GD020", "tenant-over-quota", Level.ERROR,
                  "A tenant's running pods request more accelerators than its nominal quota plus what it may borrow.",
                  "Find pods that bypass the queues; check the admission policies (Kueue) or the ResourceQuota backstop (Volcano).")
HELD_FROM_HIGHER_QUOTA = rule(
    "GD026", "held-from-a-higher-quota", Level.INFO,
    "A tenant's running pods hold more accelerators than its quota allows now, each having started within "
    "the quota of its time: a QuotaGrant ended or a QuotaWindow closed under them.",
    "Kueue does not evict admitted workloads when quota drops: they finish on their own, or are preempted "
    "when another queue reclaims its quota (reclaimWithinCohort) or a pending workload of the same queue "
    "outranks them (withinClusterQueue).")
QUEUE_BYPASS = rule("GD021", "queue-bypass", Level.ERROR,
                    "A GPU pod in a tenant namespace is not submitted through a queue.",
                    "Kueue: label it kueue.x-k8s.io/queue-name; Volcano: schedulerName volcano.")
UNADMITTED = rule("GD027", "accelerators-without-admitted-workload", Level.ERROR,
                  "A running pod in a tenant namespace holds accelerators, has no owner, and no admitted Workload is "
                  "its (Kueue): a pod released from its controller (its labels or ownerReferences changed) or "
                  "orphaned (its Job deleted with propagationPolicy Orphan) runs on outside any job Kueue admitted.",
                  "Delete the pod; find who released it (gpugov-controller-release refuses a tenant's relabel).")
FOREIGN_NAMESPACE = rule("GD022", "gpu-pod-outside-tenants", Level.ERROR,
                         "A pod requests accelerators in a namespace that belongs to no tenant.",
                         "Declare a tenant for the namespace, or move the workload.")
POOL_WITHOUT_QUOTA = rule("GD023", "pod-on-pool-without-quota", Level.WARNING,
                          "A tenant's pod runs on a pool where the tenant has no quota (borrowed or bypassing).",
                          "Give the tenant quota in that pool, or check how the pod got there.")
PENDING = rule("GD024", "pending-workloads", Level.INFO,
               "A tenant's ClusterQueue has pending workloads.", "See `kubectl get workloads -n <namespace>`.")
BORROWING = rule("GD025", "borrowing", Level.INFO,
                 "A tenant's ClusterQueue uses quota borrowed from its cohort.", "")
IDLE = rule("GD030", "idle-accelerator", Level.WARNING,
            "A pod holds accelerators whose utilisation (DCGM) stayed under the idle threshold for the whole window.",
            "Ask the owner to release the GPUs; consider a shorter runtime limit.")
QUEUE_NOT_OPEN = rule("GD028", "volcano-queue-not-open", Level.ERROR,
                      "A Volcano Queue gpugov declares is not Open (Closed or Closing) and gpugov budget did not "
                      "close it (no gpugov.io/budget-held mark): Volcano admits no new job into it, while the "
                      "declarations promise its tenant a queue.",
                      "Open it again (vcctl queue operate --name QUEUE --action open), or remove the tenant from the declarations.")

DRIFT_RULE_IDS = {r.id for r in (INCOMPLETE, OBJECT_MISSING, OBJECT_CHANGED, OBJECT_NOT_DESIRED, NODE_MISSING,
                                 NODE_NOT_READY, NODE_LABEL, NODE_TAINT, GPU_PRODUCT, GPU_COUNT, MIG_STATE,
                                 MIG_ALLOCATABLE, OVER_QUOTA, QUEUE_BYPASS, FOREIGN_NAMESPACE, POOL_WITHOUT_QUOTA,
                                 PENDING, BORROWING, IDLE)}
