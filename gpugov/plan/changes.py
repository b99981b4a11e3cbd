"""What a plan holds: the changes of one pull request, as plain values (differ.py finds them,
assess.py weighs them, diff.py puts them together)."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from gpugov.plan.risks import (
    Risk,
)
from gpugov.plan.timeline import TimelineEntry

QUOTA_FIELDS = ("nominal", "borrowing_limit", "lending_limit")


@dataclass(frozen=True)
class QuotaChange:
    holder: str  # "tenant" or "department"
    name: str
    pool: str
    resource: str
    before: dict[str, Decimal | None]
    after: dict[str, Decimal | None]

    @property
    def nominal_delta(self) -> Decimal:
        return (self.after["nominal"] or Decimal(0)) - (self.before["nominal"] or Decimal(0))

    @property
    def decreases(self) -> bool:
        """Whether a quota that existed shrinks: a new quota (a new tenant's, a new pool's) has
        nothing to go down from, even where it sets a limit that was unlimited before."""
        if self.before["nominal"] is None:
            return False
        if self.after["nominal"] is None or self.nominal_delta < 0:
            return True
        for limit in ("borrowing_limit", "lending_limit"):  # None: unlimited
            old, new = self.before[limit], self.after[limit]
            if new is not None and (old is None or new < old):
                return True
        return False


@dataclass(frozen=True)
class CapacityRow:
    pool: str
    resource: str
    guaranteed_before: Decimal
    guaranteed_after: Decimal
    capacity_before: Decimal
    capacity_after: Decimal


@dataclass(frozen=True)
class ReachChange:
    """What a tenant's queue can reach at most in a pool changes (Kueue's maximum capacity over the
    compiled cohort tree, gpugov.reach): its own quotas, or another's lending or borrowing limits."""

    cluster: str
    tenant: str
    pool: str
    resource: str
    before: Decimal | None  # None: its queue did not list the pool
    after: Decimal | None


@dataclass(frozen=True)
class PoolChange:
    pool: str
    status: str  # added, removed, changed
    nodes_added: tuple[str, ...] = ()
    nodes_removed: tuple[str, ...] = ()
    capacity_before: dict[str, Decimal] = field(default_factory=dict)
    capacity_after: dict[str, Decimal] = field(default_factory=dict)


@dataclass(frozen=True)
class MigChange:
    cluster: str
    node: str
    before: str | None
    after: str | None
    reason: str


@dataclass(frozen=True)
class PriorityChange:
    name: str
    before: str | None
    after: str | None
    protected: bool


@dataclass(frozen=True)
class Move:
    """A tenant's department, or a department's parent, changes: its cohort (Kueue) or parent queue (Volcano)."""

    holder: str  # "tenant" or "department"
    name: str
    before: str | None
    after: str | None

    @property
    def field(self) -> str:
        return "department" if self.holder == "tenant" else "parent"


@dataclass(frozen=True)
class WeightChange:
    holder: str  # "tenant" or "department"
    name: str
    before: int | None  # as declared; None: the default 1, or the holder is new (see `new`)
    after: int | None
    new: bool = False

    @property
    def raised(self) -> bool:
        return (self.after or 1) > (self.before or 1)


@dataclass(frozen=True)
class Removal:
    """What a change stops declaring, of one category, and what each deploy path does with it."""

    category: str  # object, Namespace or Node
    names: tuple[str, ...]
    paths: dict[str, str]


@dataclass(frozen=True)
class ObjectChange:
    cluster: str
    action: str  # create, update, delete, replace (delete + create), retain (kept: a Namespace or a Node)
    kind: str
    namespace: str
    name: str
    fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class FleetMember:
    """One cluster of a fleet (issue #43) and how many of its objects the change touches, by action."""

    fleet: str
    cluster: str
    role: str  # manager | worker
    counts: dict[str, int]  # action -> objects (create, update, ...), only actions that occur


@dataclass
class Plan:
    base: str
    head: str
    tenants_added: list[str] = field(default_factory=list)
    tenants_removed: list[str] = field(default_factory=list)
    departments_added: list[str] = field(default_factory=list)
    departments_removed: list[str] = field(default_factory=list)
    quotas: list[QuotaChange] = field(default_factory=list)
    capacity: list[CapacityRow] = field(default_factory=list)
    reach: list[ReachChange] = field(default_factory=list)
    pools: list[PoolChange] = field(default_factory=list)
    mig: list[MigChange] = field(default_factory=list)
    priorities: list[PriorityChange] = field(default_factory=list)
    moves: list[Move] = field(default_factory=list)
    weights: list[WeightChange] = field(default_factory=list)
    objects: list[ObjectChange] = field(default_factory=list)
    removals: list[Removal] = field(default_factory=list)
    risks: list[Risk] = field(default_factory=list)
    timeline: list[TimelineEntry] = field(default_factory=list)  # the head's grants and windows (issue #27)
    fleets: list[FleetMember] = field(default_factory=list)  # each member of a fleet the change touches

    @property
    def empty(self) -> bool:
        return not (self.objects or self.quotas or self.tenants_added or self.tenants_removed or self.pools
                    or self.moves or self.weights)
