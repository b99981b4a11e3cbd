"""The builder: schema-valid documents become the typed Model (declarations.model).

Each document becomes one typed object, the schema's defaults filled in (schema.defaulted);
quota keys are resolved against their pool; a name declared twice (or a singleton kind
declared twice) is a finding, not a second object.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Any

from gpugov.catalog import MODELS, AcceleratorModel, model_from_spec
from gpugov.declarations.loader import SourceDoc
from gpugov.declarations.model import (
    Allow,
    Budget,
    DeclaredModel,
    Department,
    Fleet,
    FleetTenant,
    FleetWorker,
    GPUPool,
    HamiSharing,
    Model,
    Owners,
    PoolNode,
    PoolQuota,
    PriorityClass,
    Queue,
    ResourceQuota,
    Subjects,
    Taint,
    Tenant,
    cluster_from_spec,
    guardrails_from_spec,
    scheduling_from_spec,
)
from gpugov.declarations.schema import defaulted
from gpugov.declarations.timeline import build_grant, build_window
from gpugov.findings import Finding, Level, make, rule
from gpugov.i18n import Text
from gpugov.kube.quantity import parse_quantity

DUPLICATE_NAME = rule(
    "GG010",
    "duplicate-name",
    Level.ERROR,
    "Two declarations of the same kind share a name (or a singleton kind is declared twice).",
    "Names are unique per kind; rename or merge the two declarations.",
)


def _optional_decimal(value: Any) -> Decimal | None:
    return None if value is None else parse_quantity(value)


def _owners(spec: dict[str, Any]) -> Owners:
    owners = spec.get("owners") or {}
    return Owners(
        tuple(owners.get("users", ())), tuple(owners.get("groups", ())), tuple(owners.get("reviewers", ()))
    )


def _subjects(subjects: dict[str, Any]) -> Subjects:
    """spec.members or spec.viewers, its defaults (schema.defaulted) filled in."""
    return Subjects(tuple(subjects["users"]), tuple(subjects["groups"]))


def _weight(spec: dict[str, Any]) -> int | None:
    return (spec.get("fairSharing") or {}).get("weight")


def _pool_quotas(spec: dict[str, Any], pools: dict[str, GPUPool]) -> tuple[PoolQuota, ...]:
    result = []
    for index, entry in enumerate(spec.get("quotas", ())):
        pool = pools.get(entry["pool"])
        resources = []
        for key, value in entry["resources"].items():
            if not isinstance(value, dict):
                value = {"nominal": value}
            resource = pool.resource_for(key) if pool else key
            unit = pool.quota_unit(key) if pool else None
            amounts = [_optional_decimal(value.get(name)) for name in ("nominal", "borrowingLimit", "lendingLimit")]
            if unit is not None:  # exact: 40Gi of nvidia.com/gpumem is 40960 MiB units, a fraction stays a fraction
                amounts = [None if amount is None else amount / unit for amount in amounts]
            nominal, borrowing, lending = amounts
            resources.append(ResourceQuota(key, resource, nominal or Decimal(0), borrowing, lending))
        result.append(PoolQuota(entry["pool"], index, tuple(resources)))
    return tuple(result)


def _timeline_resources(spec: dict[str, Any], pools: dict[str, GPUPool]) -> tuple[ResourceQuota, ...]:
    """A grant's or window's resources, resolved against its pool as a quota entry's are."""
    return _pool_quotas({"quotas": [{"pool": spec["pool"], "resources": spec["resources"]}]}, pools)[0].resources


def _hami(spec: dict[str, Any]) -> HamiSharing | None:
    """spec.sharing.hami, its defaults (schema.defaulted) filled in; None: not shared through HAMi."""
    if (spec.get("sharing") or {}).get("hami") is None:
        return None
    hami = defaulted("GPUPool", spec)["sharing"]["hami"]
    return HamiSharing(
        split_count=hami["deviceSplitCount"],
        memory_scaling=Decimal(str(hami["deviceMemoryScaling"])),
        core_scaling=Decimal(str(hami["deviceCoreScaling"])),
        device_memory=_optional_decimal(hami.get("deviceMemory")),
    )


def _build_pool(name: str, doc: SourceDoc, spec: dict[str, Any], accelerator: AcceleratorModel | None) -> GPUPool:
    resources = spec.get("nodeResources") or {}
    return GPUPool(
        name,
        doc,
        cluster=spec.get("cluster"),
        model_name=spec["accelerator"]["model"],
        product_label=spec["accelerator"].get("productLabel"),
        per_node=spec["acceleratorsPerNode"],
        nodes=tuple(
            PoolNode(n["name"], tuple(sorted((n.get("labels") or {}).items())), n.get("migLayout"), i, n.get("vnpuLayout"))
            for i, n in enumerate(spec.get("nodes", ()))
        ),
        node_selector=tuple(sorted(((spec.get("nodeSelector") or {}).get("matchLabels") or {}).items())),
        every_node=("nodeSelector" in spec and not (spec["nodeSelector"] or {}).get("matchLabels")
                    and not spec.get("nodes")),
        node_count=spec.get("nodeCount"),
        node_cpu=_optional_decimal(resources.get("cpu")),
        node_memory=_optional_decimal(resources.get("memory")),
        taints=tuple(Taint(t["key"], t.get("value", ""), t["effect"]) for t in spec.get("taints", ())),
        topology_levels=tuple((spec.get("topology") or {}).get("levels", ())),
        price_per_hour=_optional_decimal(spec.get("pricePerAcceleratorHour")),
        currency=spec.get("currency"),
        mig_layouts={k: dict(v) for k, v in (spec.get("migLayouts") or {}).items()},
        vnpu_layouts={k: dict(v) for k, v in (spec.get("vnpuLayouts") or {}).items()},
        hami=_hami(spec),
        accelerator=accelerator,
    )


def build_model(documents: list[SourceDoc]) -> tuple[Model, list[Finding]]:
    """Build the model from schema-valid documents; duplicate names become findings."""
    model = Model()
    findings: list[Finding] = []
    by_kind: dict[str, list[SourceDoc]] = defaultdict(list)
    for doc in documents:
        by_kind[doc.data["kind"]].append(doc)

    def unique(kind: str) -> list[tuple[str, SourceDoc]]:
        seen: dict[str, SourceDoc] = {}
        result = []
        for doc in by_kind.get(kind, ()):
            name = doc.data["metadata"]["name"]
            if name in seen:
                first = seen[name]
                findings.append(
                    make(
                        DUPLICATE_NAME,
                        Text("{kind} '{name}' is declared twice (first at {first})", kind=kind, name=name,
                             first=first.locate(("metadata", "name"))),
                        doc.locate(("metadata", "name")),
                        first.locate(("metadata", "name")),
                    )
                )
                continue
            seen[name] = doc
            result.append((name, doc))
        return result

    def singleton(kind: str) -> tuple[str, SourceDoc] | None:
        items = unique(kind)
        for name, doc in items[1:]:
            first = items[0][1]
            findings.append(
                make(
                    DUPLICATE_NAME,
                    Text("only one {kind} may be declared; '{name}' repeats '{first}' at {location}", kind=kind,
                         name=name, first=items[0][0], location=first.locate()),
                    doc.locate(("metadata", "name")),
                    first.locate(),
                )
            )
        return items[0] if items else None

    for name, doc in unique("Cluster"):
        model.clusters[name] = cluster_from_spec(name, doc, doc.data["spec"])
    for name, doc in unique("AcceleratorModel"):
        if name in MODELS:
            findings.append(
                make(
                    DUPLICATE_NAME,
                    Text("AcceleratorModel '{name}' is built in (see `gpugov catalog`); give the declared model "
                         "another name, or use the built-in one", name=name),
                    doc.locate(("metadata", "name")),
                )
            )
            continue
        model.accelerator_models[name] = DeclaredModel(name, doc, model_from_spec(name, doc.data["spec"]))
    for name, doc in unique("GPUPool"):
        spec = doc.data["spec"]
        model.pools[name] = _build_pool(name, doc, spec, model.lookup_model(spec["accelerator"]["model"]))
    for name, doc in unique("Department"):
        spec = doc.data["spec"]
        model.departments[name] = Department(
            name,
            doc,
            spec.get("parent"),
            _owners(spec),
            spec.get("costCenter"),
            _pool_quotas(spec, model.pools),
            _weight(spec),
            Budget.of(defaulted("Department", spec)),
        )
    for name, doc in unique("Tenant"):
        spec = doc.data["spec"]
        filled = defaulted("Tenant", spec)
        model.tenants[name] = Tenant(
            name,
            doc,
            department=spec.get("department"),
            owners=_owners(spec),
            cost_center=spec.get("costCenter"),
            clusters=tuple(spec.get("clusters", ())),
            members=_subjects(filled["members"]),
            viewers=_subjects(filled["viewers"]),
            namespaces=tuple(spec["namespaces"]),
            adopt_namespaces=tuple(filled["adoptNamespaces"]),
            queues=tuple(
                Queue(q["name"], q["namespace"], tuple(q.get("priorityClasses", ())), i)
                for i, q in enumerate(spec.get("queues", ()))
            ),
            quotas=_pool_quotas(spec, model.pools),
            weight=_weight(spec),
            flavor_fungibility=tuple(sorted((spec.get("flavorFungibility") or {}).items())),
            reclaim_spec=spec.get("reclaim") or {},
            budget=Budget.of(filled),
            allow=Allow.of(spec),
        )
    for name, doc in unique("PriorityClass"):
        spec = defaulted("PriorityClass", doc.data["spec"])
        model.priority_classes[name] = PriorityClass(name, doc, spec["value"], spec["preemptible"], spec.get("description", ""))
    for name, doc in unique("QuotaGrant"):
        spec = doc.data["spec"]
        model.grants[name] = build_grant(name, doc, spec, _timeline_resources(spec, model.pools))
    for name, doc in unique("QuotaWindow"):
        spec = doc.data["spec"]
        model.windows[name] = build_window(name, doc, defaulted("QuotaWindow", spec), _timeline_resources(spec, model.pools))
    for name, doc in unique("Fleet"):
        model.fleets[name] = _build_fleet(name, doc, defaulted("Fleet", doc.data["spec"]))
    if found := singleton("SchedulingPolicy"):
        name, doc = found
        model.scheduling = scheduling_from_spec(name, doc, doc.data["spec"])
    if found := singleton("Guardrails"):
        name, doc = found
        model.guardrails = guardrails_from_spec(name, doc, doc.data["spec"])
    return model, findings


def _build_fleet(name: str, doc: SourceDoc, spec: dict[str, Any]) -> Fleet:
    return Fleet(
        name,
        doc,
        manager=spec["manager"],
        kueue_namespace=spec["kueueNamespace"],
        manager_user=spec["managerUser"],
        workers=tuple(FleetWorker(w["cluster"], w["kubeconfigSecret"], i) for i, w in enumerate(spec["workers"])),
        tenants=tuple(
            FleetTenant(t["tenant"], tuple((k, parse_quantity(str(v))) for k, v in t["quota"].items()), i)
            for i, t in enumerate(spec["tenants"])
        ),
    )
