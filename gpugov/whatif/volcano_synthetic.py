"""A seeded synthetic trace from a revision's Volcano Queues, for `whatif` on a Volcano cluster without --trace.

As synthetic.py's for Kueue, with a tenant's leaf Queue's deserved share in place of a nominal quota:
one stream per tenant and accelerator resource it deserves at least 1 of, on the first pool of its
node groups serving that resource; Poisson arrivals whose offered load is `load` times the deserved
share, 1, 2, 4 or 8 accelerators (at most half the share), log-normal durations. The same Queues, seed
and sizes give the same trace.
"""

from __future__ import annotations

import math
import random

from gpugov.whatif.synthetic import SIGMA, SIZES
from gpugov.whatif.trace import Job
from gpugov.whatif.volcano_setup import VolcanoSetup

Stream = tuple[str, str, str, int]  # tenant, pool, resource, deserved


def volcano_streams(setup: VolcanoSetup, only: set[str] | None = None) -> list[Stream]:
    streams = []
    for name in setup.leaves():
        q = setup.queues[name]
        if not q.tenant or (only is not None and q.tenant not in only):
            continue
        for resource, deserved in sorted(q.deserved.items()):
            pools = sorted({n.pool for n in setup.nodes if (not q.node_groups or n.group in q.node_groups)
                            and setup.resource_of_pool.get(n.pool) == resource})
            if deserved >= 1 and pools:
                streams.append((q.tenant, pools[0], resource, deserved))
    return streams


def synthesize_volcano(setup: VolcanoSetup, jobs: int = 2000, seed: int = 0, load: float = 0.8,
                       median_minutes: float = 30.0, head: VolcanoSetup | None = None) -> list[Job]:
    streams = volcano_streams(setup)
    if head is not None:
        known = {s[0] for s in streams}
        streams += [s for s in volcano_streams(head) if s[0] not in known]
    if not streams or jobs <= 0:
        return []
    rng = random.Random(seed)
    mean_duration_s = median_minutes * 60 * math.exp(SIGMA**2 / 2)
    total = sum(s[3] for s in streams)
    result: list[Job] = []
    for tenant, pool, resource, deserved in streams:
        sizes = [(size, weight) for size, weight in SIZES if size <= deserved // 2] or [(1, 1.0)]
        mean_size = sum(size * weight for size, weight in sizes) / sum(weight for _, weight in sizes)
        rate = load * deserved / (mean_size * mean_duration_s)
        clock = 0.0
        for n in range(max(1, round(jobs * deserved / total))):
            clock += rng.expovariate(rate)
            size = rng.choices([s for s, _ in sizes], weights=[w for _, w in sizes])[0]
            duration = max(1.0, rng.lognormvariate(math.log(median_minutes * 60), SIGMA))
            result.append(Job(id=f"{tenant}-{pool}-{resource.rsplit('/', 1)[-1]}-{n + 1}", submit_ms=int(clock * 1000),
                              duration_ms=int(duration * 1000), tenant=tenant, accelerators=size, resource=resource,
                              pool=pool))
    result.sort(key=lambda j: (j.submit_ms, j.id))
    return result
