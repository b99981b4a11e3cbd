"""Non-preemptible work on the real Volcano scheduler (v1.14.1): never preempted, never reclaimed.

Cluster ``west`` of the example organisation with one more tenant, ``serving``, whose only queue admits
``inference-critical`` (``preemptible: false``), in department ``product`` beside recsys; llm-pretrain
holds 8 instead of 16 so that the pool (32 Ascend) still covers every guarantee. A sandbox of its own:
the Kueue scenario (tests/e2e/test_contract.py::test_non_preemptible_inference_is_never_reclaimed)
replayed on Volcano.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gpugov.app.pipeline import validate_repo
from gpugov.cluster.apply import apply_objects
from gpugov.compile import compile
from gpugov.compile.volcano_scheduler import CONFIG_KEY
from gpugov.sandbox.cluster import Sandbox
from gpugov.sandbox.nodes import create_nodes
from gpugov.sandbox.simulated import simulated_nodes
from tests.e2e.test_volcano_contract import bound, job, pods_of, queue, running
from tests.helpers.repos import REPO, write
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.e2e

SERVING = """apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata:
  name: serving
spec:
  description: Online inference on Ascend; never preempted.
  department: product
  owners:
    users: [frank@example.com]
  costCenter: CC-2040
  namespaces: [serving]
  queues:
    - name: online
      namespace: serving
      priorityClasses: [inference-critical]
  quotas:
    - pool: ascend-910b
      resources:
        accelerators: 8
"""


def protected_repo(root: Path) -> Path:
    """The example organisation's declarations with tenant `serving` on west (see the module doc)."""
    for folder in ("tenants", "policies", "hardware"):
        shutil.copytree(REPO / folder, root / folder)
    pretrain = root / "tenants" / "llm-pretrain.yaml"
    pretrain.write_text(pretrain.read_text().replace("{nominal: 16, lendingLimit: 8}", "{nominal: 8}"))
    write(root, "tenants/serving.yaml", SERVING)
    return root


def protected_objects(root: Path) -> tuple[Any, list[dict[str, Any]]]:
    result = validate_repo(root)
    assert result.model is not None and result.findings == [], result.findings
    return result.model, compile(result.model, cluster="west")


@pytest.fixture(scope="module")
def protected(sandbox_binaries: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[client.ApiClient]:
    model, objects = protected_objects(protected_repo(tmp_path_factory.mktemp("protected")))
    conf = next(o["data"][CONFIG_KEY] for o in objects if CONFIG_KEY in o.get("data", {}))
    with Sandbox(backend="volcano", volcano_conf=conf) as sandbox:
        api = sandbox.cp.api_client()
        create_nodes(api, simulated_nodes(model, "west"), kwok=True)
        assert not apply_objects(api, objects).missing
        eventually(lambda: queue(api, "serving").get("status", {}).get("state") == "Open", 60, "queue serving open")
        yield api
        problems = sandbox.problems()
    assert not problems, "\n".join(problems)


def test_compiled_serving_queue_never_borrows_and_is_not_reclaimable(tmp_path: Path) -> None:
    """What the scenario below rests on: capability = deserved (it never borrows), reclaimable false."""
    _, objects = protected_objects(protected_repo(tmp_path))
    spec = next(o for o in objects if o["kind"] == "Queue" and o["metadata"]["name"] == "serving")["spec"]
    assert spec["reclaimable"] is False
    assert spec["capability"] == spec["deserved"] == {"huawei.com/Ascend910": "8"}


def test_non_preemptible_work_is_never_reclaimed_on_volcano(protected: client.ApiClient) -> None:
    """serving fills its 8 with `inference-critical` and asks for 8 more: it waits, though 24 are idle (what it
    borrowed could never be given back). llm-pretrain then borrows the rest of the pool (24, deserved 8), and
    recsys and speech each claim their deserved 8: Volcano reclaims from llm-pretrain, never from serving,
    whose pods keep running on the nodes they started on."""
    api = protected
    served = job(api, "serving", priority_class="inference-critical")
    eventually(lambda: bound(pods_of(api, "serving", served)), 90, "serving's job bound")
    beyond = job(api, "serving", priority_class="inference-critical")
    time.sleep(5)  # several scheduling cycles (1 s each)
    borrowed = len(bound(pods_of(api, "serving", beyond)))

    borrower = [job(api, "llm-pretrain") for _ in range(3)]
    eventually(lambda: running(api, "llm-pretrain") + running(api, "serving") == 32, 90, "the pool full")
    serving = {(p.metadata.uid, p.spec.node_name) for j in (served, beyond) for p in bound(pods_of(api, "serving", j))}
    claims = [job(api, "recsys"), job(api, "speech")]
    eventually(lambda: all(bound(pods_of(api, t, j)) for t, j in zip(("recsys", "speech"), claims, strict=True)), 120,
               "recsys and speech bound after reclaim")
    time.sleep(3)
    after = {(p.metadata.uid, p.spec.node_name) for j in (served, beyond) for p in bound(pods_of(api, "serving", j))}
    assert after == serving, "a pod of non-preemptible serving was evicted"
    assert borrowed == 0, "serving borrowed beyond its deserved quota"
    assert sum(len(bound(pods_of(api, "llm-pretrain", j))) for j in borrower) == 1
