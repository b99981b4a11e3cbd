"""Admission rules that make a tenant's queues binding (Kueue and Volcano).

Kueue itself checks neither which priority class a job asks for nor whether a GPU pod goes
through a queue at all. compile therefore emits native ValidatingAdmissionPolicies (CEL in
the apiserver, no webhook to run or to fail) with their bindings:

- ``gpugov-queue-access``: a Job or Pod labelled with a queue (``kueue.x-k8s.io/queue-name``)
  must name a queue declared for its namespace, and may only ask for the priority classes
  declared on that queue (none declared: the preemptible ones), through the
  ``kueue.x-k8s.io/priority-class`` label or the pod's
  ``priorityClassName`` (Kueue falls back to the pod's PriorityClass for a workload's
  priority, so that door is shut too). The message names the queue and its allowed classes.
- ``gpugov-accelerators-need-a-queue``: outside the system namespaces, a Job or Pod that
  requests an accelerator of the cluster's pools must carry a queue label; pods that a Job
  owns are left to the Job's own check (Kueue's job integration labels the Job, not its pods).

On **Volcano** the same two doors are shut with Volcano's own names:

- ``gpugov-volcano-queue-access``: a PodGroup (``spec.queue``), a Volcano Job (``spec.queue``)
  or a Pod (``scheduling.volcano.sh/queue-name`` annotation) in a tenant's namespace may only
  name that tenant's leaf Queue; elsewhere no gpugov Queue at all. Department (parent) Queues
  run no jobs, so no PodGroup may aim at one.
- ``gpugov-volcano-accelerators-need-volcano``: outside the system namespaces, a Pod or Job
  that requests an accelerator must be scheduled by ``volcano``.
- ``gpugov-volcano-reclaim``: in a tenant namespace, gpugov reclaim's marks on a batch/v1 Job and
  the suspension of a Job it deactivated are gpugov's (see volcano_reclaim_policy).

The declarations are written into the CEL as literals, so the policy needs no parameter
objects and always matches the compiled queues.

One module a policy, each with its threat-model row (attack, control, test) in its docstring, as
gpugov/policy/ has one module a rule family; `common` holds what they share (the workload kinds, the
policy and binding shapes, CEL literals). This package assembles them per backend (`admission_objects`)
and names every policy and what the rest of gpugov reads.
"""
from __future__ import annotations

from gpugov.compile.admission.common import (
    API,
    CEL_BUDGET,
    DEVICE_ENV,
    PARENT_KINDS,
    SYSTEM_NAMESPACES,
    WORKLOAD_KINDS,
    WorkloadKind,
    _binding,
    accelerator_resources,
    allowances,
    tenant_namespaces_selector,
)
from gpugov.compile.admission.device_access import DEVICE_ACCESS, device_access_policy
from gpugov.compile.admission.device_sources import DEVICE_LIST_MOUNT, DEVICE_SOURCES, device_sources_policy
from gpugov.compile.admission.lifecycle import LIFECYCLE, lifecycle_policy
from gpugov.compile.admission.max_runtime import MAX_RUNTIME, _max_runtime_objects, max_runtime_policy, max_runtimes
from gpugov.compile.admission.need_a_queue import NEED_A_QUEUE, need_a_queue_policy
from gpugov.compile.admission.ownership import OWNERSHIP, ownership_policy
from gpugov.compile.admission.placement import PLACEMENT, placement_policy
from gpugov.compile.admission.pod_priority import POD_PRIORITY, pod_priority_policy
from gpugov.compile.admission.queue_access import (
    QUEUE_ACCESS,
    allowed_classes,
    declared_queues,
    queue_access_objects,
    queue_access_policy,
)
from gpugov.compile.admission.release import RELEASE, release_policy
from gpugov.compile.admission.service_exposure import SERVICE_EXPOSURE, service_exposure_policy
from gpugov.compile.admission.volcano import (
    VOLCANO_NEED_VOLCANO,
    VOLCANO_POD_PRIORITY,
    VOLCANO_QUEUE_ACCESS,
    VOLCANO_RECLAIM,
    volcano_need_volcano_policy,
    volcano_pod_priority_policy,
    volcano_priority_classes,
    volcano_queue_access_policy,
    volcano_reclaim_policy,
)
from gpugov.compile.admission.volumes import VOLUMES, volumes_policy
from gpugov.compile.common import Object, Scope


def admission_objects(scope: Scope) -> list[Object]:
    if not scope.tenants:
        return []
    exempt = sorted({*SYSTEM_NAMESPACES, scope.cluster.mig_config_namespace, scope.cluster.operations_namespace})
    not_system = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": exempt}]}
    if scope.backend == "volcano":
        return [
            volcano_queue_access_policy(scope),
            _binding(scope, VOLCANO_QUEUE_ACCESS),
            volcano_need_volcano_policy(scope),
            _binding(scope, VOLCANO_NEED_VOLCANO, not_system),
            device_access_policy(scope),
            _binding(scope, DEVICE_ACCESS, not_system),
            volcano_pod_priority_policy(scope),
            _binding(scope, VOLCANO_POD_PRIORITY, not_system),
            volcano_reclaim_policy(scope),
            _binding(scope, VOLCANO_RECLAIM, tenant_namespaces_selector()),
            *namespace_objects(scope),
        ]
    return [
        *queue_access_objects(scope),
        need_a_queue_policy(scope),
        _binding(scope, NEED_A_QUEUE, not_system),
        ownership_policy(scope),
        _binding(scope, OWNERSHIP, not_system),
        lifecycle_policy(scope),
        _binding(scope, LIFECYCLE, not_system),
        device_access_policy(scope),
        _binding(scope, DEVICE_ACCESS, not_system),
        pod_priority_policy(scope),
        _binding(scope, POD_PRIORITY, not_system),
        *_max_runtime_objects(scope, not_system),
        release_policy(scope),
        _binding(scope, RELEASE, not_system),
        placement_policy(scope),
        _binding(scope, PLACEMENT, tenant_namespaces_selector()),  # other namespaces' agents tolerate every taint
        *namespace_objects(scope),
    ]


def namespace_objects(scope: Scope) -> list[Object]:
    """Storage, exposure and the device variables' other sources, on every backend, bound to the tenant
    namespaces."""
    tenants = tenant_namespaces_selector()
    return [volumes_policy(scope), _binding(scope, VOLUMES, tenants),
            service_exposure_policy(scope), _binding(scope, SERVICE_EXPOSURE, tenants),
            device_sources_policy(scope), _binding(scope, DEVICE_SOURCES, tenants)]


__all__ = [
    "API",
    "CEL_BUDGET",
    "DEVICE_ACCESS",
    "DEVICE_ENV",
    "DEVICE_LIST_MOUNT",
    "DEVICE_SOURCES",
    "LIFECYCLE",
    "MAX_RUNTIME",
    "NEED_A_QUEUE",
    "OWNERSHIP",
    "PARENT_KINDS",
    "PLACEMENT",
    "POD_PRIORITY",
    "QUEUE_ACCESS",
    "RELEASE",
    "SERVICE_EXPOSURE",
    "SYSTEM_NAMESPACES",
    "VOLCANO_NEED_VOLCANO",
    "VOLCANO_POD_PRIORITY",
    "VOLCANO_QUEUE_ACCESS",
    "VOLCANO_RECLAIM",
    "VOLUMES",
    "WORKLOAD_KINDS",
    "WorkloadKind",
    "accelerator_resources",
    "admission_objects",
    "allowances",
    "allowed_classes",
    "declared_queues",
    "device_access_policy",
    "device_sources_policy",
    "lifecycle_policy",
    "max_runtime_policy",
    "max_runtimes",
    "namespace_objects",
    "need_a_queue_policy",
    "ownership_policy",
    "placement_policy",
    "pod_priority_policy",
    "queue_access_objects",
    "queue_access_policy",
    "release_policy",
    "service_exposure_policy",
    "tenant_namespaces_selector",
    "volcano_need_volcano_policy",
    "volcano_pod_priority_policy",
    "volcano_priority_classes",
    "volcano_queue_access_policy",
    "volcano_reclaim_policy",
    "volumes_policy",
]
