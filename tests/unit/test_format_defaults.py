"""One description of the format: the defaults editors see in the JSON Schemas are the ones the model uses."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from gpugov.declarations.model import Model
from gpugov.declarations.schema import defaulted, schema_files


def schema_default(kind: str, *path: str) -> Any:
    """The default of spec.<path> in the schema file `gpugov schema --out` writes for editors."""
    node = json.loads(schema_files()[f"{kind.lower()}.json"])["properties"]["spec"]
    for step in path:
        node = node["properties"][step]
    return node["default"]


def test_undeclared_policies_take_the_schemas_defaults() -> None:
    model = Model()  # a repository that declares no SchedulingPolicy, Guardrails or Cluster
    policy, limits, cluster = model.policy, model.limits, model.cluster("default")
    assert policy.queueing_strategy == schema_default("SchedulingPolicy", "queueingStrategy")
    assert policy.reclaim_within_cohort == schema_default("SchedulingPolicy", "preemption", "reclaimWithinCohort")
    assert policy.within_cluster_queue == schema_default("SchedulingPolicy", "preemption", "withinClusterQueue")
    assert policy.borrow_within_cohort == schema_default("SchedulingPolicy", "preemption", "borrowWithinCohort", "policy")
    assert policy.volcano_plugin == schema_default("SchedulingPolicy", "volcano", "plugin")
    assert limits.capacity_ratio == Decimal(str(schema_default("Guardrails", "capacityRatio")))
    assert limits.require_owner is schema_default("Guardrails", "requireOwner")
    assert limits.require_cost_center is schema_default("Guardrails", "requireCostCenter")
    assert limits.idle_below_percent == Decimal(str(schema_default("Guardrails", "idle", "utilizationBelowPercent")))
    assert limits.idle_window == schema_default("Guardrails", "idle", "window")
    assert cluster.mig_config_name == schema_default("Cluster", "migConfig", "name")
    assert cluster.mig_config_namespace == schema_default("Cluster", "migConfig", "namespace")
    assert cluster.operations_namespace == schema_default("Cluster", "operations", "namespace")
    assert cluster.drift_schedule == schema_default("Cluster", "operations", "driftSchedule")
    assert cluster.run_agent is schema_default("Cluster", "operations", "agent")


def test_a_hami_pool_takes_the_schemas_defaults() -> None:
    from gpugov.declarations.build import _hami

    sharing = _hami({"sharing": {"hami": {}}})
    assert sharing is not None
    assert sharing.split_count == schema_default("GPUPool", "sharing", "hami", "deviceSplitCount")
    assert sharing.memory_scaling == Decimal(str(schema_default("GPUPool", "sharing", "hami", "deviceMemoryScaling")))
    assert sharing.core_scaling == Decimal(str(schema_default("GPUPool", "sharing", "hami", "deviceCoreScaling")))
    assert _hami({"sharing": {}}) is None and _hami({}) is None  # not shared: no defaults invented


def test_defaults_fill_every_depth_and_never_override() -> None:
    spec = defaulted("SchedulingPolicy", {"preemption": {"withinClusterQueue": "Never"}})
    assert spec["preemption"]["withinClusterQueue"] == "Never"  # declared wins
    assert spec["preemption"]["reclaimWithinCohort"] == "Any"  # sibling filled
    assert spec["preemption"]["borrowWithinCohort"] == {"policy": "LowerPriority"}  # absent object filled
    assert spec["volcano"] == {"plugin": "capacity"}
    original: dict[str, Any] = {"idle": {"window": "1h"}}
    filled = defaulted("Guardrails", original)
    assert original == {"idle": {"window": "1h"}}  # the declaration itself is never changed
    assert filled["idle"] == {"window": "1h", "utilizationBelowPercent": 5}
