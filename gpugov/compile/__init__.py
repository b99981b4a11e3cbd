"""compile: the one source of desired state.

`compile(model, cluster=..., backend=...)` (or `compile_scope` of a scope resolved once by
`select`) turns the organisation model into the Kubernetes objects
a cluster should hold. It is pure (no I/O, no pulumi or kubernetes imports) and
deterministic: objects come out in apply order (namespaces and classes first, flavors and
cohorts before the queues that use them, parents before children), each with stable
names. Pulumi, render, plan and drift all call it.
"""

from __future__ import annotations

from gpugov.compile.admission import admission_objects
from gpugov.compile.common import BACKENDS, Backend, CompileError, Object, Scope, select
from gpugov.compile.core import compile_core
from gpugov.compile.gpu_operator import gpu_operator_objects
from gpugov.compile.kueue import compile_kueue
from gpugov.compile.mig import mig_configmap
from gpugov.compile.nodes import compile_nodes
from gpugov.compile.operations import operations_objects
from gpugov.compile.roles import compile_roles
from gpugov.compile.timeline import mark_instant
from gpugov.compile.volcano import compile_volcano
from gpugov.compile.volcano_scheduler import scheduler_configmap
from gpugov.declarations.model import Model
from gpugov.kube.kinds import APPLY_ORDER
from gpugov.kube.objects import object_key


def compile(model: Model, *, cluster: str | None = None, backend: str | None = None) -> list[Object]:
    """Desired objects for one cluster, in apply order (CompileError for an unknown cluster or backend)."""
    return compile_scope(select(model, cluster=cluster, backend=backend))


def compile_scope(scope: Scope) -> list[Object]:
    """Desired objects for a resolved scope, in apply order. They may share parts that are equal
    (a borrow-only flavor entry between the ClusterQueues that list it): read them, or copy one
    before changing it (cluster/apply.py and kube/canonical.py do)."""
    objects = compile_core(scope) + compile_roles(scope) + mig_configmap(scope)
    objects += compile_kueue(scope) if scope.backend is Backend.KUEUE else compile_volcano(scope) + scheduler_configmap(scope)
    objects += admission_objects(scope)
    objects += compile_nodes(scope)
    objects += gpu_operator_objects(scope)
    objects += operations_objects(scope, objects)
    mark_instant(scope.model, objects)
    rank = {kind: index for index, kind in enumerate(APPLY_ORDER)}
    # Stable sort: within a kind keep the backend's order (parents before children).
    return sorted(objects, key=lambda obj: rank[obj["kind"]])


__all__ = ["APPLY_ORDER", "BACKENDS", "Backend", "CompileError", "Object", "Scope", "compile", "compile_scope", "object_key",
           "select"]
