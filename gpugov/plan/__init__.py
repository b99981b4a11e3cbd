"""plan: the desired state of two revisions compared, for the pull request's summary.

diff.py puts a plan together (make_plan); differ.py compares the models and compile's objects
(quotas, capacity, MIG, priorities, departments and weights, objects); assess.py and widening.py
weigh the changes as risks; changes.py holds the plan's values; removal.py says what each deploy
path does with what is no longer declared; report.py writes the summary as markdown or text,
serialize.py as JSON.
"""

from __future__ import annotations

from gpugov.plan.changes import QUOTA_FIELDS, ObjectChange, Plan, QuotaChange
from gpugov.plan.diff import make_plan  # from diff, where the gate's tests plant a lie about it
from gpugov.plan.differ import immutable_change, object_changes
from gpugov.plan.risks import Risk
from gpugov.plan.serialize import to_json

__all__ = [
    "QUOTA_FIELDS",
    "ObjectChange",
    "Plan",
    "QuotaChange",
    "Risk",
    "immutable_change",
    "make_plan",
    "object_changes",
    "to_json",
]
