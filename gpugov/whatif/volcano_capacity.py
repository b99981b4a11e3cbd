"""Volcano v1.14's capacity plugin with enableHierarchy, as one session of vc-scheduler sees it.

- realCapability: the root's is the cluster's total; a child's is its parent's less the guarantees of
  all the parent's children, plus its own guarantee, at most its capability (inherited from the
  parent where a resource is not set);
- share: a queue's largest allocated/deserved over the resources its deserved names (1 without
  deserved). Computed when the session opens; during the session only a leaf's share follows its
  allocations (the plugin's allocate and deallocate events update an ancestor's allocated, not its
  share);
- queue order: of two leaves, the shares of their ancestors just below their deepest common one
  (the leaves themselves when siblings), lower first; equal shares put a queue with deserved first;
  then the Queue's creation (here: compile's order);
- allocatable: the allocated of the leaf and of every ancestor, plus the pod, within realCapability
  on the resources the pod asks for;
- preemptive (may reclaim): the leaf's allocated plus the pod within its deserved on a resource;
- reclaimable: a victim's queue keeps its guarantee and is above its deserved on a resource the
  victim holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpugov.compile.volcano import ROOT_QUEUE
from gpugov.whatif.volcano_setup import Amounts, VolcanoSetup


def add(into: Amounts, other: Amounts, sign: int = 1) -> None:
    for resource, value in other.items():
        into[resource] = into.get(resource, 0) + sign * value


@dataclass
class QueueAttr:
    name: str
    ancestors: tuple[str, ...]  # root first, parent last
    deserved: Amounts
    guarantee: Amounts
    real_capability: Amounts
    order: int  # creation order among the Queues
    allocated: Amounts = field(default_factory=dict)
    share: float = 0.0

    def update_share(self) -> None:
        if not self.deserved:
            self.share = 1.0
            return
        share = 0.0
        for resource, deserved in self.deserved.items():
            used = self.allocated.get(resource, 0)
            share = max(share, (1.0 if used > 0 else 0.0) if deserved == 0 else used / deserved)
        self.share = share


def real_capabilities(setup: VolcanoSetup) -> dict[str, Amounts]:
    total = setup.total()
    children: dict[str, list[str]] = {}
    for q in setup.queues.values():
        if q.parent is not None:
            children.setdefault(q.parent, []).append(q.name)
    real: dict[str, Amounts] = {ROOT_QUEUE: dict(total)}
    capability: dict[str, Amounts] = {ROOT_QUEUE: dict(total)}

    def visit(parent: str) -> None:
        kids = children.get(parent, [])
        guarantees: Amounts = {}
        for kid in kids:
            add(guarantees, setup.queues[kid].guarantee)
        for kid in kids:
            own = dict(setup.queues[kid].capability or {})
            for resource, value in capability[parent].items():
                own.setdefault(resource, value)  # a resource it does not set: the parent's
            capability[kid] = own
            value: Amounts = {}
            for resource in set(real[parent]) | set(guarantees) | set(setup.queues[kid].guarantee):
                value[resource] = max(real[parent].get(resource, 0) - guarantees.get(resource, 0), 0) \
                    + setup.queues[kid].guarantee.get(resource, 0)
            real[kid] = {r: min(v, own[r]) if r in own else v for r, v in value.items()}
            visit(kid)

    visit(ROOT_QUEUE)
    return real


def ancestors_of(setup: VolcanoSetup, name: str) -> tuple[str, ...]:
    chain: list[str] = []
    parent = setup.queues[name].parent
    while parent is not None:
        chain.append(parent)
        parent = setup.queues[parent].parent
    return tuple(reversed(chain))


class Capacity:
    """The plugin's state for one session: every queue's attributes, allocations from `held` (leaf -> amounts)."""

    def __init__(self, setup: VolcanoSetup, real: dict[str, Amounts], held: dict[str, Amounts]) -> None:
        self.attrs = {name: QueueAttr(name, ancestors_of(setup, name), q.deserved, q.guarantee,
                                      real.get(name, {}), index)
                      for index, (name, q) in enumerate(setup.queues.items())}
        for leaf, amounts in held.items():
            self.allocate(leaf, amounts, update_share=False)
        for attr in self.attrs.values():
            attr.update_share()

    def allocate(self, leaf: str, amounts: Amounts, sign: int = 1, update_share: bool = True) -> None:
        attr = self.attrs[leaf]
        add(attr.allocated, amounts, sign)
        if update_share:
            attr.update_share()
        for ancestor in attr.ancestors:
            add(self.attrs[ancestor].allocated, amounts, sign)

    def _compare_share(self, left: str, right: str) -> int:
        lattr, rattr = self.attrs[left], self.attrs[right]
        if lattr.share == rattr.share:
            if bool(lattr.deserved) == bool(rattr.deserved):
                return 0
            return -1 if lattr.deserved else 1
        return -1 if lattr.share < rattr.share else 1

    def compare(self, left: str, right: str) -> int:
        """The plugin's queue order of two leaves: negative when `left` goes first; 0 for a tie."""
        la, ra = self.attrs[left].ancestors, self.attrs[right].ancestors
        level = 0
        for i in range(min(len(la), len(ra))):
            if la[i] != ra[i]:
                break
            level = i
        lp = la[level + 1] if level + 1 < len(la) else left
        rp = ra[level + 1] if level + 1 < len(ra) else right
        return self._compare_share(lp, rp)

    def queue_less(self, left: str, right: str) -> bool:
        """The session's queue order: the plugin's, then the Queue's creation."""
        verdict = self.compare(left, right)
        if verdict != 0:
            return verdict < 0
        return self.attrs[left].order < self.attrs[right].order

    def allocatable(self, leaf: str, request: Amounts) -> bool:
        for name in (leaf, *reversed(self.attrs[leaf].ancestors)):
            attr = self.attrs[name]
            for resource, value in request.items():
                if value > 0 and attr.allocated.get(resource, 0) + value > attr.real_capability.get(resource, 0):
                    return False
        return True

    def blocking(self, leaf: str, request: Amounts) -> str | None:
        """The first queue (leaf, then up) whose realCapability the pod would exceed."""
        for name in (leaf, *reversed(self.attrs[leaf].ancestors)):
            attr = self.attrs[name]
            if any(v > 0 and attr.allocated.get(r, 0) + v > attr.real_capability.get(r, 0) for r, v in request.items()):
                return name
        return None

    def preemptive(self, leaf: str, request: Amounts) -> bool:
        attr = self.attrs[leaf]
        return any(value > 0 and attr.allocated.get(resource, 0) + value <= attr.deserved.get(resource, 0)
                   for resource, value in request.items()
                   if attr.allocated.get(resource, 0) + value >= 1 or attr.deserved.get(resource, 0) >= 1)

    def reclaimable(self, victims: list[tuple[str, Amounts]]) -> list[int]:
        """Which of `victims` ((queue, pod's request), in order) the plugin lets a reclaimer take."""
        allocations: dict[str, Amounts] = {}
        chosen = []
        for index, (queue, request) in enumerate(victims):
            attr = self.attrs[queue]
            allocated = allocations.setdefault(queue, dict(attr.allocated))
            rest = dict(allocated)
            add(rest, request, -1)
            if any(rest.get(r, 0) < v for r, v in attr.guarantee.items()):
                continue
            relevant = [r for r, v in request.items() if v > 0 and r in attr.deserved]
            if relevant and not any(allocated.get(r, 0) > attr.deserved[r] for r in relevant):
                continue
            add(allocated, request, -1)
            chosen.append(index)
        return chosen

    def victim_level(self, victim_queue: str, reclaimer_queue: str) -> int:
        """The victim queue order's level: victims sharing deeper ancestry with the reclaimer go first."""
        la, ra = self.attrs[victim_queue].ancestors, self.attrs[reclaimer_queue].ancestors
        level = 0
        for i in range(min(len(la), len(ra))):
            if la[i] != ra[i]:
                return level
            level = i
        return level
