"""Device equivalents: how much of one physical accelerator one unit of each resource a pool
offers is, for guardrails (GP007) and costs (usage), so every unit gpugov accepts counts.

- a whole device: 1;
- a MIG device: its compute slices over the GPU's (1g.10gb = 1/7 of an A100): ``gpu_equivalents``,
  which compile also weighs quotas with;
- an Ascend vNPU template: the larger of its share of the NPU's memory and of its AI cores
  (vir10_3c_32g on a 64 GiB 910B = 1/2);
- HAMi's units on a shared pool: a vGPU slot is 1/deviceSplitCount of a device, a memory unit
  1/(units per device), a core unit 1/(units per device). These are three views of the same
  devices, so a quota's or a change's equivalents take the largest of them (``hami_views``),
  never their sum.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from gpugov.catalog import mig_resource_name
from gpugov.catalog.mig import GEOMETRIES
from gpugov.declarations.model import GPUPool


def gpu_equivalents(pool: GPUPool) -> dict[str, Decimal]:
    """How much of one physical accelerator each of the pool's resources is: 1 for a whole
    device, compute slices / the GPU's compute slices for a MIG profile (1g.10gb = 1/7 on A100)."""
    weights = {pool.model.resource: Decimal(1)}
    if pool.model.mig_geometry:
        total, _, slots = GEOMETRIES[pool.model.mig_geometry]
        for profile in pool.model.mig_profiles.values():
            weights[mig_resource_name(profile.name)] = Decimal(slots[profile.slot][0]) / Decimal(total)
    return weights


def device_equivalents(pool: GPUPool) -> dict[str, Decimal]:
    """Resource name -> device equivalents of one unit of it, for every accelerator resource of the pool."""
    weights = dict(gpu_equivalents(pool))
    model = pool.model
    if model.vnpu is not None:
        for template in model.vnpu.templates.values():
            shares = []
            if model.memory:
                shares.append(template.memory / model.memory)
            if template.ai_cores and model.vnpu.ai_cores:
                shares.append(Decimal(template.ai_cores) / Decimal(model.vnpu.ai_cores))
            if shares:
                weights[template.resource] = max(shares)
    if pool.hami_units is not None:
        for resource, per_device in pool.hami_device_units.items():
            if per_device:
                weights[resource] = 1 / Decimal(per_device)
    return weights


def hami_views(pool: GPUPool) -> frozenset[str]:
    """The resources that are views of the same devices (HAMi's count, memory and cores)."""
    return frozenset(pool.hami_device_units) if pool.hami_units is not None else frozenset()


def equivalents_of(pool: GPUPool, amounts: Mapping[str, Decimal]) -> tuple[Decimal, frozenset[str]]:
    """Device equivalents of `amounts` (resource -> amount) of one holder on one pool: separate
    devices add up, HAMi's views of the same devices count their largest; with the resources
    that have no equivalent (none of the pool's accelerators)."""
    weights, views = device_equivalents(pool), hami_views(pool)
    total, shared = Decimal(0), Decimal(0)
    unknown = []
    for resource, amount in amounts.items():
        weight = weights.get(resource)
        if weight is None:
            unknown.append(resource)
        elif resource in views:
            shared = max(shared, abs(amount) * weight)
        else:
            total += abs(amount) * weight
    return total + shared, frozenset(unknown)


__all__ = ["device_equivalents", "equivalents_of", "gpu_equivalents", "hami_views"]
