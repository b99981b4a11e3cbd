"""Plan risks: changes a reviewer must see before a pull request merges (GP rules)."""

from __future__ import annotations

from dataclasses import dataclass

from gpugov.findings import Level, Rule, rule

QUOTA_DECREASE = rule("GP001", "quota-decrease", Level.WARNING,
                      "A nominal quota or a borrowing or lending limit goes down; running work may be preempted.")
TENANT_REMOVED = rule("GP002", "tenant-removed", Level.WARNING,
                      "A tenant is removed; its ClusterQueue must be drained first (stopPolicy: HoldAndDrain).")
MIG_RECONFIGURATION = rule("GP003", "mig-reconfiguration", Level.WARNING,
                           "Nodes get a new MIG geometry; mig-manager drains them while it reconfigures.")
PROTECTED_PRIORITY = rule("GP004", "protected-priority-class", Level.WARNING,
                          "A non-preemptible priority class changes or disappears.")
LOCALQUEUE_REPOINTED = rule("GP005", "localqueue-repointed", Level.WARNING,
                            "A LocalQueue moves to another ClusterQueue: clusterQueue is immutable, so it is recreated.")
KUEUE_IMMUTABLE = rule("GP006", "kueue-immutable", Level.WARNING,
                       "A field Kueue does not let change in place changes: the object is deleted and recreated.")
NEEDS_APPROVAL = rule("GP007", "needs-approval", Level.WARNING,
                      "Accelerator quotas move by more than Guardrails.maxQuotaChangePerPullRequest in one pull request.")


@dataclass(frozen=True)
class Risk:
    rule: str  # GP id
    id: str  # the rule's name, e.g. quota-decrease
    message: str


def risk(of: Rule, message: str) -> Risk:
    return Risk(of.id, of.name, message)
