"""NVIDIA mig-parted's default MIG configs, read as per-GPU profile tables (a test helper, no tests here).

The file is `deployments/systemd/config-default.yaml` of `github.com/NVIDIA/mig-parted` at the version
`tools/mig-parted/go.mod` pins; `tools/build mig-parted` downloads the module (checked against go.sum)
and links the file as `tools/bin/mig-parted-config-default.yaml`. Nothing of it is copied here.

What follows from the file's data alone (its comments are not read):

* a GPU is one `all-balanced` entry: its `device-filter` is the PCI ids that share one MIG geometry, and
  its mix is mig-parted's balanced formula (2x1g + 1x2g + 1x3g on a 7-slice GPU, 2x1g + 1x2g on a
  4-slice one, see mig-parted's pkg/mig/builder/balanced.go), so the compute slices add up to the
  geometry and the base profiles name the memory of one (1g), two (2g) and four (3g) memory slices;
* the GPU's profiles are then: 1g at one and at two memory slices, 2g at two, 3g and 4g at four, 7g at
  all eight (twice the 3g's memory; NVIDIA's names round, so 141gb beside 71gb) on a 7-slice GPU; 1g,
  2g, and 4g at exactly twice the 2g's memory on a 4-slice GPU; plus the variants (media extensions
  `+me`, `+me.all`, `-me`, graphics `+gfx`) of the balanced base profiles and of that largest one
  that the file lists, in their plain profile's placement class. Each plain profile must exist in the
  file, and the largest must be the only candidate, else the derivation fails rather than guess;
* a profile's max count on one GPU is the count of its single-profile config (`all-1g.10gb` fills a
  GPU with 1g.10gb); where that config splits by `device-filter` (1g.10gb: 7 on the 80GB parts, 4 on
  the 40GB ones) the entry whose filter meets the GPU's PCI ids counts.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tests.helpers.repos import REPO

MODULE_DIR = REPO / "tools" / "mig-parted"
CONFIG_LINK = REPO / "tools" / "bin" / "mig-parted-config-default.yaml"
_PROFILE = re.compile(r"(?P<g>\d+)g\.(?P<gb>\d+)gb(?P<attrs>[+-].*)?")


class MigPartedUnavailableError(AssertionError):
    """The upstream file is neither linked nor fetchable: the tests that need it fail, never skip."""


@cache
def config_path() -> Path:
    """tools/bin/mig-parted-config-default.yaml, after `tools/build mig-parted` (quick when cached).

    tools/build runs whenever Go is installed, so a changed tools/mig-parted/go.mod is never served by a
    stale cache entry; without Go an existing link is used.
    """
    if shutil.which("go"):
        result = subprocess.run(
            [str(REPO / "tools" / "build"), "mig-parted"], capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            raise MigPartedUnavailableError(f"tools/build mig-parted failed:\n{result.stderr}")
    if not CONFIG_LINK.is_file():
        raise MigPartedUnavailableError(
            f"{CONFIG_LINK} is missing and 'go' is not on PATH: install Go >= 1.26 and run tools/build mig-parted"
        )
    return CONFIG_LINK


def pinned_version() -> str:
    """The mig-parted release tools/mig-parted/go.mod requires."""
    match = re.search(r"^require github\.com/NVIDIA/mig-parted (v\S+)$", (MODULE_DIR / "go.mod").read_text(), re.M)
    assert match, "tools/mig-parted/go.mod requires no github.com/NVIDIA/mig-parted version"
    return match.group(1)


@cache
def load_configs(path: Path | None = None) -> dict[str, list[dict[str, Any]]]:
    """The file's `mig-configs`: config name -> its entries."""
    document = yaml.safe_load((path or config_path()).read_text(encoding="utf-8"))
    assert document.get("version") == "v1", f"mig-parted config version {document.get('version')!r}"
    return document["mig-configs"]


def _filter(entry: dict[str, Any]) -> frozenset[str] | None:
    """An entry's device-filter as upper-case 0xDDDDVVVV ids; None when it applies to every GPU."""
    value = entry.get("device-filter")
    if value is None:
        return None
    values = [value] if isinstance(value, str) else value
    return frozenset("0x" + v.strip()[2:].upper() for v in values)


@dataclass(frozen=True)
class UpstreamGpu:
    """One MIG geometry of the file: the PCI ids of one all-balanced entry and what follows for them."""

    pci_device_ids: frozenset[str]
    geometry: str  # "g7m8" or "g4m4", as gpugov's catalog names them
    balanced: dict[str, int]
    profiles: dict[str, tuple[int, str]]  # profile -> (max instances alone on one GPU, placement class)


def _parse(profile: str) -> tuple[int, int, str]:
    match = _PROFILE.fullmatch(profile)
    assert match, f"mig-parted profile {profile!r} is not <n>g.<m>gb[attributes]"
    return int(match["g"]), int(match["gb"]), match["attrs"] or ""


def single_profile_counts(configs: dict[str, list[dict[str, Any]]]) -> dict[str, list[tuple[frozenset[str] | None, int]]]:
    """Profile -> (device-filter, count) of every entry that fills a GPU with that profile alone."""
    counts: dict[str, list[tuple[frozenset[str] | None, int]]] = {}
    for name, entries in configs.items():
        if name == "all-balanced":
            continue
        for entry in entries:
            devices = entry.get("mig-devices") or {}
            if entry.get("mig-enabled") and len(devices) == 1:
                ((profile, count),) = devices.items()
                counts.setdefault(profile, []).append((_filter(entry), int(count)))
    return counts


def _max_count(counts: dict[str, list[tuple[frozenset[str] | None, int]]], profile: str, ids: frozenset[str]) -> int:
    entries = counts.get(profile)
    assert entries, f"mig-parted has no all-{profile} config"
    filtered = {count for filt, count in entries if filt is not None and filt & ids}
    unfiltered = {count for filt, count in entries if filt is None}
    found = filtered or unfiltered
    assert len(found) == 1, f"{profile} on {sorted(ids)}: mig-parted's counts {sorted(found)} (one expected)"
    return found.pop()


def _one(candidates: Iterable[str], what: str) -> str:
    found = sorted(candidates)
    assert len(found) == 1, f"{what}: mig-parted lists {found} (exactly one expected)"
    return found[0]


def upstream_gpus(configs: dict[str, list[dict[str, Any]]] | None = None) -> list[UpstreamGpu]:
    """Every all-balanced entry of the file, with its profile table (see the module docstring)."""
    configs = load_configs() if configs is None else configs
    counts = single_profile_counts(configs)
    gpus = []
    for entry in configs["all-balanced"]:
        ids = _filter(entry)
        assert ids, f"an all-balanced entry without a device-filter: {entry}"
        balanced = {str(p): int(n) for p, n in entry["mig-devices"].items()}
        base: dict[int, tuple[str, int]] = {}
        for profile in balanced:
            slices, memory, attrs = _parse(profile)
            assert not attrs and slices not in base, f"{sorted(ids)}: balanced mix {balanced}"
            base[slices] = (profile, memory)
        compute = sum(_parse(p)[0] * n for p, n in balanced.items())
        if compute == 7:
            assert set(base) == {1, 2, 3}, f"{sorted(ids)}: a 7-slice balanced mix of 1g, 2g and 3g expected"
            one, two, four = base[1][1], base[2][1], base[3][1]
            top = _one((p for p in counts if _parse(p)[0] == 7 and not _parse(p)[2] and abs(_parse(p)[1] - 2 * four) <= 1),
                       f"the 7g profile beside 3g.{four}gb")
            slots = {f"1g.{one}gb": "1g", f"1g.{two}gb": "1g_2mem", f"2g.{two}gb": "2g", f"3g.{four}gb": "3g",
                     f"4g.{four}gb": "4g", top: "7g"}
            geometry = "g7m8"
        elif compute == 4:
            assert set(base) == {1, 2}, f"{sorted(ids)}: a 4-slice balanced mix of 1g and 2g expected"
            one, two = base[1][1], base[2][1]
            top = _one((p for p in counts if _parse(p)[0] == 4 and not _parse(p)[2] and _parse(p)[1] == 2 * two),
                       f"the 4g profile beside 2g.{two}gb")
            slots = {f"1g.{one}gb": "1g", f"2g.{two}gb": "2g", top: "4g"}
            geometry = "g4m4"
        else:
            raise AssertionError(f"{sorted(ids)}: balanced mix {balanced} adds up to {compute} compute slices")
        for plain in [profile for profile, _ in base.values()] + [top]:
            for variant in counts:
                if variant.startswith(plain) and _parse(variant)[2] and _parse(variant)[:2] == _parse(plain)[:2]:
                    slots[variant] = slots[plain]
        profiles = {p: (_max_count(counts, p, ids), slot) for p, slot in slots.items()}
        gpus.append(UpstreamGpu(ids, geometry, balanced, profiles))
    return gpus


def gpu_of(pci_device_ids: Iterable[str], gpus: list[UpstreamGpu] | None = None) -> UpstreamGpu:
    """The one all-balanced entry whose device-filter holds every one of these PCI ids."""
    ids = set(pci_device_ids)
    found = [gpu for gpu in (upstream_gpus() if gpus is None else gpus) if ids <= gpu.pci_device_ids]
    assert len(found) == 1, f"{sorted(ids)}: in {len(found)} of mig-parted's all-balanced device-filters (one expected)"
    return found[0]


def filtered_pci_ids(configs: dict[str, list[dict[str, Any]]] | None = None) -> set[str]:
    """Every PCI id any device-filter of the file names (each a MIG-capable GPU)."""
    configs = load_configs() if configs is None else configs
    return {pci for entries in configs.values() for entry in entries for pci in (_filter(entry) or ())}
