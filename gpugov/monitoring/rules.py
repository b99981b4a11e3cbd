"""Recording rules compiled from the declarations: DCGM activity, framebuffer memory and allocation
attributed to tenant, department, cost centre, pool, resource and job, the way the usage ledger
attributes them.

The same facts as the ledger's idle hours (gpugov.usage.idle): whole GPUs by DCGM_FI_DEV_GPU_UTIL
(percent), MIG instances by DCGM_FI_PROF_GR_ENGINE_ACTIVE (a ratio; DEV_GPU_UTIL is not produced for
MIG), a pod's busiest device deciding whether the pod is idle, against the declared
Guardrails.idle.utilizationBelowPercent. The workload's pod is read from exported_pod / exported_namespace
(the GPU Operator's ServiceMonitor, honorLabels false) or pod / namespace (a scrape keeping the
exporter's labels), its node from Hostname or hostname (dcgm-exporter renames it on its main branch).
Tenants come from their declared namespaces and pools from their declared nodes, both compiled into
constant `info` series, so a GPU outside the declarations is never attributed.

The series (every ratio in 0..1, memory in bytes):

| record | labels | what |
|---|---|---|
| gpugov:device_activity:ratio | namespace, pod, node, gpu, resource, ... | each device's activity |
| gpugov:device_memory_used:bytes / gpugov:device_memory_total:bytes | the same | framebuffer |
| gpugov:tenant_device_activity:ratio | + tenant, department, cost_center, pool, job_name | attributed |
| gpugov:pod_activity:max, gpugov:pod_devices:count, gpugov:pod_idle_devices:count | per pod | as the ledger |
| gpugov:tenant_devices:count, gpugov:tenant_idle_devices:count, gpugov:tenant_activity:avg, gpugov:tenant_memory_used:bytes | tenant, department, cost_center, pool, resource | the ledger's rows |
| gpugov:department_... / gpugov:cost_center_... / gpugov:pool_... | each | the same, summed |
| gpugov:job_devices:count, gpugov:job_activity:avg, gpugov:job_memory_used:max_bytes | tenant, namespace, job_name | per job |
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from gpugov.declarations.model import Model
from gpugov.usage.ledger import cluster_pools, cost_center_of

GROUP = "gpugov-gpu-attribution"
TENANT = ("tenant", "department", "cost_center", "pool", "resource")
POD = (*TENANT, "namespace", "pod", "job_name")
JOB = ("tenant", "department", "cost_center", "namespace", "job_name")
# Job pods are <job>-<5 random characters>, indexed Job pods <job>-<index>-<5 random characters>.
JOB_OF_POD = "^(.+?)(?:-[0-9]+)?-[a-z0-9]{5}$"
MIB = 1048576


def _const(labels: dict[str, str]) -> str:
    """A constant series of value 1 with `labels` (PromQL has no literal with labels)."""
    expr = "vector(1)"
    for key, value in labels.items():
        expr = f'label_replace({expr}, "{key}", "{_quote(value)}", "", "")'
    return expr


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _normalise(expr: str) -> str:
    """The workload's pod in namespace/pod and the node in node, whichever way the scrape labelled them."""
    for target, source in (("namespace", "exported_namespace"), ("pod", "exported_pod"), ("node", "Hostname"),
                           ("node", "hostname")):
        expr = f'label_replace({expr}, "{target}", "$1", "{source}", "(.+)")'
    return expr


def _by(labels: tuple[str, ...]) -> str:
    return ", ".join(labels)


def declared(model: Model, cluster: str) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(namespace info, node info) of the cluster's tenants and pools, sorted."""
    namespaces = []
    for name, tenant in sorted(model.tenants.items()):
        if tenant.clusters and cluster not in tenant.clusters:
            continue
        for namespace in sorted(tenant.namespaces):
            namespaces.append({"namespace": namespace, "tenant": name, "department": tenant.department or "",
                               "cost_center": cost_center_of(model, tenant) or ""})
    nodes = [{"node": node.name, "pool": pool_name}
             for pool_name, pool in cluster_pools(model, cluster).items() for node in pool.nodes]
    return namespaces, sorted(nodes, key=lambda n: n["node"])


def recording_rules(model: Model, cluster: str) -> dict[str, Any]:
    """The rule file (`groups:`) for `cluster`, as Prometheus' --config rule_files and promtool read it."""
    threshold = model.limits.idle_below_percent / Decimal(100)
    namespaces, nodes = declared(model, cluster)
    rules: list[dict[str, Any]] = []
    for info in namespaces:
        rules.append({"record": "gpugov:namespace_tenant:info", "expr": _const(info)})
    for info in nodes:
        rules.append({"record": "gpugov:node_pool:info", "expr": _const(info)})
    whole = 'label_replace(DCGM_FI_DEV_GPU_UTIL{GPU_I_ID=""} / 100, "resource", "nvidia.com/gpu", "", "")'
    mig = ('label_replace(DCGM_FI_PROF_GR_ENGINE_ACTIVE{GPU_I_PROFILE!=""}, "resource", "nvidia.com/mig-$1", '
           '"GPU_I_PROFILE", "(.+)")')
    resource = ('label_replace(label_replace({metric}, "resource", "nvidia.com/gpu", "", ""), "resource", '
                '"nvidia.com/mig-$1", "GPU_I_PROFILE", "(.+)")')
    attributed = ("{series} * on (namespace) group_left (tenant, department, cost_center) "
                  "gpugov:namespace_tenant:info * on (node) group_left (pool) gpugov:node_pool:info")

    def job(expr: str) -> str:
        return f'label_replace({expr}, "job_name", "$1", "pod", "{JOB_OF_POD}")'

    rules += [
        {"record": "gpugov:device_activity:ratio", "expr": f"{_normalise(whole)} or {_normalise(mig)}"},
        {"record": "gpugov:device_memory_used:bytes",
         "expr": _normalise(resource.format(metric=f"DCGM_FI_DEV_FB_USED * {MIB}"))},
        {"record": "gpugov:device_memory_total:bytes",
         "expr": _normalise(resource.format(metric=f"(DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) * {MIB}"))},
        {"record": "gpugov:tenant_device_activity:ratio",
         "expr": job(attributed.format(series="gpugov:device_activity:ratio"))},
        {"record": "gpugov:tenant_device_memory_used:bytes",
         "expr": job(attributed.format(series="gpugov:device_memory_used:bytes"))},
        # per pod, as the ledger: the busiest device decides, every device the pod holds counts
        {"record": "gpugov:pod_activity:max", "expr": f"max by ({_by(POD)}) (gpugov:tenant_device_activity:ratio)"},
        {"record": "gpugov:pod_devices:count", "expr": f"count by ({_by(POD)}) (gpugov:tenant_device_activity:ratio)"},
        {"record": "gpugov:pod_idle_devices:count",
         "expr": f"gpugov:pod_devices:count and on ({_by(POD)}) (gpugov:pod_activity:max < {threshold})"},
        {"record": "gpugov:tenant_devices:count", "expr": f"sum by ({_by(TENANT)}) (gpugov:pod_devices:count)"},
        {"record": "gpugov:tenant_idle_devices:count",
         "expr": f"sum by ({_by(TENANT)}) (gpugov:pod_idle_devices:count) or "
                 f"0 * gpugov:tenant_devices:count"},
        {"record": "gpugov:tenant_activity:avg",
         "expr": f"avg by ({_by(TENANT)}) (gpugov:tenant_device_activity:ratio)"},
        {"record": "gpugov:tenant_memory_used:bytes",
         "expr": f"sum by ({_by(TENANT)}) (gpugov:tenant_device_memory_used:bytes)"},
        {"record": "gpugov:job_devices:count", "expr": f"sum by ({_by(JOB)}) (gpugov:pod_devices:count)"},
        {"record": "gpugov:job_activity:avg", "expr": f"avg by ({_by(JOB)}) (gpugov:tenant_device_activity:ratio)"},
        {"record": "gpugov:job_memory_used:max_bytes",
         "expr": f"max by ({_by(JOB)}) (gpugov:tenant_device_memory_used:bytes)"},
    ]
    for level, labels in (("department", ("department", "resource")), ("cost_center", ("cost_center", "resource")),
                          ("pool", ("pool", "resource"))):
        only = "" if level == "pool" else f'{{{level}!=""}}'  # a tenant of no department is in none
        for what in ("devices:count", "idle_devices:count"):
            rules.append({"record": f"gpugov:{level}_{what}",
                          "expr": f"sum by ({_by(labels)}) (gpugov:tenant_{what}{only})"})
        rules.append({"record": f"gpugov:{level}_activity:avg",
                      "expr": f"avg by ({_by(labels)}) (gpugov:tenant_device_activity:ratio{only})"})
    return {"groups": [{"name": GROUP, "rules": rules}]}


def prometheus_rule(model: Model, cluster: str, namespace: str = "monitoring") -> dict[str, Any]:
    """The same rules as a prometheus-operator PrometheusRule object."""
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": {"name": "gpugov-gpu-attribution", "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "gpugov", "gpugov.io/cluster": cluster}},
            "spec": recording_rules(model, cluster)}
