"""gpugov-pool-placement: a pod reaches a pool's nodes only as an admission gives it.

Kueue's admission injects a flavor's node labels and tolerations into an admitted workload's pods (its
ServiceAccount mutates the Job on unsuspend, the Job controller copies the template; a gated Pod is
ungated with them): the trusted controllers. A tenant's own pod spec that requests no accelerator may
not tolerate a pool's taint (nor every taint), select a pool's node labels or a node by name, or use
node affinity toward them: CPU work on the accelerator servers, and the way a pod that gets its GPU
from the runtime's variable (a CUDA image's own `ENV`) reaches them.

Threat model: attack: a pod without an accelerator request that tolerates a pool's taint and selects its
nodes, accepted on a GPU server; control: this policy on every kind, CREATE and UPDATE (work that
requests accelerators goes through a queue, gpugov-accelerators-need-a-queue, and Kueue's flavor
decides its nodes), bound to the tenant namespaces: the platform's own DaemonSets (gpugov's node agent
in its operations namespace, the GPU Operator's, a monitoring agent) tolerate every taint elsewhere; test: tests/unit/test_namespace_isolation.py::test_only_an_admission_places_a_pod_on_a_pool."""

from __future__ import annotations

from gpugov.compile.admission.common import (
    _asks,
    _cel,
    _containers,
    _not_trusted,
    _pod_specs_expr,
    _policy,
    _team,
    _workload_rules,
    accelerator_resources,
)
from gpugov.compile.common import Object, Scope
from gpugov.compile.kueue import flavor_node_labels

PLACEMENT = "gpugov-pool-placement"
# Its messages end in the platform team to ask (Guardrails.platformTeam), which gpugov import reads back.
ASK = "(gpugov: request accelerators through a queue, whose admission places the pods on its pool; ask "
# Selecting a node by name is selecting its pool.
NODE_NAME_KEYS = ("kubernetes.io/hostname",)


def pool_keys(scope: Scope) -> tuple[list[str], list[str]]:
    """(the node label keys that pick a pool's nodes, the taint keys of the pools)."""
    labels = {key for pool in scope.pools.values() for key in flavor_node_labels(pool)}
    taints = {taint.key for pool in scope.pools.values() for taint in pool.taints}
    return sorted(labels | set(NODE_NAME_KEYS)), sorted(taints)


def placement_policy(scope: Scope) -> Object:
    labels, taints = pool_keys(scope)
    no_request = f"!({_containers('ps')}).exists(c, {_asks()})"
    tolerates = ("has(ps.tolerations) && ps.tolerations.exists(t, (has(t.key) && t.key in variables.taintKeys) || "
                 "((!has(t.key) || t.key == '') && has(t.operator) && t.operator == 'Exists'))")
    selects = "has(ps.nodeSelector) && ps.nodeSelector.exists(k, k in variables.labelKeys)"
    terms = ("ps.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms")
    required = (f"has(ps.affinity) && has(ps.affinity.nodeAffinity) && "
                f"has(ps.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) && {terms}.exists(t, "
                "(has(t.matchExpressions) && t.matchExpressions.exists(e, e.key in variables.labelKeys)) || "
                "(has(t.matchFields) && t.matchFields.size() > 0))")
    preferred = ("has(ps.affinity) && has(ps.affinity.nodeAffinity) && "
                 "has(ps.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution) && "
                 "ps.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution.exists(p, "
                 "has(p.preference.matchExpressions) && p.preference.matchExpressions.exists(e, "
                 "e.key in variables.labelKeys))")
    where = "object.kind + ' ' + request.namespace + '/' + object.metadata.name + "
    ask = f"{ASK}{_team(scope)})'"
    return _policy(
        scope,
        PLACEMENT,
        {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _workload_rules(("CREATE", "UPDATE"))},
            "matchConditions": [_not_trusted(scope)],
            "variables": [
                {"name": "accelerators", "expression": _cel(accelerator_resources(scope))},
                {"name": "labelKeys", "expression": _cel(labels)},
                {"name": "taintKeys", "expression": _cel(taints)},
                {"name": "podSpecs", "expression": _pod_specs_expr()},
                {"name": "unrequested", "expression": f"variables.podSpecs.filter(ps, {no_request})"},
            ],
            "validations": [
                {
                    "expression": f"!variables.unrequested.exists(ps, {tolerates})",
                    "messageExpression": where + "' requests no accelerator but tolerates an accelerator pool\\'s "
                    "taint (' + variables.taintKeys.join(', ') + ', or every taint) " + ask,
                    "reason": "Forbidden",
                },
                {
                    "expression": f"!variables.unrequested.exists(ps, ({selects}) || ({required}) || ({preferred}))",
                    "messageExpression": where + "' requests no accelerator but selects an accelerator pool\\'s "
                    "nodes (' + variables.labelKeys.join(', ') + ' in its nodeSelector or node affinity) " + ask,
                    "reason": "Forbidden",
                },
            ],
        },
    )
