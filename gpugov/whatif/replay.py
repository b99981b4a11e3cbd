"""One what-if: compile a revision's model for a cluster, replay the trace, keep what the report needs.

The quotas come only from `compile(model, backend="kueue", cluster=cluster)`; the model itself supplies
hardware facts the Kueue objects do not carry: which accelerator resource a pool serves and
which pools hold a given GPU model (for a trace's `pool` and `model` columns), and how much of
a GPU a MIG slice is (for GPU-hours).
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from gpugov.compile import compile
from gpugov.declarations.equivalents import gpu_equivalents
from gpugov.declarations.model import Model
from gpugov.whatif.report import Run
from gpugov.whatif.setup import FR, Placement, Setup, cap_runtimes, read_setup
from gpugov.whatif.simulate import Options, Simulator
from gpugov.whatif.timeline import DEFAULT_START, quota_timeline
from gpugov.whatif.trace import Job


def placement_of(model: Model) -> Placement:
    resource_of_pool: dict[str, str] = {}
    pools_of_model: dict[str, list[str]] = {}
    resource_of_model: dict[str, str] = {}
    for name, pool in sorted(model.pools.items()):
        accelerator = pool.model
        resource_of_pool[name] = accelerator.resource
        pools_of_model.setdefault(accelerator.name.lower(), []).append(name)
        resource_of_model.setdefault(accelerator.name.lower(), accelerator.resource)
    return Placement(resource_of_pool, {k: tuple(v) for k, v in pools_of_model.items()}, resource_of_model)


def weights_of(model: Model) -> dict[FR, Decimal]:
    """GPU equivalents of one unit of each (pool, resource): 1 for a whole device, a MIG
    profile's compute slices over the GPU's."""
    return {(name, resource): weight for name, pool in sorted(model.pools.items())
            for resource, weight in gpu_equivalents(pool).items()}


def kueue_setup(model: Model, cluster: str) -> Setup:
    return read_setup(compile(model, backend="kueue", cluster=cluster))


def replay(model: Model, cluster: str, jobs: list[Job], label: str, options: Options,
           start: datetime = DEFAULT_START) -> Run:
    """`start`: the calendar instant of the trace's second 0, where the model's quotas change with
    time (QuotaGrant, QuotaWindow); a model without them replays the quotas as declared."""
    timeline = None
    if model.has_timeline and jobs:
        setup, timeline = quota_timeline(model, cluster, start, min(j.submit_ms for j in jobs),
                                         max(j.submit_ms for j in jobs))
    else:
        setup = kueue_setup(model, cluster)
    jobs, cut = cap_runtimes(setup, jobs)  # Kueue ends a job at its queue's maximum runtime
    simulator = Simulator(setup, jobs, options, placement_of(model), timeline.steps() if timeline else None)
    outcome = simulator.run()
    return Run(label, setup, outcome, simulator.never, weights_of(model), cut, timeline)
