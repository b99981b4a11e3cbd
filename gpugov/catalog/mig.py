"""NVIDIA MIG geometry: placement classes, and whether a per-GPU mix of profiles fits.

Placements (in memory-slice units) follow the NVIDIA MIG User Guide (v580, "Supported MIG
Profiles" and its ``nvidia-smi mig -lgipp`` output for A100). Which profiles a model has, and
how many fit alone, is model data in models.yaml; tests/unit/test_catalog.py holds both to
NVIDIA mig-parted's default configs (v0.15.1 ``deployments/systemd/config-default.yaml``,
fetched by ``tools/build mig-parted``): each profile's max count on one GPU must be exactly
what its placement class packs. Profile names are not unique across models
(1g.10gb is 7 per GPU on H100-80GB but 4 on A100-40GB), so every lookup is keyed on the
model first.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpugov.i18n import Text

# Placement classes of the 7-compute / 8-memory-slice family (A100, H100, H200, B200...):
# (compute slices, allowed (start, size) placements in memory slices).
_G7M8: dict[str, tuple[int, tuple[tuple[int, int], ...]]] = {
    "1g": (1, tuple((i, 1) for i in range(7))),
    "1g_2mem": (1, ((0, 2), (2, 2), (4, 2), (6, 2))),
    "2g": (2, ((0, 2), (2, 2), (4, 2))),
    "3g": (3, ((0, 4), (4, 4))),
    "4g": (4, ((0, 4),)),
    "7g": (7, ((0, 8),)),
}
# The 4-slice family (A30). Placements come from go-nvml mock data only (unverified).
_G4M4: dict[str, tuple[int, tuple[tuple[int, int], ...]]] = {
    "1g": (1, tuple((i, 1) for i in range(4))),
    "2g": (2, ((0, 2), (2, 2))),
    "4g": (4, ((0, 4),)),
}
GEOMETRIES = {"g7m8": (7, 8, _G7M8), "g4m4": (4, 4, _G4M4)}


@dataclass(frozen=True)
class MigProfile:
    name: str  # e.g. "1g.10gb" or "1g.10gb+me"
    slot: str  # placement class within the model's geometry
    max_count: int  # instances of this profile alone on one GPU
    media_extensions: bool = False


def mig_resource_name(profile: str) -> str:
    """Device-plugin resource under the mixed strategy: '+' becomes '.' (nvidia.com/mig-1g.10gb.me)."""
    return "nvidia.com/mig-" + profile.replace("+", ".")


def mig_config_key(profile: str) -> str:
    return profile.replace("+", ".")


def layout_fits(geometry: str, profiles: dict[str, MigProfile], mix: dict[str, int]) -> str | None:
    """None when the per-GPU mix can be placed on one GPU, else the reason it cannot.

    The mix fits when every instance can take one of its allowed placements without two
    instances sharing a memory slice; with these placement sets total compute never
    exceeds the GPU's compute slices. At most one media-extension instance per GPU, as
    mig-parted's own configs use.
    """
    compute_slices, memory_slices, slots = GEOMETRIES[geometry]
    media = sum(count for name, count in mix.items() if profiles[name].media_extensions)
    if media > 1:
        return Text("at most one media-extension (+me) instance per GPU, got {count}", count=media)
    instances: list[tuple[int, tuple[tuple[int, int], ...]]] = []
    for name, count in mix.items():
        profile = profiles[name]
        if count > profile.max_count:
            return Text("{profile} allows at most {most} per GPU, got {count}", profile=name, most=profile.max_count,
                        count=count)
        compute, placements = slots[profile.slot]
        instances.extend([(compute, placements)] * count)
    compute_total = sum(compute for compute, _ in instances)
    if compute_total > compute_slices:
        return Text("needs {needed} compute slices, the GPU has {slices}", needed=compute_total, slices=compute_slices)
    # Largest first, as mig-parted orders creation; then backtrack over placements.
    instances.sort(key=lambda item: (-max(size for _, size in item[1]), -item[0]))
    if not _place(instances, 0, [False] * memory_slices):
        return Text("the instances do not fit into the GPU's {slices} memory slices without overlap",
                    slices=memory_slices)
    return None


def _place(instances: list[tuple[int, tuple[tuple[int, int], ...]]], index: int, used: list[bool]) -> bool:
    if index == len(instances):
        return True
    for start, size in instances[index][1]:
        span = range(start, start + size)
        if any(used[i] for i in span):
            continue
        for i in span:
            used[i] = True
        if _place(instances, index + 1, used):
            return True
        for i in span:
            used[i] = False
    return False
