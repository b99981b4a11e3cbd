"""One what-if: compile a revision's model for a cluster, replay the trace, keep what the report needs.

The quotas come only from `compile(model, backend="kueue", cluster=cluster)`; the model itself supplies
hardware facts the Kueue objects do not carry: which accelerator resource a pool serves and
which pools hold a given GPU model (for a trace's `pool` and `model` columns), how a pool holds a
share of a device (HAMi units or MIG devices, for a trace's `share`), and how much of a device a
MIG slice or a HAMi unit is (for GPU-hours).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from decimal import Decimal

from gpugov.catalog import mig_resource_name
from gpugov.compile import compile
from gpugov.declarations.equivalents import device_equivalents, gpu_equivalents, hami_views
from gpugov.declarations.model import GPUPool, Model
from gpugov.whatif.report import Run
from gpugov.whatif.setup import FR, Placement, PoolSharing, Setup, cap_runtimes, read_setup
from gpugov.whatif.simulate import Options, Simulator
from gpugov.whatif.timeline import DEFAULT_START, quota_timeline
from gpugov.whatif.trace import Job


def placement_of(model: Model) -> Placement:
    resource_of_pool: dict[str, str] = {}
    pools_of_model: dict[str, list[str]] = {}
    resource_of_model: dict[str, str] = {}
    sharing_of_pool: dict[str, PoolSharing] = {}
    for name, pool in sorted(model.pools.items()):
        accelerator = pool.model
        resource_of_pool[name] = accelerator.resource
        pools_of_model.setdefault(accelerator.name.lower(), []).append(name)
        resource_of_model.setdefault(accelerator.name.lower(), accelerator.resource)
        sharing = sharing_of(pool)
        if sharing is not None:
            sharing_of_pool[name] = sharing
    return Placement(resource_of_pool, {k: tuple(v) for k, v in pools_of_model.items()}, resource_of_model,
                     sharing_of_pool)


def sharing_of(pool: GPUPool) -> PoolSharing | None:
    """How `pool` holds a share of a device: HAMi's units (a vGPU, and of one physical device its
    memory in the plugin's unit and its compute, before HAMi's scaling) or its MIG profiles."""
    units, hami = pool.hami_units, pool.hami
    if units is not None and hami is not None:
        views: list[tuple[str, Decimal]] = [(units.count, Decimal(1))]
        memory = hami.device_memory or pool.model.memory
        if units.memory and units.memory_unit and memory is not None:
            views.append((units.memory, (memory / units.memory_unit).to_integral_value("ROUND_FLOOR")))
        if units.cores and units.cores_per_device:
            views.append((units.cores, Decimal(units.cores_per_device)))
        return PoolSharing(hami=tuple(views))
    if pool.uses_mig:
        weights = gpu_equivalents(pool)
        offered = {mig_resource_name(profile) for layout in pool.mig_layouts.values() for profile in layout}
        return PoolSharing(mig=tuple(sorted(((r, weights[r]) for r in offered if r in weights),
                                            key=lambda item: (item[1], item[0]))))
    return None


def weights_of(model: Model) -> dict[FR, Decimal]:
    """Device equivalents of one unit of each (pool, resource): 1 for a whole device, a MIG
    profile's compute slices over the GPU's, a HAMi unit its part of one device."""
    return {(name, resource): weight for name, pool in sorted(model.pools.items())
            for resource, weight in device_equivalents(pool).items()}


def views_of(model: Model) -> frozenset[FR]:
    """The (pool, resource) pairs that are HAMi's views of the same devices: counted by their
    largest, never summed."""
    return frozenset((name, resource) for name, pool in sorted(model.pools.items()) for resource in hami_views(pool))


def kueue_setup(model: Model, cluster: str) -> Setup:
    return read_setup(compile(model, backend="kueue", cluster=cluster))


def replay(model: Model, cluster: str, jobs: list[Job], label: str, options: Options,
           start: datetime = DEFAULT_START, progress: Callable[[int, int, int], None] | None = None) -> Run:
    """`start`: the calendar instant of the trace's second 0, where the model's quotas change with
    time (QuotaGrant, QuotaWindow); a model without them replays the quotas as declared. `progress`: as
    Simulator.run's (jobs submitted, jobs in all, simulated ms), for a progress line."""
    timeline = None
    if model.has_timeline and jobs:
        setup, timeline = quota_timeline(model, cluster, start, min(j.submit_ms for j in jobs),
                                         max(j.submit_ms for j in jobs))
    else:
        setup = kueue_setup(model, cluster)
    jobs, cut = cap_runtimes(setup, jobs)  # Kueue ends a job at its queue's maximum runtime
    simulator = Simulator(setup, jobs, options, placement_of(model), timeline.steps() if timeline else None)
    outcome = simulator.run(progress)
    return Run(label, setup, outcome, simulator.never, weights_of(model), cut, timeline,
               simulator.held_as, views_of(model))
