"""What each deploy path does with what a change stops declaring: the one wording plan uses.

gpugov offers three ways to put compiled objects into a cluster, and they treat a removed
object differently:

- `gpugov apply` prunes (gpugov/cluster/prune.py): what carries its managed-by label and field
  manager and is no longer declared is deleted, a ClusterQueue after `stopPolicy: HoldAndDrain`;
  Namespaces and Nodes are released (gpugov's labels, annotations and recorded taints removed), never
  deleted;
- Pulumi (gpugov/deploy) deletes the resources its stack created; Namespaces are retained on delete,
  Nodes are NodePatches (server-side apply patches), so deleting one withdraws only its fields;
- Argo CD and Flux sync what `gpugov render` wrote; they delete only when pruning is on, and the node
  patches sit outside the kustomization (render's nodes/, applied by kubectl apply --server-side).
"""

from __future__ import annotations

from gpugov.i18n import Text

PATHS = ("gpugov apply", "Pulumi", "Argo CD / Flux")
OBJECT, NAMESPACE, NODE = "object", "Namespace", "Node"
KEPT_KINDS = (NAMESPACE, NODE)  # plan marks these "retain": no path should delete them

# Texts: English in plan's JSON, the reader's language in its markdown and text (issue #30).
WHAT_EACH_PATH_DOES: dict[str, dict[str, str]] = {
    OBJECT: {
        "gpugov apply": Text("deletes them (prune: they carry gpugov's managed-by label and are no longer declared); a "
        "ClusterQueue first gets stopPolicy HoldAndDrain"),
        "Pulumi": Text("deletes the resources its stack created"),
        "Argo CD / Flux": Text("deletes them only when the sync prunes (Argo CD: prune enabled; Flux: spec.prune: true); "
        "otherwise they stay in the cluster, unmanaged"),
    },
    NAMESPACE: {
        "gpugov apply": Text("keeps them and their workloads; removes gpugov's labels and annotations"),
        "Pulumi": Text("keeps them (retainOnDelete) and drops them from the stack; gpugov's labels stay"),
        "Argo CD / Flux": Text("keeps them: gpugov marks every tenant namespace argocd.argoproj.io/sync-options: "
        "Prune=false and kustomize.toolkit.fluxcd.io/prune: disabled, so a pruning sync leaves them and their "
        "workloads"),
    },
    NODE: {
        "gpugov apply": Text("keeps the nodes; removes gpugov's labels and annotations and the taints it recorded in "
        "gpugov.io/taints"),
        "Pulumi": Text("deletes their NodePatches, which withdraws the labels and taints those patches applied; the Nodes "
        "stay"),
        "Argo CD / Flux": Text("nothing: node patches are not in the kustomization (kubectl apply --server-side of "
        "nodes/ never removes one), so the nodes keep gpugov's labels and taints until `gpugov apply` releases them "
        "or they are removed by hand"),
    },
}

PLURAL = {OBJECT: "objects", NAMESPACE: "namespaces", NODE: "nodes"}


def category(kind: str) -> str:
    return kind if kind in KEPT_KINDS else OBJECT


def drain_hint(kind: str, name: str) -> str:
    """How to empty a removed tenant's queue before it goes, per scheduler."""
    if kind == "ClusterQueue":
        return Text("drain ClusterQueue {name} first (spec.stopPolicy: HoldAndDrain): `gpugov apply` sets it itself "
                    "before deleting; Pulumi and Argo CD / Flux delete at once, and Kueue's resource-in-use finalizer "
                    "keeps the ClusterQueue until its admitted workloads finish", name=name)
    if kind == "Queue":
        return Text("close Volcano Queue {name} first (`vcctl queue operate --name {name} --action close`; the state "
                    "lives in status, Closing turns Closed once no PodGroups remain): no deploy path closes it, and "
                    "some Volcano releases refuse to delete a Queue that is not Closed", name=name)
    return Text("drain {kind} {name} first", kind=kind, name=name)
