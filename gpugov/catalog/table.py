"""The catalog as tables: `gpugov catalog` (text) and the README's catalog table (markdown, with sources)."""

from __future__ import annotations

from collections.abc import Iterable

from gpugov.catalog.accelerators import AcceleratorModel
from gpugov.kube.quantity import format_quantity


def _memory(model: AcceleratorModel) -> str:
    return format_quantity(model.memory) if model.memory is not None else "-"


def _partitions(model: AcceleratorModel) -> str:
    parts = []
    if model.mig_profiles:
        parts.append("MIG " + " ".join(model.mig_profiles))
    if model.vnpu:
        parts.append("vNPU " + " ".join(model.vnpu.templates))
    if model.hami:
        units = [u for u in (model.hami.count, model.hami.memory, model.hami.cores) if u]
        parts.append("HAMi " + " ".join(units))
    return "; ".join(parts) or "-"


def text_table(models: Iterable[AcceleratorModel]) -> str:
    lines = []
    for m in models:
        lines.append(f"{m.name:<17} {m.vendor:<10} {m.resource:<22} {_memory(m):>6}  {_partitions(m)}")
    return "\n".join(lines) + "\n"


_FIELDS = (("resource", "resource"), ("memory", "memory"), ("productLabel", "label"), ("pciDeviceIds", "PCI"),
           ("pciVendorId", "vendor id"), ("mig", "MIG"), ("vnpu", "vNPU"), ("hami", "HAMi"), ("notes", "note"))


def markdown_table(models: Iterable[AcceleratorModel]) -> str:
    """One row per model, its facts' sources as numbered references listed under the table."""
    references: dict[str, int] = {}

    def refs(text: str) -> str:
        return f"[{references.setdefault(text, len(references) + 1)}]"

    rows = [
        "| model | vendor | resource | memory | product label | PCI device ids | partitions | sources |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in models:
        label = f"`{m.product_label.key}`: {', '.join(m.product_label.values)}" if m.product_label else "-"
        pci = " ".join(m.pci_device_ids) or "-"
        sources = ", ".join(
            f"{title} {'none found' if m.sources[key].startswith('none found') else refs(m.sources[key])}"
            for key, title in _FIELDS
            if key in m.sources
        )
        rows.append(f"| {m.name} | {m.vendor} | `{m.resource}` | {_memory(m)} | {label} | {pci} | {_partitions(m)} "
                    f"| {sources} |")
    notes = [f"{n}. {text.replace('|', '/')}" for text, n in references.items()]
    return "\n".join(rows) + "\n\nSources:\n\n" + "\n".join(notes) + "\n"
