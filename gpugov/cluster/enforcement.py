"""Whether the admission policies gpugov applied are in force yet.

The API server enforces a ValidatingAdmissionPolicy once its policy informers hold it and its
binding, a moment after they are written (about a second on the sandbox): a tenant who submits at
once after a first install or a policy change could get through. `gpugov apply` therefore waits,
asking the server, by server-side dry runs (nothing is created), for requests each policy must
refuse: a CronJob whose Jobs ask for an accelerator without a queue (Kueue), a Pod that asks for one
without Volcano as its scheduler, and one that names a Job as its owner. Not a Pod without a queue:
Kueue's webhook gives a Pod or Job without one the LocalQueue named `default` of its namespace where
there is one (LocalQueueDefaulting, on by default), and that Pod rightly gets in; Kueue leaves
CronJobs alone, and the policy checks their Jobs' template. A refusal counts only when it names the
policy; the probes' pods pass Pod Security's restricted level, so that another check cannot answer
for them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpugov.cluster.rest import Api
from gpugov.compile.admission import NEED_A_QUEUE, OWNERSHIP, VOLCANO_NEED_VOLCANO
from gpugov.kube.names import KUEUE_QUEUE_LABEL
from gpugov.kube.objects import LABEL_TENANT
from gpugov.kube.resources import is_accelerator

WAIT_S = 30.0
POLL_S = 0.2
PROBED = (NEED_A_QUEUE, OWNERSHIP, VOLCANO_NEED_VOLCANO)  # the policies a probe can ask about
POLICY_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


@dataclass(frozen=True)
class Probe:
    policy: str  # the policy that must refuse it
    namespace: str
    body: dict[str, Any]  # a Pod or a CronJob

    @property
    def path(self) -> str:
        if self.body["kind"] == "CronJob":
            return f"/apis/batch/v1/namespaces/{self.namespace}/cronjobs"
        return f"/api/v1/namespaces/{self.namespace}/pods"


@dataclass
class Enforcement:
    in_force: list[str]  # policies that refused their probe
    not_yet: list[str]  # policies whose probe was still let in when the wait ended
    not_probed: list[str]  # policies the probe could not ask about, with why


def _pod(name: str, resource: str, labels: dict[str, str] | None = None,
         owner: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Pod Security 'restricted' pod asking for one `resource`."""
    metadata: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/name": "gpugov-probe", **(labels or {})}}
    if owner:
        metadata["ownerReferences"] = [owner]
    container = {
        "name": "probe", "image": "registry.k8s.io/pause:3.10",
        "resources": {"limits": {resource: "1"}},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": metadata,
        "spec": {"containers": [container], "securityContext": {
            "runAsNonRoot": True, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}}},
    }


def _cron_job(name: str, resource: str) -> dict[str, Any]:
    """A CronJob whose Jobs' pods are _pod's, never due (a dry run creates nothing anyway)."""
    pod = _pod(name, resource)
    template = {"metadata": {"labels": pod["metadata"]["labels"]}, "spec": {**pod["spec"], "restartPolicy": "Never"}}
    return {
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name, "labels": pod["metadata"]["labels"]},
        "spec": {"schedule": "0 0 1 1 *", "suspend": True, "jobTemplate": {"spec": {"template": template}}},
    }


def _accelerator(objects: list[dict[str, Any]]) -> str:
    """An accelerator resource the compiled queues hold quota of ('' when none)."""
    found: set[str] = set()
    for obj in objects:
        spec = obj.get("spec") or {}
        if obj["kind"] == "ClusterQueue":
            for group in spec.get("resourceGroups") or []:
                found.update(group.get("coveredResources") or [])
        elif obj["kind"] == "Queue":
            for field in ("capability", "deserved"):
                found.update(spec.get(field) or {})
    return min((r for r in found if is_accelerator(r)), default="")


def probes_for(objects: list[dict[str, Any]]) -> list[Probe]:
    """The probes of the policies among `objects` that gpugov knows a refusal for."""
    policies = {o["metadata"]["name"] for o in objects if o["kind"] == "ValidatingAdmissionPolicy"}
    tenant_namespaces = sorted(o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"
                               and LABEL_TENANT in (o["metadata"].get("labels") or {}))
    resource = _accelerator(objects)
    if not tenant_namespaces or not resource:
        return []
    namespace = tenant_namespaces[0]
    queues = sorted(o["metadata"]["name"] for o in objects
                    if o["kind"] == "LocalQueue" and o["metadata"].get("namespace") == namespace)
    probes = []
    if NEED_A_QUEUE in policies:
        probes.append(Probe(NEED_A_QUEUE, namespace, _cron_job("gpugov-probe-no-queue", resource)))
    if VOLCANO_NEED_VOLCANO in policies:
        probes.append(Probe(VOLCANO_NEED_VOLCANO, namespace, _pod("gpugov-probe-no-volcano", resource)))
    if OWNERSHIP in policies and queues:
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "gpugov-probe", "uid": str(uuid.uuid4())}
        probes.append(Probe(OWNERSHIP, namespace, _pod("gpugov-probe-owner", resource,
                                                       {KUEUE_QUEUE_LABEL: queues[0]}, owner)))
    return probes


def probed_last(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`objects` with the probed policies, and their bindings, written after the other policies and bindings.
    The API server enforces what its policy and binding informers hold when it refreshes (once a second):
    each informer gets its objects in the order they were written, so a refresh that holds the probed ones,
    written last, holds every other one too, and a refused probe means every policy applied is in force.
    (Only where the probed ones are written: an unchanged object makes no event.)"""
    ordered = list(objects)
    for kind in POLICY_KINDS:
        places = [i for i, o in enumerate(ordered) if o["kind"] == kind]
        of_kind = [ordered[i] for i in places]
        last = [o for o in of_kind if o["metadata"]["name"] not in PROBED] + [
            o for o in of_kind if o["metadata"]["name"] in PROBED]
        for i, obj in zip(places, last, strict=True):
            ordered[i] = obj
    return ordered


def wait_until_enforced(api: Api, probes: list[Probe], wait_s: float = WAIT_S,
                        sleep: Callable[[float], None] = time.sleep) -> Enforcement:
    """Ask each probe until its policy refuses it or `wait_s` has passed; what each policy did."""
    result = Enforcement([], [], [])
    deadline = time.monotonic() + wait_s
    pending = list(probes)
    while pending:
        probe = pending[0]
        answer = api.call("POST", probe.path, [("dryRun", "All")], probe.body, "application/json")
        if answer.ok:
            if time.monotonic() >= deadline:
                result.not_yet += [p.policy for p in pending]
                break
            sleep(POLL_S)
            continue
        pending.pop(0)
        if probe.policy in answer.message:
            result.in_force.append(probe.policy)
        else:
            why = answer.message or answer.status_reason or f"{answer.status} {answer.reason}".strip()
            result.not_probed.append(f"{probe.policy} ({why})")
    return result
