"""A seeded synthetic trace from a revision's queues, for when no real trace is configured.

Each tenant with a LocalQueue gets a stream of jobs on every (pool, accelerator) it holds a
nominal quota of (tenants only the head has, too, when synthesizing for a comparison): Poisson arrivals whose offered load is `load`
times that nominal quota, 1, 2, 4 or 8 accelerators (at most half the quota, so that no job
waits for the whole quota to drain while smaller ones keep passing it), log-normal
durations around `median_minutes`, priority classes drawn from those its queue allows. The
same objects, seed and sizes give the same trace.
"""

from __future__ import annotations

import math
import random

from gpugov.kube.resources import is_accelerator
from gpugov.whatif.setup import Setup
from gpugov.whatif.trace import Job

SIZES = ((1, 0.45), (2, 0.25), (4, 0.18), (8, 0.12))
SIGMA = 1.0  # log-normal spread of durations


Stream = tuple[str, str, str, int, tuple[str, ...]]  # LocalQueue, pool, resource, nominal, priority classes


def tenant_streams(setup: Setup, only: set[str] | None = None) -> list[Stream]:
    """One stream per tenant (of `only`, when given) and (pool, accelerator resource) it holds a
    nominal quota of at least 1 on, each on one of its LocalQueues in turn: every pool a tenant
    holds quota in gets work, so a change to any of them shows in the replay."""
    streams = []
    for tenant in sorted(setup.local_queues_of_tenant):
        if only is not None and tenant not in only:
            continue
        queues = [q for q in setup.local_queues_of_tenant[tenant] if setup.cluster_queues.get(setup.local_queues[q])]
        if not queues:
            continue
        cq = setup.cluster_queues[setup.local_queues[queues[0]]]
        held = [(flavor, resource, quota.nominal) for group in cq.groups for flavor in group.flavors
                for resource in group.covered
                if is_accelerator(resource)
                and (quota := cq.quotas.get((flavor, resource))) is not None and quota.nominal >= 1]
        for index, (flavor, resource, nominal) in enumerate(held):
            queue = queues[index % len(queues)]
            streams.append((queue, flavor, resource, nominal, setup.allowed_priority_classes.get(queue, ())))
    return streams


def synthesize(setup: Setup, jobs: int = 2000, seed: int = 0, load: float = 0.8, median_minutes: float = 30.0,
               head: Setup | None = None) -> list[Job]:
    """`jobs` jobs spread over the tenants' streams in proportion to their quota. With `head` (the
    proposed revision), tenants only it has get streams too, from its quotas: a new tenant's work
    is in the trace (in the base it finds no LocalQueue and is reported so)."""
    streams = tenant_streams(setup)
    if head is not None:
        streams += tenant_streams(head, set(head.local_queues_of_tenant) - set(setup.local_queues_of_tenant))
    if not streams or jobs <= 0:
        return []
    rng = random.Random(seed)
    mean_duration_s = median_minutes * 60 * math.exp(SIGMA**2 / 2)
    total_quota = sum(s[3] for s in streams)
    result: list[Job] = []
    for queue, flavor, resource, nominal, classes in streams:
        sizes = [(size, weight) for size, weight in SIZES if size <= nominal // 2] or [(1, 1.0)]
        mean_size = sum(size * weight for size, weight in sizes) / sum(weight for _, weight in sizes)
        rate = load * nominal / (mean_size * mean_duration_s)  # jobs per second
        count = max(1, round(jobs * nominal / total_quota))
        clock = 0.0
        for n in range(count):
            clock += rng.expovariate(rate)
            size = rng.choices([s for s, _ in sizes], weights=[w for _, w in sizes])[0]
            duration = max(1.0, rng.lognormvariate(math.log(median_minutes * 60), SIGMA))
            result.append(Job(
                id=f"{queue.replace('/', '-')}-{flavor}-{resource.rsplit('/', 1)[-1]}-{n + 1}",
                submit_ms=int(clock * 1000),
                duration_ms=int(duration * 1000),
                queue=queue,
                accelerators=size,
                resource=resource,
                pool=flavor,
                priority_class=rng.choice(classes) if classes else "",
            ))
    result.sort(key=lambda j: (j.submit_ms, j.id))
    return result
