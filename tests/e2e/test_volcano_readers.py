"""`gpugov queue` and `gpugov why` on the real Volcano (v1.14.1): what gpugov says is short equals
what the scheduler computes and does.

One Volcano sandbox for this module, cluster ``west`` applied (pool ascend-910b: 4 nodes x 8 Ascend
910B; research: llm-pretrain guarantee 8, speech no guarantee; product: recsys capability 16), its
scheduler run with ``--enable-metrics`` so that the capacity plugin's own realCapability and
allocated per queue can be read and compared with gpugov's (gpugov.queueing.volcano).
"""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpugov.cli import main
from gpugov.cluster.apply import apply_objects
from gpugov.cluster.volcano_queues import read_volcano
from gpugov.compile.volcano_scheduler import CONFIG_KEY
from gpugov.queueing.reasons import Why
from gpugov.queueing.volcano import refusal
from gpugov.queueing.volcano_report import Entry, View, view
from gpugov.sandbox import volcano as volcano_mod
from gpugov.sandbox.cluster import Sandbox
from gpugov.sandbox.nodes import create_nodes
from gpugov.sandbox.simulated import simulated_nodes
from tests.e2e.test_volcano_contract import (
    ASCEND,
    bound,
    eventually,
    job,
    podgroup_of,
    pods_of,
    west_objects,
)
from tests.helpers.repos import REPO

pytestmark = pytest.mark.e2e

TENANT_NAMESPACES = ("llm-pretrain", "recsys", "speech")


@pytest.fixture(scope="module")
def west(sandbox_binaries: dict[str, Any]) -> Iterator[Sandbox]:
    """West on the real Volcano, its scheduler serving its metrics."""
    from gpugov.app.pipeline import validate_repo

    objects = west_objects()
    conf = next(o["data"][CONFIG_KEY] for o in objects if CONFIG_KEY in o.get("data", {}))
    model = validate_repo(REPO).model
    assert model is not None
    original = volcano_mod.Volcano.__init__

    def with_metrics(self: volcano_mod.Volcano, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.scheduler.args = [*self.scheduler.args, "--enable-metrics=true"]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(volcano_mod.Volcano, "__init__", with_metrics)
        sandbox = Sandbox(backend="volcano", volcano_conf=conf)
        sandbox.__enter__()
    try:
        api = sandbox.cp.api_client()
        create_nodes(api, simulated_nodes(model, "west"), kwok=True)
        assert not apply_objects(api, objects).missing
        yield sandbox
    finally:
        sandbox.__exit__(None, None, None)


@pytest.fixture
def api(west: Sandbox) -> Iterator[client.ApiClient]:
    api = west.cp.api_client()
    yield api
    delete_jobs(api)


def delete_jobs(api: client.ApiClient) -> None:
    """Remove every Job of the test in west's tenant namespaces and wait until their pods are gone (a pod may be
    gone already when it is deleted)."""
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    for namespace in TENANT_NAMESPACES:
        for j in batch.list_namespaced_job(namespace).items:
            batch.delete_namespaced_job(j.metadata.name, namespace, propagation_policy="Background",
                                        grace_period_seconds=0)

    def gone() -> bool:
        left = False
        for namespace in TENANT_NAMESPACES:
            for p in core.list_namespaced_pod(namespace).items:
                left = True
                try:
                    core.delete_namespaced_pod(p.metadata.name, namespace, grace_period_seconds=0)
                except ApiException as exc:
                    if exc.status != 404:
                        raise
        return not left
    eventually(gone, 60, "the test's pods gone")


def metrics(west: Sandbox) -> dict[tuple[str, str, str], Decimal]:
    """(metric, queue, resource) -> value, from vc-scheduler's /metrics (scalars in milli units, as it keeps them)."""
    assert west.volcano is not None
    address = next(a.split("=", 1)[1] for a in west.volcano.scheduler.args if a.startswith("--listen-address="))
    text = urllib.request.urlopen(f"http://{address}/metrics", timeout=10).read().decode()
    found = {}
    for m in re.finditer(r'^volcano_(queue_\w+)\{([^}]*)\} (\S+)$', text, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m[2]))
        found[(m[1], labels.get("queue_name", ""), labels.get("resource", ""))] = Decimal(m[3])
    return found


def gpugov_view(api: client.ApiClient) -> View:
    from datetime import UTC, datetime

    from gpugov.app.pipeline import validate_repo

    model = validate_repo(REPO).model
    assert model is not None
    read = read_volcano(api, TENANT_NAMESPACES)
    return view(datetime.now(UTC), model.tenant_of_namespace(), read.queues, read.nodes, read.podgroups, read.pods,
                read.jobs, read.failed_create)


def listed(api: client.ApiClient, namespace: str, name: str) -> Entry | None:
    """gpugov's entry for the job, or None while its view does not list it yet (a Job just created)."""
    return next((e for e in gpugov_view(api).entries if e.job.namespace == namespace and e.job.job == name), None)


def entry_of(api: client.ApiClient, namespace: str, name: str) -> Entry:
    entry = listed(api, namespace, name)
    assert entry is not None, f"gpugov's view does not list {namespace}/{name}"
    return entry


def refused(api: client.ApiClient, namespace: str, name: str) -> Entry | None:
    """The job's entry once gpugov tells a refusal for it."""
    entry = listed(api, namespace, name)
    return entry if entry is not None and entry.verdict.refusal else None


def condition(api: client.ApiClient, namespace: str, name: str) -> str:
    for c in podgroup_of(api, namespace, name).get("status", {}).get("conditions", []):
        if c.get("type") == "Unschedulable" and c.get("status") == "True":
            return c.get("message", "")
    return ""


def cli(west: Sandbox, capsys: pytest.CaptureFixture[str], *args: str, after: tuple[str, ...] = ()) -> tuple[int, str]:
    capsys.readouterr()
    code = main([*args, str(REPO), "--cluster", "west", "--kubeconfig", str(west.cp.kubeconfig), *after])
    return code, capsys.readouterr().out


def test_real_capability_is_the_schedulers_own(west: Sandbox, api: client.ApiClient) -> None:
    """Every queue's real capability as gpugov computes it equals the capacity plugin's (its metric), on every
    resource: speech 24 (research's 32 less llm-pretrain's guarantee 8), recsys 16 (its capability), root 32."""
    eventually(lambda: ("queue_real_capacity_scalar_resources", "speech", ASCEND) in metrics(west), 60,
               "the scheduler's queue metrics")
    capacity = gpugov_view(api).capacity
    seen = metrics(west)
    for name, c in capacity.items():
        assert seen[("queue_real_capacity_scalar_resources", name, ASCEND)] / 1000 == c.real[ASCEND], name
        assert seen[("queue_real_capacity_milli_cpu", name, "")] / 1000 == c.real["cpu"], name
        assert seen[("queue_real_capacity_memory_bytes", name, "")] == c.real["memory"], name
    assert (capacity["speech"].real[ASCEND], capacity["recsys"].real[ASCEND], capacity["root"].real[ASCEND]) == (
        24, 16, 32)


def test_a_job_beyond_its_queues_real_capability_waits_by_what_gpugov_says(
        west: Sandbox, api: client.ApiClient, capsys: pytest.CaptureFixture[str]) -> None:
    """speech (no guarantee) holds 24 of a 32 pool; its 4th job of 8 waits though 8 are free: Volcano says only
    that the task is unschedulable (volcano#4311); gpugov says speech's real capability is 24 and 8 more are
    needed, which is the scheduler's own realCapability and allocated; releasing 8 lets it run."""
    running = [job(api, "speech") for _ in range(3)]
    eventually(lambda: all(len(bound(pods_of(api, "speech", j))) == 1 for j in running), 90, "speech at 24")
    waiting = job(api, "speech")
    said = eventually(lambda: condition(api, "speech", waiting), 60, "Volcano's Unschedulable condition")
    assert "1 Pending, 1 minAvailable" in said and "pod group is not ready" in said
    assert bound(pods_of(api, "speech", waiting)) == []
    e = entry_of(api, "speech", waiting)
    assert e.verdict.why == Why.QUOTA and not e.verdict.finding
    assert [(s.queue, s.resource, s.asks, s.held, s.real, s.more) for s in e.verdict.shortfalls] == [
        ("speech", ASCEND, 8, 24, 24, 8)]
    seen = eventually(lambda: (m := metrics(west)).get(("queue_allocated_scalar_resources", "speech", ASCEND)) == 24000
                      and m, 30, "the scheduler's allocated")
    short = e.verdict.shortfalls[0]
    assert short.more == (seen[("queue_allocated_scalar_resources", "speech", ASCEND)]
                          + 8000 - seen[("queue_real_capacity_scalar_resources", "speech", ASCEND)]) / 1000
    assert e.verdict.volcano == said
    code, out = cli(west, capsys, "why", f"speech/{waiting}")
    assert code == 0
    assert "queue speech may hold 24 huawei.com/Ascend910" in out and "8 more needed" in out
    assert f"Volcano: {said}" in out
    code, out = cli(west, capsys, "queue", "--tenant", "speech")
    assert code == 0 and f"speech/{waiting}" in out and "8 more needed" in out
    # A member of speech may not list nodes nor read recsys: the same answer, from the declared pools, and said so.
    code, out = cli(west, capsys, "why", f"speech/{waiting}",
                    after=("--as", "intern@example.com", "--as-group", "speech-interns"))
    assert code == 0 and "queue speech may hold 24 huawei.com/Ascend910" in out and "8 more needed" in out
    assert "computed from the declared pools: you may not list nodes" in out
    assert "not shown: namespace recsys" in out
    client.BatchV1Api(api).delete_namespaced_job(running[0], "speech", propagation_policy="Background",
                                                 grace_period_seconds=0)
    eventually(lambda: len(bound(pods_of(api, "speech", waiting))) == 1, 120, "the waiting job bound once 8 are freed")


def test_a_gang_beyond_its_queues_real_capability_never_starts(
        west: Sandbox, api: client.ApiClient, capsys: pytest.CaptureFixture[str]) -> None:
    """A speech gang of 4 x 8 (32, within its namespace quota) on an idle pool of 32: every pod exists, none is
    bound; gpugov says never, as declared: speech may hold at most 24."""
    name = job(api, "speech", pods=4)
    eventually(lambda: len(pods_of(api, "speech", name)) == 4, 60, "the gang's 4 pods")
    said = eventually(lambda: condition(api, "speech", name), 60, "Volcano's Unschedulable condition")
    assert "pod group is not ready" in said and "4 minAvailable" in said
    time.sleep(3)
    assert bound(pods_of(api, "speech", name)) == []
    e = entry_of(api, "speech", name)
    assert e.verdict.why == Why.NEVER_FITS and e.verdict.finding
    never = [s for s in e.verdict.shortfalls if s.never]
    assert [(s.queue, s.asks, s.real) for s in never if s.resource == ASCEND] == [("speech", 32, 24)]
    code, out = cli(west, capsys, "why", f"speech/{name}")
    assert code == 1 and "never, as declared" in out and "queue speech may hold at most 24" in out


def test_a_pod_the_tenants_quota_refuses_is_told_by_how_much(
        west: Sandbox, api: client.ApiClient, capsys: pytest.CaptureFixture[str]) -> None:
    """recsys at its ceiling (16) on an idle pool: its third job of 8 has no pod (the namespace's ResourceQuota
    refuses it) and so no PodGroup; gpugov reads the Job's FailedCreate event and says 8 more are needed, the
    apiserver's own used + requested - limited. A gang of 5 x 8 in llm-pretrain (ceiling 32) never starts."""
    jobs = [job(api, "recsys") for _ in range(3)]
    eventually(lambda: sum(len(bound(pods_of(api, "recsys", j))) for j in jobs) == 2, 90, "recsys at 16")
    waiting = next(j for j in jobs if not pods_of(api, "recsys", j))
    e = eventually(lambda: refused(api, "recsys", waiting), 60, "the FailedCreate event")
    events = client.CoreV1Api(api).list_namespaced_event(
        "recsys", field_selector=f"involvedObject.name={waiting},reason=FailedCreate").items
    apiserver = refusal(events[-1].message)
    assert apiserver is not None and (apiserver.requested, apiserver.used, apiserver.limited) == (8, 16, 16)
    assert e.verdict.why == Why.QUOTA and e.verdict.refusal is not None
    assert e.verdict.refusal.more == apiserver.used + apiserver.requested - apiserver.limited == 8
    assert e.job.podgroup == ""
    gang = job(api, "llm-pretrain", pods=5)
    # The job controller creates the gang's pods side by side: the fifth's refusal can be told while the
    # fourth, already charged to the quota, is not yet stored; the count settles at 4.
    g = eventually(lambda: (e := refused(api, "llm-pretrain", gang)) and e.job.pods == 4 and e, 60,
                   "the gang's refusal with its 4 pods")
    assert g.verdict.why == Why.NEVER_FITS and g.job.asks[ASCEND] == 40
    code, out = cli(west, capsys, "queue")
    assert code == 1 and f"recsys/{waiting}" in out and f"llm-pretrain/{gang}" in out


def test_drift_sees_a_queue_moved_closed_or_a_scheduler_configuration_edited_by_hand(
        west: Sandbox, api: client.ApiClient, capsys: pytest.CaptureFixture[str]) -> None:
    """gpugov declares every Queue's parent (root for a department), so a department moved under another by hand
    is drift (GD002 on spec.parent), as is a tenant's queue moved; a Queue closed (its status, which the queue
    controller keeps) is GD028; the scheduler's configuration ConfigMap edited by hand is GD002. Applying again
    restores all but the state, which drift keeps reporting until it is Open."""
    import json

    custom = client.CustomObjectsApi(api)
    eventually(lambda: all(custom.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", n)
                           .get("status", {}).get("state") == "Open" for n in TENANT_NAMESPACES), 60, "queues Open")
    code, out = cli(west, capsys, "drift", "--format", "json")
    # Fresh from apply, no object differs from its declaration (a PriorityClass compiled with
    # globalDefault: false once read as drift: the API server stores false as absent).
    assert not [f for f in json.loads(out)["findings"] if f["rule"] in ("GD002", "GD028")], out
    hand = {"field_manager": "someone-by-hand"}
    custom.patch_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", "product",
                                       {"spec": {"parent": "research"}}, **hand)
    custom.patch_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", "recsys",
                                       {"spec": {"parent": "research"}}, **hand)
    custom.patch_cluster_custom_object_status("scheduling.volcano.sh", "v1beta1", "queues", "speech",
                                              {"status": {"state": "Closed"}})
    client.CoreV1Api(api).patch_namespaced_config_map(
        "volcano-scheduler-configmap", "volcano-system", {"data": {CONFIG_KEY: "actions: allocate\n"}}, **hand)
    time.sleep(3)  # the queue controller's resync: a closed Queue stays closed
    assert custom.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", "speech")["status"][
        "state"] == "Closed"
    code, out = cli(west, capsys, "drift", "--format", "json")
    found = {(f["rule"], f["object"], f.get("field", ""), f.get("declared", ""), f.get("live", ""))
             for f in json.loads(out)["findings"]}
    assert code == 1
    assert ("GD002", "Queue product", "spec.parent", "root", "research") in found
    assert ("GD002", "Queue recsys", "spec.parent", "product", "research") in found
    assert ("GD028", "Queue speech", "status.state", "Open", "Closed") in found
    assert any(r == "GD002" and o == "ConfigMap volcano-system/volcano-scheduler-configmap" for r, o, *_ in found)
    assert apply_objects(api, west_objects()).missing == []
    custom.patch_cluster_custom_object_status("scheduling.volcano.sh", "v1beta1", "queues", "speech",
                                              {"status": {"state": "Open"}})
    code, out = cli(west, capsys, "drift", "--format", "json")
    assert not [f for f in json.loads(out)["findings"] if f["rule"] in ("GD002", "GD028")
                and ("Queue" in f["object"] or "volcano-scheduler" in f["object"])], out


def test_the_ledger_counts_what_volcano_bound(west: Sandbox, api: client.ApiClient,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """`gpugov usage` on Volcano: a speech job of 8 Ascend that ran a few seconds is charged 8 x its pod's bound
    time (PodScheduled to its container's finishedAt, as the pod records them) to speech on ascend-910b."""
    import json
    from datetime import UTC
    from decimal import Decimal

    name = job(api, "speech", run_for="4s")
    pod = eventually(lambda: next((p for p in pods_of(api, "speech", name) if p.status.phase == "Succeeded"), None),
                     120, "the job's pod finished")
    assert podgroup_of(api, "speech", name)["spec"]["queue"] == "speech"
    scheduled = next(c.last_transition_time for c in pod.status.conditions if c.type == "PodScheduled")
    finished = max(s.state.terminated.finished_at for s in pod.status.container_statuses)
    assert finished > scheduled
    since = scheduled.astimezone(UTC).replace(microsecond=0)
    code, out = cli(west, capsys, "usage", "--since", since.strftime("%Y-%m-%dT%H:%M:%SZ"), "--no-idle",
                    "--format", "json")
    assert code == 0
    rows = {(r["tenant"], r["pool"], r["resource"]): r for r in json.loads(out)["rows"]}
    charged = Decimal(rows[("speech", "ascend-910b", ASCEND)]["admitted_hours"])
    seconds = int((finished - scheduled).total_seconds())
    assert seconds >= 4 and charged == (Decimal(8 * seconds) / 3600).quantize(Decimal("0.000001"))  # JSON: 6 places
    assert Decimal(rows[("recsys", "ascend-910b", ASCEND)]["admitted_hours"]) == 0
