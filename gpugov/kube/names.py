"""The names other projects own that gpugov reads and writes: Kueue's and Volcano's API groups,
versions, labels and annotations, and the core API versions gpugov emits. One home each, so a
version bump or a renamed key is one edit."""

from __future__ import annotations

# Kueue (kueue.x-k8s.io, v0.16 or later: v1beta2 served and stored)
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
KUEUE_API = f"{KUEUE_GROUP}/{KUEUE_VERSION}"
KUEUE_CONFIG_API = f"config.{KUEUE_GROUP}/{KUEUE_VERSION}"  # Kueue's controller Configuration
KUEUE_KEY_PREFIX = f"{KUEUE_GROUP}/"  # every label, annotation and scheduling gate Kueue owns
KUEUE_QUEUE_LABEL = f"{KUEUE_GROUP}/queue-name"  # a job's LocalQueue, set by its user
KUEUE_PRIORITY_LABEL = f"{KUEUE_GROUP}/priority-class"  # a job's WorkloadPriorityClass, set by its user
# What Kueue puts on the pods of a workload it admitted (a Job's pods carry no queue-name label).
KUEUE_ADMITTED_LABEL = f"{KUEUE_GROUP}/local-queue-name"
KUEUE_PREBUILT_WORKLOAD_LABEL = f"{KUEUE_GROUP}/prebuilt-workload-name"
KUEUE_WORKLOAD_ANNOTATION = f"{KUEUE_GROUP}/workload"
# Plain pod groups (Kueue's pod integration): the group a Pod joins, and the role Kueue files it
# under, which Kueue's webhook computes from the pod's spec unless the pod already carries one.
KUEUE_POD_GROUP_LABEL = f"{KUEUE_GROUP}/pod-group-name"
KUEUE_ROLE_HASH_ANNOTATION = f"{KUEUE_GROUP}/role-hash"
# A job's maximum execution time in seconds, set by its user (Kueue: constants.MaxExecTimeSecondsLabel,
# immutable); Kueue copies it to the Workload's spec.maximumExecutionTimeSeconds and deactivates the
# Workload (spec.active=false) once it has run that long admitted.
KUEUE_MAX_EXEC_TIME_LABEL = f"{KUEUE_GROUP}/max-exec-time-seconds"
# Kueue's visibility API: an aggregated API server (pending workloads, positions)
VISIBILITY_GROUP = f"visibility.{KUEUE_GROUP}"
VISIBILITY_API = f"{VISIBILITY_GROUP}/{KUEUE_VERSION}"
VISIBILITY_APISERVICE = f"{KUEUE_VERSION}.{VISIBILITY_GROUP}"

# Volcano
VOLCANO_GROUP = "scheduling.volcano.sh"
VOLCANO_API = f"{VOLCANO_GROUP}/v1beta1"
VOLCANO_BATCH_GROUP = "batch.volcano.sh"  # Volcano Jobs
VOLCANO_QUEUE_ANNOTATION = f"{VOLCANO_GROUP}/queue-name"  # a pod's Queue
VOLCANO_GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"  # the PodGroup a pod joins (Volcano Jobs' pods)
VOLCANO_NODEGROUP_LABEL = "volcano.sh/nodegroup-name"  # a node's group, which a Queue's affinity lists

# Kubernetes
SCHEDULING_API = "scheduling.k8s.io/v1"  # PriorityClass
