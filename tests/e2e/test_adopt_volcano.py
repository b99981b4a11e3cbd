"""Issue #37 on the real Volcano scheduler (v1.14.1): `gpugov import --kubeconfig` of a cluster that runs Volcano.

One Volcano sandbox for this module, with the example org's cluster west applied as `gpugov apply` applies it
(test_volcano_contract's ``west`` fixture). First west is imported from the live cluster into a fresh folder: it
validates, compiles back to the same Queues, `gpugov drift` finds nothing on them and apply --dry-run deletes
nothing. Then a Volcano configuration written by hand (not gpugov's: a parent Queue without a parent field,
tenants known only by their PodGroups) is applied beside it, with jobs running and waiting; it is imported, the
import applied for real, and Volcano keeps running what ran and keeps waiting what waited, for the same reason.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gpugov.adopt.canonical import queue_view
from gpugov.app.pipeline import validate_repo
from gpugov.cli import main
from gpugov.compile import compile
from gpugov.sandbox import samples
from gpugov.sandbox.cluster import Sandbox
from tests.e2e.test_volcano_contract import ASCEND, VOLCANO, bound, pods_of, west, west_objects
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.e2e
__all__ = ["west"]  # the module's sandbox: test_volcano_contract's fixture, one instance for this module

HAND = ("hw-org", "hw-a", "hw-b")  # the hand-written queues
GROUP = "ascend-910b"  # the node group west's nodes carry


def gpugov(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def live_queues(api: client.ApiClient) -> dict[str, dict[str, Any]]:
    items = client.CustomObjectsApi(api).list_cluster_custom_object(*VOLCANO, "queues")["items"]
    return {q["metadata"]["name"]: q for q in items}


def imported(capsys: pytest.CaptureFixture[str], sandbox: Sandbox, out: Path) -> dict[str, Any]:
    code, text, err = gpugov(capsys, "import", "--kubeconfig", str(sandbox.cp.kubeconfig), "--cluster", "west",
                             "--out", str(out), "--format", "json")
    assert code in (0, 1) and text.strip(), text + err
    return json.loads(text)


@pytest.fixture
def api(west: Sandbox) -> Iterator[client.ApiClient]:
    yield west.cp.api_client()


def test_west_imported_from_the_live_cluster_changes_nothing(west: Sandbox, api: client.ApiClient, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    org = west_objects()
    repo = tmp_path / "imported"
    report = imported(capsys, west, repo)
    names = {f"{o['kind']} {o['metadata'].get('namespace') + '/' if o['metadata'].get('namespace') else ''}"
             f"{o['metadata']['name']}" for o in org}
    # Volcano's own default queue is a gap (gpugov declares no tenant for it); nothing of west is.
    assert [g for g in report["notExpressed"] if g["object"] in names] == [], report["notExpressed"]
    assert [(g["object"], g["field"]) for g in report["notExpressed"]] == [("Queue default", "(object)")], report
    assert "default queue" in report["notExpressed"][0]["why"]  # the one vc-scheduler makes at start, with why
    assert {(t["kind"], t["name"]) for t in report["takeOver"]} >= {
        ("Queue", q["metadata"]["name"]) for q in org if q["kind"] == "Queue"}
    code, out, err = gpugov(capsys, "validate", str(repo))
    assert code == 0, out + err
    validation = validate_repo(repo)
    assert validation.model is not None and validation.model.cluster("west").backend == "volcano"
    again = {o["metadata"]["name"]: queue_view(o) for o in compile(validation.model, cluster="west")
             if o["kind"] == "Queue"}
    original = {o["metadata"]["name"]: queue_view(o) for o in org if o["kind"] == "Queue"}
    assert again == original
    # And the live Queues read back the same (the queue controller's own fields aside).
    assert {n: queue_view(q) for n, q in live_queues(api).items() if n in original} == original

    kubeconfig = str(west.cp.kubeconfig)
    code, out, err = gpugov(capsys, "drift", str(repo), "--cluster", "west", "--kubeconfig", kubeconfig,
                            "--format", "json")
    findings = [f for f in json.loads(out)["findings"] if f["level"] != "info"]
    # Nothing of west differs: its Queues, PriorityClasses, scheduler ConfigMap, nodes, namespaces, bindings, policies.
    assert [f for f in findings if f.get("object") in names] == [], findings
    code, out, err = gpugov(capsys, "apply", str(repo), "--cluster", "west", "--kubeconfig", kubeconfig, "--dry-run")
    assert code == 0, out + err
    assert [line for line in out.splitlines() if line.startswith(("would delete", "would release"))] == [], out
    rows = [line.split() for line in out.splitlines()]
    for name in original:  # written as they are: at most gpugov.io/source (the imported file's line) changes
        assert any(words[:3] == ["unchanged", "Queue", name] or words[:4] == ["would", "configure", "Queue", name]
                   for words in rows), (name, out)


def _queue(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "/".join(VOLCANO), "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def _job(api: client.ApiClient, namespace: str, queue: str) -> str:
    sample = samples.SampleJob(namespace, namespace, f"{namespace}-{uuid.uuid4().hex[:6]}", queue, queue, GROUP,
                               ASCEND, backend="volcano")
    client.BatchV1Api(api).create_namespaced_job(namespace, samples.job_manifest(sample, None, pods=1, amount=8))
    return sample.name


def _podgroup(api: client.ApiClient, namespace: str) -> list[dict[str, Any]]:
    return client.CustomObjectsApi(api).list_namespaced_custom_object(*VOLCANO, namespace, "podgroups")["items"]


def _waiting_reason(api: client.ApiClient, namespace: str, job_name: str) -> str | None:
    """The reason Volcano gives on the PodGroup of a job whose pod is not bound (None while it has none)."""
    pods = pods_of(api, namespace, job_name)
    if not pods or bound(pods):
        return None
    uid = client.BatchV1Api(api).read_namespaced_job(job_name, namespace).metadata.uid
    for group in _podgroup(api, namespace):
        if any(o.get("uid") == uid for o in group["metadata"].get("ownerReferences", [])):
            for condition in (group.get("status") or {}).get("conditions") or []:
                if condition.get("type") == "Unschedulable" and condition.get("status") == "True":
                    return str(condition.get("reason"))
    return None


def _placed(api: client.ApiClient, namespace: str, job_name: str) -> tuple[str, str] | None:
    pods = bound(pods_of(api, namespace, job_name))
    return (pods[0].metadata.uid, pods[0].spec.node_name) if len(pods) == 1 else None


def test_a_hand_written_volcano_configuration_imported_and_applied_schedules_the_same(
        west: Sandbox, api: client.ApiClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    for namespace in ("hw-a", "hw-b"):
        core.create_namespace({"metadata": {"name": namespace}})
    affinity = {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [GROUP]}}
    # Written by hand: the parent names no parent (Volcano reads root), no gpugov label, tenants known to Volcano
    # only by the queue their pods name. hw-a may borrow 8 and no more; hw-b as much as the pool has idle.
    for queue in (_queue("hw-org", weight=2, reclaimable=True),
                  _queue("hw-a", parent="hw-org", capability={ASCEND: "8"}, affinity=affinity),
                  _queue("hw-b", parent="hw-org", weight=3, affinity=affinity)):
        custom.create_cluster_custom_object(*VOLCANO, "queues", queue)
    for name in HAND:
        eventually(lambda n=name: live_queues(api)[n].get("status", {}).get("state") == "Open", 60, f"{name} Open")
    running_a, running_b = _job(api, "hw-a", "hw-a"), _job(api, "hw-b", "hw-b")
    eventually(lambda: _placed(api, "hw-a", running_a) and _placed(api, "hw-b", running_b), 90, "both jobs running")
    waiting = _job(api, "hw-a", "hw-a")  # hw-a at its capability of 8: waits though the pool has room
    reason = eventually(lambda: _waiting_reason(api, "hw-a", waiting), 60, "the second hw-a job waiting, with a reason")
    before = {"a": _placed(api, "hw-a", running_a), "b": _placed(api, "hw-b", running_b)}
    queues_before = {n: queue_view(q) for n, q in live_queues(api).items() if n in HAND}

    repo = tmp_path / "imported"
    report = imported(capsys, west, repo)
    assert [g for g in report["notExpressed"] if g["object"].split(" ", 1)[1] in HAND] == [], report["notExpressed"]
    assert {(t["kind"], t["name"]) for t in report["takeOver"]} >= {("Queue", n) for n in HAND}
    validation = validate_repo(repo)
    assert validation.model is not None and not validation.errors, validation.errors
    assert validation.model.tenants["hw-a"].namespaces == ("hw-a",)  # from its PodGroups
    assert validation.model.tenants["hw-a"].department == "hw-org"
    again = {o["metadata"]["name"]: queue_view(o) for o in compile(validation.model, cluster="west")
             if o["kind"] == "Queue" and o["metadata"]["name"] in HAND}
    assert again == queues_before

    code, out, err = gpugov(capsys, "apply", str(repo), "--cluster", "west", "--kubeconfig", str(west.cp.kubeconfig))
    assert code == 0, out + err
    labels = {n: q["metadata"].get("labels", {}) for n, q in live_queues(api).items() if n in HAND}
    assert all(v.get("app.kubernetes.io/managed-by") == "gpugov" for v in labels.values()), labels  # taken over
    assert {n: queue_view(q) for n, q in live_queues(api).items() if n in HAND} == queues_before
    code, out, err = gpugov(capsys, "drift", str(repo), "--cluster", "west", "--kubeconfig", str(west.cp.kubeconfig),
                            "--format", "json")
    findings = [f for f in json.loads(out)["findings"] if f["level"] != "info"]
    assert [f for f in findings if f.get("object") in {f"Queue {n}" for n in HAND}] == [], findings
    time.sleep(6)  # several scheduling cycles (1 s each) on the applied Queues
    assert _placed(api, "hw-a", running_a) == before["a"] and _placed(api, "hw-b", running_b) == before["b"]
    assert _waiting_reason(api, "hw-a", waiting) == reason
    # The same decisions for new work too: one more hw-b job runs (hw-b has no ceiling), hw-a stays at 8.
    more = _job(api, "hw-b", "hw-b")
    eventually(lambda: _placed(api, "hw-b", more), 90, "a new hw-b job running after apply")
    assert _waiting_reason(api, "hw-a", waiting) == reason
