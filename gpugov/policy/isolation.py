"""Checks on Guardrails.isolation: the identities the admission policies trust, and the Pod Security
level of the tenant namespaces and why it is below restricted (README: Threat model)."""

from __future__ import annotations

from collections.abc import Iterator

from gpugov.declarations.model import Model, Tenant
from gpugov.findings import Finding, Level, make, rule
from gpugov.i18n import Text
from gpugov.policy.checks import check
from gpugov.policy.naming import any_pattern, reserved_patterns

SERVICEACCOUNT_GROUP = "system:serviceaccounts:"
SERVICEACCOUNT_USER = "system:serviceaccount:"

TRUSTED_TENANT_NAMESPACE = rule(
    "GG100",
    "trusted-identity-in-tenant-namespace",
    Level.ERROR,
    "Guardrails.isolation.trustedControllers trusts a ServiceAccount (or every ServiceAccount) of a namespace a "
    "tenant holds: that tenant could act as a controller and pass every isolation check.",
    "Trust only the controllers' own namespaces (kube-system, kueue-system, ...), never a tenant's.",
)
NO_POD_SECURITY = rule(
    "GG101",
    "tenant-namespaces-privileged",
    Level.WARNING,
    "Guardrails.isolation.podSecurity is privileged: tenant pods may run privileged or mount the host's /dev, "
    "and reach accelerators without requesting them.",
    "Use podSecurity: restricted (the default) or baseline.",
)
POD_SECURITY_UNREASONED = rule(
    "GG102",
    "pod-security-without-reason",
    Level.ERROR,
    "Guardrails.isolation.podSecurity is below restricted (baseline or privileged) without "
    "podSecurityReason: tenant pods may then run as root and mount network volumes the restricted level refuses.",
    "Keep the default (restricted), or say why in podSecurityReason.",
)


def trusted_namespace(identity: str, group: bool) -> str | None:
    """The namespace whose ServiceAccounts a trusted user or group names (None: not a ServiceAccount)."""
    if group and identity.startswith(SERVICEACCOUNT_GROUP):
        return identity[len(SERVICEACCOUNT_GROUP):]
    if not group and identity.startswith(SERVICEACCOUNT_USER):
        return identity[len(SERVICEACCOUNT_USER):].split(":", 1)[0]
    return None


@check
def check_trusted_identities(model: Model) -> Iterator[Finding]:
    isolation = model.limits.isolation
    trusted = [(u, False, "users", i) for i, u in enumerate(isolation.trusted_users)]
    trusted += [(g, True, "groups", i) for i, g in enumerate(isolation.trusted_groups)]
    guardrails = model.guardrails
    reserved = any_pattern([pattern for pattern, _ in reserved_patterns(model)])  # GG015's already
    claims: list[tuple[Tenant, str]] | None = None  # (tenant, namespace) outside the reserved ones, found once
    for identity, group, field, index in trusted:
        namespace = trusted_namespace(identity, group)
        if namespace is None:
            continue
        if claims is None:
            claims = [(tenant, claimed) for tenant in model.tenants.values() for claimed in tenant.namespaces
                      if not reserved(claimed)]
        names = any_pattern([namespace])
        for tenant, claimed in claims:
            if claimed == namespace or names(claimed):
                where = guardrails.at("isolation", "trustedControllers", field, index) if guardrails else None
                yield make(
                    TRUSTED_TENANT_NAMESPACE,
                    Text("trusted controller {identity} is a ServiceAccount of namespace '{namespace}', which "
                         "tenant '{tenant}' holds", identity=identity, namespace=claimed, tenant=tenant.name),
                    where,
                    tenant.name_at(),
                )


@check
def check_pod_security(model: Model) -> Iterator[Finding]:
    guardrails = model.guardrails
    if guardrails is not None and guardrails.isolation.pod_security == "privileged" and model.tenants:
        yield make(
            NO_POD_SECURITY,
            Text("tenant namespaces enforce no Pod Security level (podSecurity: privileged)"),
            guardrails.at("isolation", "podSecurity"),
        )


@check
def check_pod_security_reason(model: Model) -> Iterator[Finding]:
    guardrails = model.guardrails
    isolation = model.limits.isolation
    if guardrails is not None and isolation.pod_security != "restricted" and not isolation.pod_security_reason.strip():
        yield make(
            POD_SECURITY_UNREASONED,
            Text("tenant namespaces enforce Pod Security {level}, below restricted, and no podSecurityReason says why",
                 level=isolation.pod_security),
            guardrails.at("isolation", "podSecurity"),
        )
