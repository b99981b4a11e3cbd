"""gpugov.usage.volcano: the ledger's segments from the pods Volcano bound (the e2e twin:
tests/e2e/test_volcano_readers.py::test_the_ledger_counts_what_volcano_bound)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gpugov.usage.volcano import pod_segments
from gpugov.usage.window import Window

ASCEND = "huawei.com/Ascend910"
T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def pod(name: str, *, scheduled: str | None = "2026-12-01T10:10:00Z", finished: str | None = None,
        scheduler: str = "volcano", node: str = "ascend-01", amount: str = "8") -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Succeeded" if finished else "Running", "conditions": []}
    if scheduled:
        status["conditions"].append({"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled})
    if finished:
        status["containerStatuses"] = [{"state": {"terminated": {"finishedAt": finished}}}]
    return {"metadata": {"name": name, "namespace": "speech"},
            "spec": {"schedulerName": scheduler, "nodeName": node,
                     "containers": [{"resources": {"requests": {ASCEND: amount, "cpu": "1"}}}]},
            "status": status}


NODES = [{"metadata": {"name": "ascend-01", "labels": {"gpugov.io/pool": "ascend-910b"}}}]


def test_a_pod_holds_its_accelerators_from_scheduled_to_finished_within_the_window() -> None:
    window = Window(T0, datetime(2026, 12, 1, 11, 0, tzinfo=UTC))
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    pods = [pod("done", finished="2026-12-01T10:40:00Z"), pod("running", scheduled="2026-12-01T10:30:00Z"),
            pod("early", scheduled="2026-12-01T09:00:00Z", finished="2026-12-01T10:15:00Z"),
            pod("kube", scheduler="default-scheduler"), pod("unscheduled", scheduled=None)]
    found = {s.workload: (s.tenant, s.pool, s.resource, s.amount, s.seconds)
             for s in pod_segments(pods, NODES, window, now, {"speech": "speech"})}
    assert found == {"speech/done": ("speech", "ascend-910b", ASCEND, 8, 1800),
                     "speech/running": ("speech", "ascend-910b", ASCEND, 8, 1800),  # until the window's end
                     "speech/early": ("speech", "ascend-910b", ASCEND, 8, 900)}  # from the window's start
