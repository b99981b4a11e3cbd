"""plan: the desired state of two revisions compared, for the pull request's summary.

diff.py compares the models and compile's objects (quotas, capacity, MIG, priorities, risks);
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
