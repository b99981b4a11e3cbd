"""The Pulumi program compiles for an instant (issue #27), as `gpugov apply --at` does: stack config
gpugov:at, else the clock read once per run; a stack of a repository with a QuotaGrant registers the
quota of that instant, and the objects say which span of instants they hold for. In the mocked
runtime of tests/unit/test_deploy.py."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pulumi = pytest.importorskip("pulumi", reason="the deploy extra is not installed: pip install -e '.[deploy]'")

from pulumi.runtime.settings import get_root_resource  # noqa: E402

from gpugov.app.desired import desired_state  # noqa: E402
from gpugov.kube.objects import ANNOTATION_DESIRED_AT  # noqa: E402
from tests.helpers.repos import REPO, write  # noqa: E402
from tests.unit.test_deploy import Recording, deploy, fake_cluster, stack_config  # noqa: E402, F401

CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
GRANT = """\
apiVersion: gpugov.io/v1alpha1
kind: QuotaGrant
metadata: {name: vision-release}
spec:
  tenant: vision
  pool: h100
  resources: {accelerators: 4}
  from: "2030-06-03T00:00:00Z"
  until: "2030-06-10T00:00:00Z"
  reason: release crunch
  approvedBy: [cto@example.com]
"""
BEFORE, DURING = "2030-06-01T00:00:00Z", "2030-06-05T12:00:00+08:00"


@pytest.fixture(scope="module")
def granted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example org with vision +4 h100 GPUs for a week of June 2030."""
    root = tmp_path_factory.mktemp("timeline") / "repo"
    for folder in ("hardware", "policies", "tenants"):
        shutil.copytree(REPO / folder, root / folder)
    write(root, "tenants/vision-release.yaml", GRANT)
    return root


def vision_queue(recording: Recording) -> dict[str, Any]:
    (queue,) = [r.inputs for r in recording.of_type(CLUSTER_QUEUE) if r.inputs["metadata"]["name"] == "vision"]
    return queue


def h100_gpus(queue: dict[str, Any]) -> str:
    return next(str(entry["nominalQuota"]) for group in queue["spec"]["resourceGroups"]
                for flavor in group["flavors"] if flavor["name"] == "h100"
                for entry in flavor["resources"] if entry["name"] == "nvidia.com/gpu")


def exported() -> dict[str, Any]:
    """The stack outputs of the last `deploy` (pulumi.export keeps them on the root Stack resource)."""
    return dict(get_root_resource().outputs)  # type: ignore[union-attr]


def applied_queue(root: Path, at: datetime) -> dict[str, Any]:
    """The vision ClusterQueue `gpugov apply --at` compiles (app.desired, the same path)."""
    objects = desired_state(root, cluster="east", backend="kueue", at=at).objects
    (queue,) = [o for o in objects if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "vision"]
    return queue


def test_a_stack_at_an_instant_inside_a_grant_registers_its_quota(granted: Path) -> None:
    recording = deploy({**stack_config("east", "kueue"), "gpugov:at": DURING}, root=granted)
    queue = vision_queue(recording)
    assert h100_gpus(queue) == "12"  # 8 declared + 4 granted
    span = "2030-06-03T00:00:00Z/2030-06-10T00:00:00Z"
    assert queue["metadata"]["annotations"][ANNOTATION_DESIRED_AT] == span
    assert exported().get("desiredAt") == span, exported()
    assert queue == applied_queue(granted, datetime.fromisoformat(DURING))  # what apply would write


def test_before_the_grant_and_by_default_the_declared_quota(granted: Path) -> None:
    before = vision_queue(deploy({**stack_config("east", "kueue"), "gpugov:at": BEFORE}, root=granted))
    assert h100_gpus(before) == "8"
    assert before["metadata"]["annotations"][ANNOTATION_DESIRED_AT] == "../2030-06-03T00:00:00Z"
    # No gpugov:at: the clock of the run (before 2030), as `gpugov apply` without --at.
    now = vision_queue(deploy(stack_config("east", "kueue"), root=granted))
    assert now == before == applied_queue(granted, datetime.now(UTC))


def test_a_repository_without_a_timeline_exports_no_span() -> None:
    recording = deploy({**stack_config("east", "kueue"), "gpugov:at": DURING})
    assert "desiredAt" not in exported() and "tenants" in exported()
    assert ANNOTATION_DESIRED_AT not in vision_queue(recording)["metadata"].get("annotations", {})


def test_an_instant_that_is_none_stops_the_stack_before_any_resource(granted: Path) -> None:
    recording = Recording()
    with pytest.raises(pulumi.RunError, match="gpugov:at '2030-06-05 noon' is not an RFC 3339 instant"):
        deploy({**stack_config("east", "kueue"), "gpugov:at": "2030-06-05 noon"}, root=granted, recording=recording)
    assert not recording.resources
