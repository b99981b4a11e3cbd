"""gpugov-queue-access: a namespace uses only its own declared queues, and a queue only its priority
classes (the `kueue.x-k8s.io/priority-class` label or the pod's priorityClassName).

Threat model: attack: name another namespace's queue, or a priority class the queue does not grant;
control: this policy on every kind, CREATE and UPDATE, sharded past CEL_BUDGET; test:
tests/e2e/test_contract.py (test_queue_of_another_namespace_is_refused,
test_disallowed_priority_class_is_refused_at_creation), tests/unit/test_admission_scale.py."""
from __future__ import annotations

from collections.abc import Collection

from gpugov.compile.admission.common import (
    _binding,
    _cel,
    _cut,
    _labels_expr,
    _names_selector,
    _not_trusted,
    _pod_specs_expr,
    _policy,
    _team,
    _workload_rules,
)
from gpugov.compile.common import Object, Scope
from gpugov.kube.names import (
    KUEUE_PRIORITY_LABEL,
    KUEUE_QUEUE_LABEL,
)

QUEUE_ACCESS = "gpugov-queue-access"


def allowed_classes(scope: Scope) -> dict[str, list[str]]:
    """'namespace/queue' -> the priority classes declared on that queue; a queue that declares
    none may use every preemptible class (a non-preemptible one is only ever granted by name)."""
    preemptible = sorted(name for name, pc in scope.model.priority_classes.items() if pc.preemptible)
    return {
        f"{queue.namespace}/{queue.name}": sorted(queue.priority_classes) if queue.priority_classes else preemptible
        for tenant in scope.tenants.values()
        for queue in tenant.queues
    }


def declared_queues(scope: Scope) -> dict[str, str]:
    """namespace -> 'queue, queue (tenants/x.yaml)': what a refused tenant may use instead."""
    found: dict[str, list[str]] = {}
    origin: dict[str, str] = {}
    for tenant in scope.tenants.values():
        for queue in tenant.queues:
            found.setdefault(queue.namespace, []).append(queue.name)
            origin[queue.namespace] = tenant.origin.rsplit(":", 1)[0]  # the file, not its line: moves are no change
    return {ns: f"{', '.join(sorted(names))} (declared in {origin[ns]})" for ns, names in sorted(found.items())}


def queue_access_policy(scope: Scope, namespaces: Collection[str] | None = None, name: str = QUEUE_ACCESS,
                        maps: tuple[dict[str, list[str]], dict[str, str]] | None = None) -> Object:
    """The queue-access policy over the queues of `namespaces` (None: every tenant's). `maps`:
    (allowed_classes(scope), declared_queues(scope)) when the caller has them already."""
    labels = _labels_expr()
    allowed, declared = maps or (allowed_classes(scope), declared_queues(scope))
    if namespaces is not None:
        wanted = set(namespaces)  # a shard is a list: a set makes the filters linear
        allowed = {key: classes for key, classes in allowed.items() if key.split("/", 1)[0] in wanted}
        declared = {ns: queues for ns, queues in declared.items() if ns in wanted}
    return _policy(
        scope,
        name,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _workload_rules(("CREATE", "UPDATE"))},
            "matchConditions": [
                _not_trusted(scope),
                {"name": "has-queue", "expression": f"'{KUEUE_QUEUE_LABEL}' in {labels}"},
            ],
            "variables": [
                {"name": "allowed", "expression": _cel(allowed)},
                {"name": "declared", "expression": _cel(declared)},
                {"name": "labels", "expression": labels},
                {"name": "queue", "expression": f"request.namespace + '/' + variables.labels['{KUEUE_QUEUE_LABEL}']"},
                {
                    "name": "priorityClass",
                    "expression": f"'{KUEUE_PRIORITY_LABEL}' in variables.labels ? variables.labels['{KUEUE_PRIORITY_LABEL}'] : ''",
                },
                {"name": "podSpecs", "expression": _pod_specs_expr()},
                {
                    "name": "podPriorityClasses",
                    "expression": "variables.podSpecs.filter(ps, has(ps.priorityClassName))"
                    ".map(ps, ps.priorityClassName)",
                },
                {
                    "name": "ask",
                    "expression": _cel(f"; ask {_team(scope)} (declarations in Git: tenants/, policies/)"),
                },
            ],
            "validations": [
                {
                    "expression": "variables.queue in variables.allowed",
                    "messageExpression": "'queue ' + variables.queue + ' is not declared for namespace ' + "
                    "request.namespace + ' (gpugov: declared queues only); ' + (request.namespace in "
                    "variables.declared ? 'namespace ' + request.namespace + ' may use: ' + "
                    "variables.declared[request.namespace] : 'no tenant declares a queue in namespace ' + "
                    "request.namespace) + variables.ask",
                    "reason": "Forbidden",
                },
                {
                    "expression": "!(variables.queue in variables.allowed) || variables.priorityClass == '' || "
                    "variables.priorityClass in variables.allowed[variables.queue]",
                    "messageExpression": "'priority class ' + variables.priorityClass + ' is not allowed on queue ' + "
                    "variables.queue + '; allowed: ' + variables.allowed[variables.queue].join(', ') + variables.ask",
                    "reason": "Forbidden",
                },
                {
                    "expression": "!(variables.queue in variables.allowed) || "
                    "variables.podPriorityClasses.all(p, p in variables.allowed[variables.queue])",
                    "messageExpression": "'priorityClassName ' + variables.podPriorityClasses.filter(p, !(p in "
                    "variables.allowed[variables.queue]))[0] + ' is not allowed on queue ' + variables.queue + "
                    "'; allowed: ' + variables.allowed[variables.queue].join(', ') + variables.ask",
                    "reason": "Forbidden",
                },
            ],
        },
    )


def queue_access_objects(scope: Scope) -> list[Object]:
    """One queue-access policy bound everywhere while its maps fit CEL_BUDGET; past that, one policy a
    shard of tenant namespaces (bound to them by name) and gpugov-queue-access, with no queue at all,
    bound to every other namespace, so that a namespace no tenant declares still may use none."""
    maps = allowed_classes(scope), declared_queues(scope)  # once for the shards and every policy
    shards = _namespace_shards(*maps)
    if len(shards) == 1:
        return [queue_access_policy(scope, maps=maps), _binding(scope, QUEUE_ACCESS)]
    everyone = sorted(ns for shard in shards for ns in shard)
    objects = [queue_access_policy(scope, (), QUEUE_ACCESS, maps),
               _binding(scope, QUEUE_ACCESS, _names_selector("NotIn", everyone))]
    for number, shard in enumerate(shards, start=1):
        name = f"{QUEUE_ACCESS}-{number}"
        objects += [queue_access_policy(scope, shard, name, maps), _binding(scope, name, _names_selector("In", shard))]
    return objects


def _namespace_shards(allowed: dict[str, list[str]], declared: dict[str, str]) -> list[list[str]]:
    """The tenant namespaces, in order, cut where the queue maps of a shard would pass CEL_BUDGET
    (`allowed` and `declared`: allowed_classes and declared_queues of the scope)."""
    sizes = {namespace: len(_cel({namespace: queues})) for namespace, queues in declared.items()}
    allowed_sizes: dict[str, int] = {}
    for key, classes in allowed.items():
        namespace = key.split("/", 1)[0]
        allowed_sizes[namespace] = allowed_sizes.get(namespace, 0) + len(_cel({key: classes}))
    return _cut({ns: max(sizes.get(ns, 0), allowed_sizes.get(ns, 0)) for ns in set(sizes) | set(allowed_sizes)})
