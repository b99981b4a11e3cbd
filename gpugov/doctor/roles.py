"""The doctor's view of the tenant roles (gpugov.compile.roles), pure: are gpugov's ClusterRoles
there with exactly the compiled rules, are the bindings there with the declared subjects, and does
any RoleBinding in a tenant namespace still hand out a built-in role as broad as `edit` (the
`gpugov-owners` binding of before, left behind by an apply without prune, say)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gpugov.compile.roles import LABELS, QUEUE_READER
from gpugov.i18n import Text
from gpugov.kube.objects import LABEL_COMPONENT

Obj = dict[str, Any]
RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "RoleBinding")
# Built-in roles that hold Secrets, ServiceAccount tokens or impersonation: never a tenant's.
BROAD_ROLES = ("admin", "cluster-admin", "edit")


def is_tenant_rbac(obj: Obj) -> bool:
    """One of the tenant roles' objects compile emits."""
    if obj.get("kind") not in RBAC_KINDS:
        return False
    if obj["kind"] == "ClusterRole":
        return (obj["metadata"].get("labels") or {}).get(LABEL_COMPONENT) == LABELS[LABEL_COMPONENT]
    ref = (obj.get("roleRef") or {}).get("name", "")
    return ref == QUEUE_READER if obj["kind"] == "ClusterRoleBinding" else ref.startswith("gpugov-tenant-")


def grants(rules: Iterable[Obj]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules or () for g in rule.get("apiGroups") or [""]
            for r in rule.get("resources") or () for v in rule.get("verbs") or ()}


def _subjects(obj: Obj) -> set[tuple[str, str]]:
    return {(s.get("kind", ""), s.get("name", "")) for s in obj.get("subjects") or ()}


def _label(obj: Obj) -> str:
    meta, kind = obj["metadata"], obj.get("kind") or "RoleBinding"  # list items may leave their kind out
    return f"{kind} {meta['namespace']}/{meta['name']}" if meta.get("namespace") else f"{kind} {meta['name']}"


def role_problems(desired: Iterable[Obj], cluster_scoped: dict[tuple[str, str], Obj],
                  rolebindings: Iterable[Obj]) -> tuple[list[str], list[str]]:
    """(missing objects, objects that differ: rules granting more or less, another role, other subjects)."""
    found = {**{(k, "", n): o for (k, n), o in cluster_scoped.items()},
             **{("RoleBinding", b["metadata"].get("namespace", ""), b["metadata"]["name"]): b for b in rolebindings}}
    missing, wrong = [], []
    for want in desired:
        meta = want["metadata"]
        live = found.get((want["kind"], meta.get("namespace", ""), meta["name"]))
        if live is None:
            missing.append(_label(want))
            continue
        if want["kind"] == "ClusterRole":
            more, less = grants(live.get("rules")) - grants(want["rules"]), grants(want["rules"]) - grants(live.get("rules"))
            # Texts: English in doctor's JSON, the reader's language in its text and markdown (issue #30)
            if more:
                shown = ", ".join(f"{v} {r}" + (f".{g}" if g else "") for g, r, v in sorted(more)[:4])
                wrong.append(Text("{object} grants more than compiled: {grants}", object=_label(want), grants=shown))
            elif less:
                wrong.append(Text("{object} lacks {count} compiled grant(s)", object=_label(want), count=len(less)))
            continue
        if (live.get("roleRef") or {}).get("name") != want["roleRef"]["name"]:
            wrong.append(Text("{object} binds {role}, not {wanted}", object=_label(want),
                              role=(live.get("roleRef") or {}).get("name"), wanted=want["roleRef"]["name"]))
        elif _subjects(live) != _subjects(want):
            extra = sorted(n for _, n in _subjects(live) - _subjects(want))
            wrong.append(Text("{object} subjects differ from the declarations (not declared: {subjects})",
                              object=_label(want), subjects=", ".join(extra[:4])) if extra else
                         Text("{object} subjects differ from the declarations", object=_label(want)))
    return missing, wrong


def broad_bindings(rolebindings: Iterable[Obj]) -> list[str]:
    """RoleBindings (in the tenants' namespaces) of a built-in role as broad as edit."""
    return sorted(f"{_label(b)} -> {b['roleRef']['name']}" for b in rolebindings
                  if (b.get("roleRef") or {}).get("kind") == "ClusterRole" and b["roleRef"].get("name") in BROAD_ROLES)
