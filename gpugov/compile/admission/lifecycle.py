"""gpugov-queue-lifecycle (class 2): what a tenant changes after creation.

Threat model: attack: clear `suspend`, remove Kueue's scheduling gate, edit Kueue's own keys, grow a
running Job, keep devices through a long grace period, run a pod group beyond its admission; control:
`oldObject` on UPDATE, only trusted controllers change what Kueue holds; test:
tests/e2e/test_tenant_escape.py::test_class2_*."""
from __future__ import annotations

from gpugov.compile.admission.common import (
    TENANT_KUEUE_KEYS,
    WORKLOAD_KINDS,
    _asks,
    _by_kind,
    _cel,
    _containers,
    _guarded,
    _not_trusted,
    _pod_specs_expr,
    _policy,
    _team,
    _workload_rules,
    accelerator_resources,
)
from gpugov.compile.common import Object, Scope
from gpugov.kube.names import (
    KUEUE_KEY_PREFIX,
    KUEUE_POD_GROUP_LABEL,
    KUEUE_PREBUILT_WORKLOAD_LABEL,
    KUEUE_ROLE_HASH_ANNOTATION,
)

LIFECYCLE = "gpugov-queue-lifecycle"


def _labels_or_empty(root: str, field: str) -> str:
    return f"(has({root}.metadata.{field}) ? {root}.metadata.{field} : {{}})"


# The pod templates whose pods Kueue's pod integration files by role: a Deployment's and a
# StatefulSet's, a LeaderWorkerSet's leader and workers (a Job's or JobSet's pods have a managed
# owner and are no pod group).
_ROLE_TEMPLATES = {
    "Deployment": ("spec.template.metadata.annotations",),
    "StatefulSet": ("spec.template.metadata.annotations",),
    "LeaderWorkerSet": ("spec.leaderWorkerTemplate.leaderTemplate.metadata.annotations",
                        "spec.leaderWorkerTemplate.workerTemplate.metadata.annotations"),
}


def _template_names_role() -> str:
    """CEL: a pod template of the object names the role its pods are filed under."""
    return " || ".join(f"(object.kind == '{kind}' && '{KUEUE_ROLE_HASH_ANNOTATION}' in {_guarded('object', path, '{}')})"
                       for kind, paths in _ROLE_TEMPLATES.items() for path in paths)


def lifecycle_policy(scope: Scope) -> Object:
    """Class 2: what a tenant may change once a workload exists. Kueue holds a queued workload
    through `suspend` (Jobs and the CRD kinds) or its scheduling gates (Pods), and tracks it through
    its own labels and annotations: only Kueue and the trusted controllers clear `suspend`, remove a
    kueue.x-k8s.io gate or change a kueue.x-k8s.io key other than the queue and priority labels (both
    still checked by gpugov-queue-access; removing the queue label by gpugov-accelerators-need-a-queue).
    A running Job may not grow, and pods that use accelerators stop within the declared grace period,
    so that what Kueue preempts, reclaims or stops gives its devices back.

    Plain pod groups: Kueue admits a group for its first pod of each role and takes a pod's role from
    its kueue.x-k8s.io/role-hash annotation when it carries one, so a tenant's 4-GPU pod filed under
    the role of its 1-GPU pod ran on the 1-GPU admission. Kueue's webhook writes the annotation on
    every Pod it gates, before this policy reads the Pod, so a forged one cannot be told apart: a
    tenant may not create a Pod that joins a pod group (the trusted controllers may; a tenant runs
    a group as an indexed Job, a JobSet or a StatefulSet), nor put the annotation in a pod template."""
    isolation = scope.model.limits.isolation
    suspendable = [k for k in WORKLOAD_KINDS if k.suspend]
    held = _by_kind(lambda k: _guarded("oldObject", k.suspend, "false") if k.suspend else "false", "false",
                    "oldObject", tuple(suspendable))
    held_now = _by_kind(lambda k: _guarded("object", k.suspend, "false") if k.suspend else "false", "false",
                        "object", tuple(suspendable))
    internal = f"k.contains('{KUEUE_KEY_PREFIX}') && !(k in {_cel(list(TENANT_KUEUE_KEYS))})"
    unchanged = ("variables.old{f}.all(k, !({internal}) || (k in variables.new{f} && variables.new{f}[k] == "
                 "variables.old{f}[k])) && variables.new{f}.all(k, !({internal}) || k in variables.old{f})")
    # A running Job that asks for more pods than its queue admitted: the Job controller starts them at
    # once, before Kueue's reconciler sees the Workload no longer matches and suspends the Job.
    parallelism = ("(has(object.spec.parallelism) ? object.spec.parallelism : 1) > "
                   "(has(oldObject.spec.parallelism) ? oldObject.spec.parallelism : 1)")
    gates = ("has(oldObject.spec.schedulingGates) ? oldObject.spec.schedulingGates.filter(g, "
             f"g.name.startsWith('{KUEUE_KEY_PREFIX}') && !(has(object.spec.schedulingGates) && "
             "object.spec.schedulingGates.exists(h, h.name == g.name))).map(g, g.name) : []")
    return _policy(
        scope,
        LIFECYCLE,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _workload_rules(("CREATE", "UPDATE"))},
            "matchConditions": [_not_trusted(scope)],
            "variables": [
                {"name": "update", "expression": "request.operation == 'UPDATE'"},
                {"name": "wasHeld", "expression": f"variables.update && {held}"},
                {"name": "isHeld", "expression": held_now},
                {"name": "oldLabels", "expression": f"variables.update ? {_labels_or_empty('oldObject', 'labels')} : {{}}"},
                {"name": "newLabels", "expression": _labels_or_empty("object", "labels")},
                {"name": "oldAnnotations",
                 "expression": f"variables.update ? {_labels_or_empty('oldObject', 'annotations')} : {{}}"},
                {"name": "newAnnotations", "expression": _labels_or_empty("object", "annotations")},
                {"name": "removedGates",
                 "expression": f"variables.update && object.kind == 'Pod' ? ({gates}) : []"},
                {"name": "grown", "expression": f"variables.update && object.kind == 'Job' && "
                 f"object.apiVersion.startsWith('batch/') && !variables.wasHeld && ({parallelism})"},
                {"name": "templateRoles", "expression": _template_names_role()},
                {"name": "accelerators", "expression": _cel(accelerator_resources(scope))},
                {"name": "maxGrace", "expression": str(isolation.max_termination_grace_seconds)},
                {"name": "lingering", "expression": f"({_pod_specs_expr()}).filter(ps, "
                 "has(ps.terminationGracePeriodSeconds) && ps.terminationGracePeriodSeconds > variables.maxGrace && "
                 f"({_containers('ps')}).exists(c, {_asks()})).map(ps, ps.terminationGracePeriodSeconds)"},
            ],
            "validations": [
                {
                    "expression": "!variables.wasHeld || variables.isHeld",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "' is held by Kueue until its queue admits it: only Kueue clears suspend (gpugov: a workload "
                    "runs when its queue admits it; the queue and its quota are declared in tenants/; ask "
                    f"{_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": "variables.removedGates.size() == 0",
                    "messageExpression": "'Pod ' + request.namespace + '/' + object.metadata.name + ' may not lose "
                    "its scheduling gate ' + variables.removedGates[0] + ': Kueue removes it when the queue admits "
                    f"the pod (gpugov: a workload runs when its queue admits it; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": "!variables.update || (" + unchanged.format(f="Labels", internal=internal) + ")",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "': the kueue.x-k8s.io labels other than the queue and priority class are Kueue\\'s own and "
                    f"may not change (gpugov; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": "!variables.update || ("
                    + unchanged.format(f="Annotations", internal=internal) + ")",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "': the kueue.x-k8s.io annotations are Kueue\\'s own and may not change (gpugov; ask "
                    f"{_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": "!variables.grown",
                    "messageExpression": "'Job ' + request.namespace + '/' + object.metadata.name + ' runs as its "
                    "queue admitted it: its parallelism may not grow while it runs (submit it again at the new size: "
                    f"its queue admits it anew; gpugov, ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": "variables.lingering.size() == 0",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    "' sets terminationGracePeriodSeconds ' + string(variables.lingering[0]) + ' on pods that use "
                    "accelerators; at most ' + string(variables.maxGrace) + ': a preempted, reclaimed or stopped pod "
                    "keeps its devices that long (gpugov: Guardrails.isolation.maxTerminationGracePeriodSeconds; ask "
                    f"{_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": f"variables.update || object.kind != 'Pod' || !('{KUEUE_POD_GROUP_LABEL}' in "
                    "variables.newLabels)",
                    "messageExpression": "'Pod ' + request.namespace + '/' + object.metadata.name + ' may not join "
                    f"a pod group ({KUEUE_POD_GROUP_LABEL}): Kueue files each pod of a plain group under the role "
                    f"its {KUEUE_ROLE_HASH_ANNOTATION} annotation names, so one pod could run more than the group was "
                    "admitted for (gpugov: submit the group as an indexed Job, a JobSet or a StatefulSet; ask "
                    f"{_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": "!variables.templateRoles",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    f"' may not name its pods\\' role ({KUEUE_ROLE_HASH_ANNOTATION}): Kueue computes it from the "
                    "pod spec, and a named one files a larger pod under a smaller one\\'s admission (gpugov; ask "
                    f"{_team(scope)})'",
                    "reason": "Forbidden",
                },
                {
                    "expression": f"variables.update || !('{KUEUE_PREBUILT_WORKLOAD_LABEL}' in variables.newLabels)",
                    "messageExpression": "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
                    f"' may not name a prebuilt Workload ({KUEUE_PREBUILT_WORKLOAD_LABEL}): Kueue creates the Workload "
                    f"of a tenant\\'s job itself (gpugov; ask {_team(scope)})'",
                    "reason": "Forbidden",
                },
            ],
        },
    )
