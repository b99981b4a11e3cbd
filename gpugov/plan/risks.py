"""Plan risks: changes a reviewer must see before a pull request merges (GP rules)."""

from __future__ import annotations

from dataclasses import dataclass

from gpugov.findings import Level, Rule, rule
from gpugov.i18n import Text

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

# GP011-GP025: every change that widens a tenant's power (gpugov/plan/directions.py gives each field of
# every declaration kind its direction; gpugov/plan/widening.py raises these from that table).
OUTSIDE_DECLARATIONS = rule("GP011", "change-outside-declarations", Level.WARNING,
                            "A file outside the declaration folders changes (gpugov's code, schemas, workflows, "
                            "CODEOWNERS, build files, scripts): the gate reads declarations only, so the platform "
                            "team reviews the rest.")
NAMESPACE_CLAIMED = rule("GP012", "namespace-claimed", Level.WARNING,
                         "A tenant claims a namespace it did not have: its RoleBindings give its people their roles there. gpugov "
                         "apply refuses a namespace that exists on the cluster without being gpugov's unless the "
                         "tenant adopts it (spec.adoptNamespaces).")
NAMESPACE_ADOPTED = rule("GP013", "namespace-adopted", Level.WARNING,
                         "A tenant adopts a namespace (spec.adoptNamespaces): gpugov apply takes over a namespace "
                         "that exists on the cluster without being gpugov's.")
QUOTA_RAISED = rule("GP014", "quota-raised", Level.WARNING,
                    "A nominal quota goes up or a new one appears: guaranteed accelerators taken from the pool's "
                    "shared capacity.")
BORROWING_RAISED = rule("GP015", "borrowing-limit-raised", Level.WARNING,
                        "A borrowing limit goes up or is removed (unbounded borrowing of the others' idle quota).")
LENDING_RAISED = rule("GP016", "lending-limit-raised", Level.WARNING,
                      "A lending limit goes up or is removed: more of a guaranteed quota may be lent out, and taken "
                      "back only by preemption.")
PRIORITY_RAISED = rule("GP017", "priority-raised", Level.WARNING,
                       "A priority class's value goes up: its work preempts more of the others'.")
QUEUE_WIDENED = rule("GP018", "queue-widened", Level.WARNING,
                     "A queue is added, moves to another namespace, or admits a priority class it did not admit.")
POOL_GAINS_NODE = rule("GP019", "pool-gains-node", Level.WARNING,
                       "A pool gains a node (taken from another pool, or new): the pool's quotas and flavor reach it.")
OWNERS_CHANGED = rule("GP020", "owners-changed", Level.WARNING,
                      "Who owns, reviews or works in a tenant or department changes (owners, RBAC subjects).")
DECLARATION_ADDED = rule("GP021", "declaration-added", Level.WARNING,
                         "A new tenant, department, pool, cluster, priority class or accelerator model is declared.")
GUARDRAIL_LOOSENED = rule("GP022", "guardrail-loosened", Level.WARNING,
                          "A guardrail is loosened or removed (capacity ratios, quota change limit, owner and cost "
                          "centre requirements, platform team, reserved namespaces).")
SCHEDULING_CHANGED = rule("GP023", "scheduling-policy-changed", Level.WARNING,
                          "The preemption or scheduler policy changes: who may reclaim or preempt whose work.")
CLUSTER_CHANGED = rule("GP024", "cluster-changed", Level.WARNING,
                       "A cluster's settings change (backend, the operations image and namespace that run with "
                       "cluster rights, MIG config), or a tenant is deployed to another cluster.")
HARDWARE_CHANGED = rule("GP025", "hardware-widened", Level.WARNING,
                        "A pool or accelerator model changes so that more can run on it or elsewhere: more devices, "
                        "a taint removed, a selector, model, sharing or MIG/vNPU layout changed.")

OBJECTS_ADOPTED = rule("GP026", "objects-adopted", Level.WARNING,
                       "A Cluster adopts scheduler objects (spec.adopt): gpugov apply takes over ClusterQueues, "
                       "Cohorts, flavors, LocalQueues, priority classes or Topologies that exist on the cluster "
                       "without being gpugov's, and from then on prune deletes any of them the declarations drop.")
BILLING_CHANGED = rule("GP027", "billing-changed", Level.WARNING,
                       "Who pays changes: a tenant's or department's costCenter, or a pool's price or currency (what "
                       "the usage ledger bills by); a tenant's own reviewers must not move its bill to another team.")


@dataclass(frozen=True)
class Risk:
    rule: str  # GP id
    id: str  # the rule's name, e.g. quota-decrease
    message: str  # a Text: English in JSON, the reader's language in the comment and the text output


# The words a risk's message puts in its fields, each a message of its own (issue #30).
HOLDERS = {"tenant": Text("tenant"), "department": Text("department")}
FIELDS = {"department": Text("department"), "parent": Text("parent")}
ABSENT = Text("absent")


def holder(word: str) -> str:
    """"tenant" or "department", told in the reader's language where the risk is shown."""
    return HOLDERS.get(word, word)


def risk(of: Rule, message: str) -> Risk:
    return Risk(of.id, of.name, message)
