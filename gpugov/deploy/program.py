"""The Pulumi program: stack config -> validated declarations -> compile -> components.

Stack config (namespace `gpugov`, see Pulumi.east.yaml):
  gpugov:cluster     the declared Cluster this stack drives (required)
  gpugov:backend     kueue or volcano (default: the cluster's declared backend)
  gpugov:repo        the declarations' root (default: the project directory)
  gpugov:kubeconfig  path of a kubeconfig on the deploying machine, and
  gpugov:context     optionally its context;
  gpugov:at          the instant quotas are compiled for where QuotaGrants or QuotaWindows are
                     declared: RFC 3339 with a zone, or now (default: the clock, read once per run),
                     as `gpugov apply --at`;
or the kubeconfig itself as a secret: `pulumi config set --secret kubernetes:kubeconfig ...`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from gpugov.app.desired import CompileError, DesiredState, InputError, InvalidDeclarations, desired_state
from gpugov.cluster.identity import WrongCluster
from gpugov.cluster.ownership import ForeignObjects
from gpugov.cluster.rest import Rejected
from gpugov.declarations.timeline import desired_at, parse_instant
from gpugov.deploy.components import Organisation
from gpugov.deploy.guard import StackGuardError, check_stack_cluster, stack_client
from gpugov.deploy.resources import DeployError
from gpugov.findings.report import text
from gpugov.kube.objects import Object
from gpugov.sources import CheckIncomplete

CONFIG = "gpugov"
PROVIDER_NAME = "kubernetes"


def stack_instant(config: pulumi.Config) -> datetime:
    """gpugov:at as `gpugov apply --at` reads it: `now` or unset is the clock, read here once per run;
    pulumi.RunError for anything that is no RFC 3339 instant with a zone."""
    text = config.get("at")
    if text is None or text == "now":
        return datetime.now(UTC)
    parsed = parse_instant(text)
    if parsed is None:
        raise pulumi.RunError(f"gpugov: gpugov:at {text!r} is not an RFC 3339 instant with a zone "
                              "(e.g. 2025-03-01T09:00:00Z) nor `now`; nothing was deployed")
    return parsed


def load_objects(root: Path, cluster: str, backend: str | None = None, at: datetime | None = None) -> list[Object]:
    """Compile's objects for `cluster` at `at`; pulumi.RunError (findings, no traceback) when invalid."""
    return load_state(root, cluster, backend, at).objects


def load_state(root: Path, cluster: str, backend: str | None = None, at: datetime | None = None) -> DesiredState:
    """The desired state for `cluster` at the instant `at` (None: as declared, no grant or window
    applied); pulumi.RunError (findings, no traceback) when invalid."""
    try:
        state = desired_state(root, cluster=cluster, backend=backend, at=at)
    except (InputError, CompileError) as exc:
        raise pulumi.RunError(f"gpugov: {exc}") from None
    except InvalidDeclarations as exc:
        raise pulumi.RunError(
            f"gpugov: the declarations in {root} have errors; nothing was deployed.\n"
            + text(exc.findings, len(exc.validation.files))
        ) from None
    if state.warnings:
        pulumi.log.warn(text(state.warnings, len(state.validation.files)))
    return state


def guard_cluster(state: DesiredState) -> None:
    """Before any resource: the stack's kubeconfig must reach the stack's declared cluster (see
    gpugov.deploy.guard); `pulumi up` records the identity the first time, preview only checks.
    `pulumi config set gpugov:reidentify true` rebuilds a cluster as this stack's on purpose."""
    config = pulumi.Config(CONFIG)
    kubeconfig = pulumi.Config("kubernetes").get("kubeconfig") or config.get("kubeconfig")
    if kubeconfig is None:
        return  # kubernetes_provider says what is missing
    try:
        identity = check_stack_cluster(stack_client(kubeconfig, config.get("context")), state,
                                       write=not pulumi.runtime.is_dry_run(),
                                       reidentify=config.get_bool("reidentify") or False, tell=pulumi.log.info)
    except (WrongCluster, ForeignObjects) as exc:
        raise pulumi.RunError(f"gpugov: refused: {exc}; nothing was deployed") from None
    except (StackGuardError, CheckIncomplete, Rejected) as exc:
        raise pulumi.RunError(f"gpugov: could not tell which cluster the stack's kubeconfig reaches: {exc}") from None
    pulumi.log.info(identity.describe(done=not pulumi.runtime.is_dry_run()))


def kubernetes_provider(cluster: str) -> k8s.Provider:
    """The explicit provider all resources use: server-side apply, kubeconfig from config."""
    config = pulumi.Config(CONFIG)
    kubeconfig: pulumi.Input[str] | None = pulumi.Config("kubernetes").get_secret("kubeconfig")
    if kubeconfig is None:
        kubeconfig = config.get("kubeconfig")
    if kubeconfig is None:
        # No fallback to ~/.kube/config: a stack must never deploy to whatever cluster is current.
        raise pulumi.RunError(
            'gpugov: no cluster credentials: run `pulumi config set --secret kubernetes:kubeconfig "$(cat KUBECONFIG)"` '
            "or `pulumi config set gpugov:kubeconfig PATH` (and optionally gpugov:context)"
        )
    return k8s.Provider(
        PROVIDER_NAME,
        kubeconfig=kubeconfig,
        context=config.get("context"),
        enable_server_side_apply=True,
        # The MIG ConfigMap is read by name (mig-manager): change it in place, never replace it.
        enable_config_map_mutable=True,
        # Rotated credentials or a new context must not replace (delete and recreate) every object.
        cluster_identifier=cluster,
    )


def run(root: Path | str | None = None) -> Organisation:
    """Deploy this stack's cluster; the whole of the project's __main__.py."""
    config = pulumi.Config(CONFIG)
    cluster = config.require("cluster")
    backend = config.get("backend")
    repo = Path(root if root is not None else config.get("repo") or ".").resolve()
    # The same instant `gpugov apply` compiles for, so that a stack and the timeline CronJob agree.
    state = load_state(repo, cluster, backend, stack_instant(config))
    objects = state.objects
    guard_cluster(state)  # before any resource, the provider included
    provider = kubernetes_provider(cluster)
    try:
        organisation = Organisation(cluster, objects, provider)
    except DeployError as exc:
        raise pulumi.RunError(f"gpugov: {exc}") from None
    pulumi.export("cluster", cluster)
    pulumi.export("objects", len(objects))
    pulumi.export("tenants", sorted(organisation.tenants))
    span = desired_at(state.model)
    if span is not None:  # the span of instants the quotas hold for (gpugov.io/desired-at), not the clock
        pulumi.export("desiredAt", span)
    return organisation


__all__ = ["guard_cluster", "kubernetes_provider", "load_objects", "load_state", "run", "stack_instant"]
