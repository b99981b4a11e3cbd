"""`gpugov apply --dry-run` says what the apply right after it does (issue #39), on the living sandbox.

The case it used to miss: after the first apply, the ValidatingAdmissionPolicy status controller
(kube-controller-manager) applies each policy's status.typeChecking under its own manager. The next
apply by gpugov then rewrites gpugov's own managedFields entry (its time) without changing anything
else, and the API server reports a new resourceVersion: `configured`, generation unchanged. The dry
run compared the objects without managedFields and said `unchanged`.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from kubernetes import client

from gpugov.app.pipeline import validate_repo
from gpugov.sandbox.cluster import Sandbox
from gpugov.sandbox.nodes import create_gpu_operator_footprint, create_nodes
from gpugov.sandbox.simulated import simulated_nodes
from tests.helpers.repos import REPO

pytestmark = pytest.mark.e2e

VERBS = {"would configure": "configure", "would label": "configure", "would create": "create",
         "configured": "configure", "labelled": "configure", "created": "create", "unchanged": "unchanged"}


def apply(root: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, str]:
    """`gpugov apply` (no prune): what it did or would do to each object, `Kind namespace/name` -> verb."""
    from gpugov.cli import main

    code = main(["apply", str(root), "--cluster", "east", "--kubeconfig", str(kubeconfig), "--no-prune", *extra])
    out, err = capsys.readouterr()
    assert code == 0, err + out
    done = {}
    for line in out.splitlines():
        for verb in sorted(VERBS, key=len, reverse=True):
            if line.startswith(verb + " "):
                kind, name = line[len(verb):].split()[:2]
                done[f"{kind} {name}".rstrip(":")] = VERBS[verb]
                break
    return done


def policy_versions(api: client.ApiClient) -> dict[str, str]:
    """The resourceVersion of each of gpugov's admission policies and bindings."""
    custom, versions = client.CustomObjectsApi(api), {}
    for plural in ("validatingadmissionpolicies", "validatingadmissionpolicybindings"):
        for item in custom.list_cluster_custom_object("admissionregistration.k8s.io", "v1", plural)["items"]:
            if item["metadata"]["name"].startswith("gpugov-"):
                versions[f"{plural} {item['metadata']['name']}"] = item["metadata"]["resourceVersion"]
    return versions


def statuses_applied(api: client.ApiClient, seconds: float = 90, settled: float = 8) -> int:
    """Wait until the status controller has written the status of gpugov's policies (it writes some,
    not all: the count stops growing for `settled` seconds); how many it wrote."""
    custom = client.CustomObjectsApi(api)
    deadline, last, since = time.monotonic() + seconds, -1, time.monotonic()
    while True:
        policies = custom.list_cluster_custom_object("admissionregistration.k8s.io", "v1",
                                                     "validatingadmissionpolicies")["items"]
        checked = sum(1 for p in policies if p["metadata"]["name"].startswith("gpugov-")
                      and (p.get("status") or {}).get("observedGeneration") == p["metadata"]["generation"])
        if checked != last:
            last, since = checked, time.monotonic()
        if checked and time.monotonic() - since >= settled:
            return checked
        assert time.monotonic() < deadline, f"{checked} policies type-checked"
        time.sleep(0.5)


def test_the_dry_run_says_what_the_apply_then_does(sandbox_binaries, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "org"
    for folder in ("hardware", "policies", "tenants"):
        shutil.copytree(REPO / folder, root / folder)
    model = validate_repo(root).model
    assert model is not None
    with Sandbox() as sandbox:
        api = sandbox.cp.api_client()
        create_nodes(api, simulated_nodes(model, "east"), kwok=True)
        create_gpu_operator_footprint(api)
        first = apply(root, sandbox.cp.kubeconfig, capsys)
        assert "create" in first.values()
        rounds: list[dict[str, str]] = []
        rewritten: list[str] = []  # admission objects the server wrote again with nothing configured
        for _round in range(3):  # a few seconds apart, as a person runs them: the status controller writes meanwhile
            time.sleep(5)
            said = apply(root, sandbox.cp.kubeconfig, capsys, "--dry-run")
            versions = policy_versions(api)
            done = apply(root, sandbox.cp.kubeconfig, capsys)
            rewritten += sorted(k for k, v in policy_versions(api).items() if v != versions.get(k))
            assert said.keys() == done.keys() == first.keys()
            changed = {key: verb for key, verb in done.items() if verb != "unchanged"}
            assert {key: verb for key, verb in said.items() if verb != "unchanged"} == changed, (said, done)
            rounds.append(changed)
        print("what each apply after its dry run changed:", rounds, "; written again by the server:", rewritten)
        assert statuses_applied(api) >= 1 and rounds[-1] == {}  # settled: nothing to do, and the dry run says so
