"""Plan reporters: markdown for the pull-request comment (short, tables, risks first) and text."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from gpugov.i18n import _, localized, ngettext
from gpugov.kube.quantity import format_quantity
from gpugov.kube.resources import is_accelerator
from gpugov.plan.changes import QUOTA_FIELDS, FleetMember, Move, Plan, QuotaChange, WeightChange
from gpugov.plan.removal import NAMESPACE, NODE, PATHS, PLURAL
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
    return _("**unassigned**: {free} of {capacity} {resource} of pool {pool} are in nobody's nominal quota after "
             "this change (before: {before}), and Kueue admits nothing onto them: give them to a department as "
             "shared quota or to a tenant").format(free=_q(after), capacity=_q(row.capacity_after),
                                                   resource=row.resource, pool=row.pool,
                                                   before=_q(max(before, Decimal(0))))


def _capacity_delta(before: dict[str, Decimal], after: dict[str, Decimal]) -> str:
    parts = []
    for resource in sorted(set(before) | set(after)):
        old, new = before.get(resource, Decimal(0)), after.get(resource, Decimal(0))
        if old != new:
            parts.append(f"{resource} {_q(old)} → {_q(new)}")
    return ", ".join(parts)


def _holder(holder: str) -> str:
    """"tenant" or "department" in the reader's language."""
    return {"tenant": _("tenant"), "department": _("department")}.get(holder, holder)


def _move(move: Move) -> str:
    field = {"department": _("department"), "parent": _("parent")}.get(move.field, move.field)
    none = _("none")
    return f"{_holder(move.holder)} `{move.name}`: {field} {move.before or none} → {move.after or none}"


def _weight(change: WeightChange) -> str:
    before = _("new") if change.new else str(change.before or 1)
    return _("{holder} `{name}`: fairSharing weight {before} → {after}").format(
        holder=_holder(change.holder), name=change.name, before=before, after=change.after or 1)


def _action(action: str) -> str:
    """An object change's action as the reader says it (JSON keeps the English word)."""
    words = {"create": _("create"), "label": _("label"), "update": _("update"), "replace": _("replace"),
             "delete": _("delete"), "retain": _("retain")}
    return words.get(action, action)


def _quota_field(field: str) -> str:
    words = {"nominal": _("nominal"), "borrowing_limit": _("borrowing limit"), "lending_limit": _("lending limit")}
    return words.get(field, field.replace("_", " "))


def _object_counts(counts: dict[str, int]) -> str:
    """"2 to create, 1 to delete": each action's words a message of its own, so a language may reorder."""
    words = {"create": _("{n} to create"), "label": _("{n} to label"), "update": _("{n} to update"),
             "replace": _("{n} to replace"), "delete": _("{n} to delete"), "retain": _("{n} to retain")}
    return _(", ").join(words[a].format(n=n) for a, n in counts.items() if n)


def _member(member: FleetMember) -> tuple[str, str]:
    """A fleet member's role and what changes on it, in the reader's words."""
    role = _("manager") if member.role == "manager" else _("worker")
    return role, _object_counts(member.counts) if member.counts else _("no object change")


def markdown(plan: Plan) -> str:
    out = [MARKER, _("### gpugov plan: `{base}` → `{head}`").format(base=plan.base, head=plan.head), ""]
    if plan.empty and not plan.priorities and not plan.risks:
        out.append(_("No change to tenants, quotas, pools or cluster objects."))
        return "\n".join(out) + "\n"
    if plan.risks:
        out.append(_("**Risks ({count})**").format(count=len(plan.risks)))
        out.extend(f"- **{risk.id}** ({risk.rule}): {localized(risk.message)}" for risk in plan.risks)
    else:
        out.append(_("**No risks found.**"))
    out.append("")
    who = []
    for label, names in ((_("Tenants added: {names}"), plan.tenants_added),
                         (_("Tenants removed: {names}"), plan.tenants_removed),
                         (_("Departments added: {names}"), plan.departments_added),
                         (_("Departments removed: {names}"), plan.departments_removed)):
        if names:
            who.append(label.format(names=", ".join(f"`{n}`" for n in names)))
    if who:
        out.extend([_("; ").join(who), ""])
    if plan.quotas:
        out += [_("**Quota changes**"), "", _row(_("who"), _("pool"), _("resource"), _("nominal"),
                                                  _("borrowing limit"), _("lending limit")),
                "|---|---|---|---|---|---|"]
        for c in plan.quotas:
            cells = " | ".join(_cell(c, f) for f in QUOTA_FIELDS)
            out.append(f"| {_holder(c.holder)} `{c.name}` | {c.pool} | {c.resource} | {cells} |")
        out.append("")
    if plan.capacity:
        out += [_("**Guaranteed quota against capacity**"), "",
                _row(_("pool"), _("resource"), _("before"), _("after")), "|---|---|---|---|"]
        for r in plan.capacity:
            out.append(f"| {r.pool} | {r.resource} | {_fraction(r.guaranteed_before, r.capacity_before)} | "
                       f"{_fraction(r.guaranteed_after, r.capacity_after)} |")
        out.append("")
        out += [f"- {_unassigned(r)}" for r in plan.capacity if _unassigned(r)]
        out += [""] if any(_unassigned(r) for r in plan.capacity) else []
    if plan.reach:
        out += [_("**What each tenant can reach** (Kueue's maximum: its nominal quota plus what its cohort tree "
                  "can lend, within every borrowing and lending limit)"), "",
                _row(_("cluster"), _("tenant"), _("pool"), _("resource"), _("before"), _("after")),
                "|---|---|---|---|---|---|"]
        out += [f"| {r.cluster} | `{r.tenant}` | {r.pool} | {r.resource} | {_q(r.before)} | {_q(r.after)} |"
                for r in plan.reach]
        out.append("")
    if plan.pools:
        out += [_("**Pools**"), ""]
        statuses = {"added": _("added"), "removed": _("removed"), "changed": _("changed")}
        sep = _("; ")
        for p in plan.pools:
            detail = []
            if p.nodes_added:
                detail.append(_("nodes added: {nodes}").format(nodes=", ".join(p.nodes_added)))
            if p.nodes_removed:
                detail.append(_("nodes removed: {nodes}").format(nodes=", ".join(p.nodes_removed)))
            capacity = _capacity_delta(p.capacity_before, p.capacity_after)
            if capacity:
                detail.append(_("capacity: {change}").format(change=capacity))
            out.append(f"- `{p.pool}` {statuses.get(p.status, p.status)}" + (f" ({sep.join(detail)})" if detail else ""))
        out.append("")
    if plan.mig:
        out += [_("**MIG reconfiguration** (nodes are drained while mig-manager applies the new geometry)"), "",
                _row(_("cluster"), _("node"), _("before"), _("after"), _("why")), "|---|---|---|---|---|"]
        out += [f"| {m.cluster} | {m.node} | {m.before or '-'} | {m.after or '-'} | {localized(m.reason)} |"
                for m in plan.mig]
        out.append("")
    if plan.priorities:
        out += [_("**Priority classes**"), ""]
        absent = _("absent")
        out += [f"- `{p.name}`: {p.before or absent} → {p.after or absent}" for p in plan.priorities]
        out.append("")
    if plan.moves or plan.weights:
        out += [_("**Departments and fair sharing**"), ""]
        out += [f"- {_move(m)}" for m in plan.moves] + [f"- {_weight(w)}" for w in plan.weights]
        out.append("")
    if plan.fleets:
        out += [_("**Fleet members** (which cluster of each fleet the change touches: apply workers first, then "
                  "the manager)"), "", _row(_("fleet"), _("cluster"), _("role"), _("object changes")), "|---|---|---|---|"]
        out += ["| {} | {} | {} | {} |".format(m.fleet, m.cluster, *_member(m)) for m in plan.fleets]
        out.append("")
    if plan.objects:
        counts = {a: sum(1 for o in plan.objects if o.action == a) for a in ("create", "label", "update", "replace", "delete", "retain")}
        summary = _("Object changes: {summary}").format(summary=_object_counts(counts))
        out += [f"<details><summary>{summary}</summary>", "",
                _row(_("cluster"), _("action"), _("kind"), _("name"), _("fields")), "|---|---|---|---|---|"]
        for o in plan.objects[:MAX_OBJECT_ROWS]:
            name = f"{o.namespace}/{o.name}" if o.namespace else o.name
            out.append(f"| {o.cluster} | {_action(o.action)} | {o.kind} | {name} | {', '.join(o.fields)} |")
        if len(plan.objects) > MAX_OBJECT_ROWS:
            more = _("… {count} more").format(count=len(plan.objects) - MAX_OBJECT_ROWS)
            out.append(f"| | | | {more} | |")
        out += ["", "</details>", ""]
    out += markdown_rows(plan.timeline)
    if plan.removals:
        out += [_("**What removing them does**, per deploy path"), ""]
        for removal in plan.removals:
            out.append(f"- {_counted(removal.category, len(removal.names))} ({_names(removal.names)}):")
            out += [f"  - {path}: {localized(removal.paths[path])}" for path in PATHS]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _names(names: tuple[str, ...], shown: int = 8) -> str:
    listed = ", ".join(f"`{n}`" for n in names[:shown])
    return listed + (_(" and {count} more").format(count=len(names) - shown) if len(names) > shown else "")


def _counted(category: str, count: int) -> str:
    """'1 node', '2 nodes' (gpugov.plan.removal.counted) in the reader's language."""
    if category == NAMESPACE:
        return ngettext("{n} namespace", "{n} namespaces", count).format(n=count)
    if category == NODE:
        return ngettext("{n} node", "{n} nodes", count).format(n=count)
    return ngettext("{n} object", "{n} objects", count).format(n=count)


def _row(*cells: str) -> str:
    """A markdown table's header row."""
    return "| " + " | ".join(cells) + " |"


def text(plan: Plan) -> str:
    out = [_("gpugov plan: {base} -> {head}").format(base=plan.base, head=plan.head)]
    # Each line's leading words are a message (issue #30); ids, names and quantities stay as they are.
    told = _("RISK {id} ({rule}): {message}")
    out += [told.format(id=r.id, rule=r.rule, message=localized(r.message)) for r in plan.risks]
    added, removed = _("tenant added: {name}"), _("tenant removed: {name}")
    out += [added.format(name=n) for n in plan.tenants_added] + [removed.format(name=n) for n in plan.tenants_removed]
    told, sep = _("quota {holder} {name} {pool} {resource}: {fields}"), _(", ")
    for c in plan.quotas:
        fields = sep.join(f"{_quota_field(f)} {_cell(c, f)}" for f in QUOTA_FIELDS if c.before[f] != c.after[f])
        out.append(told.format(holder=_holder(c.holder), name=c.name, pool=c.pool, resource=c.resource, fields=fields))
    told = _("capacity {pool} {resource}: {before} -> {after}")
    out += [told.format(pool=r.pool, resource=r.resource, before=_fraction(r.guaranteed_before, r.capacity_before),
                        after=_fraction(r.guaranteed_after, r.capacity_after)) for r in plan.capacity]
    out += [_unassigned(r).replace("**", "") for r in plan.capacity if _unassigned(r)]  # as markdown says it, plain
    told = _("reach {cluster} {tenant} {pool} {resource}: {before} -> {after}")
    out += [told.format(cluster=r.cluster, tenant=r.tenant, pool=r.pool, resource=r.resource, before=_q(r.before),
                        after=_q(r.after)) for r in plan.reach]
    told, more = _("pool {pool} {status} +{added} -{removed} nodes"), _("; capacity {change}")
    statuses = {"added": _("added"), "removed": _("removed"), "changed": _("changed")}
    for p in plan.pools:
        capacity = _capacity_delta(p.capacity_before, p.capacity_after)
        out.append(told.format(pool=p.pool, status=statuses.get(p.status, p.status), added=len(p.nodes_added),
                               removed=len(p.nodes_removed)) + (more.format(change=capacity) if capacity else ""))
    told = _("mig {cluster} {node}: {before} -> {after} ({reason})")
    out += [told.format(cluster=m.cluster, node=m.node, before=m.before, after=m.after, reason=localized(m.reason))
            for m in plan.mig]
    told = _("priority {name}: {before} -> {after}")
    out += [told.format(name=p.name, before=p.before, after=p.after) for p in plan.priorities]
    none, told = _("none"), _("{holder} {name} {field}: {before} -> {after}")
    fields = {"department": _("department"), "parent": _("parent")}
    out += [told.format(holder=_holder(m.holder), name=m.name, field=fields.get(m.field, m.field),
                        before=m.before or none, after=m.after or none) for m in plan.moves]
    new, told = _("new"), _("{holder} {name} weight: {before} -> {after}")
    out += [told.format(holder=_holder(w.holder), name=w.name, before=new if w.new else w.before or 1,
                        after=w.after or 1) for w in plan.weights]
    told = _("fleet {fleet} {cluster} ({role}): {changes}")
    out += [told.format(fleet=m.fleet, cluster=m.cluster, role=_member(m)[0], changes=_member(m)[1])
            for m in plan.fleets]
    for o in plan.objects:
        name = f"{o.namespace}/{o.name}" if o.namespace else o.name
        out.append(f"{_action(o.action)} {o.cluster} {o.kind} {name}" + (f" ({', '.join(o.fields)})" if o.fields else ""))
    told = _("removed {things}, {path}: {what}")
    things = {"objects": _("objects"), "namespaces": _("namespaces"), "nodes": _("nodes")}
    for removal in plan.removals:
        plural = PLURAL[removal.category]
        out += [told.format(things=things.get(plural, plural), path=path, what=localized(removal.paths[path]))
                for path in PATHS]
    # One message, no plural forms: English has always said "1 risks" here, and Chinese has no plural.
    out.append(_("{risks} risks, {quotas} quota changes, {objects} object changes").format(
        risks=len(plan.risks), quotas=len(plan.quotas), objects=len(plan.objects)))
    return "\n".join(out) + "\n"
