"""The typed, immutable organisation model: its types and the facts derived from them.

Quantities are Decimals. Every object keeps where it was declared so policy findings and
compiled objects can point back at `file:line`. Derived facts that several consumers need
(a pool's capacity, a department's ancestors) are computed here once, so nothing
downstream re-derives them. `declarations.build` turns schema-valid documents into a Model.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, time
from decimal import Decimal
from functools import cached_property
from typing import Any, ClassVar

from gpugov.catalog import MODELS, AcceleratorModel, HamiUnits, mig_resource_name
from gpugov.catalog.accelerators import unknown_model
from gpugov.declarations.schema import defaulted, defaulted_reclaim
from gpugov.findings import Location, Locator

DEFAULT_CLUSTER = "default"
ACCELERATORS = "accelerators"  # whole devices (on a HAMi pool: its virtual devices)
ACCELERATOR_MEMORY = "acceleratorMemory"  # HAMi device memory, declared as a size, kept in the plugin's unit
ACCELERATOR_CORES = "acceleratorCores"  # HAMi compute, in the plugin's unit (100 = one NVIDIA GPU)
NON_DEVICE = ("cpu", "memory", "pods")


@dataclass(frozen=True, eq=False)
class Decl:
    """A declaration: its name and where it was written (file:line of the document and of each of
    its fields), never the YAML it was read from."""

    name: str
    source: Locator
    KIND: ClassVar[str] = ""

    @property
    def kind(self) -> str:
        return self.KIND

    @property
    def file(self) -> str:
        return self.source.file

    @property
    def origin(self) -> str:
        return self.source.origin

    def at(self, *path: Any, key: bool = False) -> Location:
        return self.source.locate(("spec", *path), key=key)

    def name_at(self) -> Location:
        return self.source.locate(("metadata", "name"))


@dataclass(frozen=True)
class ResourceQuota:
    key: str  # as declared: accelerators, cpu, memory, pods, a MIG profile, a vNPU template or a HAMi unit
    resource: str  # resolved resource name, e.g. nvidia.com/gpu
    nominal: Decimal  # in the resource's own unit (acceleratorMemory: units of the plugin, e.g. MiB)
    borrowing_limit: Decimal | None = None
    lending_limit: Decimal | None = None


@dataclass(frozen=True)
class PoolQuota:
    pool: str
    index: int  # position in spec.quotas, for locations
    resources: tuple[ResourceQuota, ...]


@dataclass(frozen=True)
class Owners:
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    reviewers: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.users and not self.groups


@dataclass(frozen=True)
class Subjects:
    """Users and groups who hold one of a tenant's roles (spec.members, spec.viewers)."""

    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.users and not self.groups


@dataclass(frozen=True)
class Queue:
    name: str
    namespace: str
    priority_classes: tuple[str, ...]
    index: int


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class PoolNode:
    name: str
    labels: tuple[tuple[str, str], ...]
    mig_layout: str | None
    index: int
    vnpu_layout: str | None = None


@dataclass(frozen=True)
class HamiSharing:
    """A pool shared through HAMi (spec.sharing.hami; its defaults are the schema's)."""

    split_count: int
    memory_scaling: Decimal
    core_scaling: Decimal
    device_memory: Decimal | None = None  # bytes per device as NVML reports it; default: the model's


@dataclass(frozen=True)
class Charge:
    """What one quota entry holds of a pool resource, and the quota key it comes from."""

    resource: str
    amount: Decimal
    key: str


@dataclass(frozen=True, order=True)
class AdoptEntry:
    """One entry of a Cluster's spec.adopt: an existing scheduler object apply may take over."""

    kind: str
    name: str
    namespace: str = ""  # a LocalQueue's; "" for the cluster-scoped kinds

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"


@dataclass(frozen=True, eq=False)
class Cluster(Decl):
    KIND: ClassVar[str] = "Cluster"
    # Defaults are the schema's (schema.defaulted); the dataclasses state none of their own.
    backend: str
    mig_config_name: str
    mig_config_namespace: str
    operations_image: str | None
    operations_namespace: str
    drift_schedule: str
    run_agent: bool
    declared: bool = True
    kube_system_uid: str | None = None  # spec.identity: the physical cluster it is pinned to
    prune_limit_objects: int = 30  # spec.pruneLimit (the schema's defaults; repeated for clusters built in code)
    prune_limit_fraction: Decimal = Decimal("0.5")
    prometheus_url: str | None = None  # spec.operations.prometheus: what the reclaim CronJob reads
    reclaim_schedule: str = "*/5 * * * *"  # spec.operations.reclaimSchedule
    budget_schedule: str = "*/10 * * * *"  # spec.operations.budgetSchedule
    adopt: tuple[AdoptEntry, ...] = ()  # spec.adopt: existing scheduler objects apply may take over
    # spec.gpuOperator: the GPU Operator ClusterPolicy gpugov patches (None: not managed here) and how its
    # device plugin hands devices once the toolkit refuses NVIDIA_VISIBLE_DEVICES (volume-mounts or cdi).
    gpu_operator_policy: str | None = None
    device_list_strategy: str = "volume-mounts"
    topology_aware_scheduling: bool = True  # spec.topologyAwareScheduling: Kueue flavors TAS (a Topology per pool)


@dataclass(frozen=True)
class FleetWorker:
    cluster: str
    kubeconfig_secret: str  # the Secret's name on the manager, never its contents
    index: int  # position in spec.workers, for file:line


@dataclass(frozen=True)
class FleetTenant:
    tenant: str
    quota: tuple[tuple[str, Decimal], ...]  # (accelerators|cpu|memory, amount), declared order
    index: int  # position in spec.tenants


@dataclass(frozen=True, eq=False)
class Fleet(Decl):
    """Clusters Kueue's MultiKueue runs as one pool (issue #43): a manager and its workers."""

    KIND: ClassVar[str] = "Fleet"
    manager: str
    kueue_namespace: str
    manager_user: str
    workers: tuple[FleetWorker, ...]
    tenants: tuple[FleetTenant, ...]

    def worker_names(self) -> list[str]:
        return [w.cluster for w in self.workers]

    def tenant_names(self) -> list[str]:
        return [t.tenant for t in self.tenants]


@dataclass(frozen=True, eq=False)
class DeclaredModel(Decl):
    """An AcceleratorModel declared under hardware/ for hardware the catalog lacks."""
    KIND: ClassVar[str] = "AcceleratorModel"

    accelerator: AcceleratorModel | None = None


@dataclass(frozen=True, eq=False)
class GPUPool(Decl):
    KIND: ClassVar[str] = "GPUPool"
    cluster: str | None = None
    model_name: str = ""
    product_label: str | None = None
    per_node: int = 1
    nodes: tuple[PoolNode, ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()
    # spec.nodeSelector declared empty ({} or matchLabels {}) without nodes listed: the pool selects every node of
    # its cluster, as a Kueue ResourceFlavor without nodeLabels does (GG056 says what gpugov cannot govern there).
    every_node: bool = False
    node_count: int | None = None
    node_cpu: Decimal | None = None
    node_memory: Decimal | None = None
    taints: tuple[Taint, ...] = ()
    topology_levels: tuple[str, ...] = ()
    price_per_hour: Decimal | None = None
    currency: str | None = None  # ISO 4217 code of price_per_hour (spec.currency)
    mig_layouts: dict[str, dict[str, int]] = field(default_factory=dict)
    vnpu_layouts: dict[str, dict[str, int]] = field(default_factory=dict)
    hami: HamiSharing | None = None
    accelerator: AcceleratorModel | None = None  # resolved from the catalog or a DeclaredModel

    @cached_property
    def model(self) -> AcceleratorModel:
        return self.accelerator or unknown_model(self.model_name)

    @property
    def uses_mig(self) -> bool:
        return bool(self.mig_layouts)

    @property
    def hami_units(self) -> HamiUnits | None:
        """The model's HAMi resources, when this pool is shared through HAMi."""
        return self.model.hami if self.hami else None

    @cached_property
    def hami_device_units(self) -> dict[str, Decimal]:
        """HAMi resource -> what one physical device registers of it (deviceSplitCount vGPUs,
        its memory in the plugin's unit times deviceMemoryScaling, its compute times
        deviceCoreScaling; rounded down as HAMi's integer registration does)."""
        units, sharing = self.hami_units, self.hami
        if units is None or sharing is None:
            return {}
        per_device = {units.count: Decimal(sharing.split_count)}
        memory = sharing.device_memory or self.model.memory
        if units.memory and units.memory_unit and memory is not None:
            per_device[units.memory] = (memory * sharing.memory_scaling / units.memory_unit).to_integral_value("ROUND_FLOOR")
        if units.cores and units.cores_per_device:
            per_device[units.cores] = (units.cores_per_device * sharing.core_scaling).to_integral_value("ROUND_FLOOR")
        return per_device

    def node_accelerators(self, mig_layout: str | None = None, vnpu_layout: str | None = None) -> dict[str, Decimal]:
        """What the device plugin of one node advertises for its accelerators: MIG devices of
        its MIG layout, vNPUs of its vNPU layout, HAMi's units on a shared pool, else whole devices."""
        per_node = Decimal(self.per_node)
        mig = self.mig_layouts.get(mig_layout or "")
        if mig is not None:
            return {mig_resource_name(profile): count * per_node for profile, count in mig.items()}
        vnpu = self.vnpu_layouts.get(vnpu_layout or "")
        if vnpu is not None:
            resources = self.model.partition_resources
            return {resources[t]: count * per_node for t, count in vnpu.items() if t in resources}
        if self.hami_units is not None:
            return {resource: amount * per_node for resource, amount in self.hami_device_units.items()}
        return {self.model.resource: per_node}

    @cached_property
    def capacity(self) -> dict[str, Decimal]:
        """Physical capacity per resource name: the ceiling of what quotas may guarantee."""
        capacity: dict[str, Decimal] = defaultdict(Decimal)
        if self.nodes:
            groups = Counter((node.mig_layout, node.vnpu_layout) for node in self.nodes)
        else:
            groups = Counter({(None, None): self.node_count or 0})
        for (mig, vnpu), nodes in groups.items():
            if nodes:
                for resource, amount in self.node_accelerators(mig, vnpu).items():
                    capacity[resource] += amount * nodes
        total_nodes = len(self.nodes) if self.nodes else (self.node_count or 0)
        if self.node_cpu is not None:
            capacity["cpu"] = self.node_cpu * total_nodes
        if self.node_memory is not None:
            capacity["memory"] = self.node_memory * total_nodes
        return dict(sorted(capacity.items()))

    def resource_for(self, key: str) -> str:
        """The resource a quota key names on this pool; an unresolvable key names itself (GG033)."""
        units = self.hami_units
        if key == ACCELERATORS:
            return units.count if units else self.model.resource
        if key in NON_DEVICE:
            return key
        if key == ACCELERATOR_MEMORY:
            return units.memory if units and units.memory else key
        if key == ACCELERATOR_CORES:
            return units.cores if units and units.cores else key
        if key in self.model.partition_resources:
            return self.model.partition_resources[key]
        if key.startswith("vir"):
            return key
        return mig_resource_name(key)

    def quota_unit(self, key: str) -> Decimal | None:
        """Bytes per unit when a key is declared as a size but counted in the plugin's unit."""
        units = self.hami_units
        if key == ACCELERATOR_MEMORY and units and units.memory_unit:
            return units.memory_unit
        return None

    def charges(self, quota: PoolQuota) -> list[Charge]:
        """What a quota entry holds of the pool's resources, for the capacity check. On a HAMi
        pool an entry that declares no acceleratorMemory guarantees whole devices: HAMi gives a
        vGPU without gpumem the whole device's memory, so each is charged one device's memory
        (and, without acceleratorCores either, its compute)."""
        charged = [Charge(rq.resource, rq.nominal, rq.key) for rq in quota.resources if rq.resource in self.capacity]
        units = self.hami_units
        devices = next((rq.nominal for rq in quota.resources if rq.key == ACCELERATORS), None)
        if units is None or not devices:
            return charged
        keys = {rq.key for rq in quota.resources}
        per_device = self.hami_device_units
        if ACCELERATOR_MEMORY not in keys and units.memory in per_device:
            charged.append(Charge(units.memory, devices * per_device[units.memory], ACCELERATORS))
            if ACCELERATOR_CORES not in keys and units.cores in per_device:
                charged.append(Charge(units.cores, devices * per_device[units.cores], ACCELERATORS))
        return charged


@dataclass(frozen=True)
class Budget:
    """spec.budget of a Tenant or Department (gpugov.usage.budget reads it against the ledger): in
    accelerator-hours or, with `cost`, in money (the pools' currency); the schema allows exactly one."""

    accelerator_hours: Decimal | None
    period: str = "month"  # month | week, in UTC
    alerts: tuple[int, ...] = (80, 100)  # percent, sorted
    action: str = "none"  # none | hold (stopPolicy Hold at 100%)
    cost: Decimal | None = None  # spec.budget.cost: the ledger's cost, in the currency of the holder's pools

    @property
    def amount(self) -> Decimal:
        """The budget in its own unit: hours, or money for a cost budget."""
        amount = self.cost if self.cost is not None else self.accelerator_hours
        assert amount is not None, "the schema requires acceleratorHours or cost"
        return amount

    @classmethod
    def of(cls, spec: dict[str, Any]) -> Budget | None:
        """From a defaulted spec (schema.defaulted): None where no budget is declared."""
        budget = spec.get("budget")
        if not isinstance(budget, dict):
            return None

        def number(key: str) -> Decimal | None:
            return Decimal(str(budget[key])) if key in budget else None

        return cls(number("acceleratorHours"), budget["period"], tuple(sorted(budget["alerts"])), budget["action"],
                   number("cost"))


@dataclass(frozen=True, eq=False)
class Department(Decl):
    KIND: ClassVar[str] = "Department"
    parent: str | None = None
    owners: Owners = Owners()
    cost_center: str | None = None
    quotas: tuple[PoolQuota, ...] = ()
    weight: int | None = None
    budget: Budget | None = None


@dataclass(frozen=True)
class Allow:
    """Tenant.allow: what the tenant's namespaces may do beyond gpugov's default (compile.admission)."""

    volumes: tuple[str, ...] = ()
    csi_drivers: tuple[str, ...] = ()
    service_types: tuple[str, ...] = ()
    reason: str = ""

    @classmethod
    def of(cls, spec: dict[str, Any]) -> Allow:
        allow = spec.get("allow")
        if not isinstance(allow, dict):
            return cls()
        return cls(tuple(sorted(set(allow.get("volumes", ())))), tuple(sorted(set(allow.get("csiDrivers", ())))),
                   tuple(sorted(set(allow.get("serviceTypes", ())))), allow.get("reason", ""))


@dataclass(frozen=True, eq=False)
class Tenant(Decl):
    KIND: ClassVar[str] = "Tenant"
    department: str | None = None
    owners: Owners = Owners()
    cost_center: str | None = None
    clusters: tuple[str, ...] = ()
    members: Subjects = Subjects()
    viewers: Subjects = Subjects()
    namespaces: tuple[str, ...] = ()
    adopt_namespaces: tuple[str, ...] = ()  # existing foreign namespaces apply may take over
    queues: tuple[Queue, ...] = ()
    quotas: tuple[PoolQuota, ...] = ()
    weight: int | None = None
    # spec.flavorFungibility as declared (field -> value); compile fills whenCanBorrow TryNextFlavor
    flavor_fungibility: tuple[tuple[str, str], ...] = ()
    reclaim_spec: dict[str, Any] = field(default_factory=dict)  # spec.reclaim as declared (over Guardrails')
    budget: Budget | None = None
    allow: Allow = Allow()


@dataclass(frozen=True)
class Holder:
    """Whose quota a timeline entry changes: a tenant's or a department's."""

    kind: str  # "Tenant" or "Department"
    name: str

    def __str__(self) -> str:
        return f"{self.kind.lower()} '{self.name}'"


@dataclass(frozen=True, eq=False)
class QuotaGrant(Decl):
    """A temporary quota (issue #27): `resources` added to the tenant's nominal quota in `pool`
    from `starts` until `ends` (exclusive; None: never ends). Instants are aware datetimes; one the
    schema let through that is no date (30 February) is None, and policy reports it (GG175)."""

    KIND: ClassVar[str] = "QuotaGrant"
    tenant: str = ""
    pool: str = ""
    resources: tuple[ResourceQuota, ...] = ()  # the nominal of each is what is added
    starts: datetime | None = None
    ends: datetime | None = None
    ends_declared: bool = False  # spec.until is written (even when it is no date)
    reason: str = ""
    approved_by: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)
class QuotaWindow(Decl):
    """A recurring window (issue #27): on `weekdays` from `start` to `end` local time in `time_zone`
    (an end at or before the start closes the next day), `resources` of `pool` move from the donor's
    nominal quota to the recipient's."""

    KIND: ClassVar[str] = "QuotaWindow"
    pool: str = ""
    donor: Holder = Holder("Tenant", "")
    recipient: Holder = Holder("Tenant", "")
    resources: tuple[ResourceQuota, ...] = ()
    weekdays: tuple[int, ...] = ()  # 0 Monday .. 6 Sunday, as datetime.weekday()
    start: time = time(0)
    end: time = time(0)
    time_zone: str = "UTC"
    reason: str = ""
    approved_by: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)
class PriorityClass(Decl):
    KIND: ClassVar[str] = "PriorityClass"
    value: int
    preemptible: bool
    description: str


@dataclass(frozen=True, eq=False)
class SchedulingPolicy(Decl):
    KIND: ClassVar[str] = "SchedulingPolicy"
    queueing_strategy: str
    reclaim_within_cohort: str
    within_cluster_queue: str
    borrow_within_cohort: str
    borrow_max_priority_threshold: int | None
    volcano_plugin: str
    volcano_not_kept: tuple[str, ...] = ()  # promises said not kept on Volcano (GG064 stays silent on them)
    declared: bool = True


# Namespaces no tenant may ever claim (`*` globs): the system's, the schedulers' and the GPU
# Operator's. Guardrails.reservedNamespaces adds to them, and every cluster's gpugov operations
# and MIG config namespaces are reserved too.
RESERVED_NAMESPACES = ("kube-*", "default", "gpu-operator", "nvidia-gpu-operator", "kueue-system",
                       "volcano-system")


@dataclass(frozen=True)
class Isolation:
    """Guardrails.isolation: what keeps a tenant inside its queues (compile.admission, compile.core)."""

    pod_security: str = "restricted"
    pod_security_reason: str = ""
    trusted_users: tuple[str, ...] = ()
    trusted_groups: tuple[str, ...] = ()
    pod_priority_classes: tuple[str, ...] = ()
    device_runtime_classes: tuple[str, ...] = ()
    max_termination_grace_seconds: int = 300


@dataclass(frozen=True)
class ProfileThresholds:
    """Guardrails.profile: when `gpugov profile` gives advice (gpugov.profile)."""

    low_activity_below_percent: Decimal = Decimal(30)
    advise_idle_share_percent: Decimal = Decimal(25)
    host_io_bytes_per_second: Decimal = Decimal(1_000_000_000)
    memory_headroom_percent: Decimal = Decimal(10)


@dataclass(frozen=True, eq=False)
class Guardrails(Decl):
    KIND: ClassVar[str] = "Guardrails"
    capacity_ratio: Decimal
    pool_capacity_ratios: dict[str, Decimal]
    max_quota_change: int | None
    require_owner: bool
    require_cost_center: bool
    platform_team: tuple[str, ...]
    reserved_namespaces: tuple[str, ...]  # reserved on top of RESERVED_NAMESPACES
    idle_below_percent: Decimal
    idle_window: str
    declared: bool = True
    isolation: Isolation = field(default_factory=Isolation)
    reclaim_spec: dict[str, Any] | None = None  # spec.reclaim as declared; None: no reclaim policy
    profile: ProfileThresholds = field(default_factory=lambda: ProfileThresholds())

    def ratio_for(self, pool: str) -> Decimal:
        return self.pool_capacity_ratios.get(pool, self.capacity_ratio)


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_seconds(text: str) -> int:
    """A schema-valid duration (`30m`, `24h`, `7d`) in seconds."""
    return int(text[:-1]) * _DURATION_UNITS[text[-1]]


@dataclass(frozen=True)
class IdlePolicy:
    """When an admitted workload counts as idle, and what is done about it (gpugov.reclaim)."""

    metric: str
    below_percent: Decimal
    window: int  # seconds
    grace: int  # seconds between the warning and the action
    action: str  # notify | deactivate
    exempt_classes: tuple[str, ...] = ()
    exempt_queues: tuple[str, ...] = ()
    exempt_non_preemptible: bool = True


@dataclass(frozen=True)
class ReclaimPolicy:
    """A tenant's reclaim policy: Guardrails.reclaim with the tenant's own fields over it."""

    max_runtime_default: int | None  # seconds
    max_runtime: dict[str, int]  # priority class -> seconds
    idle: IdlePolicy | None
    snooze_maximum: int  # seconds

    def max_runtime_for(self, priority_class: str) -> int | None:
        return self.max_runtime.get(priority_class, self.max_runtime_default)


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        merged[key] = _merged(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) \
            else value
    return merged


def reclaim_from_spec(spec: dict[str, Any]) -> ReclaimPolicy:
    filled = defaulted_reclaim(spec)
    runtime = filled.get("maxRuntime") or {}
    idle = filled.get("idle")
    exempt = (idle or {}).get("exempt") or {}
    return ReclaimPolicy(
        max_runtime_default=duration_seconds(runtime["default"]) if "default" in runtime else None,
        max_runtime={name: duration_seconds(text) for name, text in sorted((runtime.get("priorityClasses") or {}).items())},
        idle=None if idle is None else IdlePolicy(
            metric=idle["metric"],
            below_percent=Decimal(str(idle["belowPercent"])),
            window=duration_seconds(idle["window"]),
            grace=duration_seconds(idle["grace"]),
            action=idle["action"],
            exempt_classes=tuple(exempt["priorityClasses"]),
            exempt_queues=tuple(exempt["queues"]),
            exempt_non_preemptible=exempt["nonPreemptible"],
        ),
        snooze_maximum=duration_seconds(filled["snooze"]["maximum"]),
    )


@dataclass
class Model:
    accelerator_models: dict[str, DeclaredModel] = field(default_factory=dict)
    clusters: dict[str, Cluster] = field(default_factory=dict)
    pools: dict[str, GPUPool] = field(default_factory=dict)
    departments: dict[str, Department] = field(default_factory=dict)
    tenants: dict[str, Tenant] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    scheduling: SchedulingPolicy | None = None
    guardrails: Guardrails | None = None
    grants: dict[str, QuotaGrant] = field(default_factory=dict)
    windows: dict[str, QuotaWindow] = field(default_factory=dict)
    fleets: dict[str, Fleet] = field(default_factory=dict)  # issue #43: MultiKueue
    # The instant the quotas are for (declarations.timeline.model_at); None: as declared, no grant or
    # window applied.
    instant: datetime | None = None
    # The model as declared, of which this one is the state at `instant` (None: this is it).
    declared: Model | None = None
    # When the command runs (the CLI reads the clock once): validate checks the timeline from then on and
    # warns of grants that have ended. None: every instant counts, nothing has ended.
    now: datetime | None = None

    @property
    def has_timeline(self) -> bool:
        """Whether any quota changes with time (a grant or a window is declared)."""
        return bool(self.grants or self.windows)

    @property
    def policy(self) -> SchedulingPolicy:
        return self.scheduling or _DEFAULT_SCHEDULING

    @property
    def limits(self) -> Guardrails:
        return self.guardrails or _DEFAULT_GUARDRAILS

    def lookup_model(self, name: str) -> AcceleratorModel | None:
        """A model by name: declared under hardware/ or built in."""
        declared = self.accelerator_models.get(name)
        return declared.accelerator if declared else MODELS.get(name)

    def cluster_names(self) -> list[str]:
        return sorted(self.clusters) or [DEFAULT_CLUSTER]

    def cluster(self, name: str) -> Cluster:
        if name in self.clusters:
            return self.clusters[name]
        return cluster_from_spec(name, _NO_DOC, {"backend": DEFAULT_BACKEND}, declared=False)

    def pool_cluster(self, pool: GPUPool) -> str | None:
        """The cluster a pool belongs to; None when that is ambiguous (a policy error)."""
        if pool.cluster:
            return pool.cluster
        names = self.cluster_names()
        return names[0] if len(names) == 1 else None

    def fleets_managed_by(self, cluster: str) -> list[Fleet]:
        """The fleets whose manager is `cluster`, by name."""
        return [f for _, f in sorted(self.fleets.items()) if f.manager == cluster]

    def fleets_with_worker(self, cluster: str) -> list[Fleet]:
        """The fleets that dispatch to `cluster`, by name."""
        return [f for _, f in sorted(self.fleets.items()) if cluster in f.worker_names()]

    def protected_classes(self, tenant: Tenant) -> list[str]:
        """The non-preemptible priority classes the tenant's queues admit."""
        names = {pc for queue in tenant.queues for pc in queue.priority_classes}
        return sorted(n for n in names if n in self.priority_classes and not self.priority_classes[n].preemptible)

    def never_borrows(self, tenant: Tenant) -> bool:
        """Whether the tenant must not borrow: it runs non-preemptible work in a cohort that
        reclaims with `Any`. Kueue reclaims from ANY workload of a borrowing ClusterQueue,
        whatever its priority (pkg/scheduler/preemption findCandidates), so only a queue that
        never borrows keeps such work from being evicted."""
        return bool(tenant.department) and self.policy.reclaim_within_cohort == "Any" and bool(
            self.protected_classes(tenant)
        )

    def ancestors(self, department: str) -> list[str]:
        """Parents of a department, nearest first; stops at a cycle or a dangling parent."""
        chain: list[str] = []
        current = self.departments.get(department)
        while current and current.parent and current.parent not in chain and current.parent != department:
            chain.append(current.parent)
            current = self.departments.get(current.parent)
        return chain

    def budget_holders(self) -> list[tuple[Holder, Budget, tuple[str, ...]]]:
        """Every declared budget: (holder, budget, the tenants it covers: the tenant, or every tenant
        below the department at any depth), tenants before departments, by name."""
        found: list[tuple[Holder, Budget, tuple[str, ...]]] = []
        for name, tenant in sorted(self.tenants.items()):
            if tenant.budget is not None:
                found.append((Holder("Tenant", name), tenant.budget, (name,)))
        for name, department in sorted(self.departments.items()):
            if department.budget is not None:
                below = tuple(t.name for _, t in sorted(self.tenants.items())
                              if t.department and (t.department == name or name in self.ancestors(t.department)))
                found.append((Holder("Department", name), department.budget, below))
        return found

    def budget_pools(self, tenants: tuple[str, ...]) -> list[GPUPool]:
        """The declared pools the tenants may spend a budget in: those of their quotas and grants, and
        of windows that give them quota; by name."""
        names = {q.pool for t in tenants if t in self.tenants for q in self.tenants[t].quotas}
        names |= {g.pool for g in self.grants.values() if g.tenant in tenants}
        names |= {w.pool for w in self.windows.values() if w.recipient.kind == "Tenant" and w.recipient.name in tenants}
        return [self.pools[n] for n in sorted(names) if n in self.pools]

    def root_department(self, department: str) -> str:
        chain = self.ancestors(department)
        return chain[-1] if chain else department

    def quota_holders(self) -> list[tuple[Department | Tenant, PoolQuota]]:
        """Every (department or tenant, pool quota), departments first."""
        holders: list[tuple[Department | Tenant, PoolQuota]] = []
        for department in self.departments.values():
            holders.extend((department, quota) for quota in department.quotas)
        for tenant in self.tenants.values():
            holders.extend((tenant, quota) for quota in tenant.quotas)
        return holders

    def guaranteed(self) -> dict[tuple[str, str], Decimal]:
        """Sum of nominal quotas per (pool, resource) over tenants and departments, for
        resources the pool offers: what the pools must physically hold."""
        totals: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
        for _, quota in self.quota_holders():
            pool = self.pools.get(quota.pool)
            if pool is None:
                continue
            for charge in pool.charges(quota):
                totals[(quota.pool, charge.resource)] += charge.amount
        return dict(sorted(totals.items()))

    def reclaim_policy(self, tenant: Tenant) -> ReclaimPolicy | None:
        """The tenant's reclaim policy; None when neither Guardrails nor the tenant declares one."""
        base = self.limits.reclaim_spec
        if base is None and not tenant.reclaim_spec:
            return None
        return reclaim_from_spec(_merged(base or {}, tenant.reclaim_spec))

    def tenant_of_namespace(self) -> dict[str, str]:
        owners: dict[str, str] = {}
        for tenant in self.tenants.values():
            for namespace in tenant.namespaces:
                owners.setdefault(namespace, tenant.name)
        return owners


class _Defaults:
    """The source of what nobody declared (the default policies and cluster)."""

    file = "<defaults>"
    origin = "<defaults>"

    def locate(self, path: tuple[Any, ...] = (), key: bool = False) -> Location:
        return Location(self.file)


# The policy kinds read from their specs. They live beside the types, not in the builder,
# because what nobody declared (Model.policy, .limits, .cluster) is the same reading of an
# empty spec: the schema's defaults.
def cluster_from_spec(name: str, doc: Locator, declared_spec: dict[str, Any], declared: bool = True) -> Cluster:
    spec = defaulted("Cluster", declared_spec)
    mig, operations = spec["migConfig"], spec["operations"]
    return Cluster(
        name,
        doc,
        backend=spec["backend"],
        mig_config_name=mig["name"],
        mig_config_namespace=mig["namespace"],
        operations_image=operations.get("image"),
        operations_namespace=operations["namespace"],
        drift_schedule=operations["driftSchedule"],
        run_agent=operations["agent"],
        declared=declared,
        kube_system_uid=(spec.get("identity") or {}).get("kubeSystemUID"),
        prune_limit_objects=spec["pruneLimit"]["objects"],
        prune_limit_fraction=Decimal(str(spec["pruneLimit"]["fraction"])),
        prometheus_url=operations.get("prometheus"),
        reclaim_schedule=operations["reclaimSchedule"],
        budget_schedule=operations["budgetSchedule"],
        adopt=tuple(AdoptEntry(e["kind"], e["name"], e.get("namespace", "")) for e in spec["adopt"]),
        gpu_operator_policy=spec["gpuOperator"].get("clusterPolicy"),
        device_list_strategy=spec["gpuOperator"]["deviceListStrategy"],
        topology_aware_scheduling=spec["topologyAwareScheduling"],
    )


def scheduling_from_spec(name: str, doc: Locator, declared_spec: dict[str, Any], declared: bool = True) -> SchedulingPolicy:
    spec = defaulted("SchedulingPolicy", declared_spec)
    preemption = spec["preemption"]
    return SchedulingPolicy(
        name,
        doc,
        queueing_strategy=spec["queueingStrategy"],
        reclaim_within_cohort=preemption["reclaimWithinCohort"],
        within_cluster_queue=preemption["withinClusterQueue"],
        borrow_within_cohort=preemption["borrowWithinCohort"]["policy"],
        borrow_max_priority_threshold=preemption["borrowWithinCohort"].get("maxPriorityThreshold"),
        volcano_plugin=spec["volcano"]["plugin"],
        volcano_not_kept=tuple(spec["volcano"].get("notKept", ())),
        declared=declared,
    )


def guardrails_from_spec(name: str, doc: Locator, declared_spec: dict[str, Any], declared: bool = True) -> Guardrails:
    spec = defaulted("Guardrails", declared_spec)
    return Guardrails(
        name,
        doc,
        capacity_ratio=Decimal(str(spec["capacityRatio"])),
        pool_capacity_ratios={k: Decimal(str(v)) for k, v in (spec.get("poolCapacityRatios") or {}).items()},
        max_quota_change=spec.get("maxQuotaChangePerPullRequest"),
        require_owner=spec["requireOwner"],
        require_cost_center=spec["requireCostCenter"],
        platform_team=tuple(spec.get("platformTeam", ())),
        reserved_namespaces=tuple(spec.get("reservedNamespaces", ())),
        idle_below_percent=Decimal(str(spec["idle"]["utilizationBelowPercent"])),
        idle_window=spec["idle"]["window"],
        declared=declared,
        isolation=_isolation(spec["isolation"]),
        reclaim_spec=declared_spec.get("reclaim"),
        profile=ProfileThresholds(*(Decimal(str(spec["profile"][k])) for k in (
            "lowActivityBelowPercent", "adviseIdleSharePercent", "hostIOBytesPerSecond", "memoryHeadroomPercent"))),
    )


def _isolation(spec: dict[str, Any]) -> Isolation:
    """Guardrails.isolation, its defaults (schema.defaulted) filled in."""
    trusted = spec["trustedControllers"]
    return Isolation(
        pod_security=spec["podSecurity"],
        pod_security_reason=spec.get("podSecurityReason", ""),
        trusted_users=tuple(trusted["users"]),
        trusted_groups=tuple(trusted["groups"]),
        pod_priority_classes=tuple(spec["podPriorityClasses"]),
        device_runtime_classes=tuple(spec["deviceRuntimeClasses"]),
        max_termination_grace_seconds=spec["maxTerminationGracePeriodSeconds"],
    )


DEFAULT_BACKEND = "kueue"  # of the one cluster a repository without Cluster declarations drives
_NO_DOC = _Defaults()
_DEFAULT_SCHEDULING = scheduling_from_spec("default", _NO_DOC, {}, declared=False)
_DEFAULT_GUARDRAILS = guardrails_from_spec("default", _NO_DOC, {}, declared=False)
