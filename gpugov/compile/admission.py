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

The declarations are written into the CEL as literals, so the policy needs no parameter
objects and always matches the compiled queues.
"""

from __future__ import annotations

import json
from typing import Any

from gpugov.compile.common import NON_ACCELERATOR, Object, Scope, metadata
from gpugov.declarations.model import Decl

API = "admissionregistration.k8s.io/v1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
QUEUE_ACCESS = "gpugov-queue-access"
NEED_A_QUEUE = "gpugov-accelerators-need-a-queue"
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease", "kueue-system")
_RULES = [
    {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["jobs"]},
    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]},
]


def _cel(value: Any) -> str:
    """A CEL literal of a JSON-shaped value (CEL's string, list and map syntax is JSON's)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _pod_spec(expr: str = "object") -> str:
    return f"({expr}.kind == 'Job' ? {expr}.spec.template.spec : {expr}.spec)"


def allowed_classes(scope: Scope) -> dict[str, list[str]]:
    """'namespace/queue' -> the priority classes declared on that queue; a queue that declares
    none may use every preemptible class (a non-preemptible one is only ever granted by name)."""
    preemptible = sorted(name for name, pc in scope.model.priority_classes.items() if pc.preemptible)
    return {
        f"{queue.namespace}/{queue.name}": sorted(queue.priority_classes) if queue.priority_classes else preemptible
        for tenant in scope.tenants.values()
        for queue in tenant.queues
    }


COMPONENT = "gpugov.io/component"  # as compile.operations labels gpugov's own objects
LABELS = {COMPONENT: "admission"}


def _source(scope: Scope) -> Decl:
    """The declaration a policy is traced to: the Cluster, or (implicit cluster) the first tenant."""
    return scope.cluster if scope.cluster.declared else scope.tenants[min(scope.tenants)]


def _policy(scope: Scope, name: str, spec: dict[str, Any]) -> Object:
    meta = metadata(name, _source(scope), LABELS)
    return {"apiVersion": API, "kind": "ValidatingAdmissionPolicy", "metadata": meta, "spec": spec}


def _binding(scope: Scope, name: str, namespace_selector: dict[str, Any] | None = None) -> Object:
    spec: dict[str, Any] = {"policyName": name, "validationActions": ["Deny"]}
    if namespace_selector:
        spec["matchResources"] = {"namespaceSelector": namespace_selector}
    return {
        "apiVersion": API,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": metadata(name, _source(scope), LABELS),
        "spec": spec,
    }


def queue_access_policy(scope: Scope) -> Object:
    pod_spec = _pod_spec()
    return _policy(
        scope,
        QUEUE_ACCESS,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _RULES},
            "matchConditions": [
                {"name": "has-queue", "expression": f"has(object.metadata.labels) && '{QUEUE_LABEL}' in object.metadata.labels"}
            ],
            "variables": [
                {"name": "allowed", "expression": _cel(allowed_classes(scope))},
                {"name": "queue", "expression": f"request.namespace + '/' + object.metadata.labels['{QUEUE_LABEL}']"},
                {
                    "name": "priorityClass",
                    "expression": f"'{PRIORITY_LABEL}' in object.metadata.labels ? object.metadata.labels['{PRIORITY_LABEL}'] : ''",
                },
                {
                    "name": "podPriorityClass",
                    "expression": f"has({pod_spec}.priorityClassName) ? {pod_spec}.priorityClassName : ''",
                },
            ],
            "validations": [
                {
                    "expression": "variables.queue in variables.allowed",
                    "messageExpression": "'queue ' + variables.queue + ' is not declared for namespace ' + "
                    "request.namespace + ' (gpugov: declared queues only)'",
                    "reason": "Forbidden",
                },
                {
                    "expression": "!(variables.queue in variables.allowed) || variables.priorityClass == '' || "
                    "variables.priorityClass in variables.allowed[variables.queue]",
                    "messageExpression": "'priority class ' + variables.priorityClass + ' is not allowed on queue ' + "
                    "variables.queue + '; allowed: ' + variables.allowed[variables.queue].join(', ')",
                    "reason": "Forbidden",
                },
                {
                    "expression": "!(variables.queue in variables.allowed) || variables.podPriorityClass == '' || "
                    "variables.podPriorityClass in variables.allowed[variables.queue]",
                    "messageExpression": "'priorityClassName ' + variables.podPriorityClass + ' is not allowed on queue ' + "
                    "variables.queue + '; allowed: ' + variables.allowed[variables.queue].join(', ')",
                    "reason": "Forbidden",
                },
            ],
        },
    )


def accelerator_resources(scope: Scope) -> list[str]:
    names = {resource for pool in scope.pools.values() for resource in pool.capacity if resource not in NON_ACCELERATOR}
    return sorted(names)


def need_a_queue_policy(scope: Scope) -> Object:
    pod_spec = _pod_spec()
    asks = "(has(c.resources) && ((has(c.resources.limits) && c.resources.limits.exists(r, r in variables.accelerators)) || (has(c.resources.requests) && c.resources.requests.exists(r, r in variables.accelerators))))"
    return _policy(
        scope,
        NEED_A_QUEUE,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [dict(rule, operations=["CREATE"]) for rule in _RULES]},
            "matchConditions": [
                {
                    "name": "no-queue",
                    "expression": f"!has(object.metadata.labels) || !('{QUEUE_LABEL}' in object.metadata.labels)",
                },
                {
                    "name": "not-a-job-pod",
                    "expression": "object.kind == 'Job' || !has(object.metadata.ownerReferences) || "
                    "!object.metadata.ownerReferences.exists(o, o.kind == 'Job')",
                },
            ],
            "variables": [
                {"name": "accelerators", "expression": _cel(accelerator_resources(scope))},
                {
                    "name": "containers",
                    "expression": f"{pod_spec}.containers + (has({pod_spec}.initContainers) ? {pod_spec}.initContainers : [])",
                },
            ],
            "validations": [
                {
                    "expression": f"!variables.containers.exists(c, {asks})",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    f"' requests accelerators without a queue: label it {QUEUE_LABEL}=<queue> (gpugov: every "
                    "accelerator goes through a queue)'",
                    "reason": "Forbidden",
                }
            ],
        },
    )


VOLCANO_QUEUE_ACCESS = "gpugov-volcano-queue-access"
VOLCANO_NEED_VOLCANO = "gpugov-volcano-accelerators-need-volcano"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
_VOLCANO_RULES = [
    {"apiGroups": ["scheduling.volcano.sh"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
     "resources": ["podgroups"]},
    {"apiGroups": ["batch.volcano.sh"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["jobs"]},
    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]},
]


def volcano_queue_access_policy(scope: Scope) -> Object:
    own = {ns: tenant.name for tenant in scope.tenants.values() for ns in sorted(tenant.namespaces)}
    every = sorted({*scope.tenants, *scope.departments})
    queue = (
        f"object.kind == 'Pod' ? (has(object.metadata.annotations) && '{VOLCANO_QUEUE_ANNOTATION}' in "
        f"object.metadata.annotations ? object.metadata.annotations['{VOLCANO_QUEUE_ANNOTATION}'] : '') : "
        "(has(object.spec.queue) ? object.spec.queue : 'default')"
    )
    return _policy(
        scope,
        VOLCANO_QUEUE_ACCESS,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _VOLCANO_RULES},
            "variables": [
                {"name": "own", "expression": _cel(own)},
                {"name": "gpugovQueues", "expression": _cel(every)},
                {"name": "queue", "expression": queue},
            ],
            "validations": [
                {
                    "expression": "variables.queue == '' || (request.namespace in variables.own ? "
                    "variables.queue == variables.own[request.namespace] : !(variables.queue in variables.gpugovQueues))",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "' may not use Volcano queue ' + variables.queue + (request.namespace in variables.own ? "
                    "'; namespace ' + request.namespace + ' uses queue ' + variables.own[request.namespace] : "
                    "': it belongs to a gpugov tenant or department')",
                    "reason": "Forbidden",
                }
            ],
        },
    )


def volcano_need_volcano_policy(scope: Scope) -> Object:
    policy = need_a_queue_policy(scope)
    pod_spec = _pod_spec()
    spec = policy["spec"]
    policy["metadata"]["name"] = VOLCANO_NEED_VOLCANO
    spec["matchConditions"] = [
        {"name": "not-volcano", "expression": f"!has({pod_spec}.schedulerName) || {pod_spec}.schedulerName != 'volcano'"}
    ]
    spec["validations"][0]["messageExpression"] = (
        "object.kind + ' ' + request.namespace + '/' + object.metadata.name + ' requests accelerators but is not "
        "scheduled by volcano: set schedulerName: volcano and a queue (gpugov: every accelerator goes through a queue)'"
    )
    return policy


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
        ]
    return [
        queue_access_policy(scope),
        _binding(scope, QUEUE_ACCESS),
        need_a_queue_policy(scope),
        _binding(scope, NEED_A_QUEUE, not_system),
    ]
