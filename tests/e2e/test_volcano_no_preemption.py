"""`withinClusterQueue: Never` on the real Volcano scheduler (v1.14.1): no job preempts another of its queue.

Cluster ``west`` of the example organisation with its SchedulingPolicy saying ``withinClusterQueue: Never``
(a sandbox of its own). The same scenario as
tests/e2e/test_volcano_contract.py::test_higher_priority_preempts_lower_priority_of_its_queue_on_a_full_pool,
where the `training-high` job preempts: here it waits.
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
from tests.e2e.test_volcano_contract import bound, job, pods_of, running
from tests.helpers.repos import REPO
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.e2e


def never_repo(root: Path) -> Path:
    for folder in ("tenants", "policies", "hardware"):
        shutil.copytree(REPO / folder, root / folder)
    policy = root / "policies" / "scheduling.yaml"
    text = policy.read_text()
    assert "withinClusterQueue: LowerPriority" in text
    policy.write_text(text.replace("withinClusterQueue: LowerPriority", "withinClusterQueue: Never"))
    return root


def never_objects(root: Path) -> tuple[Any, list[dict[str, Any]]]:
    result = validate_repo(root)
    assert result.model is not None and result.findings == [], result.findings
    return result.model, compile(result.model, cluster="west")


@pytest.fixture(scope="module")
def never(sandbox_binaries: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[client.ApiClient]:
    model, objects = never_objects(never_repo(tmp_path_factory.mktemp("never")))
    conf = next(o["data"][CONFIG_KEY] for o in objects if CONFIG_KEY in o.get("data", {}))
    with Sandbox(backend="volcano", volcano_conf=conf) as sandbox:
        api = sandbox.cp.api_client()
        create_nodes(api, simulated_nodes(model, "west"), kwok=True)
        assert not apply_objects(api, objects).missing
        yield api
        problems = sandbox.problems()
    assert not problems, "\n".join(problems)


def test_no_job_preempts_another_of_its_queue_when_the_policy_says_never(never: client.ApiClient) -> None:
    """The pool full (llm-pretrain 24, recsys 8 of `batch-low`), recsys's `training-high` job waits: its pods
    carry preemptionPolicy Never from gpugov's PriorityClass, which Volcano's preempt action honours."""
    api = never
    assert client.SchedulingV1Api(api).read_priority_class("training-high").preemption_policy == "Never"
    borrower = [job(api, "llm-pretrain") for _ in range(3)]
    eventually(lambda: running(api, "llm-pretrain") == 24, 90, "llm-pretrain holding 24")
    low = job(api, "recsys", priority_class="batch-low")
    eventually(lambda: len(bound(pods_of(api, "recsys", low))) == 1, 90, "recsys's batch-low job bound")
    high = job(api, "recsys", priority_class="training-high")
    eventually(lambda: len(pods_of(api, "recsys", high)) == 1, 30, "training-high's pod created")
    time.sleep(8)  # the preempting job of the LowerPriority scenario is bound within this
    assert bound(pods_of(api, "recsys", high)) == []
    assert len(bound(pods_of(api, "recsys", low))) == 1
    assert sum(len(bound(pods_of(api, "llm-pretrain", j))) for j in borrower) == 3
