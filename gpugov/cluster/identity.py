"""Which cluster is this? The guard apply, prune and the Pulumi stacks pass before any write.

One repository declares several clusters (policies/clusters.yaml), and what is declared for
one of them, applied to another, deletes the other's queues, flavors and cohorts and releases
its nodes. So gpugov records on each cluster which declared cluster it is, and checks the
record before it writes:

- the live cluster's fingerprint is the ``metadata.uid`` of its ``kube-system`` namespace
  (made once when the cluster is created, kept across upgrades, new for a new cluster);
- the record is the ConfigMap ``gpugov-cluster-identity`` in ``kube-system`` (beside the
  fingerprint, in the one namespace every cluster has: no namespace is created for it, so it never
  meets compile's namespaces, their ownership check or prune), labelled
  ``gpugov.io/cluster-identity: <name>``, written once by the first apply under the field manager
  ``gpugov-identity`` and never labelled managed-by gpugov, so prune and drift never see it;
- a Cluster may pin itself to one fingerprint (``spec.identity.kubeSystemUID``).

check() refuses (WrongCluster, one line naming both clusters and the fix) when the pin names
another fingerprint, when a record names another declared cluster, when a record was made on
another physical cluster (its fingerprint differs: restored from another cluster's backup),
and, on a cluster with no record yet, when gpugov's objects there are ones another declared
cluster declares and this one does not. ``reidentify`` (apply --reidentify) overrides the
record and the foreign objects, never the pin: that is how a cluster is deliberately rebuilt
as another one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpugov.cluster.rest import Api, Rejected, delete, list_all, read_object, server_side_apply
from gpugov.declarations.model import Cluster, Model
from gpugov.i18n import Text
from gpugov.kube.kinds import KINDS
from gpugov.kube.objects import Key, Object, object_key
from gpugov.sources import CheckIncomplete

RECORD_NAME = "gpugov-cluster-identity"
LABEL_IDENTITY = "gpugov.io/cluster-identity"  # value: the declared cluster's name
IDENTITY_MANAGER = "gpugov-identity"  # not gpugov: prune and the ownership checks never see the record
FINGERPRINT_NAMESPACE = "kube-system"
RECORD_NAMESPACE = "kube-system"
NAMESPACE = KINDS[("v1", "Namespace")]
CONFIG_MAP = KINDS[("v1", "ConfigMap")]
EXAMPLES = 3  # foreign objects named in a refusal, the kinds that tell a cluster first:
TELLING = ("ClusterQueue", "Queue", "ResourceFlavor", "Node", "Cohort")


class WrongCluster(Exception):
    """The API server is (or says it is) another cluster than the one declared; nothing was written."""


@dataclass(frozen=True)
class Record:
    """One identity record found on the cluster."""

    cluster: str
    fingerprint: str
    namespace: str
    name: str = RECORD_NAME

    @property
    def where(self) -> str:
        return f"ConfigMap {self.namespace}/{self.name}"


@dataclass(frozen=True)
class Identity:
    """The outcome of a check that passed: what apply may do about the record."""

    cluster: str
    fingerprint: str
    host: str
    namespace: str  # where the record is (or will be) kept
    records: tuple[Record, ...]  # found before the check
    reidentified: bool = False

    @property
    def recorded(self) -> bool:
        """This cluster's record is there and right: nothing to write."""
        return not self.reidentified and any(
            r.cluster == self.cluster and r.fingerprint == self.fingerprint and r.namespace == self.namespace
            for r in self.records)

    def describe(self, done: bool = False) -> str:
        """One line for apply's output (dry run: what would be done; done: what was), a Text: in the
        reader's language."""
        fields = {"where": f"ConfigMap {self.namespace}/{RECORD_NAME}", "host": self.host, "cluster": self.cluster,
                  "uid": self.fingerprint}
        if self.recorded:
            return Text("identity: {host} is cluster {cluster} (kube-system uid {uid}), as recorded in {where}",
                        **fields)
        if self.reidentified:
            return Text("identity: {host} is cluster {cluster} (kube-system uid {uid}); re-recorded in {where}",
                        **fields) if done else \
                Text("identity: {host} is cluster {cluster} (kube-system uid {uid}); would re-record in {where}",
                     **fields)
        return Text("identity: {host} is cluster {cluster} (kube-system uid {uid}); recorded in {where}", **fields) \
            if done else Text("identity: {host} is cluster {cluster} (kube-system uid {uid}); would record in {where}",
                              **fields)


def fingerprint(api: Api) -> str:
    """The uid of the kube-system namespace; CheckIncomplete when the server has none."""
    namespace = read_object(api, NAMESPACE, FINGERPRINT_NAMESPACE)
    uid = str(((namespace or {}).get("metadata") or {}).get("uid") or "")
    if not uid:
        raise CheckIncomplete(f"GET {api.host}{NAMESPACE.object_path(FINGERPRINT_NAMESPACE)}: no kube-system "
                              "namespace with a uid, so gpugov cannot tell which cluster this is")
    return uid


def records(api: Api) -> list[Record]:
    """Every identity record on the cluster, found by its label in any namespace (one, normally)."""
    found = []
    for item in list_all(api, CONFIG_MAP, label_selector=LABEL_IDENTITY):
        data = item.get("data") or {}
        labels = item["metadata"].get("labels") or {}
        found.append(Record(str(data.get("cluster") or labels.get(LABEL_IDENTITY) or ""),
                            str(data.get("kubeSystemUID") or ""), item["metadata"].get("namespace", ""),
                            item["metadata"]["name"]))
    return sorted(found, key=lambda r: (r.namespace, r.name))


def declared_elsewhere(model: Model, cluster: str) -> dict[str, set[Key]]:
    """The object keys every other declared cluster's compile emits (at its declared backend)."""
    from gpugov.compile import compile

    return {name: {object_key(o) for o in compile(model, cluster=name)}
            for name in model.cluster_names() if name != cluster}


def _label(key: Key) -> str:
    _, kind, namespace, name = key
    return f"{kind} {namespace + '/' if namespace else ''}{name}"


def foreign_objects(owned: Iterable[Object], desired: Iterable[Object],
                    elsewhere: dict[str, set[Key]]) -> tuple[str, list[Key]] | None:
    """The other declared cluster whose objects (and not this one's) gpugov owns here, with them;
    None when there are none. The cluster with the most such objects is named."""
    own = {object_key(o) for o in desired}
    live = {object_key(o) for o in owned} - own
    best: tuple[str, list[Key]] | None = None
    for name in sorted(elsewhere):
        theirs = sorted(live & elsewhere[name])
        if theirs and (best is None or len(theirs) > len(best[1])):
            best = (name, theirs)
    return best


FIX = Text("check --kubeconfig/--context (and --cluster)")


def check(api: Api, cluster: Cluster, desired: list[Object], owned: list[Object],
          elsewhere: dict[str, set[Key]], reidentify: bool = False) -> Identity:
    """Whether the API server behind `api` may be written as declared cluster `cluster`.
    Reads only. WrongCluster names both clusters and the fix; CheckIncomplete when a read is not whole."""
    live = fingerprint(api)
    name, host = cluster.name, api.host
    if cluster.kube_system_uid and cluster.kube_system_uid != live:
        where = f" ({cluster.source.locate(('spec', 'identity', 'kubeSystemUID'))})" if cluster.declared else ""
        raise WrongCluster(Text(
            "{host} is not cluster {name}: {name} is pinned to kube-system uid {pinned}{where}, this server's is "
            "{live}; {fix}", host=host, name=name, pinned=cluster.kube_system_uid, where=where, live=live, fix=FIX))
    found = records(api)
    others = [r for r in found if r.cluster != name]
    if others and not reidentify:
        (other, *_) = others
        raise WrongCluster(Text(
            "{host} is cluster {other}, not {name} (its {record} says so, kube-system uid {uid}); {fix}, or rebuild "
            "it as {name} on purpose with --reidentify", host=host, other=other.cluster, name=name,
            record=other.where, uid=other.fingerprint or "?", fix=FIX))
    copied = [r for r in found if r.cluster == name and r.fingerprint != live]
    if copied and not reidentify:
        stale = copied[0]
        raise WrongCluster(Text(
            "{host} has kube-system uid {live}, but its {record} says cluster {name} with kube-system uid {uid} "
            "(restored from another cluster?); {fix}, or adopt it as {name} with --reidentify", host=host, live=live,
            record=stale.where, name=name, uid=stale.fingerprint or "?", fix=FIX))
    foreign = None if found else foreign_objects(owned, desired, elsewhere)
    if foreign:
        if not reidentify:
            other, keys = foreign
            telling = sorted(keys, key=lambda k: (TELLING.index(k[1]) if k[1] in TELLING else len(TELLING), k))
            examples = ", ".join(_label(k) for k in telling[:EXAMPLES]) + (", ..." if len(keys) > EXAMPLES else "")
            raise WrongCluster(Text(
                "{host} looks like cluster {other}, not {name}: it has no identity record, but gpugov's objects "
                "there include {count} that only {other} declares ({examples}); {fix}, or rebuild it as {name} on "
                "purpose with --reidentify", host=host, other=other, name=name, count=len(keys), examples=examples,
                fix=FIX))
    return Identity(name, live, host, RECORD_NAMESPACE, tuple(found),
                    reidentified=reidentify and bool(others or copied or foreign))


def record(api: Api, identity: Identity) -> None:
    """Write this cluster's record and remove stale records elsewhere. Nothing is written when the
    record is already right. Rejected passes up."""
    if identity.recorded and len(identity.records) == 1:
        return
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": RECORD_NAME, "namespace": identity.namespace,
                     "labels": {LABEL_IDENTITY: identity.cluster}},
        "data": {"cluster": identity.cluster, "kubeSystemUID": identity.fingerprint},
    }
    server_side_apply(api, CONFIG_MAP, body, field_manager=IDENTITY_MANAGER)
    for stale in identity.records:
        if (stale.namespace, stale.name) != (identity.namespace, RECORD_NAME):
            delete(api, CONFIG_MAP, stale.name, stale.namespace)


__all__ = ["IDENTITY_MANAGER", "LABEL_IDENTITY", "RECORD_NAME", "Identity", "Record", "Rejected", "WrongCluster",
           "check", "declared_elsewhere", "fingerprint", "foreign_objects", "record", "records"]
