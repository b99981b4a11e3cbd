"""The Volcano scheduler configuration compile emits, and what doctor reads back from a live one."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from gpugov.app.pipeline import validate_repo
from gpugov.compile import compile
from gpugov.compile.volcano_scheduler import (
    CONFIG_KEY,
    CONFIGMAP_NAME,
    CONFIGMAP_NAMESPACE,
    action_names,
    configuration_problems,
    plugin_names,
    scheduler_conf_text,
    scheduler_configuration,
)
from tests.helpers.repos import REPO


def west() -> list[dict]:
    model = validate_repo(REPO).model
    assert model is not None
    return compile(model, cluster="west")


def test_a_volcano_cluster_gets_the_scheduler_configuration_its_policy_needs() -> None:
    configmaps = [o for o in west() if o["kind"] == "ConfigMap" and CONFIG_KEY in o.get("data", {})]
    assert [(c["metadata"]["namespace"], c["metadata"]["name"]) for c in configmaps] == [
        (CONFIGMAP_NAMESPACE, CONFIGMAP_NAME)]
    conf = yaml.safe_load(configmaps[0]["data"][CONFIG_KEY])
    assert action_names(conf) == ["allocate", "preempt", "reclaim", "backfill"]
    plugins = plugin_names(conf)
    assert plugins["capacity"] == {"name": "capacity", "enableHierarchy": True}
    assert {"priority", "gang", "predicates", "nodegroup"} <= set(plugins) and "proportion" not in plugins
    assert configuration_problems(configmaps[0]["data"][CONFIG_KEY], "capacity") == []


def test_a_kueue_cluster_gets_none() -> None:
    model = validate_repo(REPO).model
    assert model is not None
    assert not [o for o in compile(model, cluster="east") if CONFIG_KEY in o.get("data", {})]


def test_the_proportion_plugin_replaces_capacity_and_has_no_hierarchy() -> None:
    conf = scheduler_configuration("proportion")
    plugins = plugin_names(conf)
    assert plugins["proportion"] == {"name": "proportion"} and "capacity" not in plugins
    assert configuration_problems(scheduler_conf_text("proportion"), "proportion") == []
    assert any("capacity is missing" in p for p in configuration_problems(scheduler_conf_text("proportion"), "capacity"))


def test_volcanos_own_default_configuration_fails_every_promise() -> None:
    """vc-scheduler's built-in configuration (pkg/scheduler/util.go DefaultSchedulerConf) when no ConfigMap is
    mounted: enqueue but no reclaim nor preempt, proportion, no nodegroup."""
    default = ("actions: \"enqueue, allocate, backfill\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n"
               "  - name: conformance\n- plugins:\n  - name: overcommit\n  - name: drf\n  - name: predicates\n"
               "  - name: proportion\n  - name: nodeorder\n")
    problems = "\n".join(configuration_problems(default, "capacity"))
    for expected in ("action preempt is missing", "action reclaim is missing", "action enqueue is configured",
                     "plugin nodegroup is missing", "plugin capacity is missing"):
        assert expected in problems
    assert configuration_problems("actions: [", "capacity")[0].startswith(f"{CONFIG_KEY} is not YAML")


def test_every_queue_names_its_parent_so_drift_sees_a_move() -> None:
    """Volcano's queue controller writes `parent: root` onto a queue created without one; gpugov writes it itself,
    so a department moved under another parent by hand differs from what gpugov set."""
    queues = {o["metadata"]["name"]: o["spec"] for o in west() if o["kind"] == "Queue"}
    assert queues["research"]["parent"] == queues["product"]["parent"] == "root"
    assert queues["llm-pretrain"]["parent"] == "research" and queues["recsys"]["parent"] == "product"


def test_the_proportion_plugin_has_no_parents(tmp_path: Path) -> None:
    root = tmp_path / "org"
    shutil.copytree(REPO, root, ignore=shutil.ignore_patterns(".*", "tests", "gpugov", "out", "bench", "tools"))
    path = root / "policies" / "scheduling.yaml"
    path.write_text(path.read_text().replace("plugin: capacity", "plugin: proportion"))
    model = validate_repo(root).model
    assert model is not None
    objects = compile(model, cluster="west")
    assert all("parent" not in o["spec"] for o in objects if o["kind"] == "Queue")
    conf = next(o["data"][CONFIG_KEY] for o in objects if CONFIG_KEY in o.get("data", {}))
    assert "proportion" in plugin_names(yaml.safe_load(conf))
