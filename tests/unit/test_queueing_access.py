"""`gpugov queue` under partial rights, pure: a read the caller's roles refuse is said on a line of its
own (permission, what it hides, which declaration grants it, whom to ask), and the workloads it may
not read are counted from their ClusterQueue's status instead of vanishing. The same on the real
API server as tenant users: tests/e2e/test_tenant_roles.py."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from gpugov.app.pipeline import validate_repo
from gpugov.queueing import report
from gpugov.queueing.access import Denied
from gpugov.queueing.view import entries, gaps, snapshot
from tests.helpers.repos import REPO
from tests.unit.test_queueing_unit import NOW, raw_cluster_queue, raw_workload, visibility_item

WORKLOADS = "workloads.kueue.x-k8s.io"
CQ_PENDING = "clusterqueues/pendingworkloads.visibility.kueue.x-k8s.io"


def counted(queue: dict[str, Any], admitted: int, pending: int) -> dict[str, Any]:
    queue["status"].update({"admittedWorkloads": admitted, "pendingWorkloads": pending})
    return queue


def test_an_admitted_job_that_may_not_be_read_is_counted_and_the_refusal_named() -> None:
    """vision's member reads vision's Workloads but not speech's; speech runs one admitted job and one
    pending: neither vanishes, neither is named."""
    model = validate_repo(REPO).model
    assert model is not None
    vision = [raw_workload("full", pods=2, gpus=8, admitted=NOW - timedelta(seconds=100)),
              raw_workload("waiting", message="couldn't assign flavors")]
    queues = [counted(raw_cluster_queue(), 1, 1),
              counted(raw_cluster_queue("speech", nominal="0", borrowing=None, held="8", cohort="research"), 1, 1)]
    denied = (Denied("list", WORKLOADS, "speech"), Denied("get", CQ_PENDING, name="speech"))
    snap = snapshot(model, NOW, queues, [], vision, {"vision": [visibility_item("waiting", "vision", 0, 0)]},
                    frozenset({"vision"}), denied)
    found = gaps(snap)
    assert [(n.tenant, n.cluster_queue, n.admitted, n.pending) for n in found.not_shown] == [("speech", "speech", 1, 1)]
    # speech is not the caller's tenant: one summary line, no namespace or job of speech named
    assert found.lines == [f"forbidden for 1 other tenant(s): get {CQ_PENDING}, list {WORKLOADS}: their workloads are "
                           "counted from their ClusterQueues' status, never named"]
    text = report.queue_text(entries(snap), NOW, "east", found)
    assert "not shown: tenant speech (ClusterQueue speech): 1 admitted and 1 pending workload(s)" in text
    assert "vision/full" in text

    # Asked about speech itself, the refusal is one line naming the permission, its declaration and owners.
    asked = gaps(snap, ["speech"])
    line = next(x for x in asked.lines if WORKLOADS in x)
    assert line.startswith(f"forbidden: list {WORKLOADS} in namespace speech (tenant speech): its admitted workloads "
                           "are counted, not named")
    assert "Tenant speech (tenants/speech.yaml) gives these reads to its owners, members and viewers" in line
    assert "ask its owners (group speech-team)" in line
    positions = next(x for x in asked.lines if CQ_PENDING in x)
    assert positions.startswith(f"forbidden: get {CQ_PENDING} speech (tenant speech): positions in this queue are not "
                                "shown (gpugov's roles give a tenant's people the pending workloads of its LocalQueues, "
                                "never a ClusterQueue's)")
    data = json.loads(report.queue_json(entries(snap, ["speech"]), NOW, "east", asked))
    assert data["not_shown"] == [{"tenant": "speech", "cluster_queue": "speech", "admitted": 1, "pending": 1}]
    assert data["forbidden"] == asked.lines


def test_nothing_refused_nothing_said() -> None:
    """An administrator reads everything: no line, and status counts never add phantom workloads."""
    model = validate_repo(REPO).model
    assert model is not None
    queues = [counted(raw_cluster_queue(), 5, 5)]  # status ahead of the list: not a gap when nothing was refused
    snap = snapshot(model, NOW, queues, [], [raw_workload("full", admitted=NOW)], {}, frozenset({"vision"}))
    assert gaps(snap).lines == [] and gaps(snap).not_shown == []
    assert "not shown" not in report.queue_text(entries(snap), NOW, "east", gaps(snap))


def test_the_callers_own_refused_namespace_is_named() -> None:
    """A member of vision whose Workload reads were taken away: its own admitted job does not vanish silently."""
    model = validate_repo(REPO).model
    assert model is not None
    queues = [counted(raw_cluster_queue(), 1, 0)]
    snap = snapshot(model, NOW, queues, [], [], {}, frozenset(), (Denied("list", WORKLOADS, "vision"),))
    found = gaps(snap, ["vision"])
    assert [(n.tenant, n.admitted, n.pending) for n in found.not_shown] == [("vision", 1, 0)]
    assert found.lines[0].startswith(f"forbidden: list {WORKLOADS} in namespace vision (tenant vision)")
    assert "ask its owners (bob@example.com, group vision-team)" in found.lines[0]
    text = report.queue_text(entries(snap, ["vision"]), NOW, "east", found)
    assert text.splitlines()[0] == "cluster east: no admitted or pending workloads"
    assert "not shown: tenant vision (ClusterQueue vision): 1 admitted and 0 pending" in text
