"""Find and install the Kueue and Volcano CRDs the sandbox serves.

The CRDs are never copied into this repository. They come from the Go modules the sandbox runs:
``tools/build kueue`` and ``tools/build volcano`` keep each module's own CRDs beside its binaries
(Kueue v0.17.0's ``config/components/crd/bases``, Volcano v1.14.1's ``config/crd/volcano/bases`` and
``config/crd/jobflow/bases``), so the API server serves exactly the versions the controllers run.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

FIELD_MANAGER = "gpugov"


class CRDError(RuntimeError):
    """CRDs could not be found or did not become Established."""


def kueue_crd_dir(build: bool = True) -> Path:
    """Kueue's own CRDs, beside the ``kueue`` binary tools/build made (built if needed)."""
    from gpugov.sandbox.tools import KUEUE_BINARY, kueue_config_dir, tool_binary

    return kueue_config_dir(tool_binary(KUEUE_BINARY, build)) / "crd"


def volcano_crd_dir(build: bool = True) -> Path:
    """Volcano's own CRDs, beside the ``vc-scheduler`` binary tools/build made (built if needed)."""
    from gpugov.sandbox.tools import VOLCANO_SCHEDULER_BINARY, tool_binary
    from gpugov.sandbox.volcano import volcano_crd_dir as beside

    return beside(tool_binary(VOLCANO_SCHEDULER_BINARY, build))


def crd_dirs(build: bool = True) -> list[Path]:
    """Directories whose ``*.yaml`` files are the CRDs to install: Kueue's and Volcano's own."""
    from gpugov.sandbox.tools import ToolUnavailableError

    try:
        return [kueue_crd_dir(build), volcano_crd_dir(build)]
    except ToolUnavailableError as exc:
        raise CRDError(f"no CRDs: {exc}") from exc


def load_crds(dirs: Iterable[Path]) -> list[dict[str, Any]]:
    """All CustomResourceDefinition documents in the given directories."""
    crds: list[dict[str, Any]] = []
    for directory in dirs:
        for path in sorted(directory.glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                    crds.append(doc)
    return crds


def apply_crds(dynamic: DynamicClient, crds: Iterable[dict[str, Any]]) -> list[str]:
    """Server-side apply each CRD (idempotent; re-running `up` is harmless)."""
    api = dynamic.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    names = []
    for crd in crds:
        api.server_side_apply(body=crd, field_manager=FIELD_MANAGER, force_conflicts=True)
        names.append(crd["metadata"]["name"])
    return names


def _established(crd: client.V1CustomResourceDefinition) -> bool:
    conditions = (crd.status.conditions if crd.status else None) or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


def _discoverable(api_client: client.ApiClient, crd: client.V1CustomResourceDefinition) -> bool:
    """Whether discovery lists the CRD's resource in each version it serves. The API server's discovery
    controller adds it a moment after the CRD is Established; a controller that starts in between (Kueue's
    RESTMapper setting up its indexes) finds no such kind and exits."""
    spec = crd.spec
    custom = client.CustomObjectsApi(api_client)
    for version in spec.versions:
        if not version.served:
            continue
        try:
            listed = custom.get_api_resources(spec.group, version.name)
        except ApiException as exc:
            if exc.status == 404:  # the group/version is not in discovery yet
                return False
            raise
        if not any(resource.name == spec.names.plural for resource in listed.resources or []):
            return False
    return True


def wait_established(api_client: client.ApiClient, names: Iterable[str], timeout: float = 60.0) -> None:
    """Block until every named CRD reports Established=True and discovery lists it (_discoverable)."""
    api = client.ApiextensionsV1Api(api_client)
    pending = set(names)
    deadline = time.monotonic() + timeout
    while pending:
        found = {n: api.read_custom_resource_definition(n) for n in pending}
        pending = {n for n, crd in found.items() if not (_established(crd) and _discoverable(api_client, crd))}
        if not pending:
            return
        if time.monotonic() > deadline:
            raise CRDError(f"CRDs not Established and discoverable after {timeout:.0f}s: {', '.join(sorted(pending))}")
        time.sleep(0.2)


def install_crds(
    api_client: client.ApiClient, dynamic: DynamicClient, dirs: Sequence[Path], timeout: float = 60.0
) -> list[str]:
    """Apply all CRDs from ``dirs`` and wait until they are Established."""
    crds = load_crds(dirs)
    if not crds:
        raise CRDError(f"no CustomResourceDefinition documents in {', '.join(map(str, dirs))}")
    names = apply_crds(dynamic, crds)
    wait_established(api_client, names, timeout)
    return names
