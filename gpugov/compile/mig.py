"""The mig-parted ConfigMap (version v1) that the NVIDIA GPU Operator's mig-manager reads.

One named config per declared layout, `<pool>-<layout>`, restricted with device-filter to
the pool model's PCI ids so a mislabelled node never gets another model's geometry, plus
`all-disabled` for the whole-GPU nodes of MIG pools. Nodes select a config through the
label nvidia.com/mig.config (see nodes.py). Point the operator at it with
`migManager.config.name`.
"""

from __future__ import annotations

from typing import Any

import yaml

from gpugov.catalog.mig import mig_config_key
from gpugov.compile.common import ANNOTATION_SOURCE, Object, Scope, metadata
from gpugov.declarations.model import GPUPool
from gpugov.kube.objects import LABEL_MIG_CONFIG

ALL_DISABLED = "all-disabled"


def mig_config_name(pool: GPUPool, layout: str) -> str:
    return f"{pool.name}-{layout}"


def mig_parted_config(scope: Scope) -> dict[str, Any]:
    configs: dict[str, Any] = {ALL_DISABLED: [{"devices": "all", "mig-enabled": False}]}
    for pool in scope.pools.values():
        for layout, mix in sorted(pool.mig_layouts.items()):
            spec: dict[str, Any] = {"devices": "all"}
            if pool.model.pci_device_ids:
                spec["device-filter"] = list(pool.model.pci_device_ids)
            spec["mig-enabled"] = True
            spec["mig-devices"] = {profile: mix[profile] for profile in sorted(mix)}
            configs[mig_config_name(pool, layout)] = [spec]
    return {"version": "v1", "mig-configs": dict(sorted(configs.items()))}


def mig_configmap(scope: Scope) -> list[Object]:
    mig_pools = [pool for pool in scope.pools.values() if pool.uses_mig]
    if not mig_pools:
        return []
    text = yaml.safe_dump(mig_parted_config(scope), sort_keys=False, default_flow_style=False)
    cluster = scope.cluster
    meta = metadata(
        cluster.mig_config_name, mig_pools[0], {LABEL_MIG_CONFIG: "true"}, cluster.mig_config_namespace
    )
    meta["annotations"][ANNOTATION_SOURCE] = ",".join(pool.origin for pool in mig_pools)
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"config.yaml": text}}]


def compiled_mig_configs(objects: list[Object]) -> dict[str, Any]:
    """The `mig-configs` of the mig-parted ConfigMap in compiled objects (for plan and drift)."""
    for obj in objects:
        if obj["kind"] == "ConfigMap" and "config.yaml" in obj.get("data", {}):
            return dict(yaml.safe_load(obj["data"]["config.yaml"]).get("mig-configs") or {})
    return {}


__all__ = ["ALL_DISABLED", "compiled_mig_configs", "mig_config_key", "mig_config_name", "mig_configmap", "mig_parted_config"]
