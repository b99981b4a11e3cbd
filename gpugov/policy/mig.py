"""Partition layouts are legal for the pool's model: MIG layouts on NVIDIA, vNPU template mixes on Ascend."""

from __future__ import annotations

from collections.abc import Iterator

from gpugov.catalog import layout_fits, vnpu_layout_fits
from gpugov.declarations.model import Model
from gpugov.findings import Finding, Level, make, rule
from gpugov.i18n import Text
from gpugov.policy.checks import check
from gpugov.policy.references import UNKNOWN_REFERENCE

UNKNOWN_PROFILE = rule(
    "GG040",
    "mig-profile-unknown",
    Level.ERROR,
    "A MIG layout uses a profile that the pool's GPU model does not have.",
    "Profile names depend on the model (1g.10gb on A100-80GB/H100-80GB, 1g.18gb on H200); see `gpugov catalog`.",
)
LAYOUT_DOES_NOT_FIT = rule(
    "GG041",
    "mig-layout-does-not-fit",
    Level.ERROR,
    "A MIG layout's instances cannot be placed on one GPU (7 compute and 8 memory slices on A100/H100-class GPUs).",
    "Use fewer or smaller instances; e.g. 3g+2g+2x1g, 2x3g or 7x1g on an A100/H100.",
)
NOT_MIG_CAPABLE = rule(
    "GG042",
    "mig-not-supported",
    Level.ERROR,
    "A pool declares MIG layouts but its accelerator model has no MIG.",
    "Remove migLayouts, or use a MIG-capable NVIDIA model.",
)
UNUSED_LAYOUT = rule(
    "GG043",
    "mig-layout-unused",
    Level.WARNING,
    "A MIG layout is declared but no node uses it.",
    "Assign it to nodes with migLayout, or delete it.",
)


VNPU_INVALID = rule(
    "GG044",
    "vnpu-layout-invalid",
    Level.ERROR,
    "A vNPU layout uses a template the pool's model lacks, its templates do not fit one device (memory, AI cores, AI "
    "CPUs), or the model has no vNPU templates.",
    "Use templates of the model (`gpugov catalog`) whose sum fits one device, e.g. 2x vir10_3c_32g on an Ascend 910B.",
)


@check
def check_vnpu_layouts(model: Model) -> Iterator[Finding]:
    for pool in model.pools.values():
        for node in pool.nodes:
            if node.vnpu_layout and node.vnpu_layout not in pool.vnpu_layouts:
                declared = ", ".join(sorted(pool.vnpu_layouts))
                yield make(UNKNOWN_REFERENCE,
                           Text("{pool}: unknown vNPU layout '{layout}' (declared: {declared})", pool=pool.name,
                                layout=node.vnpu_layout, declared=declared) if declared else
                           Text("{pool}: unknown vNPU layout '{layout}'", pool=pool.name, layout=node.vnpu_layout),
                           pool.at("nodes", node.index, "vnpuLayout"))
        if not pool.vnpu_layouts or not pool.model.known:
            continue
        geometry = pool.model.vnpu
        if geometry is None:
            yield make(VNPU_INVALID, Text("pool '{pool}': {model} has no vNPU templates, but vnpuLayouts are declared",
                                          pool=pool.name, model=pool.model.name), pool.at("vnpuLayouts", key=True))
            continue
        for name, mix in pool.vnpu_layouts.items():
            unknown = [template for template in mix if template not in geometry.templates]
            for template in unknown:
                yield make(VNPU_INVALID, Text("layout '{layout}': {model} has no vNPU template '{template}' (it has "
                                              "{known})", layout=name, model=pool.model.name, template=template,
                                              known=", ".join(geometry.templates)), pool.at("vnpuLayouts", name, template, key=True))
            if unknown:
                continue
            reason = vnpu_layout_fits(geometry, pool.model.memory, mix)
            if reason:
                yield make(VNPU_INVALID, Text("layout '{layout}' does not fit one {model}: {reason}", layout=name,
                                              model=pool.model.name, reason=reason),
                           pool.at("vnpuLayouts", name))


@check
def check_mig_layouts(model: Model) -> Iterator[Finding]:
    for pool in model.pools.values():
        if not pool.mig_layouts or not pool.model.known or pool.model.problems:
            continue
        accelerator = pool.model
        if not accelerator.mig_capable:
            yield make(
                NOT_MIG_CAPABLE,
                Text("pool '{pool}': {model} has no MIG, but migLayouts are declared", pool=pool.name,
                     model=accelerator.name),
                pool.at("migLayouts", key=True),
            )
            continue
        used = {node.mig_layout for node in pool.nodes}
        for name, mix in pool.mig_layouts.items():
            unknown = [profile for profile in mix if profile not in accelerator.mig_profiles]
            for profile in unknown:
                known = ", ".join(accelerator.mig_profiles)
                yield make(
                    UNKNOWN_PROFILE,
                    Text("layout '{layout}': {model} has no MIG profile '{profile}' (it has {known})", layout=name,
                         model=accelerator.name, profile=profile, known=known),
                    pool.at("migLayouts", name, profile, key=True),
                )
            if unknown:
                continue
            reason = layout_fits(accelerator.mig_geometry or "", accelerator.mig_profiles, mix)
            if reason:
                yield make(
                    LAYOUT_DOES_NOT_FIT,
                    Text("layout '{layout}' does not fit one {model}: {reason}", layout=name, model=accelerator.name,
                         reason=reason),
                    pool.at("migLayouts", name),
                )
            if name not in used:
                yield make(
                    UNUSED_LAYOUT,
                    Text("layout '{layout}' of pool '{pool}' is used by no node", layout=name, pool=pool.name),
                    pool.at("migLayouts", name, key=True),
                )
