"""Hardware drift: the pools' nodes as Kubernetes sees them against the declarations.

Desired labels and taints come from compile's node patches, the expected MIG geometry from
compile's mig-parted config; the model gives the facts of the hardware itself (GPU model,
GPUs per node) that GPU Feature Discovery and the device plugin report.
"""

from __future__ import annotations

from typing import Any

from gpugov.catalog import mig_resource_name
from gpugov.compile import Object
from gpugov.compile.common import LABEL_POOL
from gpugov.compile.mig import ALL_DISABLED, compiled_mig_configs
from gpugov.compile.nodes import MIG_CONFIG_LABEL
from gpugov.compile.origin import source_location
from gpugov.declarations.model import GPUPool, Model
from gpugov.drift.live import LiveState
from gpugov.drift.rules import (
    GPU_COUNT,
    GPU_PRODUCT,
    MIG_ALLOCATABLE,
    MIG_STATE,
    NODE_LABEL,
    NODE_MISSING,
    NODE_NOT_READY,
    NODE_TAINT,
)
from gpugov.findings import Finding, make
from gpugov.i18n import Text
from gpugov.kube.quantity import quantities_equal

MIG_STATE_LABEL = "nvidia.com/mig.config.state"


def mig_geometry(objects: list[Object]) -> dict[str, dict[str, int]]:
    """config name -> per-GPU MIG devices, from the compiled mig-parted ConfigMap."""
    configs = compiled_mig_configs(objects)
    return {name: dict(specs[0].get("mig-devices") or {}) for name, specs in configs.items()}


def _ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def expected_allocatable(pool: GPUPool, config: str | None, geometry: dict[str, dict[str, int]],
                         vnpu_layout: str | None = None) -> dict[str, int]:
    """Accelerator resources a node should advertise: MIG devices x GPUs of the compiled mig-parted
    layout it is labelled with, else what the pool's model says (whole devices, vNPU templates,
    HAMi's virtual devices)."""
    if config is None or config == ALL_DISABLED or pool.model.vendor != "nvidia":
        return {resource: int(amount) for resource, amount in pool.node_accelerators(None, vnpu_layout).items()}
    devices = geometry.get(config, {})
    expected = {mig_resource_name(profile): count * pool.per_node for profile, count in devices.items()}
    expected["nvidia.com/gpu"] = 0
    return expected


def hardware_findings(model: Model, objects: list[Object], live: LiveState) -> list[Finding]:
    findings: list[Finding] = []
    geometry = mig_geometry(objects)
    # (pool, node) -> the node's vNPU layout; reversed so the first entry of a name wins, as a search would
    vnpu_layouts = {(p.name, n.name): n.vnpu_layout for p in model.pools.values() for n in reversed(p.nodes)}
    for patch in (o for o in objects if o["kind"] == "Node"):
        name = patch["metadata"]["name"]
        desired_labels = patch["metadata"]["labels"]
        pool = model.pools[desired_labels[LABEL_POOL]]
        where = source_location(patch)
        node = live.nodes.get(name)
        if node is None:
            findings.append(make(NODE_MISSING, Text("node {node} of pool {pool} is not in the cluster", node=name,
                                                    pool=pool.name), where,
                                 object=f"Node {name}"))
            continue
        labels = node["metadata"].get("labels") or {}
        status = node.get("status") or {}
        if not _ready(node):
            findings.append(make(NODE_NOT_READY, Text("node {node} of pool {pool} is not Ready", node=name,
                                                      pool=pool.name), where,
                                 object=f"Node {name}"))
        for key, value in desired_labels.items():
            if labels.get(key) != value:
                now = Text("not set") if key not in labels else repr(labels[key])
                findings.append(make(NODE_LABEL, Text("node {node}: label {key} is {live}, declared {declared}",
                                                      node=name, key=key, live=now, declared=repr(value)),
                                     where, object=f"Node {name}", declared=value, live=str(labels.get(key))))
        live_taints = {(t.get("key"), t.get("value", ""), t.get("effect")) for t in (node.get("spec") or {}).get(
            "taints") or []}
        for taint in (patch.get("spec") or {}).get("taints", []):
            if (taint["key"], taint.get("value", ""), taint["effect"]) not in live_taints:
                missing = f"{taint['key']}={taint.get('value', '')}:{taint['effect']}"
                findings.append(make(NODE_TAINT, Text("node {node}: taint {taint} is missing", node=name, taint=missing),
                                     where, object=f"Node {name}"))
        if pool.model.vendor == "nvidia":
            products = (pool.product_label,) if pool.product_label else pool.model.gfd_products
            product = labels.get("nvidia.com/gpu.product")
            if product not in products:
                findings.append(make(GPU_PRODUCT, Text("node {node}: nvidia.com/gpu.product is {product}, pool {pool} "
                                                       "declares {model} ({products})", node=name,
                                                       product=repr(product), pool=pool.name, model=pool.model.name,
                                                       products=", ".join(products)), where,
                                     object=f"Node {name}", declared=pool.model.name, live=str(product)))
            count = labels.get("nvidia.com/gpu.count")
            if count != str(pool.per_node):
                findings.append(make(GPU_COUNT, Text("node {node}: nvidia.com/gpu.count is {count}, pool declares "
                                                     "{declared}", node=name, count=repr(count),
                                                     declared=pool.per_node), where, object=f"Node {name}",
                                     declared=str(pool.per_node), live=str(count)))
        config = desired_labels.get(MIG_CONFIG_LABEL)
        if config is not None and labels.get(MIG_STATE_LABEL) != "success":
            findings.append(make(MIG_STATE, Text("node {node}: {label} is {state} for config {config}", node=name,
                                                 label=MIG_STATE_LABEL, state=repr(labels.get(MIG_STATE_LABEL)),
                                                 config=config), where, object=f"Node {name}",
                                 live=str(labels.get(MIG_STATE_LABEL))))
        allocatable = status.get("allocatable") or {}
        vnpu_layout = vnpu_layouts.get((pool.name, name))
        for resource, amount in expected_allocatable(pool, config, geometry, vnpu_layout).items():
            have = allocatable.get(resource, 0)
            if not quantities_equal(have, amount):
                rule_ = MIG_ALLOCATABLE if config is not None else GPU_COUNT
                findings.append(make(rule_, Text("node {node}: allocatable {resource} is {have}, declared layout "
                                                 "{layout} gives {amount}", node=name, resource=resource, have=have,
                                                 layout=config or Text("whole GPUs"), amount=amount), where, object=f"Node {name}",
                                     declared=str(amount), live=str(have)))
    return findings
