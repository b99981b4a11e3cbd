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
from decimal import Decimal
from typing import Any

import yaml

from gpugov.app.desired import DesiredState
from gpugov.capacity.nodes import GPU_COUNT, GPU_PRODUCT, MIG_STATE, MIG_STRATEGY, labels, name, pool_nodes
from gpugov.compile.admission import API as ADMISSION_API
from gpugov.compile.admission import SERVICE_EXPOSURE, WORKLOAD_KINDS
from gpugov.compile.common import Scope
from gpugov.compile.core import POD_SECURITY
from gpugov.compile.gpu_operator import (
    CDI_STRATEGIES,
    DEVICE_LIST_STRATEGY,
    TOOLKIT_REFUSES_ENVVAR,
    TOOLKIT_VOLUME_MOUNTS,
    VOLUME_MOUNTS,
)
from gpugov.compile.volcano_scheduler import CONFIG_KEY as VOLCANO_CONFIG_KEY
from gpugov.compile.volcano_scheduler import CONFIGMAP_NAME as VOLCANO_CONFIGMAP
from gpugov.compile.volcano_scheduler import CONFIGMAP_NAMESPACE as VOLCANO_CONFIG_NAMESPACE
from gpugov.compile.volcano_scheduler import configuration_problems
from gpugov.declarations.model import GPUPool
from gpugov.doctor.facts import KUEUE_CONFIG_KEY, KUEUE_CONFIGMAP, Facts, FactsRequest, Obj
from gpugov.doctor.metrics import Sample, parse_samples
from gpugov.drift.hardware import expected_allocatable
from gpugov.drift.usage import accelerator_requests
from gpugov.i18n import Joined, Text
from gpugov.kube.kinds import KINDS
from gpugov.kube.names import KUEUE_API, VISIBILITY_APISERVICE, VOLCANO_API
from gpugov.kube.objects import ANNOTATION_BUDGET_HELD, LABEL_TENANT, selector_matches
from gpugov.kube.quantity import QuantityError, format_quantity, parse_quantity
from gpugov.kube.resources import is_accelerator
from gpugov.reach import Tree

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
            return None, Text("ConfigMap {namespace}/{configmap} has no key {key}",
                              namespace=self.request.kueue_namespace, configmap=KUEUE_CONFIGMAP, key=KUEUE_CONFIG_KEY)
        try:
            config = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            return None, Text("{key} is not YAML: {error}", key=KUEUE_CONFIG_KEY, error=str(exc).splitlines()[0])
        if not isinstance(config, dict):
            return None, Text("{key} is not a Kueue Configuration", key=KUEUE_CONFIG_KEY)
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


# Words a message puts in its fields; each check's message and hint is a Text: English in JSON, the
# reader's language in text and markdown (issue #30).
NOTHING, UNSET, NONE = Text("nothing"), Text("unset"), Text("none")


def _listing(items: list[str], limit: int = 6) -> str:
    shown = Joined(", ", items[:limit])  # items may be Texts: each told in the reader's language
    return Text("{items} and {count} more", items=shown, count=len(items) - limit) if len(items) > limit else shown


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
       hint=Text("Install Kueue 0.16 or later (or Volcano for a volcano cluster)."))
def check_scheduler_installed(s: Situation) -> Outcome:
    wanted = required_crds(s.state)
    scheduler = "Kueue" if s.kueue else "Volcano"
    if not wanted:
        return _skip(Text("compile emits no {scheduler} objects for cluster {cluster}", scheduler=scheduler,
                          cluster=s.state.cluster))
    missing = [n for n in wanted if n not in s.facts.crds]
    if missing:
        return _fail(Text("{scheduler} CRDs missing: {missing} ({count} of {total} installed)", scheduler=scheduler,
                          missing=_listing(missing), count=len(wanted) - len(missing), total=len(wanted)))
    return _pass(Text("{scheduler} CRDs installed: {wanted}", scheduler=scheduler, wanted=_listing(wanted, 8)))


@check("DR002", "scheduler-api-version", reads=("crds",),
       summary="Those CRDs serve, store and have established the API version gpugov compiles "
               "(kueue.x-k8s.io/v1beta2, scheduling.volcano.sh/v1beta1).",
       hint=Text("Upgrade the scheduler to a release that serves this version."))
def check_scheduler_version(s: Situation) -> Outcome:
    version = scheduler_api(s.state.backend).split("/")[1]
    present = [n for n in required_crds(s.state) if n in s.facts.crds]
    if not present:
        return _skip(Text("no scheduler CRD to read (see DR001)"))
    not_served, not_stored, not_established = [], [], []
    for crd_name in present:
        crd = s.facts.crds[crd_name]
        versions = {v.get("name"): v for v in (crd.get("spec") or {}).get("versions") or []}
        entry = versions.get(version)
        if entry is None or not entry.get("served"):
            served = sorted(n for n, v in versions.items() if v.get("served"))
            not_served.append(Text("{crd} (serves {versions})", crd=crd_name, versions=", ".join(served) or NOTHING))
        elif not entry.get("storage"):
            not_stored.append(crd_name)
        established = _condition(crd, "Established")
        if established is None or established.get("status") != "True":
            not_established.append(crd_name)
    if not_served:
        return _fail(Text("gpugov compiles {scheduler_api}, which these CRDs do not serve: {not_served}",
                          scheduler_api=scheduler_api(s.state.backend), not_served=_listing(not_served)))
    if not_established:
        return _fail(Text("CRDs not Established: {not_established}", not_established=_listing(not_established)),
                     Text("The apiserver has not accepted these CRDs yet; see their status.conditions."))
    if not_stored:
        return _warn(Text("{version} is served but not the storage version of {not_stored} (Kueue before 0.16?)",
                          version=version, not_stored=_listing(not_stored)),
                     Text("Upgrade the scheduler so that the version gpugov writes is the one it stores."))
    return _pass(Text("all {count} CRDs serve and store {version}", count=len(present), version=version))


# --- Volcano's settings ----------------------------------------------------------------------

def _not_volcano(s: Situation) -> Outcome | None:
    return None if not s.kueue else _skip(Text("cluster {cluster} runs {backend}, not Volcano",
                                               cluster=s.state.cluster, backend=s.state.backend))


@check("DR007", "volcano-scheduler-config", reads=("volcano-config",),
       summary="Volcano's scheduler runs the configuration gpugov's Queues need: actions allocate, preempt and reclaim "
               "without enqueue, the priority, gang, predicates and nodegroup plugins, and the SchedulingPolicy's "
               "queue plugin (capacity with enableHierarchy, or proportion), never both.",
       hint=Text("Apply gpugov's compiled ConfigMap volcano-system/volcano-scheduler-configmap (gpugov apply) and "
                 "mount it as vc-scheduler's --scheduler-conf, as Volcano's chart does."))
def check_volcano_scheduler_config(s: Situation) -> Outcome:
    if (other := _not_volcano(s)) is not None:
        return other
    where = f"ConfigMap {VOLCANO_CONFIG_NAMESPACE}/{VOLCANO_CONFIGMAP}"
    configmap = s.facts.volcano_configmap
    if configmap is None:
        return _fail(Text("{where} is missing: vc-scheduler runs its built-in configuration (the proportion plugin, "
                          "no reclaim), which reads none of the deserved quotas gpugov sets", where=where))
    text = (configmap.get("data") or {}).get(VOLCANO_CONFIG_KEY)
    if text is None:
        return _fail(Text("{where} has no key {key}", where=where, key=VOLCANO_CONFIG_KEY))
    problems = configuration_problems(text, s.scope.model.policy.volcano_plugin)
    if problems:
        return _fail(Text("{where}: {problems}", where=where, problems=Joined("; ", problems)))
    return _pass(Text("{where} has every action and plugin gpugov's Queues need", where=where))


@check("DR008", "volcano-queues", reads=("volcano-queues",),
       summary="Every Queue gpugov declares is Open (or closed by gpugov budget, which marks it), its parent exists (a Queue without one is under root), and no "
               "PodGroup names a parent Queue: one job in a non-leaf queue, or one queue whose parent is missing, "
               "makes the capacity plugin refuse to allocate, reclaim and preempt for every queue (volcano#4227).",
       hint=Text("Run vc-controller-manager (its queue controller opens Queues); move the PodGroups out of "
                 "department queues; gpugov apply creates the missing parents."))
def check_volcano_queues(s: Situation) -> Outcome:
    if (other := _not_volcano(s)) is not None:
        return other
    declared = [o["metadata"]["name"] for o in s.state.objects if o["kind"] == "Queue"]
    if not declared:
        return _skip(Text("compile emits no Volcano Queue for cluster {cluster}", cluster=s.state.cluster))
    live = {q["metadata"]["name"]: q for q in s.facts.volcano_queues}
    missing = [n for n in declared if n not in live]
    closed = [f"{n} ({(live[n].get('status') or {}).get('state') or 'no state'})" for n in declared
              if n in live and (live[n].get("status") or {}).get("state") != "Open"
              and ANNOTATION_BUDGET_HELD not in ((live[n].get("metadata") or {}).get("annotations") or {})]
    orphans = [f"{n} (parent {q['spec']['parent']})" for n, q in sorted(live.items())
               if (q.get("spec") or {}).get("parent") not in (None, "", "root") and q["spec"]["parent"] not in live]
    parents = {(q.get("spec") or {}).get("parent") or "root" for n, q in live.items() if n != "root"}
    in_parents = sorted({f"{g['metadata']['namespace']}/{g['metadata']['name']} (queue {g['spec']['queue']})"
                         for g in s.facts.podgroups if (g.get("spec") or {}).get("queue") in parents
                         and (g.get("status") or {}).get("phase") not in ("Completed",)})
    problems = []
    if in_parents:
        problems.append(Text("PodGroups in a parent Queue stop the capacity plugin for every queue: {groups}",
                             groups=_listing(in_parents)))
    if orphans:
        problems.append(Text("Queues whose parent does not exist stop the capacity plugin for every queue: {queues}",
                             queues=_listing(orphans)))
    if missing:
        problems.append(Text("declared Queues missing: {queues}", queues=_listing(missing)))
    if closed:
        problems.append(Text("Queues not Open (Volcano allocates only to Open queues): {queues}",
                             queues=_listing(closed)))
    if problems:
        return _fail(Joined("; ", problems))
    return _pass(Text("all {count} declared Queues are Open, every parent exists, no PodGroup is in a parent queue",
                      count=len(declared)))


# --- Kueue's settings ------------------------------------------------------------------------

def _not_kueue(s: Situation) -> Outcome | None:
    return None if s.kueue else _skip(Text("cluster {cluster} runs {backend}, not Kueue", cluster=s.state.cluster,
                                           backend=s.state.backend))


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
        return severity(Text("{where} turns fair sharing off (no fairSharing block): Kueue ignores the fairSharing "
                             "weights gpugov sets on ClusterQueues and Cohorts", where=where))
    ours = {o["metadata"]["name"] for o in s.state.objects if o["kind"] == "ClusterQueue"}
    reconciled = [cq for cq in s.facts.clusterqueues if cq["metadata"]["name"] in ours and _condition(cq, "Active")]
    with_share = [cq["metadata"]["name"] for cq in reconciled if "fairSharing" in (cq.get("status") or {})]
    if reconciled and not with_share:
        return severity(Text("{count} ClusterQueues of gpugov report no status.fairSharing: the running Kueue has fair "
                             "sharing off", count=len(reconciled)))
    evidence = []
    if config is not None:
        evidence.append(Text("{where} has a fairSharing block", where=where))
    if with_share:
        evidence.append(Text("{count} of {total} ClusterQueues report status.fairSharing.weightedShare",
                             count=len(with_share), total=len(reconciled)))
    if not evidence:
        return _skip(Text("not observable: no {where} and no ClusterQueue of gpugov reconciled yet (gpugov apply "
                          "first)", where=where))
    return _pass(Joined("; ", evidence))


@check("DR009", "kueue-reach", reads=("clusterqueues", "cohorts"),
       summary="What each tenant's ClusterQueue can reach at most on the cluster (Kueue's maximum over the live "
               "ClusterQueues and Cohorts: nominal quota plus what the cohort tree lends within every borrowing and "
               "lending limit, gpugov.reach) is what the declarations give it.",
       hint="Run `gpugov apply` (or `gpugov drift` to see which ClusterQueue or Cohort differs): a queue moved to "
            "another cohort, a Cohort missing or edited, or a limit changed by hand changes what tenants can reach.")
def check_kueue_reach(s: Situation) -> Outcome:
    if (other := _not_kueue(s)) is not None:
        return other
    ours = sorted(o["metadata"]["name"] for o in s.state.objects if o["kind"] == "ClusterQueue")
    live_names = {cq["metadata"]["name"] for cq in s.facts.clusterqueues}
    present = [name for name in ours if name in live_names]
    if not present:
        return _skip(Text("no ClusterQueue of gpugov on the cluster yet (gpugov apply first)"))
    declared = Tree(s.state.objects, usage={})
    live = Tree([*({**cq, "kind": "ClusterQueue"} for cq in s.facts.clusterqueues),
                 *({**c, "kind": "Cohort"} for c in s.facts.cohorts)], usage={})
    differ = []
    for queue in present:
        want, have = declared.maximum(queue), live.maximum(queue)
        for (pool, resource) in sorted(set(want) | set(have)):
            if is_accelerator(resource) and want.get((pool, resource)) != have.get((pool, resource)):
                differ.append(Text("{queue} can reach {have} {resource} in pool {pool}, the declarations give {want}",
                                   queue=queue, have=_amount(have.get((pool, resource))), resource=resource, pool=pool,
                                   want=_amount(want.get((pool, resource)))))
    if differ:
        more = [Text("and {count} more", count=len(differ) - 6)] if len(differ) > 6 else []
        return _fail(Joined("; ", [*differ[:6], *more]))
    return _pass(Text("{count} ClusterQueues reach what the declarations give them (Kueue's maximum over the live "
                      "ClusterQueues and Cohorts)", count=len(present)))


def _amount(value: Decimal | None) -> str:
    return "0" if value is None else format_quantity(value)


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
        return _skip(Text("Kueue's Configuration is not readable from the API: no ConfigMap "
                          "{kueue_namespace}/{configmap} (an out-of-cluster or renamed install); check "
                          "manageJobsWithoutQueueName and managedJobsNamespaceSelector in its --config file by hand",
                          kueue_namespace=s.request.kueue_namespace, configmap=KUEUE_CONFIGMAP))
    if config.get("manageJobsWithoutQueueName") is not True:
        return _fail(Text("manageJobsWithoutQueueName is false: in a tenant namespace a Job or Pod without a queue "
                          "label is not held by Kueue, so gpugov's admission policies are the only line between a "
                          "tenant and an accelerator outside its quota"))
    selector = config.get("managedJobsNamespaceSelector") or KUEUE_DEFAULT_NAMESPACE_SELECTOR
    namespaces = tenant_namespaces(s.state)
    outside = [n for n in namespaces if not selector_matches(selector, _namespace_labels(s.state, n))]
    if outside:
        return _fail(Text("managedJobsNamespaceSelector {selector} leaves out {count} tenant namespaces: {outside}",
                          selector=selector, count=len(outside), outside=_listing(outside)))
    system = [n for n in ("kube-system", s.request.kueue_namespace)
              if selector_matches(selector, {"kubernetes.io/metadata.name": n})]
    if system:
        return _fail(Text("managedJobsNamespaceSelector {selector} also holds the pods of {system}", selector=selector,
                          system=_listing(system)))
    return _pass(Text("manageJobsWithoutQueueName is true in all {count} tenant namespaces "
                      "(managedJobsNamespaceSelector {selector}): a workload there without a queue is held",
                      count=len(namespaces), selector=selector))


@check("DR005", "kueue-visibility-api", reads=("apiservices",),
       summary=f"The visibility API (APIService {VISIBILITY_APISERVICE}) is Available.",
       hint=Text("Check the APIService's status and the Kueue visibility server behind its Service."))
def check_visibility(s: Situation) -> Outcome:
    if (other := _not_kueue(s)) is not None:
        return other
    service = s.facts.apiservices.get(VISIBILITY_APISERVICE)
    if service is None:
        return _fail(Text("APIService {apiservice} is missing: pending workloads and queue positions "
                          "cannot be read", apiservice=VISIBILITY_APISERVICE))
    available = _condition(service, "Available")
    if available is None or available.get("status") != "True":
        why = (available or {}).get("message") or (available or {}).get("reason") or Text("no Available condition")
        return _fail(Text("APIService {apiservice} is not Available: {why}",
                          apiservice=VISIBILITY_APISERVICE, why=why))
    return _pass(Text("APIService {apiservice} is Available", apiservice=VISIBILITY_APISERVICE))


def _kueue_metric_outcome(s: Situation, samples: list[Sample]) -> Outcome:
    kueue = [m for m in samples if m.name.startswith("kueue_")]
    if not kueue:
        return _fail(Text("{kueue_metrics_url} serves no kueue_ metric", kueue_metrics_url=s.request.kueue_metrics_url))
    queues = {m.labels.get("cluster_queue") for m in kueue if m.name == "kueue_cluster_queue_status"}
    ours = sorted(o["metadata"]["name"] for o in s.state.objects if o["kind"] == "ClusterQueue")
    absent = [q for q in ours if q not in queues]
    if absent:
        return _warn(Text("{count} kueue_ series, but kueue_cluster_queue_status names none of {absent}",
                          count=len(kueue), absent=_listing(absent)),
                     Text("Apply the declarations (gpugov apply), or scrape the Kueue that runs them."))
    if not any(m.name == "kueue_cluster_queue_resource_usage" for m in kueue):
        return _warn(Text("{count} kueue_ series, no kueue_cluster_queue_resource_usage: the quota and usage gauges "
                          "are off", count=len(kueue)),
                     Text("Set metrics.enableClusterQueueResources: true in Kueue's Configuration."))
    return _pass(Text("{count} kueue_ series, with status and resource usage of all {total} ClusterQueues",
                      count=len(kueue), total=len(ours)))


@check("DR006", "kueue-metrics", reads=("kueue-services", "kueue-config", "kueue-metrics"),
       summary="Kueue's metrics are exposed (its metrics Service, or --kueue-metrics URL) with ClusterQueue status "
               "and resource usage.",
       hint=Text("Expose Kueue's /metrics and set metrics.enableClusterQueueResources: true."))
def check_kueue_metrics(s: Situation) -> Outcome:
    if (other := _not_kueue(s)) is not None:
        return other
    if s.facts.kueue_metrics is not None:
        return _kueue_metric_outcome(s, parse_samples(s.facts.kueue_metrics))
    services = [x["metadata"]["name"] for x in s.facts.kueue_services if "metrics" in x["metadata"]["name"]]
    if not services:
        return _warn(Text("no metrics Service in namespace {kueue_namespace}: Prometheus cannot scrape Kueue",
                          kueue_namespace=s.request.kueue_namespace),
                     Text("Install Kueue with its metrics Service ({service}), or pass --kueue-metrics "
                          "URL where its /metrics is served.", service=KUEUE_METRICS_SERVICE))
    config, _ = s.kueue_config()
    if config is not None and not (config.get("metrics") or {}).get("enableClusterQueueResources"):
        return _warn(Text("Service {service} exposes metrics, but metrics.enableClusterQueueResources is off: no "
                          "quota or usage gauges", service=services[0]),
                     Text("Set metrics.enableClusterQueueResources: true in Kueue's Configuration."))
    return _pass(Text("Service {services} exposes Kueue's metrics (pass --kueue-metrics URL to read them)",
                      services=", ".join(services)))


# --- NVIDIA's stack --------------------------------------------------------------------------

def _not_nvidia(s: Situation) -> Outcome | None:
    return None if s.nvidia_pools else _skip(Text("cluster {cluster} declares no NVIDIA pool", cluster=s.state.cluster))


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
            where = f"{ds['metadata'].get('namespace', '')}/{ds['metadata']['name']}"
            result.append(Text("{daemonset} ({ready}/{desired} ready)", daemonset=where, ready=ready, desired=desired))
    return result


@check("DR010", "gpu-operator", reads=("crds", "clusterpolicies"),
       summary="The NVIDIA GPU Operator's ClusterPolicy (nvidia.com/v1) exists and is ready; skip without its CRDs.",
       hint=Text("Install the GPU Operator, or fix what its status names."))
def check_gpu_operator(s: Situation) -> Outcome:
    if (other := _not_nvidia(s)) is not None:
        return other
    crd = s.facts.crds.get(CLUSTERPOLICY_CRD)
    if crd is None:
        return _skip(Text("no GPU Operator CRDs ({crd}): the device plugin, GFD, MIG manager and DCGM "
                          "checks read the nodes instead", crd=CLUSTERPOLICY_CRD))
    served = [v.get("name") for v in (crd.get("spec") or {}).get("versions") or [] if v.get("served")]
    if "v1" not in served:
        return _fail(Text("{crd} serves {served}, not nvidia.com/v1",
                          crd=CLUSTERPOLICY_CRD, served=", ".join(served) or NOTHING))
    policy = _clusterpolicy(s)
    if policy is None:
        return _fail(Text("the GPU Operator's CRD is installed but there is no ClusterPolicy: the operator deploys "
                          "nothing"))
    state = (policy.get("status") or {}).get("state")
    if state != "ready":
        return _fail(Text("ClusterPolicy {name} is {state}, not ready", name=policy["metadata"]["name"],
                          state=state or Text("without a state")),
                     Text("kubectl describe clusterpolicy; the operator's own pods in its namespace say which part "
                          "fails."))
    return _pass(Text("ClusterPolicy {name} is ready", name=policy["metadata"]["name"]))


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
       hint=Text("Run the vendor's device plugin on the pool's nodes (the GPU Operator deploys NVIDIA's)."))
def check_device_plugin(s: Situation) -> Outcome:
    members = [(pool, node) for pool in s.scope.pools.values() for node in s.nodes_of(pool)]
    if not members:
        return _skip(Text("no node of a declared pool found (see DR020)"))
    silent = [f"{name(n)} ({p.name})" for p, n in members if not _advertises(n, _pool_resources(p))]
    plugins = [d["metadata"]["name"] for d in _daemonsets(s, "device-plugin")]
    unready = _unready(_daemonsets(s, "device-plugin"))
    if silent:
        return _fail(Text("{count} of {total} pool nodes advertise no accelerator in status.allocatable: {silent}",
                          count=len(silent), total=len(members), silent=_listing(silent)))
    if unready:
        return _fail(Text("device plugin DaemonSets not ready: {unready}", unready=_listing(unready)))
    if plugins:
        return _pass(Text("all {count} pool nodes advertise their accelerators (DaemonSets {daemonsets})",
                          count=len(members), daemonsets=", ".join(plugins)))
    return _pass(Text("all {count} pool nodes advertise their accelerators", count=len(members)))


@check("DR012", "gpu-feature-discovery", reads=("nodes",),
       summary="Every NVIDIA pool node carries GFD's nvidia.com/gpu.product and nvidia.com/gpu.count labels.",
       hint=Text("Run GPU Feature Discovery (the GPU Operator deploys it)."))
def check_gfd(s: Situation) -> Outcome:
    if (other := _not_nvidia(s)) is not None:
        return other
    members = [node for pool in s.nvidia_pools for node in s.nodes_of(pool)]
    if not members:
        return _skip(Text("no node of an NVIDIA pool found (see DR020)"))
    unlabelled = [name(n) for n in members if GPU_PRODUCT not in labels(n) or GPU_COUNT not in labels(n)]
    if unlabelled:
        return _fail(Text("{count} of {total} NVIDIA pool nodes lack {product_label} / {count_label}: {unlabelled}",
                          count=len(unlabelled), total=len(members), product_label=GPU_PRODUCT, count_label=GPU_COUNT,
                          unlabelled=_listing(unlabelled)))
    return _pass(Text("all {count} NVIDIA pool nodes carry GFD's {product_label} and {count_label}", count=len(members),
                      product_label=GPU_PRODUCT, count_label=GPU_COUNT))


@check("DR013", "mig-strategy", reads=("nodes", "clusterpolicies"),
       summary="With MIG quotas, the MIG strategy is mixed: the ClusterPolicy's mig.strategy and every MIG pool "
               "node's nvidia.com/mig.strategy label.",
       hint=Text("Set mig.strategy=mixed in the GPU Operator (Helm: --set mig.strategy=mixed)."))
def check_mig_strategy(s: Situation) -> Outcome:
    if not s.mig_quotas:
        return _skip(Text("no tenant or department holds quota of a MIG profile"))
    policy = _clusterpolicy(s)
    strategy = ((policy or {}).get("spec") or {}).get("mig", {}).get("strategy") if policy else None
    if policy is not None and strategy != "mixed":
        return _fail(Text("ClusterPolicy {name} sets mig.strategy {strategy}: MIG quotas need mixed, where each "
                          "profile is its own nvidia.com/mig-<profile> resource", name=policy["metadata"]["name"],
                          strategy=strategy or Text("unset (single)")))
    members = [node for pool in s.mig_pools for node in s.nodes_of(pool)]
    if not members:
        return _skip(Text("no node of a MIG pool found (see DR020)"))
    wrong = [Text("{node} ({strategy})", node=name(n), strategy=labels(n).get(MIG_STRATEGY, NONE)) for n in members
             if labels(n).get(MIG_STRATEGY) != "mixed"]
    if wrong:
        return _fail(Text("{count} of {total} MIG pool nodes are not on the mixed strategy ({strategy_label}): {wrong}",
                          count=len(wrong), total=len(members), strategy_label=MIG_STRATEGY, wrong=_listing(wrong)))
    return _pass(Text("all {count} MIG pool nodes report {strategy_label}=mixed", count=len(members),
                      strategy_label=MIG_STRATEGY))


@check("DR014", "mig-config-state", reads=("nodes",),
       summary="mig-manager applied the selected layout on every MIG pool node: nvidia.com/mig.config.state is "
               "success.",
       hint=Text("Read the mig-manager pod's log on the node; gpugov drift names the config it should have."))
def check_mig_state(s: Situation) -> Outcome:
    if not s.mig_pools:
        return _skip(Text("no pool declares MIG layouts"))
    members = [node for pool in s.mig_pools for node in s.nodes_of(pool)]
    if not members:
        return _skip(Text("no node of a MIG pool found (see DR020)"))
    states = {name(n): labels(n).get(MIG_STATE) for n in members}
    no_state = Text("no state")
    failed = [Text("{node} ({state})", node=n, state=v or no_state) for n, v in states.items()
              if v not in ("success", "pending", "rebooting")]
    waiting = [f"{n} ({v})" for n, v in states.items() if v in ("pending", "rebooting")]
    if failed:
        return _fail(Text("{state_label} is not success on {count} of {total} nodes: {failed}", state_label=MIG_STATE,
                          count=len(failed), total=len(members), failed=_listing(failed)))
    if waiting:
        return _warn(Text("MIG reconfiguration in progress on {waiting}", waiting=_listing(waiting)),
                     Text("Wait for mig-manager; the nodes' MIG resources change when it is done."))
    return _pass(Text("{state_label}=success on all {count} MIG pool nodes", state_label=MIG_STATE, count=len(members)))


@check("DR015", "mig-manager", reads=("clusterpolicies", "daemonsets"),
       summary="The ClusterPolicy points mig-manager at gpugov's mig-parted ConfigMap, and mig-manager DaemonSets "
               "are ready.",
       hint=Text("Set migManager.config.name to the Cluster's migConfig.name."))
def check_mig_manager(s: Situation) -> Outcome:
    if not s.mig_pools:
        return _skip(Text("no pool declares MIG layouts"))
    cluster = s.scope.cluster
    policy = _clusterpolicy(s)
    managers = _daemonsets(s, "mig-manager")
    if policy is None and not managers:
        return _skip(Text("no ClusterPolicy and no mig-manager DaemonSet: see DR014 for what the nodes report"))
    if policy is not None:
        config = (((policy.get("spec") or {}).get("migManager") or {}).get("config") or {}).get("name")
        if config != cluster.mig_config_name:
            return _fail(Text("ClusterPolicy migManager.config.name is {config}, not gpugov's {mig_config_name}: "
                              "mig-manager applies another geometry than the declared layouts",
                              config=config or UNSET, mig_config_name=cluster.mig_config_name),
                         Text("Set migManager.config.name={mig_config_name} (the ConfigMap compile emits in "
                              "{mig_config_namespace}).", mig_config_name=cluster.mig_config_name,
                              mig_config_namespace=cluster.mig_config_namespace))
    unready = _unready(managers)
    if unready:
        return _fail(Text("mig-manager DaemonSets not ready: {unready}", unready=_listing(unready)))
    parts = [Text("ClusterPolicy points mig-manager at {config}", config=cluster.mig_config_name)] \
        if policy is not None else []
    parts += [Text("DaemonSet {name} ready", name=m["metadata"]["name"]) for m in managers]
    return _pass(Joined("; ", parts))


def _dcgm_samples(s: Situation) -> list[Sample] | None:
    return None if s.facts.dcgm_metrics is None else [m for m in parse_samples(s.facts.dcgm_metrics)
                                                      if m.name.startswith("DCGM_FI_")]


@check("DR016", "dcgm-exporter", reads=("daemonsets", "dcgm-metrics"),
       summary="A DCGM exporter runs (ready DaemonSet, or --dcgm-metrics URL) with the utilisation counters the idle "
               "check reads.",
       hint=Text("Enable dcgmExporter in the GPU Operator with its default counters."))
def check_dcgm_exporter(s: Situation) -> Outcome:
    if (other := _not_nvidia(s)) is not None:
        return other
    exporters = _daemonsets(s, "dcgm-exporter")
    unready = _unready(exporters)
    if unready:
        return _fail(Text("DCGM exporter DaemonSets not ready: {unready}", unready=_listing(unready)))
    samples = _dcgm_samples(s)
    if samples is None:
        if not exporters:
            return _warn(Text("no DCGM exporter DaemonSet found: GPU utilisation (idle GPUs, gpugov drift "
                              "--prometheus) cannot be measured"),
                         Text("Enable dcgmExporter in the GPU Operator, or pass --dcgm-metrics URL."))
        return _pass(Text("DaemonSet {name} ready (pass --dcgm-metrics URL to read it)",
                          name=exporters[0]["metadata"]["name"]))
    if not samples:
        return _fail(Text("{dcgm_metrics_url} serves no DCGM_FI_ metric", dcgm_metrics_url=s.request.dcgm_metrics_url))
    names = {m.name for m in samples}
    utilisation = [n for n in DCGM_UTILISATION if n in names]
    if not utilisation:
        return _warn(Text("{count} DCGM series, none of {counters}: idle GPUs cannot be found",
                          count=len(samples), counters=", ".join(DCGM_UTILISATION)),
                     Text("Use the exporter's default counters (dcp-metrics-included.csv)."))
    if s.mig_pools and "DCGM_FI_PROF_GR_ENGINE_ACTIVE" not in names:
        return _warn(Text("no DCGM_FI_PROF_GR_ENGINE_ACTIVE: MIG instances report no utilisation without it"),
                     Text("Enable the DCP (profiling) counters in the exporter."))
    return _pass(Text("{count} DCGM series, with {utilisation}", count=len(samples),
                      utilisation=", ".join(utilisation)))


def _pod_of(sample: Sample) -> str:
    return next((sample.labels[k] for k in POD_LABELS if sample.labels.get(k)), "")


@check("DR017", "dcgm-pod-labels", reads=("dcgm-metrics", "pods", "daemonsets"),
       summary="GPU metrics name the pod that holds the GPU (DCGM_EXPORTER_KUBERNETES), checked against the running "
               "GPU pods.",
       hint=Text("Set DCGM_EXPORTER_KUBERNETES=true on the exporter (the GPU Operator's default)."))
def check_dcgm_pod_labels(s: Situation) -> Outcome:
    if (other := _not_nvidia(s)) is not None:
        return other
    samples = _dcgm_samples(s)
    if samples is None:
        for ds in _daemonsets(s, "dcgm-exporter"):
            containers = (((ds.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
            env = {e.get("name"): e.get("value") for c in containers for e in c.get("env") or []}
            if str(env.get("DCGM_EXPORTER_KUBERNETES", "")).lower() == "false":
                return _fail(Text("DaemonSet {name} sets DCGM_EXPORTER_KUBERNETES=false: GPU metrics name no pod",
                                  name=ds["metadata"]["name"]))
            if "DCGM_EXPORTER_KUBERNETES" in env:
                return _pass(Text("DaemonSet {name} sets DCGM_EXPORTER_KUBERNETES={value}",
                                  name=ds["metadata"]["name"],
                                  value=env["DCGM_EXPORTER_KUBERNETES"]))
        return _skip(Text("pass --dcgm-metrics URL to see whether GPU metrics name their pods"))
    gpu_series = [m for m in samples if m.name in DCGM_UTILISATION]
    attributed = sorted({f"{m.labels.get('exported_namespace') or m.labels.get('namespace', '')}/{_pod_of(m)}"
                         for m in gpu_series if _pod_of(m)})
    nvidia_nodes = {name(n) for pool in s.nvidia_pools for n in s.nodes_of(pool)}
    running = sorted(f"{p['metadata'].get('namespace', '')}/{p['metadata']['name']}" for p in s.facts.pods or []
                     if (p.get("spec") or {}).get("nodeName") in nvidia_nodes and accelerator_requests(p))
    if attributed:
        return _pass(Text("{count} pods named on GPU series: {attributed}", count=len(attributed),
                          attributed=_listing(attributed)))
    if running:
        return _fail(Text("{count} GPU pods run ({running}) but no DCGM series names a pod: the exporter runs without "
                          "its Kubernetes mapping", count=len(running), running=_listing(running)))
    return _warn(Text("no GPU pod runs on the pools' nodes now, so pod attribution cannot be seen"),
                 Text("Run again while a GPU job runs."))


# What makes the device plugin the only way to a GPU (NVIDIA Container Toolkit and device plugin settings,
# as the GPU Operator's ClusterPolicy sets them in spec.toolkit.env and spec.devicePlugin.env; compile.gpu_operator
# emits them where a Cluster declares spec.gpuOperator).
# The GPU Operator deploys the toolkit on a node unless the node says otherwise: there its runtime is the node's own.
TOOLKIT_DEPLOY_LABEL = "nvidia.com/gpu.deploy.container-toolkit"


def _env(component: Obj) -> dict[str, str]:
    return {str(e.get("name")): str(e.get("value", "")) for e in component.get("env") or [] if isinstance(e, dict)}


def runtime_problems(policy: Obj) -> list[str]:
    """Why a ClusterPolicy's toolkit would still honour NVIDIA_VISIBLE_DEVICES from an unprivileged
    container, or its device plugin would hand devices through that variable (empty: neither).

    The device plugin's strategy is its env DEVICE_LIST_STRATEGY (a comma-separated list), else what the
    operator sets itself: cdi-annotations,cdi-cri where cdi.enabled is true (the operator's
    controllers/object_controls.go), envvar otherwise. cdi.enabled absent counts as false: the CRDs that
    default it to true write it into the stored object."""
    spec = policy.get("spec") or {}
    toolkit, plugin = spec.get("toolkit") or {}, spec.get("devicePlugin") or {}
    problems = []
    if toolkit.get("enabled") is False:
        problems.append(Text("the operator does not manage the container toolkit (toolkit.enabled false)"))
    toolkit_env, plugin_env = _env(toolkit), _env(plugin)
    key, wanted = TOOLKIT_REFUSES_ENVVAR
    if toolkit_env.get(key, "").lower() != wanted:
        problems.append(Text("toolkit.env {key} is {value}, not {wanted}", key=key, value=toolkit_env.get(key) or NONE,
                             wanted=wanted))
    cdi = (spec.get("cdi") or {}).get("enabled") is True
    strategy = plugin_env.get(DEVICE_LIST_STRATEGY) or (",".join(CDI_STRATEGIES) if cdi else "envvar")
    strategies = {part.strip() for part in strategy.split(",") if part.strip()}
    mounts_key, mounts = TOOLKIT_VOLUME_MOUNTS
    if not strategies or not strategies <= {VOLUME_MOUNTS, *CDI_STRATEGIES}:
        problems.append(Text("devicePlugin.env {key} is {value}: the device plugin hands devices through the "
                             "variable", key=DEVICE_LIST_STRATEGY, value=strategy))
    elif VOLUME_MOUNTS in strategies and toolkit_env.get(mounts_key, "").lower() != mounts:
        problems.append(Text("devicePlugin.env {key}=volume-mounts without toolkit.env {mounts_key}={mounts}",
                             key=DEVICE_LIST_STRATEGY, mounts_key=mounts_key, mounts=mounts))
    elif strategies & set(CDI_STRATEGIES) and not cdi:
        problems.append(Text("devicePlugin.env {key} is {value} but cdi.enabled is not true",
                             key=DEVICE_LIST_STRATEGY, value=strategy))
    return problems


@check("DR018", "runtime-refuses-visibility-variable", reads=("clusterpolicies", "nodes"),
       summary="No GPU node's container runtime honours NVIDIA_VISIBLE_DEVICES from an unprivileged container, so "
               "the device plugin's allocation is the only way to a GPU: the GPU Operator's ClusterPolicy sets "
               "toolkit.env ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED=false and the device plugin's "
               "DEVICE_LIST_STRATEGY to volume-mounts (with ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS=true) "
               "or CDI, and no pool node opts out of the operator's toolkit (nvidia.com/gpu.deploy.container-toolkit"
               "=false).",
       hint=Text("Set them in the ClusterPolicy (Helm: toolkit.env and devicePlugin.env); on a node without the "
                 "operator's toolkit, set accept-nvidia-visible-devices-envvar-when-unprivileged = false in "
                 "/etc/nvidia-container-runtime/config.toml."))
def check_runtime_refuses_variable(s: Situation) -> Outcome:
    if (other := _not_nvidia(s)) is not None:
        return other
    nodes = sorted({name(n) for pool in s.nvidia_pools for n in s.nodes_of(pool)})
    policy = _clusterpolicy(s)
    if policy is None:
        return _skip(Text("no GPU Operator ClusterPolicy: the runtime's settings are in each node's "
                          "/etc/nvidia-container-runtime/config.toml, which the API does not show"))
    problems = runtime_problems(policy)
    if problems:
        return _fail(Text("on all {count} GPU nodes an unprivileged container's NVIDIA_VISIBLE_DEVICES reaches the "
                          "GPUs: {problems}", count=len(nodes), problems=_listing(problems)))
    own = sorted(name(n) for pool in s.nvidia_pools for n in s.nodes_of(pool)
                 if labels(n).get(TOOLKIT_DEPLOY_LABEL) == "false")
    if own:
        return _fail(Text("{count} GPU nodes run their own container toolkit (label {label}=false), whose settings "
                          "the API does not show: {nodes}", count=len(own), label=TOOLKIT_DEPLOY_LABEL,
                          nodes=_listing(own)))
    return _pass(Text("the ClusterPolicy's toolkit refuses the variable from unprivileged containers on all {count} "
                      "GPU nodes", count=len(nodes)))


# --- the declarations against the nodes ------------------------------------------------------

@check("DR020", "pool-nodes", reads=("nodes",),
       summary="Every declared pool matches real nodes: its listed node names, or at least one node (nodeCount of "
               "them) for its nodeSelector.",
       hint=Text("Fix the pool's nodes or nodeSelector in hardware/."))
def check_pool_nodes(s: Situation) -> Outcome:
    if not s.scope.pools:
        return _skip(Text("cluster {cluster} declares no pool", cluster=s.state.cluster))
    empty, short, counts, miscounted = [], [], [], []
    for pool in s.scope.pools.values():
        found = {name(n) for n in s.nodes_of(pool)}
        if pool.nodes:
            missing = [n.name for n in pool.nodes if n.name not in found]
            if len(missing) == len(pool.nodes):
                empty.append(pool.name)
            elif missing:
                short.append(Text("{pool} lacks {nodes}", pool=pool.name, nodes=_listing(missing, 4)))
            counts.append(f"{pool.name} {len(pool.nodes) - len(missing)}/{len(pool.nodes)}")
        else:
            if not found:
                empty.append(pool.name)
            elif pool.node_count is not None and len(found) != pool.node_count:
                miscounted.append(Text("{pool} has {count}, declares {declared}", pool=pool.name, count=len(found),
                                       declared=pool.node_count))
            counts.append(Text("{pool} {count} by selector", pool=pool.name, count=len(found)))
    if empty:
        return _fail(Text("no node in the cluster for pool {empty}", empty=", ".join(empty)),
                     Text("Check the pool's node names or nodeSelector against kubectl get nodes --show-labels."))
    if short:
        return _fail(Text("declared nodes missing: {short}", short=Joined("; ", short)))
    if miscounted:
        return _warn(Text("selector pools with another node count: {miscounted}", miscounted=Joined("; ", miscounted)),
                     Text("Update nodeCount, or find the nodes the selector misses."))
    return _pass(Text("every pool has its nodes: {pools}", pools=Joined(", ", counts)))


def _device_mismatches(pool: GPUPool, node: Obj) -> list[str]:
    """A non-NVIDIA node's advertised devices against what drift expects of it (one computation,
    drift.hardware.expected_allocatable): whole devices, or the templates of its vNPU layout and
    no whole device left."""
    layout = next((n.vnpu_layout for n in pool.nodes if n.name == name(node)), None)
    expected = dict(expected_allocatable(pool, None, {}, layout))
    suffix = ""
    if pool.vnpu_layouts.get(layout or "") is not None:
        expected.setdefault(pool.model.resource, 0)
        suffix = Text(" (vNPU layout {layout})", layout=layout)
    capacity = (node.get("status") or {}).get("capacity") or {}
    return [Text("{node} has {count} {resource}, pool {pool} declares {amount}{layout}", node=name(node),
                 count=capacity.get(resource, 0), resource=resource, pool=pool.name, amount=amount, layout=suffix)
            for resource, amount in sorted(expected.items())
            if parse_quantity(capacity.get(resource, 0)) != amount]


@check("DR021", "pool-hardware", reads=("nodes",),
       summary="The pools' nodes have the declared GPU model (nvidia.com/gpu.product) and accelerators per node "
               "(nvidia.com/gpu.count; for other vendors what drift expects the device plugin to advertise: whole "
               "devices, or the vNPU templates of the node's layout).",
       hint=Text("Fix accelerator.model or acceleratorsPerNode, or move the node to the right pool."))
def check_pool_hardware(s: Situation) -> Outcome:
    members = [(pool, node) for pool in s.scope.pools.values() for node in s.nodes_of(pool)]
    if not members:
        return _skip(Text("no node of a declared pool found (see DR020)"))
    wrong, checked = [], 0
    for pool, node in members:
        node_labels = labels(node)
        if pool.model.vendor == "nvidia":
            if GPU_PRODUCT not in node_labels:
                continue  # GFD's absence is DR012's finding
            checked += 1
            products = (pool.product_label,) if pool.product_label else pool.model.gfd_products
            if node_labels[GPU_PRODUCT] not in products:
                wrong.append(Text("{node} is {product}, pool {pool} declares {model}", node=name(node),
                                  product=node_labels[GPU_PRODUCT], pool=pool.name, model=pool.model.name))
            if node_labels.get(GPU_COUNT) != str(pool.per_node):
                wrong.append(Text("{node} has {count} GPUs, pool {pool} declares {declared}", node=name(node),
                                  count=node_labels.get(GPU_COUNT), pool=pool.name, declared=pool.per_node))
        else:
            checked += 1
            wrong.extend(_device_mismatches(pool, node))
    if wrong:
        return _fail(Text("{count} mismatches: {wrong}", count=len(wrong), wrong=_listing(wrong, 4)))
    if not checked:
        return _skip(Text("no pool node reports its hardware (see DR012)"))
    return _pass(Text("{checked} pool nodes have the declared model and accelerator count", checked=checked))


# Kueue v0.17's feature gate (beta, on by default) under which its TAS node controller judges a node's taints.
TAINTS_GATE = "TASReplaceNodeOnNodeTaints"
EVICTING_EFFECTS = ("NoSchedule", "NoExecute")  # the taints Kueue's check weighs (tas classifyTaints)


def tolerating_tas_flavors(state: DesiredState) -> list[str]:
    """The topology-aware ResourceFlavors compile emits whose own tolerations let pods onto tainted nodes."""
    return sorted(o["metadata"]["name"] for o in state.objects if o["kind"] == "ResourceFlavor"
                  and o["spec"].get("topologyName")
                  and any(t.get("effect") in (None, "", *EVICTING_EFFECTS) for t in o["spec"].get("tolerations") or []))


@check("DR022", "kueue-tas-node-taints", reads=("kueue-config",),
       summary="Where a topology-aware pool's nodes are tainted, Kueue runs with the feature gate "
               "TASReplaceNodeOnNodeTaints off: Kueue v0.17 judges a node's taints against the Workload's own pod "
               "sets, never the ResourceFlavor's tolerations, and evicts a running workload (NodeFailures) once no "
               "pod of it is left on such a node while the job runs on.",
       hint=Text("Set featureGates: {{TASReplaceNodeOnNodeTaints: false}} in Kueue's Configuration (Kueue v0.17 or "
                 "later; where its Deployment passes --feature-gates, add TASReplaceNodeOnNodeTaints=false there "
                 "instead, since Kueue refuses both), and restart it."))
def check_tas_node_taints(s: Situation) -> Outcome:
    if (other := _not_kueue(s)) is not None:
        return other
    flavors = tolerating_tas_flavors(s.state)
    if not flavors:
        return _pass(Text("no topology-aware flavor tolerates a taint: Kueue's node taint check sees what the pods "
                          "tolerate"))
    config, problem = s.kueue_config()
    if problem:
        return _fail(problem)
    if config is None:
        return _skip(Text("Kueue's Configuration is not readable from the API (no ConfigMap "
                          "{kueue_namespace}/{configmap}); check that the feature gate {gate} is off by hand "
                          "(tainted topology-aware pools: {flavors})", kueue_namespace=s.request.kueue_namespace,
                          configmap=KUEUE_CONFIGMAP, gate=TAINTS_GATE, flavors=_listing(flavors)))
    gates = config.get("featureGates")
    if isinstance(gates, dict) and gates.get(TAINTS_GATE) is False:
        return _pass(Text("the feature gate {gate} is off: Kueue keeps a workload on the tainted nodes of "
                          "{flavors}, which the flavors' tolerations admitted it to", gate=TAINTS_GATE,
                          flavors=_listing(flavors)))
    harm = Text("Kueue evicts a running workload of {flavors} (NodeFailures) once its pods on a node have ended "
                "before the job: the flavors' tolerations are not in the Workload's pod sets", flavors=_listing(flavors))
    if not isinstance(gates, dict):
        return _warn(Text("Kueue's Configuration sets no featureGates, so {gate} is on (Kueue v0.17's default) unless "
                          "its --feature-gates flag turns it off, which the API does not show: {harm}", gate=TAINTS_GATE,
                          harm=harm))
    return _fail(Text("the feature gate {gate} is on: {harm}", gate=TAINTS_GATE, harm=harm))


@check("DR030", "admission-policies", reads=("admission",),
       summary="The ValidatingAdmissionPolicies and bindings gpugov emits exist, and the bindings deny.",
       hint=Text("gpugov apply."))
def check_admission(s: Situation) -> Outcome:
    wanted = [(o["kind"], o["metadata"]["name"]) for o in s.state.objects if o["apiVersion"] == ADMISSION_API]
    if not wanted:
        return _skip(Text("compile emits no admission policy for this cluster"))
    missing = [f"{k} {n}" for k, n in wanted if (k, n) not in s.facts.admission]
    if missing:
        return _fail(Text("{count} of {total} missing: {missing}: pods can bypass the queues or ask for priority "
                          "classes their queue does not allow", count=len(missing), total=len(wanted),
                          missing=_listing(missing)),
                     Text("gpugov apply (the apiserver needs admissionregistration.k8s.io/v1 policies, Kubernetes "
                          "1.30+)."))
    wrong = []
    for kind, obj_name in wanted:
        if kind != "ValidatingAdmissionPolicyBinding":
            continue
        spec = s.facts.admission[(kind, obj_name)].get("spec") or {}
        if spec.get("policyName") != obj_name or "Deny" not in (spec.get("validationActions") or []):
            wrong.append(Text("{name} (policy {policy}, actions {actions})", name=obj_name,
                              policy=spec.get("policyName"), actions=spec.get("validationActions")))
    if wrong:
        return _fail(Text("bindings that do not deny: {wrong}", wrong=_listing(wrong)),
                     Text("gpugov apply restores them."))
    policies = sorted({n for _, n in wanted})
    return _pass(Text("all {count} admission objects present (policy and binding of {policies})", count=len(wanted),
                      policies=", ".join(policies)))


# --- tenant isolation (issue #21: README "Threat model") ---------------------------------------

REQUIRED_INTEGRATIONS = ("batch/job", "pod")


def workload_crds() -> dict[str, str]:
    """CRD name -> Kueue integration of the workload kinds gpugov's policies cover."""
    return {f"{k.resource}.{k.group}": k.integration for k in WORKLOAD_KINDS
            if k.group not in ("", "batch", "apps") and k.integration}


@check("DR040", "kueue-integrations", reads=("kueue-config", "crds"),
       summary="Kueue's integrations include batch/job and pod, and the framework of every workload kind whose CRD "
               "is installed (JobSet, KubeRay, Kubeflow, LeaderWorkerSet).",
       hint=Text("Add the missing frameworks to integrations.frameworks in Kueue's Configuration."))
def check_integrations(s: Situation) -> Outcome:
    if (other := _not_kueue(s)) is not None:
        return other
    config, problem = s.kueue_config()
    if problem:
        return _fail(problem)
    if config is None:
        return _skip(Text("Kueue's Configuration is not readable from the API (no ConfigMap "
                          "{kueue_namespace}/{configmap}); check integrations.frameworks by hand",
                          kueue_namespace=s.request.kueue_namespace, configmap=KUEUE_CONFIGMAP))
    frameworks = set(((config.get("integrations") or {}).get("frameworks")) or [])
    wanted: dict[str, str] = {name: Text("always") for name in REQUIRED_INTEGRATIONS}
    wanted.update({integration: Text("CRD {crd} installed", crd=crd) for crd, integration in workload_crds().items()
                   if crd in s.facts.crds})
    missing = [Text("{framework} ({why})", framework=name, why=why) for name, why in sorted(wanted.items())
               if name not in frameworks]
    if missing:
        return _fail(Text("Kueue does not manage {missing}: such a workload runs without a queue's admission although "
                          "gpugov's policies accept it with a queue label", missing=_listing(missing)))
    return _pass(Text("Kueue manages {wanted}", wanted=_listing(sorted(wanted), 10)))


@check("DR041", "tenant-pod-security", reads=("namespaces",),
       summary="Every tenant namespace enforces the Pod Security level of Guardrails.isolation.podSecurity (no "
               "privileged pods, hostPath /dev or host namespaces).",
       hint=Text("gpugov apply (it labels the namespaces); find who relabelled them."))
def check_pod_security(s: Situation) -> Outcome:
    wanted = tenant_namespaces(s.state)
    if not wanted:
        return _skip(Text("compile emits no tenant namespace for this cluster"))
    labels = {k: v for k, v in _namespace_labels(s.state, wanted[0]).items() if k.startswith(POD_SECURITY)}
    missing = [n for n in wanted if n not in s.facts.namespaces]
    if missing:
        return _fail(Text("{count} tenant namespaces not found: {missing}", count=len(missing),
                          missing=_listing(missing)), Text("gpugov apply."))
    wrong = []
    for namespace in wanted:
        live = (s.facts.namespaces[namespace].get("metadata") or {}).get("labels") or {}
        if any(live.get(k) != v for k, v in labels.items()):
            wrong.append(Text("{namespace} (enforce {level})", namespace=namespace,
                              level=live.get(POD_SECURITY + "enforce", NONE)))
    if wrong:
        return _fail(Text("{count} of {total} tenant namespaces do not enforce Pod Security level {level}: {wrong}",
                          count=len(wrong), total=len(wanted), level=labels.get(POD_SECURITY + "enforce"),
                          wrong=_listing(wrong)))
    return _pass(Text("all {count} tenant namespaces enforce Pod Security level {level}", count=len(wanted),
                      level=labels.get(POD_SECURITY + "enforce")))


@check("DR043", "external-ips-refused", reads=("external-ips",),
       summary="The API server refuses a Service with externalIPs in a tenant namespace (CVE-2020-8554: such a "
               "Service intercepts the cluster's traffic to an address it does not own): gpugov's "
               "gpugov-service-exposure policy or the DenyServiceExternalIPs admission plugin; asked by a server-side "
               "dry run.",
       hint=Text("gpugov apply (gpugov-service-exposure), or start kube-apiserver with "
                 "--enable-admission-plugins=DenyServiceExternalIPs."))
def check_external_ips(s: Situation) -> Outcome:
    if not s.request.namespaces or s.facts.external_ips is None:
        return _skip(Text("compile emits no tenant namespace for this cluster"))
    namespace = s.request.namespaces[0]
    answer = s.facts.external_ips
    if answer == "":
        return _fail(Text("a Service with externalIPs is admitted in {namespace}: a tenant's Service can take the "
                          "cluster's traffic to any address", namespace=namespace))
    if "externalIPs" in answer or SERVICE_EXPOSURE in answer:
        return _pass(Text("a Service with externalIPs is refused in {namespace} ({answer})", namespace=namespace,
                          answer=answer))
    return _skip(Text("could not ask in {namespace}: {answer}", namespace=namespace, answer=answer))


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
       hint=Text("gpugov apply restores them; find who changed them."))
def check_isolation_intact(s: Situation) -> Outcome:
    wanted = [o for o in s.state.objects if o["apiVersion"] == ADMISSION_API]
    if not wanted:
        return _skip(Text("compile emits no admission policy for this cluster"))
    present = [o for o in wanted if (o["kind"], o["metadata"]["name"]) in s.facts.admission]
    if not present:
        return _skip(Text("none of gpugov's admission objects found (see DR030)"))
    changed = []
    for obj in present:
        live = s.facts.admission[(obj["kind"], obj["metadata"]["name"])]
        where = _differences(obj.get("spec"), live.get("spec"))
        if where:
            changed.append(Text("{kind} {name} at {path}", kind=obj["kind"], name=obj["metadata"]["name"], path=where[0]))
    if changed:
        return _fail(Text("{count} admission objects differ from what the declarations compile to (a widened trust, a "
                          "dropped rule): {changed}", count=len(changed), changed=_listing(changed, 4)))
    return _pass(Text("all {count} admission objects found hold what the declarations compile to", count=len(present)))


@check("DR050", "tenant-roles", reads=("rbac",),
       summary="gpugov's tenant ClusterRoles exist with exactly the compiled rules, and their RoleBindings and "
               "ClusterRoleBindings with the subjects the declarations name (owners, members, viewers).",
       hint=Text("gpugov apply restores them."))
def check_tenant_roles(s: Situation) -> Outcome:
    from gpugov.doctor.roles import is_tenant_rbac, role_problems

    wanted = [o for o in s.state.objects if is_tenant_rbac(o)]
    if not wanted:
        return _skip(Text("compile emits no tenant role for this cluster (no tenant names an owner, member or viewer)"))
    missing, wrong = role_problems(wanted, s.facts.rbac, s.facts.rolebindings)
    if missing:
        return _fail(Text("{count} of {total} tenant role objects missing: {missing}: tenants cannot submit or read "
                          "their queues as declared", count=len(missing), total=len(wanted),
                          missing=_listing(missing)))
    if wrong:
        return _fail(Text("tenant roles changed on the cluster: {wrong}", wrong=_listing(wrong)))
    return _pass(Text("all {count} tenant role objects present, with the compiled rules and the declared subjects",
                      count=len(wanted)))


@check("DR051", "tenant-broad-bindings", reads=("rbac",),
       summary="No RoleBinding in a tenant namespace binds the built-in edit, admin or cluster-admin (every Secret, "
               "ServiceAccount tokens, impersonation).",
       hint=Text("Delete those RoleBindings (gpugov apply prunes gpugov's own former gpugov-owners bindings; with "
                 "--no-prune or a GitOps sync without prune they stay)."))
def check_broad_bindings(s: Situation) -> Outcome:
    from gpugov.doctor.roles import broad_bindings

    if not s.request.namespaces:
        return _skip(Text("no tenant namespace"))
    found = broad_bindings(s.facts.rolebindings)
    if found:
        return _fail(Text("{count} RoleBinding(s) in tenant namespaces hand out a built-in role that reads every "
                          "Secret and mints ServiceAccount tokens: {found}", count=len(found), found=_listing(found)))
    return _pass(Text("no RoleBinding of edit, admin or cluster-admin in the {count} tenant namespaces",
                      count=len(s.request.namespaces)))


@check("DR060", "multikueue-wiring", reads=("multikueue",),
       summary="On a fleet's manager: each AdmissionCheck and MultiKueueCluster the fleet compiles to exists "
       "and is Active, i.e. Kueue reached every worker with the kubeconfig Secret the Fleet names.",
       hint=Text("Create each worker's kubeconfig Secret (key kubeconfig) in Kueue's namespace on the manager, and "
                 "apply each worker: the condition's message says what Kueue could not do."))
def check_multikueue(s: Situation) -> Outcome:
    wanted = [(o["kind"], o["metadata"]["name"]) for o in s.state.objects
              if o["kind"] in ("AdmissionCheck", "MultiKueueCluster")]
    if not wanted:
        return _skip(Text("cluster {cluster} manages no fleet", cluster=s.scope.cluster.name))
    problems = []
    for kind, object_name in wanted:
        found = s.facts.multikueue.get((kind, object_name))
        active = _condition(found, "Active") if found is not None else None
        if found is None:
            problems.append(Text("{kind} {name} is missing", kind=kind, name=object_name))
        elif active is None or active.get("status") != "True":
            why = (active or {}).get("message") or (active or {}).get("reason") or Text("no Active condition")
            problems.append(Text("{kind} {name} is not Active: {why}", kind=kind, name=object_name, why=why))
    if problems:
        return _fail("; ".join(str(p) for p in problems))
    return _pass(Text("{count} AdmissionCheck(s) and MultiKueueCluster(s) Active: every worker reached",
                      count=len(wanted)))


CHECKS: tuple[Check, ...] = (  # the order of the report
    check_scheduler_installed, check_scheduler_version, check_volcano_scheduler_config, check_volcano_queues,
    check_fair_sharing, check_manage_jobs, check_visibility,
    check_kueue_metrics, check_kueue_reach, check_gpu_operator, check_device_plugin, check_gfd, check_mig_strategy, check_mig_state,
    check_mig_manager, check_dcgm_exporter, check_dcgm_pod_labels, check_runtime_refuses_variable, check_pool_nodes,
    check_pool_hardware, check_tas_node_taints,
    check_admission, check_integrations, check_pod_security, check_external_ips, check_isolation_intact,
    check_tenant_roles,
    check_broad_bindings, check_multikueue,
)
CHECK_IDS = tuple(c.id for c in CHECKS)
COULD_NOT_READ = Text("Fix access to what it reads and run again.")


def run_checks(state: DesiredState, *, facts: Facts, request: FactsRequest,
               checks: tuple[Check, ...] = CHECKS) -> list[Result]:
    situation = Situation(state, state.scope, facts, request)
    results = []
    for check in checks:
        unread = [f"{source}: {facts.unreadable[source]}" for source in check.sources if source in facts.unreadable]
        if unread:
            why, fix = Text("could not check: {sources}", sources="; ".join(unread)), COULD_NOT_READ
            results.append(Result(check.id, check.name, Status.SKIP, why, fix, incomplete=True))
            continue
        outcome = check.function(situation)
        hint = outcome.hint if outcome.hint is not None else check.hint
        if outcome.status is Status.PASS:
            hint = ""
        results.append(Result(check.id, check.name, outcome.status, outcome.message, hint))
    return results
