"""The capacity report as JSON: every number a decimal string, as the usage ledger writes them."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from gpugov.capacity.report import ClusterReport, q, ratio_text

FORMAT_VERSION = 1


def _n(value: Decimal | None) -> str | None:
    return None if value is None else q(value)


def _r(value: Decimal | None) -> str | None:
    return None if value is None else ratio_text(value)


def cluster_json(report: ClusterReport) -> dict[str, Any]:
    pools = []
    for pool in report.pools:
        pools.append({
            "pool": pool.name,
            "model": pool.model,
            "accelerators_per_node": pool.per_node,
            "nodes": {"declared": pool.nodes_declared, "live": pool.nodes_live},
            "gpus": {"declared": pool.gpus_declared, "live_gfd": pool.gpus_live},
            "price_per_accelerator_hour": _n(pool.price_per_hour),
            "resources": [
                {
                    "resource": line.resource,
                    "physical_declared": _n(line.declared),
                    "physical_live": _n(line.live),
                    "guaranteed": _n(line.guaranteed),
                    "borrowable": _n(line.borrowable),
                    "unassigned": _n(line.unassigned),
                    "oversubscription_ratio": _r(line.ratio),
                    "ratio_limit": _n(line.ratio_limit),
                }
                for line in pool.resources
            ],
            "mig": [
                {"profile": m.profile, "resource": m.resource, "declared": _n(m.declared),
                 "guaranteed": _n(m.guaranteed), "carvable": _n(m.carvable)}
                for m in pool.mig
            ],
            "live_nodes": [
                {"node": n.name, "product": n.product, "gpus": n.gpus, "mig_config": n.mig_config,
                 "mig_state": n.mig_state}
                for n in pool.nodes
            ],
        })
    body: dict[str, Any] = {
        "cluster": report.cluster,
        "backend": report.backend,
        "live": report.live,
        "pools": pools,
        "tenants": [
            {"tenant": t.tenant, "department": t.department, "resource": t.resource, "nominal": _n(t.nominal),
             "ceiling": _n(t.ceiling), "borrowable": _n(t.borrowable), "lendable": _n(t.lendable)}
            for t in report.tenants
        ],
        "window": None,
        "usage": [],
        "pool_usage": [],
        "advice": [{"kind": a.kind, "subject": a.subject, "text": a.text} for a in report.advice],
    }
    if report.window is not None:
        w = report.window
        body["window"] = {"since": w.since.isoformat(), "until": w.until.isoformat(), "hours": _n(w.hours),
                          "ledger": w.source}
        body["usage"] = [
            {"tenant": u.tenant, "pool": u.pool, "resource": u.resource, "nominal": _n(u.nominal),
             "guaranteed_hours": _n(u.guaranteed_hours), "used_hours": _n(u.admitted_hours),
             "in_quota_hours": _n(u.in_quota_hours), "borrowed_hours": _n(u.borrowed_hours),
             "idle_hours": _n(u.idle_hours), "guarantee_use": _r(u.use), "cost": _n(u.cost),
             **({"currency": u.currency} if u.currency else {})}
            for u in report.usage
        ]
        body["pool_usage"] = [
            {"pool": p.pool, "resource": p.resource, "capacity_hours": _n(p.capacity_hours),
             "used_hours": _n(p.admitted_hours), "lent_hours": _n(p.borrowed_hours), "idle_hours": _n(p.idle_hours),
             "unallocated_hours": _n(p.unallocated_hours), "utilisation": _r(p.utilisation)}
            for p in report.pool_usage
        ]
    return body


def report_json(reports: list[ClusterReport]) -> dict[str, Any]:
    return {"version": FORMAT_VERSION, "clusters": [cluster_json(r) for r in reports]}
