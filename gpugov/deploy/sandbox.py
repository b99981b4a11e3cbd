"""Stand-ins for the controllers the sandbox control plane lacks, so Pulumi's awaits finish.

pulumi-kubernetes waits until a ResourceQuota's status.hard matches its spec (the quota
controller's job) and until a DaemonSet has rolled out (the DaemonSet controller and the
kubelets'). The sandbox runs kube-apiserver alone, so `SimulatedControllers` writes those
statuses as the real controllers would on a healthy cluster: quota hard = spec, used 0;
every node the DaemonSet selects runs a ready, updated pod. Tests and benchmarks only.

Also start the sandbox with `SANDBOX_APISERVER_ARGS`: without a garbage collector the
apiserver must not add the foregroundDeletion finalizer that Pulumi's deletes ask for.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

SANDBOX_APISERVER_ARGS = ("--enable-garbage-collector=false",)


class SimulatedControllers:
    """A background thread that reconciles ResourceQuota and DaemonSet status."""

    def __init__(self, api_client: client.ApiClient, interval: float = 0.2) -> None:
        self._core = client.CoreV1Api(api_client)
        self._apps = client.AppsV1Api(api_client)
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpugov-simulated-controllers", daemon=True)
        self.errors: list[str] = []

    def __enter__(self) -> SimulatedControllers:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.reconcile()
            except ApiException as exc:  # e.g. an object deleted between list and patch
                if exc.status not in (404, 409):
                    self.errors.append(f"{exc.status} {exc.reason}")

    def reconcile(self) -> None:
        for quota in self._core.list_resource_quota_for_all_namespaces().items:
            hard = dict(quota.spec.hard or {})
            if (quota.status and quota.status.hard) != hard:
                # Replace, not patch: a merge patch would keep resources the spec dropped.
                quota.status = client.V1ResourceQuotaStatus(hard=hard, used=dict.fromkeys(hard, "0"))
                self._core.replace_namespaced_resource_quota_status(
                    quota.metadata.name, quota.metadata.namespace, quota
                )
        for ds in self._apps.list_daemon_set_for_all_namespaces().items:
            if ds.status is None or ds.status.observed_generation != ds.metadata.generation:
                ready = self._selected_nodes(ds)
                status: dict[str, Any] = {
                    "observedGeneration": ds.metadata.generation,
                    "desiredNumberScheduled": ready,
                    "currentNumberScheduled": ready,
                    "updatedNumberScheduled": ready,
                    "numberReady": ready,
                    "numberAvailable": ready,
                    "numberMisscheduled": 0,
                }
                self._apps.patch_namespaced_daemon_set_status(
                    ds.metadata.name, ds.metadata.namespace, {"status": status}
                )

    def _selected_nodes(self, ds: client.V1DaemonSet) -> int:
        selector = (ds.spec.template.spec.node_selector or {}) if ds.spec and ds.spec.template.spec else {}
        label_selector = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        return len(self._core.list_node(label_selector=label_selector).items)


__all__ = ["SANDBOX_APISERVER_ARGS", "SimulatedControllers"]
