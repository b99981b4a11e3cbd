"""Find and install the Kueue and Volcano CRDs the sandbox serves.

The CRDs are never copied into this repository. They are read from the shared
reference directory (``../shared/reference/crds/`` next to the checkout, or
``$GPUGOV_REFERENCE_DIR/crds/``), falling back to the ``sigs.k8s.io/kueue``
module in the Go module cache (Kueue only).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient

REFERENCE_ENV = "GPUGOV_REFERENCE_DIR"
FIELD_MANAGER = "gpugov"


class CRDError(RuntimeError):
    """CRDs could not be found or did not become Established."""


def _reference_dir(repo_root: Path | None) -> Path | None:
    env = os.environ.get(REFERENCE_ENV)
    if env:
        return Path(env)
    if repo_root is not None:
        return repo_root.parent / "shared" / "reference"
    return None


def _version_key(path: Path) -> tuple[int, ...]:
    """Sort key for ``kueue@vX.Y.Z`` directories (pre-releases sort with their release)."""
    return tuple(int(n) for n in re.findall(r"\d+", path.name.split("@", 1)[-1])[:3])


def _modcache_kueue_dir() -> Path | None:
    """config/components/crd/bases of the newest Kueue in the Go module cache."""
    try:
        modcache = subprocess.run(
            ["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    candidates = sorted(Path(modcache, "sigs.k8s.io").glob("kueue@v*"), key=_version_key)
    for module in reversed(candidates):
        bases = module / "config" / "components" / "crd" / "bases"
        if bases.is_dir():
            return bases
    return None


def crd_dirs(repo_root: Path | None) -> list[Path]:
    """Directories whose ``*.yaml`` files are the CRDs to install."""
    reference = _reference_dir(repo_root)
    if reference is not None:
        dirs = [reference / "crds" / "kueue", reference / "crds" / "volcano"]
        if all(d.is_dir() for d in dirs):
            return dirs
    fallback = _modcache_kueue_dir()
    if fallback is not None:
        return [fallback]
    raise CRDError(
        f"no CRDs found: expected {reference}/crds/{{kueue,volcano}} "
        f"(set {REFERENCE_ENV}) or sigs.k8s.io/kueue in the Go module cache"
    )


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


def wait_established(api_client: client.ApiClient, names: Iterable[str], timeout: float = 60.0) -> None:
    """Block until every named CRD reports Established=True."""
    api = client.ApiextensionsV1Api(api_client)
    pending = set(names)
    deadline = time.monotonic() + timeout
    while pending:
        pending = {n for n in pending if not _established(api.read_custom_resource_definition(n))}
        if not pending:
            return
        if time.monotonic() > deadline:
            raise CRDError(f"CRDs not Established after {timeout:.0f}s: {', '.join(sorted(pending))}")
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
