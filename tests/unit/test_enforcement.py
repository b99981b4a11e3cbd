"""The probes `gpugov apply` asks the API server with before it says the admission policies are in
force: each is refused by its own policy and by no other (compile's policies evaluated in-process,
as the API server evaluates them), so a refusal that names it proves that policy enforced; and the
wait against a real HTTP server: a probe let in until the deadline, one refused by something else.
The e2e suite (test_cluster_identity) proves it against a real API server right after an apply."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from kubernetes import client

from gpugov.app.pipeline import validate_repo
from gpugov.cluster.enforcement import probes_for, wait_until_enforced
from gpugov.cluster.rest import Api
from gpugov.compile import compile
from gpugov.compile.admission import NEED_A_QUEUE, OWNERSHIP, VOLCANO_NEED_VOLCANO
from tests.helpers.local_http import serving
from tests.helpers.repos import REPO
from tests.helpers.vap_eval import Request, evaluate

ADMIN = ("kubernetes-admin", ("kubeadm:cluster-admins", "system:authenticated"))


def objects(backend: str) -> list[dict[str, Any]]:
    model = validate_repo(REPO).model
    assert model is not None
    return compile(model, backend=backend, cluster="east")


@pytest.mark.parametrize(("backend", "policies"), [("kueue", [NEED_A_QUEUE, OWNERSHIP]),
                                                   ("volcano", [VOLCANO_NEED_VOLCANO])])
def test_each_probe_is_refused_by_its_policy_alone(backend: str, policies: list[str]) -> None:
    compiled = objects(backend)
    probes = probes_for(compiled)
    assert [p.policy for p in probes] == policies
    for probe in probes:
        group, resource = ("batch", "cronjobs") if probe.body["kind"] == "CronJob" else ("", "pods")
        request = Request("CREATE", group, resource, probe.namespace, *ADMIN)
        denials = evaluate(compiled, request, {**probe.body, "metadata": {**probe.body["metadata"],
                                                                            "namespace": probe.namespace}})
        assert [d.split(":")[0] for d in denials] == [probe.policy], denials


def _pod_spec(body: dict[str, Any]) -> dict[str, Any]:
    return body["spec"]["jobTemplate"]["spec"]["template"]["spec"] if body["kind"] == "CronJob" else body["spec"]


@pytest.mark.parametrize("backend", ["kueue", "volcano"])
def test_every_probe_pod_passes_pod_security_restricted(backend: str) -> None:
    """So that Pod Security, on a namespace at `restricted`, cannot refuse it in the policy's place."""
    for probe in probes_for(objects(backend)):
        spec = _pod_spec(probe.body)
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert spec["containers"][0]["securityContext"] == {"allowPrivilegeEscalation": False,
                                                           "capabilities": {"drop": ["ALL"]}}


def test_the_no_queue_probe_is_a_cron_job_kueue_cannot_give_a_default_queue() -> None:
    """Kueue labels a Pod or Job without a queue with its namespace's LocalQueue `default` where there
    is one (a common name: tests/e2e/test_adopt's several-flavors shape has it), and such a Pod is
    rightly let in; Kueue leaves CronJobs alone, and the policy checks their Jobs' template."""
    probe = next(p for p in probes_for(objects("kueue")) if p.policy == NEED_A_QUEUE)
    assert probe.body["kind"] == "CronJob" and probe.path.startswith("/apis/batch/v1/namespaces/")
    template = probe.body["spec"]["jobTemplate"]["spec"]["template"]
    assert "kueue.x-k8s.io/queue-name" not in template["metadata"]["labels"]
    assert any("gpu" in r for r in template["spec"]["containers"][0]["resources"]["limits"])


def test_without_policies_nothing_is_probed() -> None:
    quotas = [o for o in objects("kueue") if o["kind"] not in ("ValidatingAdmissionPolicy",)]
    assert probes_for(quotas) == []


def answering(answers: list[tuple[int, str]]) -> type[BaseHTTPRequestHandler]:
    """A server that answers its n-th POST with answers[n] (the last one from then on)."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(self.path)
            code, message = answers[min(len(seen), len(answers)) - 1]
            body = ({"kind": "Pod", "apiVersion": "v1", "metadata": {}} if code < 300 else
                    {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                     "reason": "Forbidden", "message": message})
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    Handler.seen = seen  # type: ignore[attr-defined]
    return Handler


def api(url: str) -> Api:
    configuration = client.Configuration()
    configuration.host = url
    return Api(client.ApiClient(configuration), timeout=(2.0, 2.0))


def refusal(policy: str) -> str:
    return f'pods "gpugov-probe" is forbidden: ValidatingAdmissionPolicy \'{policy}\' with binding \'{policy}\' ' \
           "denied request: ..."


def test_the_wait_ends_when_the_policy_refuses() -> None:
    probes = probes_for(objects("kueue"))
    handler = answering([(201, ""), (201, ""), (403, refusal(NEED_A_QUEUE)), (403, refusal(OWNERSHIP))])
    slept: list[float] = []
    with serving(handler) as url:
        result = wait_until_enforced(api(url), probes, wait_s=30, sleep=slept.append)
    assert (result.in_force, result.not_yet, result.not_probed) == ([NEED_A_QUEUE, OWNERSHIP], [], [])
    assert len(slept) == 2 and len(handler.seen) == 4  # type: ignore[attr-defined]
    assert all("dryRun=All" in path for path in handler.seen)  # type: ignore[attr-defined]


def test_a_probe_let_in_until_the_deadline_is_not_in_force() -> None:
    probes = probes_for(objects("kueue"))
    with serving(answering([(201, "")])) as url:
        result = wait_until_enforced(api(url), probes, wait_s=0.3)
    assert (result.in_force, result.not_yet) == ([], [NEED_A_QUEUE, OWNERSHIP])


def test_a_refusal_that_does_not_name_the_policy_proves_nothing() -> None:
    probes = probes_for(objects("kueue"))[:1]
    pod_security = 'pods "gpugov-probe" is forbidden: violates PodSecurity "restricted:latest": ...'
    with serving(answering([(403, pod_security)])) as url:
        result = wait_until_enforced(api(url), probes, wait_s=5)
    assert result.in_force == [] and result.not_yet == []
    assert result.not_probed == [f"{NEED_A_QUEUE} ({pod_security})"]
