"""The wrong-cluster guard of a Pulumi stack: before the program registers one resource, the
cluster its kubeconfig reaches must be the stack's declared cluster (gpugov.cluster.identity,
the same check and record as `gpugov apply`), holding nothing the stack would take over
(gpugov.cluster.ownership). No pulumi import: tests call it directly.

Pulumi deletes what a program stops registering, and a stack's state holds no idea of which
physical cluster its provider talks to: a stack of `west` whose kubeconfig was set to east's
would delete east's queues and flavors it finds in its own state and create west's there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes import config as kube_config

from gpugov.app.desired import DesiredState
from gpugov.cluster.identity import Identity, check, declared_elsewhere, record
from gpugov.cluster.ownership import declared_adoption, refuse_foreign
from gpugov.cluster.prune import owned_objects
from gpugov.cluster.rest import Api


class StackGuardError(Exception):
    """The stack may not deploy to this cluster, or gpugov could not tell; one line."""


def stack_client(kubeconfig: str, context: str | None = None) -> client.ApiClient:
    """A client as the Pulumi provider makes it: `kubeconfig` is a path or the file's text."""
    try:
        if "\n" not in kubeconfig and Path(kubeconfig).expanduser().is_file():
            return kube_config.new_client_from_config(config_file=str(Path(kubeconfig).expanduser()), context=context)
        loaded: Any = yaml.safe_load(kubeconfig)
        if not isinstance(loaded, dict):
            raise StackGuardError(f"the stack's kubeconfig is neither a file nor a kubeconfig: {kubeconfig[:60]!r}")
        return kube_config.new_client_from_config_dict(loaded, context=context)
    except (kube_config.ConfigException, yaml.YAMLError, OSError) as exc:
        raise StackGuardError(f"the stack's kubeconfig cannot be used: {' '.join(str(exc).split())}") from None


def check_stack_cluster(api_client: client.ApiClient, state: DesiredState, write: bool,
                        reidentify: bool = False, tell: Callable[[str], None] | None = None) -> Identity:
    """Check that `api_client` reaches the stack's declared cluster (WrongCluster, CheckIncomplete
    otherwise) and that the stack takes over nothing that exists there without being gpugov's
    (ForeignObjects, as `gpugov apply`: Pulumi's server-side apply would upsert it); with `write`
    (pulumi up, not preview) record its identity the first time. What the declarations adopt
    (spec.adoptNamespaces, the Cluster's spec.adopt) passes, each told to `tell`."""
    api = Api(api_client)
    identity = check(api, state.model.cluster(state.cluster), state.objects, owned_objects(api_client),
                     declared_elsewhere(state.model, state.cluster), reidentify=reidentify)
    taken = refuse_foreign(api_client, state.objects, declared_adoption(state.model, state.cluster))
    for note in taken.notes() if tell is not None else ():
        tell(note)
    if write:
        record(api, identity)
    return identity


__all__ = ["StackGuardError", "check_stack_cluster", "stack_client"]
