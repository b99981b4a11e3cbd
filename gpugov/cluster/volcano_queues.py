"""What `gpugov queue` and `gpugov why` read of a Volcano cluster: the Queues (spec and status), the
nodes (the scheduler's total), and in the tenants' namespaces the PodGroups, the pods, the Jobs
scheduled by volcano and their FailedCreate events (a pod the namespace's ResourceQuota refused).
Read-only and paginated; gpugov.queueing.volcano judges."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from gpugov.cluster.queues import InNamespace, may
from gpugov.cluster.rest import PAGE_SIZE, Api, list_all
from gpugov.kube.kinds import KINDS, PODGROUP, Kind
from gpugov.kube.names import VOLCANO_API, VOLCANO_GROUP
from gpugov.sources import CheckIncomplete

QUEUE = KINDS[(VOLCANO_API, "Queue")]
NODE = KINDS[("v1", "Node")]
POD = KINDS[("v1", "Pod")]
JOB = Kind("batch/v1", "Job", "jobs", True)
EVENT = Kind("v1", "Event", "events", True)


@dataclass(frozen=True)
class VolcanoRead:
    queues: list[dict[str, Any]]
    nodes: list[dict[str, Any]] | None  # None: the caller may not list nodes
    podgroups: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    jobs: list[dict[str, Any]]
    failed_create: dict[tuple[str, str], str]  # (namespace, Job) -> its newest FailedCreate message
    refused: tuple[str, ...] = ()  # namespaces whose PodGroups the caller may not list


def _in(kind: Kind, namespace: str) -> InNamespace:
    return InNamespace(kind.api_version, kind.kind, kind.plural, True, namespace)


def _core(kind: Kind, namespace: str) -> InNamespace:
    """A core or batch kind in one namespace (InNamespace writes /apis/ paths)."""

    class _Path(InNamespace):
        def collection_path(self) -> str:
            prefix = "/api/" if "/" not in self.api_version else "/apis/"
            return f"{prefix}{self.api_version}/namespaces/{self.namespace}/{self.plural}"

    return _Path(kind.api_version, kind.kind, kind.plural, True, namespace)


def read_volcano(api_client: client.ApiClient, namespaces: Iterable[str], *,
                 page_size: int = PAGE_SIZE) -> VolcanoRead:
    """Everything the Volcano view needs (CheckIncomplete where the Queues may not be listed: without
    them no queue's real capability can be computed). A tenant may not list nodes (`nodes` None:
    the caller falls back to the declared pools) nor read other tenants' namespaces (`refused`)."""
    api = Api(api_client)
    if not may(api, "list", "queues", group=VOLCANO_GROUP):
        raise CheckIncomplete(f"forbidden: list queues.{VOLCANO_GROUP}: without them no queue's real capability "
                              "can be computed")
    queues = list(list_all(api, QUEUE, page_size=page_size))
    nodes = list(list_all(api, NODE, page_size=page_size)) if may(api, "list", "nodes", group="") else None
    refused: list[str] = []
    podgroups: list[dict[str, Any]] = []
    pods: list[dict[str, Any]] = []
    jobs: list[dict[str, Any]] = []
    failed: dict[tuple[str, str], tuple[str, str]] = {}
    for namespace in sorted(set(namespaces)):
        if not may(api, "list", "podgroups", group=VOLCANO_GROUP, namespace=namespace):
            refused.append(namespace)
            continue
        podgroups += list_all(api, _in(PODGROUP, namespace), page_size=page_size)
        pods += list_all(api, _core(POD, namespace), page_size=page_size)
        jobs += list_all(api, _core(JOB, namespace), page_size=page_size)
        for event in list_all(api, _core(EVENT, namespace), field_selector="reason=FailedCreate",
                              page_size=page_size):
            involved = event.get("involvedObject") or {}
            if involved.get("kind") != "Job":
                continue
            key = (namespace, involved.get("name", ""))
            at = event.get("lastTimestamp") or event.get("eventTime") or ""
            if key not in failed or at >= failed[key][0]:
                failed[key] = (at, event.get("message", ""))
    return VolcanoRead(queues, nodes, podgroups, pods, jobs, {k: m for k, (_, m) in failed.items()}, tuple(refused))
