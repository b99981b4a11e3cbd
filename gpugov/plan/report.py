"""Plan reporters: markdown for the pull-request comment (short, tables, risks first) and text."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from gpugov.kube.quantity import format_quantity
from gpugov.kube.resources import is_accelerator
from gpugov.plan.changes import QUOTA_FIELDS, Move, Plan, QuotaChange, WeightChange
from gpugov.plan.removal import PATHS, PLURAL, counted
from gpugov.plan.timeline import markdown_rows

MARKER = "<!-- gpugov-plan -->"  # lets the workflow find and update its one sticky comment
MAX_OBJECT_ROWS = 200


def _q(value: Decimal | None) -> str:
    return "-" if value is None else format_quantity(value)


def _cell(change: QuotaChange, field: str) -> str:
    before, after = change.before[field], change.after[field]
    if before == after:
        return _q(after)
    if before is not None and after is not None:
        delta = after - before
        sign = "+" if delta > 0 else ""
        return f"{_q(before)} → {_q(after)} ({sign}{format_quantity(delta)})"
    return f"{_q(before)} → {_q(after)}"


def _fraction(guaranteed: Decimal, capacity: Decimal) -> str:
    if not capacity:
        return f"{_q(guaranteed)} / 0"
    return f"{_q(guaranteed)} / {_q(capacity)} ({guaranteed * 100 / capacity:.0f}%)"


def _unassigned(row: Any) -> str:
    """Capacity this change leaves (or makes) unassigned: nobody's nominal quota, so Kueue admits
    nothing onto it (issue #23 item 7: said where the change makes it, not only by `gpugov capacity`)."""
    after = row.capacity_after - row.guaranteed_after
    before = row.capacity_before - row.guaranteed_before
    if not is_accelerator(row.resource) or after <= 0 or after <= before:
        return ""
    return (f"**unassigned**: {_q(after)} of {_q(row.capacity_after)} {row.resource} of pool {row.pool} are in "
            f"nobody's nominal quota after this change (before: {_q(max(before, Decimal(0)))}), and Kueue admits "
            "nothing onto them: give them to a department as shared quota or to a tenant")


def _capacity_delta(before: dict[str, Decimal], after: dict[str, Decimal]) -> str:
    parts = []
    for resource in sorted(set(before) | set(after)):
        old, new = before.get(resource, Decimal(0)), after.get(resource, Decimal(0))
        if old != new:
            parts.append(f"{resource} {_q(old)} → {_q(new)}")
    return ", ".join(parts)


def _move(move: Move) -> str:
    return f"{move.holder} `{move.name}`: {move.field} {move.before or 'none'} → {move.after or 'none'}"


def _weight(change: WeightChange) -> str:
    before = "new" if change.new else str(change.before or 1)
    return f"{change.holder} `{change.name}`: fairSharing weight {before} → {change.after or 1}"


def markdown(plan: Plan) -> str:
    out = [MARKER, f"### gpugov plan: `{plan.base}` → `{plan.head}`", ""]
    if plan.empty and not plan.priorities and not plan.risks:
        out.append("No change to tenants, quotas, pools or cluster objects.")
        return "\n".join(out) + "\n"
    if plan.risks:
        out.append(f"**Risks ({len(plan.risks)})**")
        out.extend(f"- **{risk.id}** ({risk.rule}): {risk.message}" for risk in plan.risks)
    else:
        out.append("**No risks found.**")
    out.append("")
    who = []
    for label, names in (("Tenants added", plan.tenants_added), ("Tenants removed", plan.tenants_removed),
                         ("Departments added", plan.departments_added),
                         ("Departments removed", plan.departments_removed)):
        if names:
            who.append(f"{label}: {', '.join(f'`{n}`' for n in names)}")
    if who:
        out.extend(["; ".join(who), ""])
    if plan.quotas:
        out += ["**Quota changes**", "", "| who | pool | resource | nominal | borrowing limit | lending limit |",
                "|---|---|---|---|---|---|"]
        for c in plan.quotas:
            cells = " | ".join(_cell(c, f) for f in QUOTA_FIELDS)
            out.append(f"| {c.holder} `{c.name}` | {c.pool} | {c.resource} | {cells} |")
        out.append("")
    if plan.capacity:
        out += ["**Guaranteed quota against capacity**", "", "| pool | resource | before | after |", "|---|---|---|---|"]
        for r in plan.capacity:
            out.append(f"| {r.pool} | {r.resource} | {_fraction(r.guaranteed_before, r.capacity_before)} | "
                       f"{_fraction(r.guaranteed_after, r.capacity_after)} |")
        out.append("")
        out += [f"- {_unassigned(r)}" for r in plan.capacity if _unassigned(r)]
        out += [""] if any(_unassigned(r) for r in plan.capacity) else []
    if plan.pools:
        out += ["**Pools**", ""]
        for p in plan.pools:
            detail = []
            if p.nodes_added:
                detail.append(f"nodes added: {', '.join(p.nodes_added)}")
            if p.nodes_removed:
                detail.append(f"nodes removed: {', '.join(p.nodes_removed)}")
            capacity = _capacity_delta(p.capacity_before, p.capacity_after)
            if capacity:
                detail.append(f"capacity: {capacity}")
            out.append(f"- `{p.pool}` {p.status}" + (f" ({'; '.join(detail)})" if detail else ""))
        out.append("")
    if plan.mig:
        out += ["**MIG reconfiguration** (nodes are drained while mig-manager applies the new geometry)", "",
                "| cluster | node | before | after | why |", "|---|---|---|---|---|"]
        out += [f"| {m.cluster} | {m.node} | {m.before or '-'} | {m.after or '-'} | {m.reason} |" for m in plan.mig]
        out.append("")
    if plan.priorities:
        out += ["**Priority classes**", ""]
        out += [f"- `{p.name}`: {p.before or 'absent'} → {p.after or 'absent'}" for p in plan.priorities]
        out.append("")
    if plan.moves or plan.weights:
        out += ["**Departments and fair sharing**", ""]
        out += [f"- {_move(m)}" for m in plan.moves] + [f"- {_weight(w)}" for w in plan.weights]
        out.append("")
    if plan.objects:
        counts = {a: sum(1 for o in plan.objects if o.action == a) for a in ("create", "label", "update", "replace", "delete", "retain")}
        summary = ", ".join(f"{n} to {a}" for a, n in counts.items() if n)
        out += [f"<details><summary>Object changes: {summary}</summary>", "",
                "| cluster | action | kind | name | fields |", "|---|---|---|---|---|"]
        for o in plan.objects[:MAX_OBJECT_ROWS]:
            name = f"{o.namespace}/{o.name}" if o.namespace else o.name
            out.append(f"| {o.cluster} | {o.action} | {o.kind} | {name} | {', '.join(o.fields)} |")
        if len(plan.objects) > MAX_OBJECT_ROWS:
            out.append(f"| | | | … {len(plan.objects) - MAX_OBJECT_ROWS} more | |")
        out += ["", "</details>", ""]
    out += markdown_rows(plan.timeline)
    if plan.removals:
        out += ["**What removing them does**, per deploy path", ""]
        for removal in plan.removals:
            out.append(f"- {counted(removal.category, len(removal.names))} ({_names(removal.names)}):")
            out += [f"  - {path}: {removal.paths[path]}" for path in PATHS]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _names(names: tuple[str, ...], shown: int = 8) -> str:
    listed = ", ".join(f"`{n}`" for n in names[:shown])
    return listed + (f" and {len(names) - shown} more" if len(names) > shown else "")


def text(plan: Plan) -> str:
    out = [f"gpugov plan: {plan.base} -> {plan.head}"]
    out += [f"RISK {r.id} ({r.rule}): {r.message}" for r in plan.risks]
    out += [f"tenant added: {n}" for n in plan.tenants_added] + [f"tenant removed: {n}" for n in plan.tenants_removed]
    for c in plan.quotas:
        fields = ", ".join(f"{f.replace('_', ' ')} {_cell(c, f)}" for f in QUOTA_FIELDS if c.before[f] != c.after[f])
        out.append(f"quota {c.holder} {c.name} {c.pool} {c.resource}: {fields}")
    for r in plan.capacity:
        out.append(f"capacity {r.pool} {r.resource}: {_fraction(r.guaranteed_before, r.capacity_before)} -> "
                   f"{_fraction(r.guaranteed_after, r.capacity_after)}")
    for p in plan.pools:
        capacity = _capacity_delta(p.capacity_before, p.capacity_after)
        out.append(f"pool {p.pool} {p.status} +{len(p.nodes_added)} -{len(p.nodes_removed)} nodes"
                   + (f"; capacity {capacity}" if capacity else ""))
    out += [f"mig {m.cluster} {m.node}: {m.before} -> {m.after} ({m.reason})" for m in plan.mig]
    out += [f"priority {p.name}: {p.before} -> {p.after}" for p in plan.priorities]
    out += [f"{m.holder} {m.name} {m.field}: {m.before or 'none'} -> {m.after or 'none'}" for m in plan.moves]
    out += [f"{w.holder} {w.name} weight: {'new' if w.new else w.before or 1} -> {w.after or 1}" for w in plan.weights]
    for o in plan.objects:
        name = f"{o.namespace}/{o.name}" if o.namespace else o.name
        out.append(f"{o.action} {o.cluster} {o.kind} {name}" + (f" ({', '.join(o.fields)})" if o.fields else ""))
    for removal in plan.removals:
        out += [f"removed {PLURAL[removal.category]}, {path}: {removal.paths[path]}" for path in PATHS]
    out.append(f"{len(plan.risks)} risks, {len(plan.quotas)} quota changes, {len(plan.objects)} object changes")
    return "\n".join(out) + "\n"
