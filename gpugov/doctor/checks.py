"""The doctor's checks: does this cluster really govern GPUs the way the declarations need?

Each check is a function from (desired state, facts) to an outcome: pass, warn, fail or skip, with
a hint; `@check` above it declares its stable id (DR001...), what it verifies, the sources it reads
(facts.SOURCES) and its hint, and CHECKS lists them in the report's order.
A check whose source could not be read reports skip and counts as "could not check".
Pure: the cluster is read at the edge (gpugov.cluster.inventory).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from gpugov.app.desired import DesiredState
from gpugov.capacity.nodes import GPU_COUNT, GPU_PRODUCT, MIG_STATE, MIG_STRATEGY, labels, name, pool_nodes
from gpugov.compile.admission import API as ADMISSION_API
from gpugov.compile.admission import WORKLOAD_KINDS
from gpugov.compile.common import Scope
from gpugov.compile.core import POD_SECURITY
from gpugov.declarations.model import GPUPool
from gpugov.doctor.facts import KUEUE_CONFIG_KEY, KUEUE_CONFIGMAP, Facts, FactsRequest, Obj
from gpugov.doctor.metrics import Sample, parse_samples
from gpugov.drift.hardware import expected_allocatable
from gpugov.drift.usage import accelerator_requests
from gpugov.kube.kinds import KINDS
from gpugov.kube.names import KUEUE_API, VISIBILITY_APISERVICE, VOLCANO_API
from gpugov.kube.objects import LABEL_TENANT, selector_matches
from gpugov.kube.quantity import QuantityError, parse_quantity
from gpugov.kube.resources import is_accelerator

CLUSTERPOLICY_CRD = "clusterpolicies.nvidia.com"
KUEUE_METRICS_SERVICE = "kueue-controller-manager-metrics-service"
DCGM_UTILISATION = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
POD_LABELS = ("pod", "exported_pod", "pod_name")


class Status(enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class Outcome:
    status: Status
    message: str
    hint: str | None = None  # None: the check's own hint (for warn and fail)


@dataclass(frozen=True)
class Result:
    id: str
    name: str
    status: Status
    message: str
    hint: str
    incomplete: bool = False  # skipped because a source could not be read


@dataclass(frozen=True)
class Situation:
    """What a check looks at: the desired state, its cluster's scope and the facts read."""

    state: DesiredState
    scope: Scope
    facts: Facts
    request: FactsRequest

    @property
    def kueue(self) -> bool:
        return self.state.backend == "kueue"

    def nodes_of(self, pool: GPUPool) -> list[Obj]:
        return pool_nodes(pool, self.facts.nodes)

    @property
    def nvidia_pools(self) -> list[GPUPool]:
        return [p for p in self.scope.pools.values() if p.model.vendor == "nvidia"]

    @property
    def mig_pools(self) -> list[GPUPool]:
        return [p for p in self.scope.pools.values() if p.uses_mig]

    @property
    def mig_quotas(self) -> bool:
        """Whether any tenant or department of the cluster holds quota of a MIG profile."""
        holdings = [*self.scope.quotas.values(), *self.scope.department_quotas.values()]
        return any(rq.resource.startswith("nvidia.com/mig-") for quotas in holdings for q in quotas
                   for rq in q.resources)

    def kueue_config(self) -> tuple[dict[str, Any] | None, str | None]:
        """(Kueue's Configuration from its ConfigMap, or None; a reason when it cannot be parsed)."""
        configmap = self.facts.kueue_configmap
        if configmap is None:
            return None, None
        text = (configmap.get("data") or {}).get(KUEUE_CONFIG_KEY)
        if text is None:
            return None, f"ConfigMap {self.request.kueue_namespace}/{KUEUE_CONFIGMAP} has no key {KUEUE_CONFIG_KEY}"
        try:
            config = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            return None, f"{KUEUE_CONFIG_KEY} is not YAML: {str(exc).splitlines()[0]}"
        if not isinstance(config, dict):
            return None, f"{KUEUE_CONFIG_KEY} is not a Kueue Configuration"
        return config, None


Function = Callable[[Situation], Outcome]


@dataclass(frozen=True)
class Check:
    id: str
    name: str
    summary: str
    sources: tuple[str, ...]
    hint: str
    function: Function


def check(id: str, name: str, *, reads: tuple[str, ...], summary: str, hint: str) -> Callable[[Function], Check]:
    """Declare a check where its function is written: its stable id and name, what it verifies, the
    sources it reads (facts.SOURCES) and its hint for warn and fail. CHECKS below lists them in order."""

    def declare(function: Function) -> Check:
        return Check(id, name, summary, reads, hint, function)

    return declare


def _pass(message: str) -> Outcome:
    return Outcome(Status.PASS, message)


def _fail(message: str, hint: str | None = None) -> Outcome:
    return Outcome(Status.FAIL, message, hint)


def _warn(message: str, hint: str | None = None) -> Outcome:
    return Outcome(Status.WARN, message, hint)


def _skip(message: str) -> Outcome:
    return Outcome(Status.SKIP, message, "")


def _listing(items: list[str], limit: int = 6) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def scheduler_api(backend: str) -> str:
    return KUEUE_API if backend == "kueue" else VOLCANO_API


def required_crds(state: DesiredState) -> list[str]:
    """The CRDs of the scheduler kinds compile emits for this cluster, as `<plural>.<group>`."""
    api = scheduler_api(state.backend)
    kinds = {(o["apiVersion"], o["kind"]) for o in state.objects if o["apiVersion"] == api}
    return sorted(f"{KINDS[k].plural}.{KINDS[k].group}" for k in kinds)


def _condition(obj: Obj, kind: str) -> dict[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return dict(condition)
    return None


# --- the scheduler ---------------------------------------------------------------------------

@check("DR001", "scheduler-installed", reads=("crds",),
       summary="The CRDs of the scheduler kinds gpugov emits (Kueue or Volcano) exist.",
       hint="Install Kueue 0.16 or later (or Volcano for a volcano cluster).")
def check_scheduler_installed(s: Situation) -> Outcome:
    wanted = required_crds(s.state)
    scheduler = "Kueue" if s.kueue else "Volcano"
    if not wanted:
        return _skip(f"compile emits no {scheduler} objects for cluster {s.state.cluster}")
    missing = [n for n in wanted if n not in s.facts.crds]
    if missing:
        return _fail(f"{scheduler} CRDs missing: {_listing(missing)} ({len(wanted) - len(missing)} of "
                     f"{len(wanted)} installed)")
    return _pass(f"{scheduler} CRDs installed: {_listing(wanted, 8)}")


@check("DR002", "scheduler-api-version", reads=("crds",),
       summary="Those CRDs serve, store and have established the API version gpugov compiles "
               "(kueue.x-k8s.io/v1beta2, scheduling.volcano.sh/v1beta1).",
       hint="Upgrade the scheduler to a release that serves this version.")
def check_scheduler_version(s: Situation) -> Outcome:
    version = scheduler_api(s.state.backend).split("/")[1]
    present = [n for n in required_crds(s.state) if n in s.facts.crds]
    if not present:
        return _skip("no scheduler CRD to read (see DR001)")
    not_served, not_stored, not_established = [], [], []
    for crd_name in present:
        crd = s.facts.crds[crd_name]
        versions = {v.get("name"): v for v in (crd.get("spec") or {}).get("versions") or []}
        entry = versions.get(version)
        if entry is None or not entry.get("served"):
            served = sorted(n for n, v in versions.items() if v.get("served"))
            not_served.append(f"{crd_name} (serves {', '.join(served) or 'nothing'})")
        elif not entry.get("storage"):
            not_stored.append(crd_name)
        established = _condition(crd, "Established")
        if established is None or established.get("status") != "True":
            not_established.append(crd_name)
    if not_served:
        return _fail(f"gpugov compiles {scheduler_api(s.state.backend)}, which these CRDs do not serve: "
                     f"{_listing(not_served)}")
    if not_established:
        return _fail(f"CRDs not Established: {_listing(not_established)}",
                     "The apiserver has not accepted these CRDs yet; see their status.conditions.")
    if not_stored:
        return _warn(f"{version} is served but not the storage version of {_listing(not_stored)} (Kueue before "
                     f"0.16?)", "Upgrade the scheduler so that the version gpugov writes is the one it stores.")
    return _pass(f"all {len(present)} CRDs serve and store {version}")


# --- Kueue's settings ------------------------------------------------------------------------

def _not_kueue(s: Situation) -> Outcome | None:
    return None if s.kueue else _skip(f"cluster {s.state.cluster} runs {s.state.backend}, not Kueue")


def _fair_sharing_configured(config: dict[str, Any]) -> bool:
    section = config.get("fairSharing")
    if str(config.get("apiVersion", "")).endswith("/v1beta1"):
        return isinstance(section, dict) and section.get("enable") is True
    return section is not None  # v1beta2: the block's presence turns it on


def _weights_declared(s: Situation) -> bool:
    return any(t.weight is not None for t in s.scope.tenants.values()) or any(
        d.weight is not None for d in s.scope.departments.values())


@check("DR003", "kueue-fair-sharing", reads=("kueue-config", "clusterqueues"),
       summary="Kueue runs with fair sharing, so the declared weights act: the Configuration's fairSharing block, or "
               "status.fairSharing on gpugov's ClusterQueues.",
       hint="Add `fairSharing: {preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]}` to "
            "Kueue's Configuration and restart it.")
def check_fair_sharing(s: Situation) -> Outcome:
    if (other := _not_kueue(s)) is not None:
        return other
    config, problem = s.kueue_config()
    if problem:
        return _fail(problem)
    severity = _fail if _weights_declared(s) else _warn
    where = f"ConfigMap {s.request.kueue_namespace}/{KUEUE_CONFIGMAP}"
    if config is not None and not _fair_sharing_configured(config):
        return severity(f"{where} turns fair sharing off (no fairSharing block): Kueue ignores the "
                        f"fairSharing weights gpugov sets on ClusterQueues and Cohorts")
    ours = {o["metadata"]["name"] for o in s.state.objects if o["kind"] == "ClusterQueue"}
    reconciled = [cq for cq in s.facts.clusterqueues if cq["metadata"]["name"] in ours and _condition(cq, "Active")]
    with_share = [cq["metadata"]["name"] for cq in reconciled if "fairSharing" in (cq.get("status") or {})]
    if reconciled and not with_share:
        return severity(f"{len(reconciled)} ClusterQueues of gpugov report no status.fairSharing: the running Kueue "
                        f"has fair sharing off")
    evidence = []
    if config is not None:
        evidence.append(f"{where} has a fairSharing block")
    if with_share:
        evidence.append(f"{len(with_share)} of {len(reconciled)} ClusterQueues report status.fairSharing.weightedShare")
    if not evidence:
        return _skip(f"not observable: no {where} and no ClusterQueue of gpugov reconciled yet (gpugov apply first)")
    return _pass("; ".join(evidence))


def tenant_namespaces(state: DesiredState) -> tuple[str, ...]:
    """The tenants' namespaces compile emits (those labelled with their tenant)."""
    return tuple(sorted(o["metadata"]["name"] for o in state.objects
                        if o["kind"] == "Namespace" and LABEL_TENANT in (o["metadata"].get("labels") or {})))


# Kueue's managedJobsNamespaceSelector when the Configuration sets none (v0.17's default).
KUEUE_DEFAULT_NAMESPACE_SELECTOR = {"matchExpressions": [
    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "kueue-system"]}]}


def _namespace_labels(state: DesiredState, name: str) -> dict[str, str]:
    for obj in state.objects:
        if obj["kind"] == "Namespace" and obj["metadata"]["name"] == name:
            return {**(obj["metadata"].get("labels") or {}), "kubernetes.io/metadata.name": name}
    return {"kubernetes.io/metadata.name": name}


@check("DR004", "kueue-manage-jobs-without-queue-name", reads=("kueue-config",),
       summary="Kueue's manageJobsWithoutQueueName is true and its managedJobsNamespaceSelector takes every tenant "
               "namespace and no system one: a workload there without a queue label is held, the second line behind "
               "gpugov's admission policies.",
       hint="Set manageJobsWithoutQueueName: true and managedJobsNamespaceSelector: {matchExpressions: [{key: "
            "gpugov.io/tenant, operator: Exists}]} in Kueue's Configuration, and restart it.")
def check_manage_jobs(s: Situation) -> Outcome:
    if (other := _not_kueue(s)) is not None:
        return other
    config, problem = s.kueue_config()
    if problem:
        return _fail(problem)
    if config is None:
        return _skip(f"Kueue's Configuration is not readable from the API: no ConfigMap "
                     f"{s.request.kueue_namespace}/{KUEUE_CONFIGMAP} (an out-of-cluster or renamed install); check "
                     f"manageJobsWithoutQueueName and managedJobsNamespaceSelector in its --config file by hand")
    if config.get("manageJobsWithoutQueueName") is not True:
        return _fail("manageJobsWithoutQueueName is false: in a tenant namespace a Job or Pod without a queue label "
                     "is not held by Kueue, so gpugov's admission policies are the only line between a tenant and "
                     "an accelerator outside its quota")
    selector = config.get("managedJobsNamespaceSelector") or KUEUE_DEFAULT_NAMESPACE_SELECTOR
    namespaces = tenant_namespaces(s.state)
    outside = [n for n in namespaces if not selector_matches(selector, _namespace_labels(s.state, n))]
    if outside:
        return _fail(f"managedJobsNamespaceSelector {selector} leaves out {len(outside)} tenant namespaces: "
                     f"{_listing(outside)}")
    system = [n for n in ("kube-system", s.request.kueue_namespace)
              if selector_matches(selector, {"kubernetes.io/metadata.name": n})]
    if system:
        return _fail(f"managedJobsNamespaceSelector {selector} also holds the pods of {_listing(system)}")
    return _pass(f"manageJobsWithoutQueueName is true in all {len(namespaces)} tenant namespaces "
                 f"(managedJobsNamespaceSelector {selector}): a workload there without a queue is held")


@check("DR005", "kueue-visibility-api", reads=("apiservices",),
       summary=f"The visibility API (APIService {VISIBILITY_APISERVICE}) is Available.",
       hint="Check the APIService's status and the Kueue visibility server behind its Service.")
def check_visibility(s: Situation) -> Outcome:
    if (other := _not_kueue(s)) is not None:
        return other
    service = s.facts.apiservices.get(VISIBILITY_APISERVICE)
    if service is None:
        return _fail(f"APIService {VISIBILITY_APISERVICE} is missing: pending workloads and queue positions cannot "
                     f"be read")
    available = _condition(service, "Available")
    if available is None or available.get("status") != "True":
        why = (available or {}).get("message") or (available or {}).get("reason") or "no Available condition"
        return _fail(f"APIService {VISIBILITY_APISERVICE} is not Available: {why}")
    return _pass(f"APIService {VISIBILITY_APISERVICE} is Available")


def _kueue_metric_outcome(s: Situation, samples: list[Sample]) -> Outcome:
    kueue = [m for m in samples if m.name.startswith("kueue_")]
    if not kueue:
        return _fail(f"{s.request.kueue_metrics_url} serves no kueue_ metric")
    queues = {m.labels.get("cluster_queue") for m in kueue if m.name == "kueue_cluster_queue_status"}
    ours = sorted(o["metadata"]["name"] for o in s.state.objects if o["kind"] == "ClusterQueue")
    absent = [q for q in ours if q not in queues]
    if absent:
        return _warn(f"{len(kueue)} kueue_ series, but kueue_cluster_queue_status names none of "
                     f"{_listing(absent)}", "Apply the declarations (gpugov apply), or scrape the Kueue that runs them.")
    if not any(m.name == "kueue_cluster_queue_resource_usage" for m in kueue):
        return _warn(f"{len(kueue)} kueue_ series, no kueue_cluster_queue_resource_usage: the quota and usage gauges "
                     f"are off", "Set metrics.enableClusterQueueResources: true in Kueue's Configuration.")
    return _pass(f"{len(kueue)} kueue_ series, with status and resource usage of all {len(ours)} ClusterQueues")


@check("DR006", "kueue-metrics", reads=("kueue-services", "kueue-config", "kueue-metrics"),
       summary="Kueue's metrics are exposed (its metrics Service, or --kueue-metrics URL) with ClusterQueue status "
               "and resource usage.",
       hint="Expose Kueue's /metrics and set metrics.enableClusterQueueResources: true.")
def check_kueue_metrics(s: Situation) -> Outcome:
    if (other := _not_kueue(s)) is not None:
        return other
    if s.facts.kueue_metrics is not None:
        return _kueue_metric_outcome(s, parse_samples(s.facts.kueue_metrics))
    services = [x["metadata"]["name"] for x in s.facts.kueue_services if "metrics" in x["metadata"]["name"]]
    if not services:
        return _warn(f"no metrics Service in namespace {s.request.kueue_namespace}: Prometheus cannot scrape Kueue",
                     f"Install Kueue with its metrics Service ({KUEUE_METRICS_SERVICE}), or pass --kueue-metrics URL "
                     f"where its /metrics is served.")
    config, _ = s.kueue_config()
    if config is not None and not (config.get("metrics") or {}).get("enableClusterQueueResources"):
        return _warn(f"Service {services[0]} exposes metrics, but metrics.enableClusterQueueResources is off: no "
                     f"quota or usage gauges", "Set metrics.enableClusterQueueResources: true in Kueue's Configuration.")
    return _pass(f"Service {', '.join(services)} exposes Kueue's metrics (pass --kueue-metrics URL to read them)")


# --- NVIDIA's stack --------------------------------------------------------------------------

def _not_nvidia(s: Situation) -> Outcome | None:
    return None if s.nvidia_pools else _skip(f"cluster {s.state.cluster} declares no NVIDIA pool")


def _clusterpolicy(s: Situation) -> Obj | None:
    return s.facts.clusterpolicies[0] if s.facts.clusterpolicies else None


def _daemonsets(s: Situation, *names: str) -> list[Obj]:
    found = []
    for ds in s.facts.daemonsets:
        meta = ds.get("metadata") or {}
        app = (meta.get("labels") or {}).get("app", "")
        if any(n in meta.get("name", "") or n in app for n in names):
            found.append(ds)
    return sorted(found, key=lambda d: (d["metadata"].get("namespace", ""), d["metadata"]["name"]))


def _unready(daemonsets: list[Obj]) -> list[str]:
    result = []
    for ds in daemonsets:
        status = ds.get("status") or {}
        desired, ready = status.get("desiredNumberScheduled", 0), status.get("numberReady", 0)
        if ready < desired:
            result.append(f"{ds['metadata'].get('namespace', '')}/{ds['metadata']['name']} ({ready}/{desired} ready)")
    return result


@check("DR010", "gpu-operator", reads=("crds", "clusterpolicies"),
       summary="The NVIDIA GPU Operator's ClusterPolicy (nvidia.com/v1) exists and is ready; skip without its CRDs.",
       hint="Install the GPU Operator, or fix what its status names.")
def check_gpu_operator(s: Situation) -> Outcome:
    if (other := _not_nvidia(s)) is not None:
        return other
    crd = s.facts.crds.get(CLUSTERPOLICY_CRD)
    if crd is None:
        return _skip(f"no GPU Operator CRDs ({CLUSTERPOLICY_CRD}): the device plugin, GFD, MIG manager and DCGM "
                     f"checks read the nodes instead")
    served = [v.get("name") for v in (crd.get("spec") or {}).get("versions") or [] if v.get("served")]
    if "v1" not in served:
        return _fail(f"{CLUSTERPOLICY_CRD} serves {', '.join(served) or 'nothing'}, not nvidia.com/v1")
    policy = _clusterpolicy(s)
    if policy is None:
        return _fail("the GPU Operator's CRD is installed but there is no ClusterPolicy: the operator deploys nothing")
    state = (policy.get("status") or {}).get("state")
    if state != "ready":
        return _fail(f"ClusterPolicy {policy['metadata']['name']} is {state or 'without a state'}, not ready",
                     "kubectl describe clusterpolicy; the operator's own pods in its namespace say which part fails.")
    return _pass(f"ClusterPolicy {policy['metadata']['name']} is ready")


def _pool_resources(pool: GPUPool) -> set[str]:
    return {r for r in pool.capacity if is_accelerator(r)} | {pool.model.resource}


def _advertises(node: Obj, resources: set[str]) -> bool:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    for resource in resources:
        try:
            if parse_quantity(allocatable.get(resource, 0)) > 0:
                return True
        except QuantityError:
            continue
    return False


@check("DR011", "device-plugin", reads=("nodes", "daemonsets"),
       summary="Every pool node advertises its accelerators in status.allocatable (the device plugin runs), and "
               "device plugin DaemonSets are ready.",
       hint="Run the vendor's device plugin on the pool's nodes (the GPU Operator deploys NVIDIA's).")
def check_device_plugin(s: Situation) -> Outcome:
    members = [(pool, node) for pool in s.scope.pools.values() for node in s.nodes_of(pool)]
    if not members:
        return _skip("no node of a declared pool found (see DR020)")
    silent = [f"{name(n)} ({p.name})" for p, n in members if not _advertises(n, _pool_resources(p))]
    plugins = [d["metadata"]["name"] for d in _daemonsets(s, "device-plugin")]
    unready = _unready(_daemonsets(s, "device-plugin"))
    if silent:
        return _fail(f"{len(silent)} of {len(members)} pool nodes advertise no accelerator in status.allocatable: "
                     f"{_listing(silent)}")
    if unready:
        return _fail(f"device plugin DaemonSets not ready: {_listing(unready)}")
    via = f" (DaemonSets {', '.join(plugins)})" if plugins else ""
    return _pass(f"all {len(members)} pool nodes advertise their accelerators{via}")


@check("DR012", "gpu-feature-discovery", reads=("nodes",),
       summary="Every NVIDIA pool node carries GFD's nvidia.com/gpu.product and nvidia.com/gpu.count labels.",
       hint="Run GPU Feature Discovery (the GPU Operator deploys it).")
def check_gfd(s: Situation) -> Outcome:
    if (other := _not_nvidia(s)) is not None:
        return other
    members = [node for pool in s.nvidia_pools for node in s.nodes_of(pool)]
    if not members:
        return _skip("no node of an NVIDIA pool found (see DR020)")
    unlabelled = [name(n) for n in members if GPU_PRODUCT not in labels(n) or GPU_COUNT not in labels(n)]
    if unlabelled:
        return _fail(f"{len(unlabelled)} of {len(members)} NVIDIA pool nodes lack {GPU_PRODUCT} / {GPU_COUNT}: "
                     f"{_listing(unlabelled)}")
    return _pass(f"all {len(members)} NVIDIA pool nodes carry GFD's {GPU_PRODUCT} and {GPU_COUNT}")


@check("DR013", "mig-strategy", reads=("nodes", "clusterpolicies"),
       summary="With MIG quotas, the MIG strategy is mixed: the ClusterPolicy's mig.strategy and every MIG pool "
               "node's nvidia.com/mig.strategy label.",
       hint="Set mig.strategy=mixed in the GPU Operator (Helm: --set mig.strategy=mixed).")
def check_mig_strategy(s: Situation) -> Outcome:
    if not s.mig_quotas:
        return _skip("no tenant or department holds quota of a MIG profile")
    policy = _clusterpolicy(s)
    strategy = ((policy or {}).get("spec") or {}).get("mig", {}).get("strategy") if policy else None
    if policy is not None and strategy != "mixed":
        return _fail(f"ClusterPolicy {policy['metadata']['name']} sets mig.strategy {strategy or 'unset (single)'}: "
                     f"MIG quotas need mixed, where each profile is its own nvidia.com/mig-<profile> resource")
    members = [node for pool in s.mig_pools for node in s.nodes_of(pool)]
    if not members:
        return _skip("no node of a MIG pool found (see DR020)")
    wrong = [f"{name(n)} ({labels(n).get(MIG_STRATEGY, 'none')})" for n in members
             if labels(n).get(MIG_STRATEGY) != "mixed"]
    if wrong:
        return _fail(f"{len(wrong)} of {len(members)} MIG pool nodes are not on the mixed strategy "
                     f"({MIG_STRATEGY}): {_listing(wrong)}")
    return _pass(f"all {len(members)} MIG pool nodes report {MIG_STRATEGY}=mixed")


@check("DR014", "mig-config-state", reads=("nodes",),
       summary="mig-manager applied the selected layout on every MIG pool node: nvidia.com/mig.config.state is "
               "success.",
       hint="Read the mig-manager pod's log on the node; gpugov drift names the config it should have.")
def check_mig_state(s: Situation) -> Outcome:
    if not s.mig_pools:
        return _skip("no pool declares MIG layouts")
    members = [node for pool in s.mig_pools for node in s.nodes_of(pool)]
    if not members:
        return _skip("no node of a MIG pool found (see DR020)")
    states = {name(n): labels(n).get(MIG_STATE) for n in members}
    failed = [f"{n} ({v or 'no state'})" for n, v in states.items() if v not in ("success", "pending", "rebooting")]
    waiting = [f"{n} ({v})" for n, v in states.items() if v in ("pending", "rebooting")]
    if failed:
        return _fail(f"{MIG_STATE} is not success on {len(failed)} of {len(members)} nodes: {_listing(failed)}")
    if waiting:
        return _warn(f"MIG reconfiguration in progress on {_listing(waiting)}",
                     "Wait for mig-manager; the nodes' MIG resources change when it is done.")
    return _pass(f"{MIG_STATE}=success on all {len(members)} MIG pool nodes")


@check("DR015", "mig-manager", reads=("clusterpolicies", "daemonsets"),
       summary="The ClusterPolicy points mig-manager at gpugov's mig-parted ConfigMap, and mig-manager DaemonSets "
               "are ready.",
       hint="Set migManager.config.name to the Cluster's migConfig.name.")
def check_mig_manager(s: Situation) -> Outcome:
    if not s.mig_pools:
        return _skip("no pool declares MIG layouts")
    cluster = s.scope.cluster
    policy = _clusterpolicy(s)
    managers = _daemonsets(s, "mig-manager")
    if policy is None and not managers:
        return _skip("no ClusterPolicy and no mig-manager DaemonSet: see DR014 for what the nodes report")
    if policy is not None:
        config = (((policy.get("spec") or {}).get("migManager") or {}).get("config") or {}).get("name")
        if config != cluster.mig_config_name:
            return _fail(f"ClusterPolicy migManager.config.name is {config or 'unset'}, not gpugov's "
                         f"{cluster.mig_config_name}: mig-manager applies another geometry than the declared layouts",
                         f"Set migManager.config.name={cluster.mig_config_name} (the ConfigMap compile emits in "
                         f"{cluster.mig_config_namespace}).")
    unready = _unready(managers)
    if unready:
        return _fail(f"mig-manager DaemonSets not ready: {_listing(unready)}")
    parts = [f"ClusterPolicy points mig-manager at {cluster.mig_config_name}"] if policy is not None else []
    parts += [f"DaemonSet {m['metadata']['name']} ready" for m in managers]
    return _pass("; ".join(parts))


def _dcgm_samples(s: Situation) -> list[Sample] | None:
    return None if s.facts.dcgm_metrics is None else [m for m in parse_samples(s.facts.dcgm_metrics)
                                                      if m.name.startswith("DCGM_FI_")]


@check("DR016", "dcgm-exporter", reads=("daemonsets", "dcgm-metrics"),
       summary="A DCGM exporter runs (ready DaemonSet, or --dcgm-metrics URL) with the utilisation counters the idle "
               "check reads.",
       hint="Enable dcgmExporter in the GPU Operator with its default counters.")
def check_dcgm_exporter(s: Situation) -> Outcome:
    if (other := _not_nvidia(s)) is not None:
        return other
    exporters = _daemonsets(s, "dcgm-exporter")
    unready = _unready(exporters)
    if unready:
        return _fail(f"DCGM exporter DaemonSets not ready: {_listing(unready)}")
    samples = _dcgm_samples(s)
    if samples is None:
        if not exporters:
            return _warn("no DCGM exporter DaemonSet found: GPU utilisation (idle GPUs, gpugov drift --prometheus) "
                         "cannot be measured", "Enable dcgmExporter in the GPU Operator, or pass --dcgm-metrics URL.")
        return _pass(f"DaemonSet {exporters[0]['metadata']['name']} ready (pass --dcgm-metrics URL to read it)")
    if not samples:
        return _fail(f"{s.request.dcgm_metrics_url} serves no DCGM_FI_ metric")
    names = {m.name for m in samples}
    utilisation = [n for n in DCGM_UTILISATION if n in names]
    if not utilisation:
        return _warn(f"{len(samples)} DCGM series, none of {', '.join(DCGM_UTILISATION)}: idle GPUs cannot be found",
                     "Use the exporter's default counters (dcp-metrics-included.csv).")
    if s.mig_pools and "DCGM_FI_PROF_GR_ENGINE_ACTIVE" not in names:
        return _warn("no DCGM_FI_PROF_GR_ENGINE_ACTIVE: MIG instances report no utilisation without it",
                     "Enable the DCP (profiling) counters in the exporter.")
    return _pass(f"{len(samples)} DCGM series, with {', '.join(utilisation)}")


def _pod_of(sample: Sample) -> str:
    return next((sample.labels[k] for k in POD_LABELS if sample.labels.get(k)), "")


@check("DR017", "dcgm-pod-labels", reads=("dcgm-metrics", "pods", "daemonsets"),
       summary="GPU metrics name the pod that holds the GPU (DCGM_EXPORTER_KUBERNETES), checked against the running "
               "GPU pods.",
       hint="Set DCGM_EXPORTER_KUBERNETES=true on the exporter (the GPU Operator's default).")
def check_dcgm_pod_labels(s: Situation) -> Outcome:
    if (other := _not_nvidia(s)) is not None:
        return other
    samples = _dcgm_samples(s)
    if samples is None:
        for ds in _daemonsets(s, "dcgm-exporter"):
            containers = (((ds.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
            env = {e.get("name"): e.get("value") for c in containers for e in c.get("env") or []}
            if str(env.get("DCGM_EXPORTER_KUBERNETES", "")).lower() == "false":
                return _fail(f"DaemonSet {ds['metadata']['name']} sets DCGM_EXPORTER_KUBERNETES=false: GPU metrics "
                             f"name no pod")
            if "DCGM_EXPORTER_KUBERNETES" in env:
                return _pass(f"DaemonSet {ds['metadata']['name']} sets DCGM_EXPORTER_KUBERNETES="
                             f"{env['DCGM_EXPORTER_KUBERNETES']}")
        return _skip("pass --dcgm-metrics URL to see whether GPU metrics name their pods")
    gpu_series = [m for m in samples if m.name in DCGM_UTILISATION]
    attributed = sorted({f"{m.labels.get('exported_namespace') or m.labels.get('namespace', '')}/{_pod_of(m)}"
                         for m in gpu_series if _pod_of(m)})
    nvidia_nodes = {name(n) for pool in s.nvidia_pools for n in s.nodes_of(pool)}
    running = sorted(f"{p['metadata'].get('namespace', '')}/{p['metadata']['name']}" for p in s.facts.pods or []
                     if (p.get("spec") or {}).get("nodeName") in nvidia_nodes and accelerator_requests(p))
    if attributed:
        return _pass(f"{len(attributed)} pods named on GPU series: {_listing(attributed)}")
    if running:
        return _fail(f"{len(running)} GPU pods run ({_listing(running)}) but no DCGM series names a pod: the "
                     f"exporter runs without its Kubernetes mapping")
    return _warn("no GPU pod runs on the pools' nodes now, so pod attribution cannot be seen",
                 "Run again while a GPU job runs.")


# --- the declarations against the nodes ------------------------------------------------------

@check("DR020", "pool-nodes", reads=("nodes",),
       summary="Every declared pool matches real nodes: its listed node names, or at least one node (nodeCount of "
               "them) for its nodeSelector.",
       hint="Fix the pool's nodes or nodeSelector in hardware/.")
def check_pool_nodes(s: Situation) -> Outcome:
    if not s.scope.pools:
        return _skip(f"cluster {s.state.cluster} declares no pool")
    empty, short, counts, miscounted = [], [], [], []
    for pool in s.scope.pools.values():
        found = {name(n) for n in s.nodes_of(pool)}
        if pool.nodes:
            missing = [n.name for n in pool.nodes if n.name not in found]
            if len(missing) == len(pool.nodes):
                empty.append(pool.name)
            elif missing:
                short.append(f"{pool.name} lacks {_listing(missing, 4)}")
            counts.append(f"{pool.name} {len(pool.nodes) - len(missing)}/{len(pool.nodes)}")
        else:
            if not found:
                empty.append(pool.name)
            elif pool.node_count is not None and len(found) != pool.node_count:
                miscounted.append(f"{pool.name} has {len(found)}, declares {pool.node_count}")
            counts.append(f"{pool.name} {len(found)} by selector")
    if empty:
        return _fail(f"no node in the cluster for pool {', '.join(empty)}",
                     "Check the pool's node names or nodeSelector against kubectl get nodes --show-labels.")
    if short:
        return _fail(f"declared nodes missing: {'; '.join(short)}")
    if miscounted:
        return _warn(f"selector pools with another node count: {'; '.join(miscounted)}",
                     "Update nodeCount, or find the nodes the selector misses.")
    return _pass("every pool has its nodes: " + ", ".join(counts))


def _device_mismatches(pool: GPUPool, node: Obj) -> list[str]:
    """A non-NVIDIA node's advertised devices against what drift expects of it (one computation,
    drift.hardware.expected_allocatable): whole devices, or the templates of its vNPU layout and
    no whole device left."""
    layout = next((n.vnpu_layout for n in pool.nodes if n.name == name(node)), None)
    expected = dict(expected_allocatable(pool, None, {}, layout))
    suffix = ""
    if pool.vnpu_layouts.get(layout or "") is not None:
        expected.setdefault(pool.model.resource, 0)
        suffix = f" (vNPU layout {layout})"
    capacity = (node.get("status") or {}).get("capacity") or {}
    return [f"{name(node)} has {capacity.get(resource, 0)} {resource}, pool {pool.name} declares {amount}{suffix}"
            for resource, amount in sorted(expected.items())
            if parse_quantity(capacity.get(resource, 0)) != amount]


@check("DR021", "pool-hardware", reads=("nodes",),
       summary="The pools' nodes have the declared GPU model (nvidia.com/gpu.product) and accelerators per node "
               "(nvidia.com/gpu.count; for other vendors what drift expects the device plugin to advertise: whole "
               "devices, or the vNPU templates of the node's layout).",
       hint="Fix accelerator.model or acceleratorsPerNode, or move the node to the right pool.")
def check_pool_hardware(s: Situation) -> Outcome:
    members = [(pool, node) for pool in s.scope.pools.values() for node in s.nodes_of(pool)]
    if not members:
        return _skip("no node of a declared pool found (see DR020)")
    wrong, checked = [], 0
    for pool, node in members:
        node_labels = labels(node)
        if pool.model.vendor == "nvidia":
            if GPU_PRODUCT not in node_labels:
                continue  # GFD's absence is DR012's finding
            checked += 1
            products = (pool.product_label,) if pool.product_label else pool.model.gfd_products
            if node_labels[GPU_PRODUCT] not in products:
                wrong.append(f"{name(node)} is {node_labels[GPU_PRODUCT]}, pool {pool.name} declares {pool.model.name}")
            if node_labels.get(GPU_COUNT) != str(pool.per_node):
                wrong.append(f"{name(node)} has {node_labels.get(GPU_COUNT)} GPUs, pool {pool.name} declares "
                             f"{pool.per_node}")
        else:
            checked += 1
            wrong.extend(_device_mismatches(pool, node))
    if wrong:
        return _fail(f"{len(wrong)} mismatches: {_listing(wrong, 4)}")
    if not checked:
        return _skip("no pool node reports its hardware (see DR012)")
    return _pass(f"{checked} pool nodes have the declared model and accelerator count")


@check("DR030", "admission-policies", reads=("admission",),
       summary="The ValidatingAdmissionPolicies and bindings gpugov emits exist, and the bindings deny.",
       hint="gpugov apply.")
def check_admission(s: Situation) -> Outcome:
    wanted = [(o["kind"], o["metadata"]["name"]) for o in s.state.objects if o["apiVersion"] == ADMISSION_API]
    if not wanted:
        return _skip("compile emits no admission policy for this cluster")
    missing = [f"{k} {n}" for k, n in wanted if (k, n) not in s.facts.admission]
    if missing:
        return _fail(f"{len(missing)} of {len(wanted)} missing: {_listing(missing)}: pods can bypass the queues or "
                     f"ask for priority classes their queue does not allow",
                     "gpugov apply (the apiserver needs admissionregistration.k8s.io/v1 policies, Kubernetes 1.30+).")
    wrong = []
    for kind, obj_name in wanted:
        if kind != "ValidatingAdmissionPolicyBinding":
            continue
        spec = s.facts.admission[(kind, obj_name)].get("spec") or {}
        if spec.get("policyName") != obj_name or "Deny" not in (spec.get("validationActions") or []):
            wrong.append(f"{obj_name} (policy {spec.get('policyName')}, actions {spec.get('validationActions')})")
    if wrong:
        return _fail(f"bindings that do not deny: {_listing(wrong)}", "gpugov apply restores them.")
    policies = sorted({n for _, n in wanted})
    return _pass(f"all {len(wanted)} admission objects present (policy and binding of {', '.join(policies)})")


# --- tenant isolation (issue #21: README "Threat model") ---------------------------------------

REQUIRED_INTEGRATIONS = ("batch/job", "pod")


def workload_crds() -> dict[str, str]:
    """CRD name -> Kueue integration of the workload kinds gpugov's policies cover."""
    return {f"{k.resource}.{k.group}": k.integration for k in WORKLOAD_KINDS
            if k.group not in ("", "batch", "apps") and k.integration}


@check("DR040", "kueue-integrations", reads=("kueue-config", "crds"),
       summary="Kueue's integrations include batch/job and pod, and the framework of every workload kind whose CRD "
               "is installed (JobSet, KubeRay, Kubeflow, LeaderWorkerSet).",
       hint="Add the missing frameworks to integrations.frameworks in Kueue's Configuration.")
def check_integrations(s: Situation) -> Outcome:
    if (other := _not_kueue(s)) is not None:
        return other
    config, problem = s.kueue_config()
    if problem:
        return _fail(problem)
    if config is None:
        return _skip(f"Kueue's Configuration is not readable from the API (no ConfigMap "
                     f"{s.request.kueue_namespace}/{KUEUE_CONFIGMAP}); check integrations.frameworks by hand")
    frameworks = set(((config.get("integrations") or {}).get("frameworks")) or [])
    wanted = {name: "always" for name in REQUIRED_INTEGRATIONS}
    wanted.update({integration: f"CRD {crd} installed" for crd, integration in workload_crds().items()
                   if crd in s.facts.crds})
    missing = [f"{name} ({why})" for name, why in sorted(wanted.items()) if name not in frameworks]
    if missing:
        return _fail(f"Kueue does not manage {_listing(missing)}: such a workload runs without a queue's admission "
                     f"although gpugov's policies accept it with a queue label")
    return _pass(f"Kueue manages {_listing(sorted(wanted), 10)}")


@check("DR041", "tenant-pod-security", reads=("namespaces",),
       summary="Every tenant namespace enforces the Pod Security level of Guardrails.isolation.podSecurity (no "
               "privileged pods, hostPath /dev or host namespaces).",
       hint="gpugov apply (it labels the namespaces); find who relabelled them.")
def check_pod_security(s: Situation) -> Outcome:
    wanted = tenant_namespaces(s.state)
    if not wanted:
        return _skip("compile emits no tenant namespace for this cluster")
    labels = {k: v for k, v in _namespace_labels(s.state, wanted[0]).items() if k.startswith(POD_SECURITY)}
    missing = [n for n in wanted if n not in s.facts.namespaces]
    if missing:
        return _fail(f"{len(missing)} tenant namespaces not found: {_listing(missing)}", "gpugov apply.")
    wrong = []
    for namespace in wanted:
        live = (s.facts.namespaces[namespace].get("metadata") or {}).get("labels") or {}
        if any(live.get(k) != v for k, v in labels.items()):
            wrong.append(f"{namespace} (enforce {live.get(POD_SECURITY + 'enforce', 'none')})")
    if wrong:
        return _fail(f"{len(wrong)} of {len(wanted)} tenant namespaces do not enforce Pod Security level "
                     f"{labels.get(POD_SECURITY + 'enforce')}: {_listing(wrong)}")
    return _pass(f"all {len(wanted)} tenant namespaces enforce Pod Security level {labels.get(POD_SECURITY + 'enforce')}")


def _differences(desired: Any, live: Any, path: str = "spec") -> list[str]:
    """Where ``live`` lacks or changes what ``desired`` sets (what the server adds is not a difference)."""
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return [path]
        return [d for k, v in desired.items() for d in _differences(v, live.get(k), f"{path}.{k}")]
    if isinstance(desired, list):
        if not isinstance(live, list) or len(live) != len(desired):
            return [path]
        return [d for i, (a, b) in enumerate(zip(desired, live, strict=True)) for d in _differences(a, b, f"{path}[{i}]")]
    return [] if desired == live else [path]


@check("DR042", "tenant-isolation-intact", reads=("admission",),
       summary="gpugov's admission policies and bindings hold what the declarations compile to: no trusted identity "
               "added, no rule dropped or edited by hand.",
       hint="gpugov apply restores them; find who changed them.")
def check_isolation_intact(s: Situation) -> Outcome:
    wanted = [o for o in s.state.objects if o["apiVersion"] == ADMISSION_API]
    if not wanted:
        return _skip("compile emits no admission policy for this cluster")
    present = [o for o in wanted if (o["kind"], o["metadata"]["name"]) in s.facts.admission]
    if not present:
        return _skip("none of gpugov's admission objects found (see DR030)")
    changed = []
    for obj in present:
        live = s.facts.admission[(obj["kind"], obj["metadata"]["name"])]
        where = _differences(obj.get("spec"), live.get("spec"))
        if where:
            changed.append(f"{obj['kind']} {obj['metadata']['name']} at {where[0]}")
    if changed:
        return _fail(f"{len(changed)} admission objects differ from what the declarations compile to (a widened "
                     f"trust, a dropped rule): {_listing(changed, 4)}")
    return _pass(f"all {len(present)} admission objects found hold what the declarations compile to")


@check("DR050", "tenant-roles", reads=("rbac",),
       summary="gpugov's tenant ClusterRoles exist with exactly the compiled rules, and their RoleBindings and "
               "ClusterRoleBindings with the subjects the declarations name (owners, members, viewers).",
       hint="gpugov apply restores them.")
def check_tenant_roles(s: Situation) -> Outcome:
    from gpugov.doctor.roles import is_tenant_rbac, role_problems

    wanted = [o for o in s.state.objects if is_tenant_rbac(o)]
    if not wanted:
        return _skip("compile emits no tenant role for this cluster (no tenant names an owner, member or viewer)")
    missing, wrong = role_problems(wanted, s.facts.rbac, s.facts.rolebindings)
    if missing:
        return _fail(f"{len(missing)} of {len(wanted)} tenant role objects missing: {_listing(missing)}: tenants "
                     "cannot submit or read their queues as declared")
    if wrong:
        return _fail(f"tenant roles changed on the cluster: {_listing(wrong)}")
    return _pass(f"all {len(wanted)} tenant role objects present, with the compiled rules and the declared subjects")


@check("DR051", "tenant-broad-bindings", reads=("rbac",),
       summary="No RoleBinding in a tenant namespace binds the built-in edit, admin or cluster-admin (every Secret, "
               "ServiceAccount tokens, impersonation).",
       hint="Delete those RoleBindings (gpugov apply prunes gpugov's own former gpugov-owners bindings; with "
            "--no-prune or a GitOps sync without prune they stay).")
def check_broad_bindings(s: Situation) -> Outcome:
    from gpugov.doctor.roles import broad_bindings

    if not s.request.namespaces:
        return _skip("no tenant namespace")
    found = broad_bindings(s.facts.rolebindings)
    if found:
        return _fail(f"{len(found)} RoleBinding(s) in tenant namespaces hand out a built-in role that reads every "
                     f"Secret and mints ServiceAccount tokens: {_listing(found)}")
    return _pass(f"no RoleBinding of edit, admin or cluster-admin in the {len(s.request.namespaces)} tenant namespaces")


CHECKS: tuple[Check, ...] = (  # the order of the report
    check_scheduler_installed, check_scheduler_version, check_fair_sharing, check_manage_jobs, check_visibility,
    check_kueue_metrics, check_gpu_operator, check_device_plugin, check_gfd, check_mig_strategy, check_mig_state,
    check_mig_manager, check_dcgm_exporter, check_dcgm_pod_labels, check_pool_nodes, check_pool_hardware,
    check_admission, check_integrations, check_pod_security, check_isolation_intact, check_tenant_roles,
    check_broad_bindings,
)
CHECK_IDS = tuple(c.id for c in CHECKS)


def run_checks(state: DesiredState, *, facts: Facts, request: FactsRequest,
               checks: tuple[Check, ...] = CHECKS) -> list[Result]:
    situation = Situation(state, state.scope, facts, request)
    results = []
    for check in checks:
        unread = [f"{source}: {facts.unreadable[source]}" for source in check.sources if source in facts.unreadable]
        if unread:
            results.append(Result(check.id, check.name, Status.SKIP, "could not check: " + "; ".join(unread),
                                  "Fix access to what it reads and run again.", incomplete=True))
            continue
        outcome = check.function(situation)
        hint = outcome.hint if outcome.hint is not None else check.hint
        if outcome.status is Status.PASS:
            hint = ""
        results.append(Result(check.id, check.name, outcome.status, outcome.message, hint))
    return results
