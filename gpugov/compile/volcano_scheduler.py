"""The Volcano scheduler's configuration that gpugov's promises on Volcano need.

Volcano reads its actions and plugins from a ConfigMap that its Helm chart names
``<release>-scheduler-configmap`` (key ``volcano-scheduler.conf``) in the release's namespace,
mounted as the file ``vc-scheduler --scheduler-conf`` watches. What gpugov's Queues mean depends on
it (a ``deserved`` quota is read by the capacity plugin only, a Queue's node group affinity by the
nodegroup plugin only), so it is compiled from the declarations like every other object:

- actions ``allocate, preempt, reclaim, backfill``. No ``enqueue``: it keeps a PodGroup Pending while
  the queue's parent is at its capability, and the reclaim action never considers a Pending
  PodGroup, so a queue below its deserved quota would never get it back from a sibling that
  borrowed it all (volcano#4679). Without ``enqueue`` the allocate action moves Pending PodGroups to
  Inqueue itself (actions/allocate/allocate.go), and the capacity plugin still refuses allocation
  beyond a queue's capability;
- tier 1: ``priority`` (PriorityClass order and preemption), ``gang`` (minMember: all or nothing),
  ``conformance`` (never evicts kube-system's critical pods). gang with ``enablePreemptable: false``:
  its victim check refuses every task of a job at its minMember (so every 1-pod job), a tier that names
  no victim passes the choice to the next, and there drf's share test refuses them too, so a
  higher-priority job never preempted a lower one of its queue (measured on v1.14.1). The priority
  plugin picks the victims alone: a lower-priority gang may lose a pod and wait whole again;
- tier 2: ``drf``, ``predicates`` (node fit), the queue plugin that reads gpugov's quotas
  (``capacity`` with ``enableHierarchy`` for the department tree, or ``proportion`` when the
  SchedulingPolicy says so; the two cannot be combined), ``nodeorder``, ``binpack`` and
  ``nodegroup`` (a Queue's jobs run only on its pools' node groups).

``gpugov doctor`` reads the live ConfigMap back and checks the parts gpugov depends on.
"""

from __future__ import annotations

from typing import Any

import yaml

from gpugov.compile.common import Object, Scope, metadata
from gpugov.i18n import Text
from gpugov.kube.objects import LABEL_COMPONENT

CONFIGMAP_NAME = "volcano-scheduler-configmap"  # the chart's name for release "volcano"
CONFIGMAP_NAMESPACE = "volcano-system"
CONFIG_KEY = "volcano-scheduler.conf"
COMPONENT = "volcano-scheduler"  # its gpugov.io/component label

ACTIONS = ("allocate", "preempt", "reclaim", "backfill")
# What each promise needs from the configuration, for doctor's check and its messages.
REQUIRED_ACTIONS = {
    "allocate": Text("nothing is scheduled"),
    "preempt": Text("higher priority work never preempts lower priority work of its queue"),
    "reclaim": Text("a queue below its deserved quota never gets it back from queues that borrowed it"),
}
FORBIDDEN_ACTIONS = {
    "enqueue": Text("a PodGroup stays Pending while its parent queue is at capability, and reclaim never considers a "
                    "Pending PodGroup: a queue below its deserved quota waits for ever (volcano#4679)"),
}
REQUIRED_PLUGINS = {
    "priority": Text("jobs are not ordered or preempted by their PriorityClass"),
    "gang": Text("a job's pods are not admitted all or nothing (minMember)"),
    "predicates": Text("pods are placed on nodes they do not fit"),
    "nodegroup": Text("a Queue's jobs may run outside its pools' node groups"),
}


def scheduler_configuration(queue_plugin: str) -> dict[str, Any]:
    """The configuration as Volcano's ``conf.SchedulerConfiguration`` reads it."""
    queue: dict[str, Any] = {"name": queue_plugin}
    if queue_plugin == "capacity":
        queue["enableHierarchy"] = True
    return {
        "actions": ", ".join(ACTIONS),
        "tiers": [
            # gang's preemptable check refuses every victim of a job at its minMember (every 1-pod job), and a
            # tier that names no victim passes the decision to the next, where drf's share test refuses them
            # too: higher priority work then never preempts lower priority work of its queue.
            {"plugins": [{"name": "priority"}, {"name": "gang", "enablePreemptable": False}, {"name": "conformance"}]},
            {
                "plugins": [
                    {"name": "drf"},
                    {"name": "predicates"},
                    queue,
                    {"name": "nodeorder"},
                    {"name": "binpack"},
                    {"name": "nodegroup"},
                ]
            },
        ],
    }


def scheduler_conf_text(queue_plugin: str) -> str:
    return yaml.safe_dump(scheduler_configuration(queue_plugin), sort_keys=False, default_flow_style=False)


def scheduler_configmap(scope: Scope) -> list[Object]:
    """The ConfigMap Volcano's chart mounts as the scheduler's configuration."""
    policy = scope.model.policy
    meta = metadata(CONFIGMAP_NAME, policy, {LABEL_COMPONENT: COMPONENT}, CONFIGMAP_NAMESPACE)
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
             "data": {CONFIG_KEY: scheduler_conf_text(policy.volcano_plugin)}}]


def plugin_names(conf: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every plugin of a parsed configuration, by name."""
    return {
        str(plugin.get("name")): plugin
        for tier in conf.get("tiers") or []
        for plugin in (tier or {}).get("plugins") or []
        if isinstance(plugin, dict)
    }


def action_names(conf: dict[str, Any]) -> list[str]:
    return [a.strip() for a in str(conf.get("actions") or "").split(",") if a.strip()]


def configuration_problems(text: str, queue_plugin: str) -> list[Text]:
    """What a live scheduler configuration lacks for gpugov's promises (empty: none)."""
    try:
        conf = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return [Text("{key} is not YAML: {error}", key=CONFIG_KEY, error=str(exc).splitlines()[0])]
    if not isinstance(conf, dict):
        return [Text("{key} is not a mapping", key=CONFIG_KEY)]
    problems = []
    actions = action_names(conf)
    for action, consequence in REQUIRED_ACTIONS.items():
        if action not in actions:
            problems.append(Text("action {action} is missing: {consequence}", action=action, consequence=consequence))
    for action, consequence in FORBIDDEN_ACTIONS.items():
        if action in actions:
            problems.append(Text("action {action} is configured: {consequence}", action=action,
                                 consequence=consequence))
    plugins = plugin_names(conf)
    for plugin, consequence in REQUIRED_PLUGINS.items():
        if plugin not in plugins:
            problems.append(Text("plugin {plugin} is missing: {consequence}", plugin=plugin, consequence=consequence))
    if queue_plugin not in plugins:
        problems.append(Text("plugin {plugin} is missing: the Queues' quotas are not read (the SchedulingPolicy "
                             "declares volcano.plugin {plugin})", plugin=queue_plugin))
    elif queue_plugin == "capacity" and plugins["capacity"].get("enableHierarchy") is not True:
        problems.append(Text("plugin capacity runs without enableHierarchy: the department queues are ignored"))
    if "gang" in plugins and plugins["gang"].get("enablePreemptable") is not False:
        problems.append(Text("plugin gang judges preemption victims (enablePreemptable is not false): no job at its "
                             "minMember is preempted, so higher priority work never preempts lower priority work of "
                             "its queue"))
    other = "proportion" if queue_plugin == "capacity" else "capacity"
    if other in plugins:
        problems.append(Text("plugins {plugin} and {other} are both configured: Volcano cannot combine them",
                             plugin=queue_plugin, other=other))
    return problems
