"""Plan risks: changes a reviewer must see before a pull request merges (GP rules)."""

from __future__ import annotations

from dataclasses import dataclass

from gpugov.findings import Level, Rule, rule

QUOTA_DECREASE = rule("GP001", "quota-decrease", Level.WARNING,
                      "A nominal quota or a borrowing or lending limit that existed goes down or is removed; running "
                      "work may be preempted.")
TENANT_REMOVED = rule("GP002", "tenant-removed", Level.WARNING,
                      "A tenant is removed; drain its queue first (Kueue: ClusterQueue stopPolicy HoldAndDrain; "
                      "Volcano: close the Queue).")
MIG_RECONFIGURATION = rule("GP003", "mig-reconfiguration", Level.WARNING,
                           "Nodes get a new MIG geometry; mig-manager drains them while it reconfigures.")
PROTECTED_PRIORITY = rule("GP004", "protected-priority-class", Level.WARNING,
                          "A non-preemptible priority class changes or disappears.")
LOCALQUEUE_REPOINTED = rule("GP005", "localqueue-repointed", Level.WARNING,
                            "A LocalQueue moves to another ClusterQueue: clusterQueue is immutable, so it is recreated.")
KUEUE_IMMUTABLE = rule("GP006", "kueue-immutable", Level.WARNING,
                       "A field Kueue does not let change in place changes: the object is deleted and recreated.")
NEEDS_APPROVAL = rule("GP007", "needs-approval", Level.WARNING,
                      "Accelerator quotas move by more than Guardrails.maxQuotaChangePerPullRequest GPU equivalents "
                      "(a whole device is 1, a MIG slice its share of the GPU's compute slices) in one pull request.")
DEPARTMENT_CHANGED = rule("GP008", "department-changed", Level.WARNING,
                          "A tenant moves to another department, or a department to another parent: it now lends to "
                          "and borrows from another cohort (Kueue) or parent queue (Volcano).")
FAIR_SHARE_RAISED = rule("GP009", "fair-share-raised", Level.WARNING,
                         "A tenant's or department's fairSharing weight goes up (or a new one starts above the default "
                         "1): it takes a larger share of idle accelerators from the others.")
QUEUE_GAINS_PROTECTED = rule("GP010", "queue-gains-protected-priority", Level.WARNING,
                             "A queue admits a non-preemptible priority class it did not admit before: that work can "
                             "no longer be preempted to give borrowed quota back.")


@dataclass(frozen=True)
class Risk:
    rule: str  # GP id
    id: str  # the rule's name, e.g. quota-decrease
    message: str


def risk(of: Rule, message: str) -> Risk:
    return Risk(of.id, of.name, message)
