"""Every tenant has owners and a cost centre, as the guardrails require; its role holders are sound."""

from __future__ import annotations

from collections.abc import Iterator

from gpugov.declarations.model import Model, Tenant
from gpugov.findings import Finding, Level, make, rule
from gpugov.i18n import Text
from gpugov.policy.checks import check

OWNER_MISSING = rule(
    "GG070",
    "owner-missing",
    Level.ERROR,
    "A tenant names no owner (user or group), so nobody can be asked about its quota.",
    "Add spec.owners.users or spec.owners.groups.",
)
COST_CENTER_MISSING = rule(
    "GG071",
    "cost-center-missing",
    Level.ERROR,
    "A tenant has no cost centre, so its GPU use cannot be charged back.",
    "Add spec.costCenter.",
)


@check
def check_ownership(model: Model) -> Iterator[Finding]:
    limits = model.limits
    for tenant in model.tenants.values():
        if limits.require_owner and tenant.owners.empty:
            yield make(OWNER_MISSING, Text("tenant '{tenant}' has no owners", tenant=tenant.name), tenant.name_at())
        if limits.require_cost_center and not tenant.cost_center:
            yield make(
                COST_CENTER_MISSING,
                Text("tenant '{tenant}' has no costCenter", tenant=tenant.name),
                tenant.name_at(),
            )


SUBJECT_INVALID = rule(
    "GG110",
    "role-subject-invalid",
    Level.ERROR,
    "A tenant's owners, members or viewers name a Kubernetes system user or group (system:authenticated, "
    "system:masters, ...), which would hand the tenant's role to every user or to the cluster's own components, "
    "or a name with blanks that no user has.",
    "Name the people and teams of the tenant; a ServiceAccount of one of its own namespaces may be a user "
    "(system:serviceaccount:NAMESPACE:NAME).",
)
SUBJECT_DUPLICATE = rule(
    "GG111",
    "role-subject-duplicate",
    Level.ERROR,
    "The same user or group is listed twice in one of a tenant's owners, members or viewers.",
    "Remove the repeated entry.",
)
SUBJECT_SEVERAL_ROLES = rule(
    "GG112",
    "role-subject-several-roles",
    Level.WARNING,
    "A user or group holds several of a tenant's roles (owner, member, viewer); RBAC adds roles up, so it "
    "holds the broadest and the narrower entry misleads.",
    "Keep the subject under one of spec.owners, spec.members or spec.viewers.",
)

PERSONA_FIELDS = (("owner", "owners"), ("member", "members"), ("viewer", "viewers"))
# The words in a finding, in the reader's language (a persona, a subject kind without its plural s).
WORDS = {"owner": Text("owner"), "member": Text("member"), "viewer": Text("viewer"), "user": Text("user"),
         "group": Text("group")}


def _subject_problem(tenant: Tenant, persona: str, kind: str, name: str) -> str:
    if not name.strip() or any(c.isspace() for c in name):
        return Text("contains blanks, which no Kubernetes user or group name has")
    if not name.startswith("system:"):
        return ""
    account = name.split(":")
    if kind == "users" and len(account) == 4 and account[1] == "serviceaccount" and account[3]:
        if account[2] not in tenant.namespaces:
            return Text("is a ServiceAccount of namespace '{namespace}', which is not one of the tenant's namespaces",
                        namespace=account[2])
        if persona == "owner":
            return Text("is a ServiceAccount: every member may run a pod as it, so as an owner it would lend the owner "
                        "role to every member (make it a member)")
        return ""
    if kind == "groups":
        return Text("is a Kubernetes system group: the role would go to every user or component in it")
    return Text("is a Kubernetes system user")


@check
def check_role_subjects(model: Model) -> Iterator[Finding]:
    for tenant in model.tenants.values():
        holders: dict[tuple[str, str], list[str]] = {}
        for persona, field in PERSONA_FIELDS:
            who = tenant.owners if field == "owners" else getattr(tenant, field)
            for kind in ("users", "groups"):
                seen: set[str] = set()
                for index, name in enumerate(getattr(who, kind)):
                    problem = _subject_problem(tenant, persona, kind, name)
                    if problem:
                        yield make(SUBJECT_INVALID, Text("tenant '{tenant}': {field}.{kind} '{name}' {problem}",
                                                         tenant=tenant.name, field=field, kind=kind, name=name,
                                                         problem=problem), tenant.at(field, kind, index))
                    if name in seen:
                        yield make(SUBJECT_DUPLICATE, Text("tenant '{tenant}': {field}.{kind} lists '{name}' twice",
                                                           tenant=tenant.name, field=field, kind=kind, name=name),
                                   tenant.at(field, kind, index))
                        continue
                    seen.add(name)
                    roles = holders.setdefault((kind, name), [])
                    if roles:
                        yield make(SUBJECT_SEVERAL_ROLES,
                                   Text("tenant '{tenant}': {kind} '{name}' is {role} and {persona}: it holds the "
                                        "{role} role (RBAC adds roles up)", tenant=tenant.name, kind=WORDS[kind[:-1]],
                                        name=name, role=WORDS[roles[0]], persona=WORDS[persona]),
                                   tenant.at(field, kind, index))
                    roles.append(persona)
