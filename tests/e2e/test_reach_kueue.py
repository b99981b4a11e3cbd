"""Issue #39: what a queue can reach, computed once (gpugov.reach), is what the real Kueue v0.17.0 says.

Seeded generated states of cohort trees on the living sandbox: a root Cohort with or without quota of its
own, child Cohorts up to three levels with their own quotas, borrowing and lending limits, two to four
ClusterQueues per tree with nominal quotas, borrowing and lending limits on one to three flavors (and cpu
beside the GPUs in some trees), and Workloads of random sizes. Every state is created at once, each tree
in its own namespace; once Kueue has settled (every Workload admitted or evaluated, every ClusterQueue's
status counting its admitted Workloads, nothing changing for a few seconds), each pending Workload's
QuotaReserved message is read, after making Kueue evaluate every pending Workload once more (a message is
written when Kueue last looked, and Workloads admitted after that leave it behind; see `reevaluate`): for every "insufficient unused quota for R in flavor F, N more needed"
gpugov's deficit (gpugov.reach from the live ClusterQueues and Cohorts, as `gpugov why` reads them) must
be N, and the reason `gpugov why` gives it must carry N; for every "... > maximum capacity (C)" gpugov's
maximum must be C. Fair sharing on (the sandbox's Kueue configuration) and off (a sandbox of its own
without the fairSharing block).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from kubernetes import client

from gpugov.cluster.queues import read_queues
from gpugov.queueing.clusterqueue import cluster_queue
from gpugov.queueing.reasons import Why, explain, parse_message
from gpugov.queueing.workload import from_object
from gpugov.reach import Tree
from gpugov.sandbox import kueue as sandbox_kueue
from gpugov.sandbox.cluster import Sandbox
from tests.helpers.waiting import condition, wait_for

pytestmark = pytest.mark.e2e

KUEUE = ("kueue.x-k8s.io", "v1beta2")
SEED = 39
STATES = 16  # cohort trees per sandbox
GPU = "nvidia.com/gpu"
FLAVORS = ("rx-a", "rx-b", "rx-c")
PROBE = "rx-probe"
SETTLE_S = 240.0


def _resources(names: list[str], values: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    return [{"name": r, **values[r]} for r in names]


def _quota(rng: random.Random, resource: str, most: int, limits: bool, borrow_most: int | None = None) -> dict[str, str]:
    """A resource's quota: nominal, and (where `limits`) maybe a borrowing and a lending limit (at most
    the nominal quota, as Kueue's webhook wants); cpu in half cores."""
    def text(units: int) -> str:
        return f"{units * 500}m" if resource == "cpu" else str(units)

    scale = 2 if resource == "cpu" else 1
    nominal = rng.randint(0, most * scale)
    quota = {"nominalQuota": text(nominal)}
    if limits and rng.random() < (0.5 if borrow_most is None else 0.8):
        quota["borrowingLimit"] = text(rng.randint(0, (most - 2 if borrow_most is None else borrow_most) * scale))
    if limits and rng.random() < 0.4:
        quota["lendingLimit"] = text(rng.randint(0, nominal))
    return quota


def _groups(rng: random.Random, flavors: list[str], resources: list[str], most: int, limits: bool,
            borrow_most: int | None = None) -> list[dict[str, Any]]:
    return [{"coveredResources": resources, "flavors": [
        {"name": f, "resources": _resources(resources, {r: _quota(rng, r, most, limits, borrow_most) for r in resources})}
        for f in flavors]}]


def generate(rng: random.Random, prefix: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One state: its namespace, Cohorts, ClusterQueues, LocalQueues, and Workloads to submit."""
    flavors = rng.sample(FLAVORS, rng.randint(1, 3))
    resources = [GPU, "cpu"] if rng.random() < 0.3 else [GPU]
    objects: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": prefix}}]
    root = f"{prefix}-root"
    cohorts = [root]
    spec: dict[str, Any] = {}
    if rng.random() < 0.5:
        spec["resourceGroups"] = _groups(rng, flavors, resources, 6, limits=False)
    objects.append({"apiVersion": "/".join(KUEUE), "kind": "Cohort", "metadata": {"name": root}, "spec": spec})
    for j in range(rng.randint(1, 2)):
        name = f"{prefix}-c{j}"
        spec = {"parentName": rng.choice(cohorts)}
        if rng.random() < 0.8:  # small borrowing limits, so that a department's limit up the tree binds too
            spec["resourceGroups"] = _groups(rng, flavors, resources, 5, limits=True, borrow_most=2)
        objects.append({"apiVersion": "/".join(KUEUE), "kind": "Cohort", "metadata": {"name": name}, "spec": spec})
        cohorts.append(name)
    queues = []
    for j in range(rng.randint(2, 4)):
        name = f"{prefix}-q{j}"
        order = rng.sample(flavors, len(flavors))
        objects.append({"apiVersion": "/".join(KUEUE), "kind": "ClusterQueue", "metadata": {"name": name}, "spec": {
            "cohortName": rng.choice(cohorts[1:] if rng.random() < 0.7 else cohorts), "namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": _groups(rng, order, resources, 8, limits=True)}})
        objects.append({"apiVersion": "/".join(KUEUE), "kind": "LocalQueue",
                        "metadata": {"name": f"q{j}", "namespace": prefix}, "spec": {"clusterQueue": name}})
        queues.append(f"q{j}")
    # The probe: a queue of the tree whose quota nobody else can use (a flavor only it lists, nothing lent). A
    # change of its spec makes Kueue evaluate every pending Workload of the tree again (see `reevaluate`).
    objects.append({"apiVersion": "/".join(KUEUE), "kind": "ClusterQueue", "metadata": {"name": f"{prefix}-probe"},
                    "spec": {"cohortName": root, "namespaceSelector": {}, "resourceGroups": [{
                        "coveredResources": [GPU], "flavors": [{"name": PROBE, "resources": [
                            {"name": GPU, "nominalQuota": "1", "lendingLimit": "0"}]}]}]}})
    workloads = []
    for k in range(rng.randint(4, 9)):
        requests = {GPU: str(rng.randint(1, 8))}
        if "cpu" in resources:
            requests["cpu"] = f"{rng.randint(1, 8) * 500}m"
        workloads.append({"apiVersion": "/".join(KUEUE), "kind": "Workload",
                          "metadata": {"name": f"w{k}", "namespace": prefix},
                          "spec": {"queueName": rng.choice(queues), "podSets": [{
                              "name": "main", "count": 1, "template": {"spec": {
                                  "restartPolicy": "Never", "containers": [{
                                      "name": "main", "image": "registry.k8s.io/pause:3.10",
                                      "resources": {"requests": requests, "limits": requests}}]}}}]}})
    return objects, workloads


def create(api: client.ApiClient, states: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]) -> None:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    flavors = [{"apiVersion": "/".join(KUEUE), "kind": "ResourceFlavor", "metadata": {"name": f}, "spec": {}}
               for f in (*FLAVORS, PROBE)]
    for obj in flavors:
        try:
            custom.create_cluster_custom_object(*KUEUE, "resourceflavors", obj)
        except client.ApiException as exc:
            if exc.status != 409:
                raise
    for objects, _ in states:
        for obj in objects:
            if obj["kind"] == "Namespace":
                core.create_namespace(obj)
            elif obj["kind"] == "LocalQueue":
                custom.create_namespaced_custom_object(*KUEUE, obj["metadata"]["namespace"], "localqueues", obj)
            else:
                custom.create_cluster_custom_object(*KUEUE, f"{obj['kind'].lower()}s", obj)
    time.sleep(2)  # Kueue's cache takes up the queues before the first Workload arrives
    for _, workloads in states:
        for w in workloads:
            custom.create_namespaced_custom_object(*KUEUE, w["metadata"]["namespace"], "workloads", w)


def _usage(w: dict[str, Any]) -> dict[tuple[str, str], Decimal]:
    from gpugov.kube.quantity import parse_quantity

    held: dict[tuple[str, str], Decimal] = {}
    for ps in (w.get("status", {}).get("admission") or {}).get("podSetAssignments") or []:
        for resource, amount in (ps.get("resourceUsage") or {}).items():
            key = (ps["flavors"][resource], resource)
            held[key] = held.get(key, Decimal(0)) + parse_quantity(amount)
    return held


def observe(api: client.ApiClient, prefixes: set[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
    """(this run's Workloads, ClusterQueues and Cohorts, whether every Workload is decided and every
    ClusterQueue's status counts exactly its admitted Workloads)."""
    custom = client.CustomObjectsApi(api)
    workloads = [w for w in custom.list_cluster_custom_object(*KUEUE, "workloads")["items"]
                 if w["metadata"]["namespace"] in prefixes]
    queues = [q for q in custom.list_cluster_custom_object(*KUEUE, "clusterqueues")["items"]
              if q["metadata"]["name"].split("-")[0] in prefixes]
    cohorts = [c for c in custom.list_cluster_custom_object(*KUEUE, "cohorts")["items"]
               if c["metadata"]["name"].split("-")[0] in prefixes]
    decided = all(condition(w, "QuotaReserved").get("status") == "True"
                  or condition(w, "QuotaReserved").get("message") for w in workloads)
    from gpugov.kube.quantity import parse_quantity

    held: dict[str, dict[tuple[str, str], Decimal]] = {}
    for w in workloads:
        if condition(w, "QuotaReserved").get("status") == "True":
            cq = w["status"]["admission"]["clusterQueue"]
            for key, amount in _usage(w).items():
                held.setdefault(cq, {})[key] = held.setdefault(cq, {}).get(key, Decimal(0)) + amount
    counted = True
    for q in queues:
        status = {(f["name"], r["name"]): parse_quantity(r.get("total") or 0)
                  for f in (q.get("status") or {}).get("flavorsReservation") or [] for r in f.get("resources") or []}
        if {k: v for k, v in status.items() if v} != {k: v for k, v in held.get(q["metadata"]["name"], {}).items() if v}:
            counted = False
    return workloads, [*queues, *cohorts], decided and counted


def settle(api: client.ApiClient, prefixes: set[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The Workloads and queues once nothing has changed for 5 s and everything is decided and counted."""
    deadline = time.monotonic() + SETTLE_S
    last: object = None
    since = time.monotonic()
    while True:
        workloads, queues, ready = observe(api, prefixes)
        seen = sorted((w["metadata"]["namespace"], w["metadata"]["name"], condition(w, "QuotaReserved").get("status"),
                       condition(w, "QuotaReserved").get("message")) for w in workloads)
        if seen != last or not ready:
            last, since = seen, time.monotonic()
        elif time.monotonic() - since >= 5:
            return workloads, queues
        assert time.monotonic() < deadline, "Kueue did not settle"
        time.sleep(1)


def reevaluate(api: client.ApiClient, prefixes: set[str]) -> None:
    """Make Kueue evaluate every pending Workload again against what is admitted now. Kueue writes a
    Workload's message when it last evaluated it, and admitting another Workload of the tree afterwards
    does not make it look again (only a change that may free quota does: a Workload leaving, a queue's spec
    changing), so a message can name a deficit smaller than today's. A change of each tree's probe queue
    frees nothing anyone else can use, so nothing more is admitted and every message is today's."""
    custom = client.CustomObjectsApi(api)
    generations = {}
    for prefix in sorted(prefixes):
        patched = custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", f"{prefix}-probe", {"spec": {
            "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": PROBE, "resources": [
                {"name": GPU, "nominalQuota": "2", "lendingLimit": "0"}]}]}]}})
        generations[f"{prefix}-probe"] = patched["metadata"]["generation"]

    # Kueue requeues the tree's pending Workloads in its ClusterQueue update handler, before it reconciles the
    # queue, whose Active condition then observes the patched generation (clusterqueue_controller.go Update,
    # updateCqStatusIfChanged): once every probe's does, each tree's re-evaluation is under way and `settle`
    # waits for it to end. A fixed pause stood for that, which a loaded machine could outlast.
    def observed(name: str, generation: int) -> bool:
        active = condition(custom.get_cluster_custom_object(*KUEUE, "clusterqueues", name), "Active")
        return int(active.get("observedGeneration") or 0) >= generation

    wait_for(lambda: all(observed(name, generation) for name, generation in generations.items()),
             "Kueue to take up the probe queues' change", timeout=60)


def check(api: client.ApiClient, workloads: list[dict[str, Any]], objects: list[dict[str, Any]]) -> dict[str, int]:
    """Every number of every pending Workload's message against gpugov's; counts of what was checked."""
    tree = Tree(objects)
    queues = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterQueue"}
    local = {(w["metadata"]["namespace"], w["spec"]["queueName"]): f"{w['metadata']['namespace']}-{w['spec']['queueName']}"
             for w in workloads}
    seen = {"admitted": 0, "pending": 0, "unused": 0, "maximum": 0, "own-limit": 0, "cohort-limit": 0,
            "tree-quota": 0, "borrowing-limit-reason": 0}
    wrong: list[str] = []
    for raw in workloads:
        reserved = condition(raw, "QuotaReserved")
        if reserved.get("status") == "True":
            seen["admitted"] += 1
            continue
        seen["pending"] += 1
        cq = local[(raw["metadata"]["namespace"], raw["spec"]["queueName"])]
        record = from_object(raw)
        message = reserved["message"]
        facts = [f for f in parse_message(message).facts if f.kind in ("unused", "maximum")]
        name = f"{raw['metadata']['namespace']}/{raw['metadata']['name']}"
        if not facts:
            wrong.append(f"{name}: no quota fact in Kueue's message: {message}")
            continue
        for fact in facts:
            room = tree.room(cq, fact.flavor, fact.resource)
            request = record.requests.get(fact.resource, Decimal(0))
            if room is None:
                wrong.append(f"{name}: gpugov knows no {fact.resource} in flavor {fact.flavor} of {cq}")
            elif fact.kind == "unused":
                seen["unused"] += 1
                seen["own-limit" if room.limited_by_own else "cohort-limit" if room.limited_by else "tree-quota"] += 1
                if room.deficit(request) != fact.amount:
                    wrong.append(f"{name}: {fact.resource} in {fact.flavor}: Kueue {fact.amount} more needed, gpugov "
                                 f"{room.deficit(request)} (available {room.available}, held {room.held}): {message}")
            else:
                seen["maximum"] += 1
                if room.maximum != fact.maximum or not room.never_fits(request):
                    wrong.append(f"{name}: {fact.resource} in {fact.flavor}: Kueue's maximum capacity {fact.maximum}, "
                                 f"gpugov {room.maximum}: {message}")
        reason = explain(record, cluster_queue(queues[cq]), tree=tree)
        said = {(f.flavor, f.resource): f.amount for f in facts if f.kind == "unused"}
        if reason.why in (Why.QUOTA, Why.BORROWING_LIMIT):
            seen["borrowing-limit-reason"] += reason.why == Why.BORROWING_LIMIT
            told = {(d.pool, d.resource): d.more for d in reason.deficits}
            if told != said:
                wrong.append(f"{name}: `gpugov why` tells {told}, Kueue says {said}: {message}")
        elif said:
            wrong.append(f"{name}: `gpugov why` says {reason.why.value} where Kueue waits for {said}: {message}")
    assert not wrong, "\n".join(wrong)
    return seen


def run_states(api: client.ApiClient, mode: str) -> dict[str, int]:
    rng = random.Random(f"{SEED}-{mode}")
    states = [generate(rng, f"rx{mode}{i}") for i in range(STATES)]
    create(api, states)
    prefixes = {f"rx{mode}{i}" for i in range(STATES)}
    before, _ = settle(api, prefixes)
    reevaluate(api, prefixes)
    workloads, objects = settle(api, prefixes)
    admitted = {(w["metadata"]["namespace"], w["metadata"]["name"]) for w in before
                if condition(w, "QuotaReserved").get("status") == "True"}
    assert admitted == {(w["metadata"]["namespace"], w["metadata"]["name"]) for w in workloads
                        if condition(w, "QuotaReserved").get("status") == "True"}, "the probe let a Workload in"
    seen = check(api, workloads, objects)
    said_before = {(w["metadata"]["namespace"], w["metadata"]["name"]): condition(w, "QuotaReserved").get("message")
                   for w in before}
    seen["stale-before"] = sum(condition(w, "QuotaReserved").get("message") != said_before.get(
        (w["metadata"]["namespace"], w["metadata"]["name"])) for w in workloads
        if condition(w, "QuotaReserved").get("status") != "True")
    # What the command reads: the same trees from `read_queues` (ClusterQueues and Cohorts, live).
    read = read_queues(api, with_positions=False)
    assert read.cohorts is not None
    live = Tree([*read.cluster_queues, *read.cohorts])
    for name in (o["metadata"]["name"] for o in objects if o["kind"] == "ClusterQueue"):
        assert live.maximum(name) == Tree(objects).maximum(name)
    print(f"fair sharing {mode}: {seen}")
    # Generated to reach every case: waits for the tree's quota, a queue's own and a cohort's borrowing limit,
    # jobs larger than their queue may ever hold.
    assert seen["pending"] >= 20 and seen["unused"] >= 15 and seen["maximum"] >= 3, seen
    assert seen["own-limit"] and seen["tree-quota"] and seen["cohort-limit"], seen
    return seen


@pytest.fixture(scope="module")
def without_fair_sharing() -> Iterator[Sandbox]:
    """A sandbox whose Kueue runs without the fairSharing block (fair sharing off)."""
    plain = sandbox_kueue.configuration

    def configuration(*args: Any, **kwargs: Any) -> dict[str, Any]:
        config = plain(*args, **kwargs)
        config.pop("fairSharing", None)
        return config

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sandbox_kueue, "configuration", configuration)
        with Sandbox() as sandbox:
            yield sandbox


@pytest.fixture(scope="module")
def with_fair_sharing() -> Iterator[Sandbox]:
    """A sandbox of its own (Kueue with fair sharing, as the session's): the generated cohort trees stay out of
    the session's sandbox, whose other tests read every ClusterQueue on it."""
    with Sandbox() as sandbox:
        yield sandbox


def test_deficits_are_kueues_own_with_fair_sharing(with_fair_sharing: Sandbox) -> None:
    run_states(with_fair_sharing.cp.api_client(), "on")


def test_deficits_are_kueues_own_without_fair_sharing(without_fair_sharing: Sandbox) -> None:
    run_states(without_fair_sharing.cp.api_client(), "off")
