"""A plan as JSON (`gpugov plan --format json`): Decimals as Kubernetes quantities, and a summary."""

from __future__ import annotations

from dataclasses import asdict
from decimal import Decimal
from typing import Any

from gpugov.kube.quantity import format_quantity
from gpugov.plan.changes import Plan


def to_json(plan: Plan) -> dict[str, Any]:
    def clean(value: Any) -> Any:
        if isinstance(value, Decimal):
            return format_quantity(value)
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        return value

    data = clean(asdict(plan))
    data["summary"] = {"risks": len(plan.risks), "quota_changes": len(plan.quotas), "object_changes": len(plan.objects)}
    return data
