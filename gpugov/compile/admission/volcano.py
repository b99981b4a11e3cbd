"""Volcano's policies: gpugov-volcano-queue-access (a namespace submits only to its tenant's leaf
Queue), gpugov-volcano-accelerators-need-volcano (accelerator pods are scheduled by volcano),
gpugov-volcano-pod-priority and gpugov-volcano-reclaim (a reclaim stays done: volcano_reclaim_policy).

Threat model: attack: submit to a department's or another tenant's Queue, schedule accelerator pods
around Volcano, outrank others with a pod's PriorityClass or keep borrowed quota with
volcano.sh/preemptable: "false"; control: these policies; test:
tests/e2e/test_volcano_admission.py."""
from __future__ import annotations

from gpugov.compile.admission.common import (
    _RULES,
    _cel,
    _not_trusted,
    _pod_spec,
    _policy,
    _team,
    accelerator_resources,
)
from gpugov.compile.admission.need_a_queue import NEED_A_QUEUE
from gpugov.compile.admission.queue_access import allowed_classes
from gpugov.compile.common import Object, Scope
from gpugov.kube.names import (
    KUEUE_QUEUE_LABEL,
    VOLCANO_BATCH_GROUP,
    VOLCANO_GROUP,
    VOLCANO_GROUP_NAME_ANNOTATION,
    VOLCANO_QUEUE_ANNOTATION,
)
from gpugov.kube.objects import (
    ANNOTATION_RECLAIM_DEACTIVATED,
    ANNOTATION_RECLAIM_SNOOZE,
    ANNOTATION_RECLAIM_WARNED,
)


def _job_pod_need_a_queue_policy(scope: Scope) -> Object:
    """Volcano's base: a Job or Pod asking for accelerators (Job-owned pods left to their Job)."""
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
                    "expression": f"!has(object.metadata.labels) || !('{KUEUE_QUEUE_LABEL}' in object.metadata.labels)",
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
                    f"' requests accelerators without a queue: label it {KUEUE_QUEUE_LABEL}=<queue> (gpugov: every "
                    "accelerator goes through a queue)'",
                    "reason": "Forbidden",
                }
            ],
        },
    )


VOLCANO_QUEUE_ACCESS = "gpugov-volcano-queue-access"


VOLCANO_NEED_VOLCANO = "gpugov-volcano-accelerators-need-volcano"


_VOLCANO_RULES = [
    {"apiGroups": [VOLCANO_GROUP], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
     "resources": ["podgroups"]},
    {"apiGroups": [VOLCANO_BATCH_GROUP], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["jobs"]},
    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]},
]


def volcano_queue_access_policy(scope: Scope) -> Object:
    own = {ns: tenant.name for tenant in scope.tenants.values() for ns in sorted(tenant.namespaces)}
    every = sorted({*scope.tenants, *scope.departments})
    # A Pod's queue: its annotation; none where it joins a named PodGroup (whose own queue this policy
    # checked); Volcano's `default` queue for a pod scheduled by volcano without either (the scheduler
    # puts it there, a queue without gpugov's quota); none for a pod Volcano does not schedule.
    annotations = "has(object.metadata.annotations)"
    queue = (
        f"object.kind == 'Pod' ? ({annotations} && '{VOLCANO_QUEUE_ANNOTATION}' in object.metadata.annotations ? "
        f"object.metadata.annotations['{VOLCANO_QUEUE_ANNOTATION}'] : "
        f"({annotations} && '{VOLCANO_GROUP_NAME_ANNOTATION}' in object.metadata.annotations ? '' : "
        "(has(object.spec.schedulerName) && object.spec.schedulerName == 'volcano' ? 'default' : ''))) : "
        "(has(object.spec.queue) && object.spec.queue != '' ? object.spec.queue : 'default')"
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
    policy = _job_pod_need_a_queue_policy(scope)
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


VOLCANO_POD_PRIORITY = "gpugov-volcano-pod-priority"
# Volcano's preempt and reclaim actions skip every task whose pod (or PodGroup) carries this annotation or
# label with a value that is not true (an unparsable one counts as false: pkg/scheduler/api/pod_info.go
# GetPodPreemptable, job_info.go extractPreemptable), so a tenant writing it would keep what it borrowed.
VOLCANO_PREEMPTABLE = "volcano.sh/preemptable"
_TRUE = "['1', 't', 'T', 'true', 'TRUE', 'True']"  # Go's strconv.ParseBool true
_IMMUNE = (
    f"(has(object.metadata.annotations) && '{VOLCANO_PREEMPTABLE}' in object.metadata.annotations && "
    f"!(object.metadata.annotations['{VOLCANO_PREEMPTABLE}'] in {_TRUE})) || "
    f"(has(object.metadata.labels) && '{VOLCANO_PREEMPTABLE}' in object.metadata.labels && "
    f"!(object.metadata.labels['{VOLCANO_PREEMPTABLE}'] in {_TRUE}))"
)


def volcano_priority_classes(scope: Scope) -> dict[str, list[str]]:
    """namespace -> the PriorityClasses its pods may name on Volcano: the classes of the namespace's
    declared queues (see allowed_classes) and Guardrails.isolation.podPriorityClasses."""
    extra = set(scope.model.limits.isolation.pod_priority_classes)
    per_namespace: dict[str, set[str]] = {}
    for key, classes in allowed_classes(scope).items():
        per_namespace.setdefault(key.split("/", 1)[0], set(extra)).update(classes)
    return {namespace: sorted(classes) for namespace, classes in sorted(per_namespace.items())}


def volcano_pod_priority_policy(scope: Scope) -> Object:
    """Class 4 on Volcano: its scheduler orders and preempts by the PriorityClass of a Pod, a PodGroup
    or a Volcano Job (and its tasks). Every pod is checked itself (Volcano's controllers are not
    trusted here), so whatever creates it, a tenant namespace names only its queues' classes and any
    other namespace only Guardrails.isolation.podPriorityClasses: never system-node-critical. Nor may
    a Pod, a PodGroup or a Volcano Job declare itself beyond preemption and reclaim
    (``volcano.sh/preemptable`` other than true): only a non-preemptible class protects work."""
    named = ("(has(object.spec.priorityClassName) ? [object.spec.priorityClassName] : []) + "
             "(object.kind == 'Job' && has(object.spec.tasks) ? object.spec.tasks.filter(t, has(t.template) && "
             "has(t.template.spec) && has(t.template.spec.priorityClassName)).map(t, t.template.spec.priorityClassName)"
             " : [])")
    return _policy(
        scope,
        VOLCANO_POD_PRIORITY,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _VOLCANO_RULES},
            "variables": [
                {"name": "perNamespace", "expression": _cel(volcano_priority_classes(scope))},
                {"name": "anywhere", "expression": _cel(sorted(scope.model.limits.isolation.pod_priority_classes))},
                {"name": "allowed", "expression": "request.namespace in variables.perNamespace ? "
                 "variables.perNamespace[request.namespace] : variables.anywhere"},
                {"name": "named", "expression": f"({named}).filter(n, !(n in variables.allowed))"},
                {"name": "immune", "expression": _IMMUNE},
            ],
            "validations": [
                {
                    "expression": "variables.named.size() == 0",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "' may not use priorityClassName ' + variables.named[0] + '; allowed here: ' + "
                    "(variables.allowed.size() == 0 ? '(none)' : variables.allowed.join(', ')) + ' (gpugov: the "
                    "classes of the namespace\\'s queues in tenants/, Guardrails.isolation.podPriorityClasses; "
                    f"ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": "!(request.namespace in variables.perNamespace) || !variables.immune",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    f"' may not set {VOLCANO_PREEMPTABLE} to anything but true: Volcano would never preempt or reclaim "
                    "it, and what it borrowed would never be given back (gpugov: work is protected by a "
                    f"non-preemptible PriorityClass of its queue; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
            ],
        },
    )


VOLCANO_RECLAIM = "gpugov-volcano-reclaim"
_RECLAIM_MARKS = (ANNOTATION_RECLAIM_WARNED, ANNOTATION_RECLAIM_DEACTIVATED)


def reclaim_account(scope: Scope) -> str:
    """The user the reclaim CronJob acts as (compile.operations RECLAIM's ServiceAccount)."""
    return f"system:serviceaccount:{scope.cluster.operations_namespace}:gpugov-reclaim"


def volcano_reclaim_policy(scope: Scope) -> Object:
    """`gpugov reclaim` on Volcano marks a tenant's own batch/v1 Job (warned, then deactivated with
    spec.suspend=true) or Volcano Job (deactivated by an AbortJob Command, which only a ResumeJob Command
    undoes: no tenant role creates Commands), and a member may edit its Jobs: in a tenant namespace
    nobody but the reclaim CronJob's ServiceAccount, the trusted controllers and cluster administrators
    (system:masters) may add, change or remove gpugov's two marks on either kind, nor set spec.suspend
    back to false on a batch/v1 Job gpugov deactivated. Stripping the warning would restart the grace at every run, un-suspending would take the
    reclaimed accelerators back unnoticed; a new Job (any name) is a new ask in the queue.

    Threat model: attack: undo a reclaim or dodge it (un-suspend the Job, drop or rewrite
    gpugov.io/reclaim-deactivated-at or -warned-at); control: this policy; test:
    tests/e2e/test_volcano_budget_reclaim.py::test_a_tenant_cannot_undo_or_dodge_a_reclaim,
    ::test_an_idle_volcano_job_is_warned_then_aborted_and_stays_down."""
    old = "(request.operation == 'UPDATE' && has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {})"
    new = "(has(object.metadata.annotations) ? object.metadata.annotations : {})"
    not_trusted = _not_trusted(scope)
    return _policy(
        scope,
        VOLCANO_RECLAIM,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [
                {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["jobs"]},
                {"apiGroups": [VOLCANO_BATCH_GROUP], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["jobs"]}]},
            "matchConditions": [
                not_trusted,
                {"name": "not-gpugov-reclaim-or-an-administrator",
                 "expression": f"request.userInfo.username != {_cel(reclaim_account(scope))} && "
                 "!request.userInfo.groups.exists(g, g == 'system:masters')"},
            ],
            "variables": [
                {"name": "marks", "expression": _cel(list(_RECLAIM_MARKS))},
                {"name": "old", "expression": old},
                {"name": "new", "expression": new},
                {"name": "changed", "expression": "variables.marks.filter(k, (k in variables.old) != "
                 "(k in variables.new) || (k in variables.old && variables.old[k] != variables.new[k]))"},
            ],
            "validations": [
                {
                    "expression": "variables.changed.size() == 0",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + ' may not "
                    "add, change or remove ' + variables.changed[0] + ': only gpugov reclaim writes it (gpugov: "
                    f"snooze with {ANNOTATION_RECLAIM_SNOOZE} within the declared maximum; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": f"request.resource.group != 'batch' || !('{ANNOTATION_RECLAIM_DEACTIVATED}' in "
                    "variables.old) || (has(object.spec.suspend) && object.spec.suspend)",
                    "messageExpression": "'Job ' + request.namespace + '/' + object.metadata.name + ' was "
                    "deactivated by gpugov reclaim (its accelerators stayed idle past the grace) and stays "
                    "suspended (gpugov: submit a new Job when it will use what it asks for; ask "
                    f"{_team(scope)})'",
                    "reason": "Forbidden",
                },
            ],
        },
    )
