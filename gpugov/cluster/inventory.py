"""Reading what `gpugov doctor` and `gpugov capacity` look at: CRDs, APIServices, Kueue's
ConfigMap and Services, ClusterQueues, Nodes, DaemonSets, the GPU Operator's ClusterPolicy,
gpugov's admission objects, running pods, and exporters' /metrics text.

Every API read goes through gpugov.cluster.rest (raw JSON, each answer checked). A source
that cannot be read whole is recorded in Facts.unreadable, never left looking empty; when the
first read (the Nodes) fails, nothing else is tried, so an unreachable cluster costs one
timeout, not one per source.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from kubernetes import client

from gpugov.cluster.rest import Api, list_all, read_object
from gpugov.compile.volcano_scheduler import CONFIGMAP_NAME as VOLCANO_CONFIGMAP
from gpugov.compile.volcano_scheduler import CONFIGMAP_NAMESPACE as VOLCANO_NAMESPACE
from gpugov.doctor.facts import API_SOURCES, KUEUE_CONFIGMAP, Facts, FactsRequest
from gpugov.kube.kinds import KINDS, PODGROUP, Kind
from gpugov.kube.names import KUEUE_API, KUEUE_GROUP, KUEUE_VERSION, VOLCANO_API, VOLCANO_GROUP
from gpugov.sources import CheckIncomplete

CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", False)
APISERVICE = Kind("apiregistration.k8s.io/v1", "APIService", "apiservices", False)
SERVICE = Kind("v1", "Service", "services", True)
CLUSTERPOLICY = Kind("nvidia.com/v1", "ClusterPolicy", "clusterpolicies", False)
CLUSTERPOLICY_CRD = "clusterpolicies.nvidia.com"
CLUSTERQUEUE = KINDS[(KUEUE_API, "ClusterQueue")]
SCRAPE_TIMEOUT = 15  # seconds
SCRAPE_LIMIT = 64 * 2**20  # bytes: a node's exporter serves well under a megabyte


def read_nodes(api_client: client.ApiClient) -> list[dict[str, Any]]:
    """Every Node (labels, allocatable); CheckIncomplete when they cannot all be read."""
    return list(list_all(Api(api_client), KINDS[("v1", "Node")]))


def scrape(url: str) -> str:
    """The text a /metrics endpoint serves; CheckIncomplete when it cannot be read."""
    try:
        with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT) as response:
            body = response.read(SCRAPE_LIMIT + 1)
    except urllib.error.HTTPError as exc:
        raise CheckIncomplete(f"GET {url}: {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CheckIncomplete(f"GET {url}: {reason}") from exc
    if len(body) > SCRAPE_LIMIT:
        raise CheckIncomplete(f"GET {url}: more than {SCRAPE_LIMIT // 2**20} MiB, not a /metrics page")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckIncomplete(f"GET {url}: the answer is not UTF-8 text") from exc


def _served(crd: dict[str, Any] | None, version: str) -> bool:
    return crd is not None and any(
        v.get("name") == version and v.get("served") for v in (crd.get("spec") or {}).get("versions") or [])


def read_facts(api_client: client.ApiClient, request: FactsRequest) -> Facts:
    api = Api(api_client)
    facts = Facts()

    def attempt(source: str, read: Callable[[], None]) -> None:
        try:
            read()
        except CheckIncomplete as exc:
            facts.unreadable[source] = str(exc)

    def nodes() -> None:
        facts.nodes = list(list_all(api, KINDS[("v1", "Node")]))

    attempt("nodes", nodes)
    if "nodes" in facts.unreadable:
        first = facts.unreadable["nodes"]
        facts.unreadable.update({s: f"not read, the first read failed ({first})" for s in API_SOURCES if s != "nodes"})
    else:
        _read_api(api, request, facts, attempt)
    for source, url, field in (("kueue-metrics", request.kueue_metrics_url, "kueue_metrics"),
                               ("dcgm-metrics", request.dcgm_metrics_url, "dcgm_metrics")):
        if url:
            def fetch(url: str = url, field: str = field) -> None:
                setattr(facts, field, scrape(url))

            attempt(source, fetch)
    return facts


def external_ips_probe() -> dict[str, Any]:
    """A Service that claims an address it does not own (CVE-2020-8554): the API server must refuse it."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "gpugov-probe-external-ips"},
            "spec": {"ports": [{"port": 80}], "externalIPs": ["192.0.2.10"]}}


def _read_api(api: Api, request: FactsRequest, facts: Facts, attempt: Callable[[str, Callable[[], None]], None]) -> None:
    def crds() -> None:
        for name in sorted({*request.crd_names, CLUSTERPOLICY_CRD}):
            crd = read_object(api, CRD, name)
            if crd is not None:
                facts.crds[name] = crd

    def apiservices() -> None:
        for name in request.apiservice_names:
            service = read_object(api, APISERVICE, name)
            if service is not None:
                facts.apiservices[name] = service

    def kueue_config() -> None:
        facts.kueue_configmap = read_object(api, KINDS[("v1", "ConfigMap")], KUEUE_CONFIGMAP, request.kueue_namespace)

    def volcano_config() -> None:
        if request.volcano:
            facts.volcano_configmap = read_object(api, KINDS[("v1", "ConfigMap")], VOLCANO_CONFIGMAP, VOLCANO_NAMESPACE)

    def volcano_queues() -> None:
        if request.volcano and _served(facts.crds.get(f"queues.{VOLCANO_GROUP}"), "v1beta1"):
            facts.volcano_queues = list(list_all(api, KINDS[(VOLCANO_API, "Queue")]))
            facts.podgroups = list(list_all(api, PODGROUP))

    def kueue_services() -> None:
        facts.kueue_services = list(list_all(api, SERVICE, field_selector=f"metadata.namespace={request.kueue_namespace}"))

    def clusterqueues() -> None:
        # Only where the CRD serves the version (else DR001/DR002 say so; listing would only fail).
        if _served(facts.crds.get(f"clusterqueues.{KUEUE_GROUP}"), KUEUE_VERSION):
            facts.clusterqueues = list(list_all(api, CLUSTERQUEUE))

    def cohorts() -> None:
        if _served(facts.crds.get(f"cohorts.{KUEUE_GROUP}"), KUEUE_VERSION):
            facts.cohorts = list(list_all(api, KINDS[(KUEUE_API, "Cohort")]))

    def daemonsets() -> None:
        facts.daemonsets = list(list_all(api, KINDS[("apps/v1", "DaemonSet")]))

    def clusterpolicies() -> None:
        if _served(facts.crds.get(CLUSTERPOLICY_CRD), "v1"):
            facts.clusterpolicies = sorted(list_all(api, CLUSTERPOLICY), key=lambda p: p["metadata"]["name"])

    def admission() -> None:
        for kind_name, name in request.admission:
            kind = KINDS[("admissionregistration.k8s.io/v1", kind_name)]
            obj = read_object(api, kind, name)
            if obj is not None:
                facts.admission[(kind_name, name)] = obj

    def namespaces() -> None:
        for name in request.namespaces:
            namespace = read_object(api, KINDS[("v1", "Namespace")], name)
            if namespace is not None:
                facts.namespaces[name] = namespace

    def rbac() -> None:
        for kind_name, name in request.rbac:
            obj = read_object(api, KINDS[("rbac.authorization.k8s.io/v1", kind_name)], name)
            if obj is not None:
                facts.rbac[(kind_name, name)] = obj
        for namespace in request.namespaces:
            facts.rolebindings += list_all(api, KINDS[("rbac.authorization.k8s.io/v1", "RoleBinding")],
                                           field_selector=f"metadata.namespace={namespace}")

    def external_ips() -> None:
        if request.namespaces:
            answer = api.call("POST", f"/api/v1/namespaces/{request.namespaces[0]}/services", [("dryRun", "All")],
                              external_ips_probe(), "application/json")
            facts.external_ips = "" if answer.ok else (
                answer.message or answer.status_reason or f"{answer.status} {answer.reason}".strip())

    def multikueue() -> None:
        for kind_name, name in request.multikueue:
            obj = read_object(api, KINDS[(KUEUE_API, kind_name)], name)
            if obj is not None:
                facts.multikueue[(kind_name, name)] = obj

    def pods() -> None:
        if request.read_pods:
            facts.pods = list(list_all(api, KINDS[("v1", "Pod")], field_selector="status.phase=Running"))

    attempt("crds", crds)
    if "crds" in facts.unreadable:  # the two reads that depend on the CRDs cannot be judged either
        facts.unreadable["clusterqueues"] = facts.unreadable["clusterpolicies"] = "not read, the CRDs could not be"
        facts.unreadable["cohorts"] = "not read, the CRDs could not be"
    else:
        attempt("clusterqueues", clusterqueues)
        attempt("cohorts", cohorts)
        attempt("clusterpolicies", clusterpolicies)
    if "crds" in facts.unreadable:
        facts.unreadable["volcano-queues"] = "not read, the CRDs could not be"
    else:
        attempt("volcano-queues", volcano_queues)
    for source, read in (("apiservices", apiservices), ("kueue-config", kueue_config), ("volcano-config", volcano_config),
                         ("kueue-services", kueue_services), ("daemonsets", daemonsets), ("admission", admission),
                         ("namespaces", namespaces), ("external-ips", external_ips), ("rbac", rbac), ("multikueue", multikueue),
                         ("pods", pods)):
        attempt(source, read)
