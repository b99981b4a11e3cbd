"""plan: the desired state of two revisions compared, for the pull request's summary.

diff.py compares the models and compile's objects (quotas, capacity, MIG, priorities, departments
and weights, risks); removal.py says what each deploy path does with what is no longer declared;
report.py writes the summary as markdown or text.
"""

from __future__ import annotations

from gpugov.plan.diff import (
    QUOTA_FIELDS,
    ObjectChange,
    Plan,
    QuotaChange,
    immutable_change,
    make_plan,
    object_changes,
    to_json,
)
from gpugov.plan.risks import Risk

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
