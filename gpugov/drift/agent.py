"""Hardware drift from the node agents' NVML snapshots (`gpugov agent`).

NVML is the ground truth that labels only summarise: the PCI device id of every GPU (models
are matched by id, not by marketing name), how many GPUs answer, and the MIG devices that
really exist on each GPU, against the layout the compiled mig-parted config asks for.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from gpugov.compile import Object
from gpugov.compile.common import LABEL_POOL
from gpugov.compile.mig import ALL_DISABLED
from gpugov.compile.nodes import MIG_CONFIG_LABEL
from gpugov.compile.origin import source_location
from gpugov.declarations.model import Model
from gpugov.drift.hardware import mig_geometry
from gpugov.drift.rules import GPU_COUNT, GPU_PRODUCT, MIG_ALLOCATABLE, MIG_STATE
from gpugov.findings import Finding, make
from gpugov.i18n import Text


def agent_findings(model: Model, objects: list[Object], snapshots: dict[str, dict[str, Any]]) -> list[Finding]:
    findings: list[Finding] = []
    geometry = mig_geometry(objects)
    for patch in (o for o in objects if o["kind"] == "Node"):
        name = patch["metadata"]["name"]
        snapshot = snapshots.get(name)
        if snapshot is None:
            continue
        pool = model.pools[patch["metadata"]["labels"][LABEL_POOL]]
        where = source_location(patch)
        label = f"Node {name}"
        gpus = snapshot.get("gpus") or []
        if len(gpus) != pool.per_node:
            findings.append(make(GPU_COUNT, Text("node {node}: NVML sees {count} GPUs, pool {pool} declares {declared}",
                                                 node=name, count=len(gpus), pool=pool.name, declared=pool.per_node),
                                 where, object=label, declared=str(pool.per_node),
                                 live=str(len(gpus))))
        ids = {i.upper() for i in pool.model.pci_device_ids}
        config = patch["metadata"]["labels"].get(MIG_CONFIG_LABEL)
        expected = Counter(geometry.get(config, {})) if config and config != ALL_DISABLED else Counter()
        for gpu in gpus:
            where_gpu = Text("node {node} GPU {index}", node=name, index=gpu.get("index"))
            device = (gpu.get("pci_device_id") or "").upper()
            if ids and device not in ids:
                findings.append(make(GPU_PRODUCT, Text("{gpu}: PCI device {device} ({name}) is not a {model}",
                                                       gpu=where_gpu, device=device or "?", name=gpu.get("name"),
                                                       model=pool.model.name), where, object=label, declared=pool.model.name,
                                     live=str(gpu.get("name"))))
            if gpu.get("mig_pending_change"):
                findings.append(make(MIG_STATE, Text("{gpu}: MIG mode change pending a GPU reset", gpu=where_gpu), where,
                                     object=label))
            have = Counter(d.get("profile") for d in gpu.get("mig_devices") or [] if d.get("profile"))
            if have != expected:
                found = ", ".join(f"{n}x{p}" for p, n in sorted(have.items())) or Text("no MIG devices")
                wanted = ", ".join(f"{n}x{p}" for p, n in sorted(expected.items())) or Text("no MIG devices")
                findings.append(make(MIG_ALLOCATABLE, Text("{gpu}: NVML sees {found}, layout {layout} declares {wanted}",
                                                           gpu=where_gpu, found=found, layout=config or Text("none"),
                                                           wanted=wanted), where, object=label, declared=wanted, live=found))
    return findings
