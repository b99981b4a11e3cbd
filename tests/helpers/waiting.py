"""Helpers the e2e modules share for reading Workloads and waiting on the living sandbox."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def condition(w: dict[str, Any], kind: str) -> dict[str, Any]:
    """A Workload's condition of type `kind` ({} when absent)."""
    return next((c for c in w.get("status", {}).get("conditions", []) if c["type"] == kind), {})


def wait_for(predicate: Any, what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def eventually(probe: Callable[[], T | None], timeout: float = 60.0, what: str = "condition") -> T:
    """Poll ``probe`` until it returns something truthy, and return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached after {timeout:.0f}s")
        time.sleep(0.5)


def queues_count_their_workloads(api: Any) -> bool:
    """Whether every ClusterQueue's status.flavorsReservation holds exactly what its quota-reserved, unfinished
    Workloads hold. Kueue writes a queue's status a second or more after one of its Workloads changes, later than the
    Workloads themselves; gpugov's arithmetic (gpugov.reach) reads the queues' status."""
    from kubernetes import client

    from gpugov.kube.quantity import parse_quantity

    custom = client.CustomObjectsApi(api)
    held: dict[tuple[str, str, str], Any] = {}
    for w in custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "workloads")["items"]:
        if condition(w, "QuotaReserved").get("status") != "True" or condition(w, "Finished").get("status") == "True":
            continue  # a finished Workload keeps its admission, but Kueue no longer counts it
        admission = w["status"]["admission"]
        for ps in admission.get("podSetAssignments") or []:
            for resource, amount in (ps.get("resourceUsage") or {}).items():
                key = (admission["clusterQueue"], ps["flavors"][resource], resource)
                held[key] = held.get(key, 0) + parse_quantity(amount)
    said = {(q["metadata"]["name"], f["name"], r["name"]): parse_quantity(r.get("total") or 0)
            for q in custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")["items"]
            for f in (q.get("status") or {}).get("flavorsReservation") or [] for r in f.get("resources") or []}
    return {k: v for k, v in said.items() if v} == {k: v for k, v in held.items() if v}
