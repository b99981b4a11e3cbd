"""The reclaim policy (Guardrails.reclaim, a tenant's reclaim) names what exists and warns before it acts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpugov.declarations.model import Decl, Model, ReclaimPolicy, Tenant, duration_seconds, reclaim_from_spec
from gpugov.findings import Finding, Level, make, rule
from gpugov.i18n import Text
from gpugov.policy.checks import check

UNKNOWN_CLASS = rule(
    "GG150",
    "reclaim-unknown-priority-class",
    Level.ERROR,
    "A reclaim policy's maxRuntime or idle exemption names a priority class that is not declared.",
    "Name a PriorityClass declared under policies/, or remove the entry.",
)
UNKNOWN_QUEUE = rule(
    "GG151",
    "reclaim-unknown-queue",
    Level.ERROR,
    "A reclaim policy exempts a queue that is not declared (on a tenant: not one of its own queues).",
    "Name a queue of spec.queues (Guardrails: of any tenant), or remove the entry.",
)
TENANT_LOOSENS = rule(
    "GG152",
    "reclaim-loosened-by-tenant",
    Level.WARNING,
    "A tenant's reclaim policy is looser than Guardrails.reclaim: a longer maximum runtime, window, grace or "
    "snooze, a lower idle threshold, notify instead of deactivate, or more exemptions.",
    "Keep the tenant's reclaim within the Guardrails', or have the platform team agree the exception.",
)
NO_WARNING = rule(
    "GG153",
    "reclaim-deactivate-without-warning",
    Level.ERROR,
    "An idle policy deactivates with a grace of 0: a job would be stopped without its owner being warned first.",
    "Give idle.grace a duration, e.g. 30m, so the owner can react (or snooze) before the job is deactivated.",
)


def _spec_of(decl: Decl, reclaim: dict[str, Any] | None) -> Iterator[tuple[Decl, dict[str, Any]]]:
    if reclaim:
        yield decl, reclaim


def _policies(model: Model) -> Iterator[tuple[Decl, dict[str, Any]]]:
    """(declaration, its declared reclaim block): Guardrails first, then each tenant by name."""
    if model.guardrails is not None:
        yield from _spec_of(model.guardrails, model.guardrails.reclaim_spec)
    for name in sorted(model.tenants):
        yield from _spec_of(model.tenants[name], model.tenants[name].reclaim_spec)


@check
def check_reclaim_names(model: Model) -> Iterator[Finding]:
    all_queues = {q.name for t in model.tenants.values() for q in t.queues}
    for decl, spec in _policies(model):
        where = "Guardrails" if decl.kind == "Guardrails" else Text("tenant '{tenant}'", tenant=decl.name)
        runtime = (spec.get("maxRuntime") or {}).get("priorityClasses") or {}
        for name in sorted(runtime):
            if name not in model.priority_classes:
                yield make(UNKNOWN_CLASS, Text("{where}: reclaim.maxRuntime names priority class '{name}', which is "
                                               "not declared (declared: {declared})", where=where, name=name,
                                               declared=", ".join(sorted(model.priority_classes)) or Text("none")),
                           decl.at("reclaim", "maxRuntime", "priorityClasses", name, key=True))
        exempt = ((spec.get("idle") or {}).get("exempt")) or {}
        for index, name in enumerate(exempt.get("priorityClasses") or ()):
            if name not in model.priority_classes:
                yield make(UNKNOWN_CLASS, Text("{where}: reclaim.idle.exempt names priority class '{name}', which is "
                                               "not declared", where=where, name=name), decl.at("reclaim", "idle", "exempt", "priorityClasses", index))
        known = {q.name for q in decl.queues} if isinstance(decl, Tenant) else all_queues
        for index, name in enumerate(exempt.get("queues") or ()):
            if name not in known:
                yield make(UNKNOWN_QUEUE, Text("{where}: reclaim.idle.exempt names queue '{name}', which is not "
                                               "declared (declared: {declared})", where=where, name=name,
                                               declared=", ".join(sorted(known)) or Text("none")),
                           decl.at("reclaim", "idle", "exempt", "queues", index))


@check
def check_deactivate_warns_first(model: Model) -> Iterator[Finding]:
    for decl in [model.limits, *(model.tenants[n] for n in sorted(model.tenants))]:
        policy = model.reclaim_policy(decl) if isinstance(decl, Tenant) else _guardrails_policy(model)
        if policy is None or policy.idle is None or policy.idle.action != "deactivate" or policy.idle.grace:
            continue
        declared = decl.reclaim_spec or {}
        if isinstance(decl, Tenant) and "grace" not in (declared.get("idle") or {}) and "action" not in (
                declared.get("idle") or {}):
            continue  # inherited from Guardrails: reported there
        field = "grace" if "grace" in (declared.get("idle") or {}) else "action"
        who = "Guardrails" if decl.kind == "Guardrails" else Text("tenant {name}", name=repr(decl.name))
        yield make(NO_WARNING, Text("{where}: reclaim.idle deactivates with a grace of 0, so a job is stopped without "
                                    "a warning first", where=who),
                   decl.at("reclaim", "idle", field))


def _guardrails_policy(model: Model) -> ReclaimPolicy | None:
    return None if model.limits.reclaim_spec is None else reclaim_from_spec(model.limits.reclaim_spec)


def _looser(model: Model, tenant: Tenant) -> Iterator[tuple[tuple[str, ...], str]]:
    """(path under reclaim, what is looser) for each field where the tenant's policy gives more than the Guardrails'."""
    base = _guardrails_policy(model)
    own = model.reclaim_policy(tenant)
    if base is None or own is None:
        return
    declared = tenant.reclaim_spec
    runtime = declared.get("maxRuntime") or {}
    if "default" in runtime and (base.max_runtime_default is not None) and (
            own.max_runtime_default or 0) > base.max_runtime_default:
        yield ("maxRuntime", "default"), Text("maxRuntime.default {value} is longer than the Guardrails'",
                                              value=runtime["default"])
    for name in sorted(runtime.get("priorityClasses") or {}):
        limit = base.max_runtime_for(name)
        if limit is not None and duration_seconds(runtime["priorityClasses"][name]) > limit:
            yield ("maxRuntime", "priorityClasses", name), Text("maxRuntime for {name} is longer than the Guardrails'",
                                                                name=name)
    idle = declared.get("idle") or {}
    if base.idle is None or own.idle is None:
        return
    for field, mine, theirs in (("window", own.idle.window, base.idle.window),
                                ("grace", own.idle.grace, base.idle.grace)):
        if field in idle and mine > theirs:
            yield ("idle", field), Text("idle.{field} {value} is longer than the Guardrails'", field=field,
                                        value=idle[field])
    if "belowPercent" in idle and own.idle.below_percent < base.idle.below_percent:
        yield ("idle", "belowPercent"), Text("idle.belowPercent {value} is lower than the Guardrails'",
                                             value=idle["belowPercent"])
    if "action" in idle and own.idle.action == "notify" and base.idle.action == "deactivate":
        yield ("idle", "action"), Text("idle.action notify where the Guardrails deactivate")
    exempt = idle.get("exempt") or {}
    for field, mine_t, theirs_t in (("priorityClasses", own.idle.exempt_classes, base.idle.exempt_classes),
                                    ("queues", own.idle.exempt_queues, base.idle.exempt_queues)):
        if field in exempt and set(mine_t) - set(theirs_t):
            yield ("idle", "exempt", field), Text("idle.exempt.{field} adds {names}", field=field,
                                                  names=", ".join(sorted(set(mine_t) - set(theirs_t))))
    snooze = (declared.get("snooze") or {}).get("maximum")
    if snooze is not None and own.snooze_maximum > base.snooze_maximum:
        yield ("snooze", "maximum"), Text("snooze.maximum {value} is longer than the Guardrails'", value=snooze)


@check
def check_tenants_keep_within_guardrails(model: Model) -> Iterator[Finding]:
    for name in sorted(model.tenants):
        tenant = model.tenants[name]
        for path, what in _looser(model, tenant):
            yield make(TENANT_LOOSENS, Text("tenant '{tenant}' loosens the reclaim policy: {what}", tenant=name,
                                            what=what),
                       tenant.at("reclaim", *path),
                       *([model.limits.at("reclaim")] if model.guardrails is not None else []))
