"""Grafana dashboards from the declarations, in the JSON that Grafana's file provisioning reads: one for the
platform (per pool, department, cost centre and tenant) and one per tenant (per pool, resource and job),
all drawn from the recording rules of gpugov.monitoring.rules, so a number on a dashboard is the number
the rules record and the ledger charges.

Every query is plain PromQL (no Grafana macros), so a test can run each one against a real Prometheus.
The Prometheus data source is a dashboard variable (`datasource`), chosen on import or by provisioning.
"""

from __future__ import annotations

import hashlib
from typing import Any

from gpugov.declarations.model import Model
from gpugov.monitoring.rules import declared

SCHEMA_VERSION = 39
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
FOLDER = "GPU governance"


def _uid(kind: str, name: str) -> str:
    """A stable dashboard uid of at most 40 characters (Grafana's limit)."""
    uid = f"gpugov-{kind}-{name}"
    if len(uid) <= 40:
        return uid
    return f"{uid[:31]}-{hashlib.sha256(uid.encode()).hexdigest()[:8]}"


def _panel(index: int, title: str, kind: str, targets: list[tuple[str, str]], unit: str,
           width: int = 12, height: int = 8) -> dict[str, Any]:
    x, y = (index % (24 // width)) * width, (index // (24 // width)) * height
    panel: dict[str, Any] = {
        "id": index + 1, "title": title, "type": kind, "datasource": DATASOURCE,
        "gridPos": {"h": height, "w": width, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [{"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr, "legendFormat": legend,
                     **({"instant": True, "format": "table"} if kind == "table" else {})}
                    for i, (expr, legend) in enumerate(targets)],
    }
    if unit == "percentunit":
        panel["fieldConfig"]["defaults"] |= {"min": 0, "max": 1}
    return panel


def _dashboard(uid: str, title: str, tags: list[str], panels: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "uid": uid, "title": title, "tags": ["gpugov", *tags], "schemaVersion": SCHEMA_VERSION, "version": 1,
        "editable": False, "timezone": "utc", "refresh": "1m", "time": {"from": "now-7d", "to": "now"},
        "templating": {"list": [{"name": "datasource", "label": "Prometheus", "type": "datasource",
                                 "query": "prometheus", "current": {}, "hide": 0}]},
        "panels": panels,
    }


def platform(model: Model, cluster: str) -> dict[str, Any]:
    """The platform's dashboard: allocation, idle allocation and activity per pool, department, cost
    centre and tenant."""
    panels = [
        ("Allocated devices per pool", "timeseries",
         [("sum by (pool, resource) (gpugov:pool_devices:count)", "{{pool}} {{resource}}")], "short"),
        ("Allocated but idle devices per pool", "timeseries",
         [("sum by (pool, resource) (gpugov:pool_idle_devices:count)", "{{pool}} {{resource}}")], "short"),
        ("Activity per pool", "timeseries",
         [("gpugov:pool_activity:avg", "{{pool}} {{resource}}")], "percentunit"),
        ("Activity per department", "timeseries",
         [("gpugov:department_activity:avg", "{{department}} {{resource}}")], "percentunit"),
        ("Idle devices per cost centre", "timeseries",
         [("gpugov:cost_center_idle_devices:count", "{{cost_center}} {{resource}}")], "short"),
        ("Framebuffer used per tenant", "timeseries",
         [("sum by (tenant) (gpugov:tenant_memory_used:bytes)", "{{tenant}}")], "bytes"),
        ("Tenants now: allocated, idle, activity", "table",
         [("gpugov:tenant_devices:count", "allocated"), ("gpugov:tenant_idle_devices:count", "idle"),
          ("gpugov:tenant_activity:avg", "activity")], "short"),
        ("Idle share of allocation per tenant", "timeseries",
         [("sum by (tenant) (gpugov:tenant_idle_devices:count) / sum by (tenant) (gpugov:tenant_devices:count)",
           "{{tenant}}")], "percentunit"),
    ]
    return _dashboard(_uid("platform", cluster), f"GPU governance: cluster {cluster}", ["platform", cluster],
                      [_panel(i, *p) for i, p in enumerate(panels)])


def tenant(model: Model, cluster: str, name: str) -> dict[str, Any]:
    """One tenant's dashboard: its allocation, idle allocation, activity and memory per pool, and its jobs."""
    who = f'tenant="{name}"'
    panels = [
        ("Allocated devices", "timeseries", [(f"gpugov:tenant_devices:count{{{who}}}", "{{pool}} {{resource}}")],
         "short"),
        ("Allocated but idle devices", "timeseries",
         [(f"gpugov:tenant_idle_devices:count{{{who}}}", "{{pool}} {{resource}}")], "short"),
        ("Activity", "timeseries", [(f"gpugov:tenant_activity:avg{{{who}}}", "{{pool}} {{resource}}")],
         "percentunit"),
        ("Framebuffer used", "timeseries", [(f"gpugov:tenant_memory_used:bytes{{{who}}}", "{{pool}} {{resource}}")],
         "bytes"),
        ("Jobs: activity", "timeseries", [(f"gpugov:job_activity:avg{{{who}}}", "{{namespace}}/{{job_name}}")],
         "percentunit"),
        ("Jobs now: devices, activity, memory peak", "table",
         [(f"gpugov:job_devices:count{{{who}}}", "devices"), (f"gpugov:job_activity:avg{{{who}}}", "activity"),
          (f"gpugov:job_memory_used:max_bytes{{{who}}}", "memory")], "short"),
    ]
    return _dashboard(_uid("tenant", name), f"GPU governance: tenant {name}", ["tenant", name],
                      [_panel(i, *p) for i, p in enumerate(panels)])


def dashboards(model: Model, cluster: str) -> dict[str, dict[str, Any]]:
    """File name -> dashboard: the platform's and each of the cluster's tenants'."""
    out = {f"gpugov-platform-{cluster}.json": platform(model, cluster)}
    for name in sorted({info["tenant"] for info in declared(model, cluster)[0]}):
        out[f"gpugov-tenant-{name}.json"] = tenant(model, cluster, name)
    return out


def provisioning(path: str = "/var/lib/grafana/dashboards/gpugov") -> dict[str, Any]:
    """Grafana's dashboard provider (provisioning/dashboards/gpugov.yaml) reading the files from `path`."""
    return {"apiVersion": 1, "providers": [{
        "name": "gpugov", "orgId": 1, "folder": FOLDER, "type": "file", "disableDeletion": False,
        "allowUiUpdates": False, "updateIntervalSeconds": 60, "options": {"path": path}}]}
