"""gpugov's own tenant roles: what an owner, a member and a viewer of a tenant may do.

The built-in `edit` role is far more than a tenant needs: every Secret of the namespace,
impersonation of its ServiceAccounts, token creation for them, and writes to whatever an
aggregated role adds. gpugov compiles three ClusterRoles of its own instead, each rule argued:

- **viewer** reads the tenant's work: pods and their logs, events, Jobs and every kind Kueue
  integrates, Kueue's Workloads and LocalQueues, and the pending workloads of its LocalQueues
  (Kueue's visibility API). No ConfigMaps and no Secrets: they hold the jobs' configuration
  and credentials, which a viewer does not need to follow a queue.
- **member** adds what submitting and managing workloads takes: create/update/patch/delete of
  Jobs, CronJobs, Pods and every Kueue-integrated kind (admission policies and Kueue decide
  whether each may run: RBAC only says who may ask), scaling Deployments and StatefulSets,
  exec/attach/port-forward into the namespace's pods (a member who may create a pod with any
  command gains nothing more by exec), and ConfigMaps (a job's configuration files).
- **owner** adds Secrets write-only (create/update/patch/delete, never get/list/watch: an owner
  can place a registry or dataset credential for its jobs but cannot read the other Secrets of
  the namespace through the API), and Services and PersistentVolumeClaims (exposure and storage
  are the owner's decisions).

None of them ever holds `impersonate`, `escalate`, `bind`, `serviceaccounts/token`, any write to
ServiceAccounts, RBAC objects, ResourceQuotas, LimitRanges, Namespaces, LocalQueues or Workloads,
or a wildcard (tests/unit/test_roles.py walks every rule). Anyone who may create a pod can mount any
Secret and run as any ServiceAccount of its namespace: that is Kubernetes' own boundary, so a
tenant namespace must never hold credentials the tenant is not meant to use, and gpugov binds a
role to a ServiceAccount only where the declarations name it, never as an owner (GG110).

Each role is bound by a RoleBinding in each of the tenant's namespaces to the subjects the
declarations name (spec.owners, spec.members, spec.viewers). A RoleBinding's roleRef cannot
change, so each binding is named after its role.

To understand its queue a tenant also reads cluster-scoped quota facts: ClusterQueues, Cohorts,
ResourceFlavors, Topologies, WorkloadPriorityClasses and PriorityClasses (get/list/watch, the
ClusterRole gpugov-tenant-queue-reader, bound per tenant by a ClusterRoleBinding). They are the
numbers the declarations in Git already publish, plus aggregate usage without any workload's name,
and `gpugov queue`/`why` need them to say why a job waits (borrowing depends on the siblings' use).
The pending workloads of a ClusterQueue (visibility API) are not granted cluster-wide: their
answer names other tenants' workloads; a tenant reads those of its own LocalQueues only.

On a Volcano cluster the same personas hold Volcano's kinds instead of Kueue's: Volcano Jobs to
submit, PodGroups to read, Queues as the quota facts.
"""

from __future__ import annotations

from typing import Any

from gpugov.compile.common import Object, Scope, metadata, tenant_labels
from gpugov.declarations.model import Decl, Subjects, Tenant
from gpugov.kube.names import KUEUE_GROUP, VISIBILITY_GROUP, VOLCANO_BATCH_GROUP, VOLCANO_GROUP
from gpugov.kube.objects import LABEL_COMPONENT

RBAC = "rbac.authorization.k8s.io"
OWNER, MEMBER, VIEWER = "owner", "member", "viewer"
PERSONAS = (OWNER, MEMBER, VIEWER)
QUEUE_READER = "gpugov-tenant-queue-reader"
LABELS = {LABEL_COMPONENT: "tenant-roles"}

READ = ["get", "list", "watch"]
WRITE = ["create", "update", "patch", "delete"]

# The workload kinds Kueue integrates (batch/job, pod and through it Deployments and StatefulSets,
# JobSet, the Kubeflow training jobs, Kubeflow Trainer, KubeRay, LeaderWorkerSet, AppWrapper):
# what a member submits. A kind whose CRD is not installed is simply not served.
WORKLOAD_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("", ("pods",)),
    ("apps", ("deployments", "statefulsets")),
    ("batch", ("cronjobs", "jobs")),
    ("jobset.x-k8s.io", ("jobsets",)),
    ("kubeflow.org", ("jaxjobs", "mpijobs", "paddlejobs", "pytorchjobs", "tfjobs", "xgboostjobs")),
    ("leaderworkerset.x-k8s.io", ("leaderworkersets",)),
    ("ray.io", ("rayclusters", "rayjobs")),
    ("trainer.kubeflow.org", ("trainjobs",)),
    ("workload.codeflare.dev", ("appwrappers",)),
)
# On a Volcano cluster: Volcano's Job and the plain kinds its scheduler places (schedulerName volcano).
VOLCANO_WORKLOAD_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("", ("pods",)),
    ("apps", ("deployments", "statefulsets")),
    ("batch", ("cronjobs", "jobs")),
    (VOLCANO_BATCH_GROUP, ("jobs",)),
)


def role_name(persona: str) -> str:
    return f"gpugov-tenant-{persona}"


def binding_name(persona: str) -> str:
    """The RoleBinding of one persona (named after its role: a roleRef never changes)."""
    return f"gpugov-tenant-{persona}s"


def queue_binding_name(tenant: str) -> str:
    return f"gpugov-tenant-{tenant}"


def _rule(group: str, resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": [group], "resources": sorted(resources), "verbs": verbs}


def _workload_rules(verbs: list[str], backend: str) -> list[dict[str, Any]]:
    kinds = WORKLOAD_KINDS if backend == "kueue" else VOLCANO_WORKLOAD_KINDS
    return [_rule(group, list(resources), verbs) for group, resources in kinds]


def viewer_rules(backend: str = "kueue") -> list[dict[str, Any]]:
    queues = [
        _rule(KUEUE_GROUP, ["localqueues", "workloads"], READ),
        _rule(VISIBILITY_GROUP, ["localqueues/pendingworkloads"], ["get"]),
    ] if backend == "kueue" else [_rule(VOLCANO_GROUP, ["podgroups"], READ)]
    return [
        _rule("", ["events", "persistentvolumeclaims", "pods", "pods/log", "services"], READ),
        _rule("events.k8s.io", ["events"], READ),
        _rule("apps", ["replicasets"], READ),
        *_workload_rules(READ, backend),
        *queues,
    ]


def member_rules(backend: str = "kueue") -> list[dict[str, Any]]:
    return [
        *viewer_rules(backend),
        *_workload_rules(WRITE, backend),
        _rule("apps", ["deployments/scale", "statefulsets/scale"], ["get", "patch", "update"]),
        _rule("", ["pods/attach", "pods/exec", "pods/portforward"], ["create", "get"]),
        _rule("", ["configmaps"], READ + WRITE),
    ]


def owner_rules(backend: str = "kueue") -> list[dict[str, Any]]:
    return [
        *member_rules(backend),
        _rule("", ["secrets"], WRITE),  # write-only: never get, list or watch
        _rule("", ["persistentvolumeclaims", "services"], WRITE),
    ]


def queue_reader_rules(backend: str = "kueue") -> list[dict[str, Any]]:
    queues = _rule(KUEUE_GROUP, ["clusterqueues", "cohorts", "resourceflavors", "topologies",
                                 "workloadpriorityclasses"], READ) if backend == "kueue" else \
        _rule(VOLCANO_GROUP, ["queues"], READ)
    return [queues, _rule("scheduling.k8s.io", ["priorityclasses"], READ)]


RULES = {OWNER: owner_rules, MEMBER: member_rules, VIEWER: viewer_rules}


def persona_subjects(tenant: Tenant) -> dict[str, Subjects]:
    return {
        OWNER: Subjects(tenant.owners.users, tenant.owners.groups),
        MEMBER: tenant.members,
        VIEWER: tenant.viewers,
    }


def subjects(who: Subjects) -> list[dict[str, Any]]:
    """RBAC subjects, groups then users, each sorted and once."""
    return ([{"apiGroup": RBAC, "kind": "Group", "name": g} for g in sorted(set(who.groups))]
            + [{"apiGroup": RBAC, "kind": "User", "name": u} for u in sorted(set(who.users))])


def _source(scope: Scope) -> Decl:
    """The declaration the shared roles are traced to: the Cluster, or (implicit cluster) the first tenant."""
    return scope.cluster if scope.cluster.declared else scope.tenants[min(scope.tenants)]


def _cluster_role(scope: Scope, name: str, rules: list[dict[str, Any]]) -> Object:
    return {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": metadata(name, _source(scope), LABELS),
            "rules": rules}


def cluster_roles(scope: Scope) -> list[Object]:
    """The four shared ClusterRoles (none when the cluster has no tenant)."""
    if not scope.tenants:
        return []
    roles = [_cluster_role(scope, role_name(p), RULES[p](scope.backend)) for p in PERSONAS]
    return [*roles, _cluster_role(scope, QUEUE_READER, queue_reader_rules(scope.backend))]


def role_bindings(tenant: Tenant, namespace: str, view_only: bool = False) -> list[Object]:
    """One RoleBinding per persona that names anyone, in one of the tenant's namespaces. `view_only`
    (a fleet's worker, issue #43: work arrives only through the manager) binds everyone as a viewer."""
    bindings = []
    personas = persona_subjects(tenant)
    if view_only:
        everyone = personas.values()
        personas = {VIEWER: Subjects(tuple(u for s in everyone for u in s.users),
                                     tuple(g for s in everyone for g in s.groups))}
    for persona, who in personas.items():
        if who.empty:
            continue
        bindings.append({
            "apiVersion": f"{RBAC}/v1",
            "kind": "RoleBinding",
            "metadata": metadata(binding_name(persona), tenant, tenant_labels(tenant), namespace),
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role_name(persona)},
            "subjects": subjects(who),
        })
    return bindings


def queue_binding(tenant: Tenant) -> Object | None:
    """Everyone who holds a role of the tenant reads the cluster's quota facts (ClusterRoleBinding)."""
    everyone = persona_subjects(tenant).values()
    who = Subjects(tuple(u for s in everyone for u in s.users), tuple(g for s in everyone for g in s.groups))
    if who.empty:
        return None
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": metadata(queue_binding_name(tenant.name), tenant, tenant_labels(tenant)),
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": QUEUE_READER},
        "subjects": subjects(who),
    }


def compile_roles(scope: Scope) -> list[Object]:
    """The shared ClusterRoles, and per tenant its queue-reader ClusterRoleBinding (the RoleBindings
    come with each namespace, from compile.core)."""
    objects = cluster_roles(scope)
    for tenant in scope.tenants.values():
        binding = queue_binding(tenant)
        if binding is not None:
            objects.append(binding)
    return objects
