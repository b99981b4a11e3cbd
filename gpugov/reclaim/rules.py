"""The rules gpugov reclaim's warnings and actions carry to the notification sinks (GD: they speak of the
live cluster against the declarations)."""

from __future__ import annotations

from gpugov.findings import Level, rule

RECLAIM_WARNED = rule(
    "GD040", "idle-workload-warned", Level.WARNING,
    "An admitted Workload (Kueue) or running Job (Volcano) stayed below its tenant's idle threshold for the "
    "declared window; its owner is warned (an Event and the gpugov.io/reclaim-warned-at annotation on it).",
    "Use the accelerators, end the job, or snooze it (annotation gpugov.io/reclaim-snooze-until, within the "
    "declared snooze.maximum) before the grace is over.")
RECLAIM_DEACTIVATED = rule(
    "GD041", "idle-workload-deactivated", Level.WARNING,
    "A warned Workload or Job stayed idle past its grace and the policy deactivates: on Kueue gpugov set "
    "spec.active=false and Kueue freed its quota; on Volcano it suspended the batch Job (spec.suspend=true) or "
    "aborted the Volcano Job (an AbortJob Command), and its pods ended.",
    "Kueue: set spec.active back to true (kubectl patch workload ... --type merge -p "
    "'{\"spec\":{\"active\":true}}') to queue it again once it will use what it holds. Volcano: submit the job "
    "again (gpugov's mark keeps the reclaimed one down).")
