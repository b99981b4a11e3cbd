"""Accelerator models: the built-in catalog (models.yaml) and the shape user-declared models share.

Both are AcceleratorModel documents with the spec of `gpugov.catalog.spec`; built-ins are
read from the package when it is imported and must pass the same schema, so a broken catalog
fails loudly at import rather than as a wrong resource name in a rendered manifest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property
from pathlib import Path
from typing import Any

import jsonschema_rs

from gpugov.catalog.mig import GEOMETRIES, MigProfile
from gpugov.catalog.spec import ACCELERATOR_MODEL_SPEC
from gpugov.catalog.virtual import HamiUnits, VnpuGeometry, VnpuTemplate
from gpugov.i18n import Text
from gpugov.kube.quantity import parse_quantity
from gpugov.yamlpos import parse_documents  # the users' reader: the same YAML rules

BUILTIN_FILE = Path(__file__).with_name("models.yaml")
GFD_PRODUCT = "nvidia.com/gpu.product"
API_VERSION = "gpugov.io/v1alpha1"
KIND = "AcceleratorModel"


@dataclass(frozen=True)
class ProductLabel:
    key: str  # e.g. nvidia.com/gpu.product (GPU Feature Discovery) or accelerator (Ascend)
    values: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class AcceleratorModel:
    name: str
    vendor: str
    resource: str  # whole-device resource name of the vendor's device plugin
    memory: Decimal | None = None  # bytes of one device, nominal; None where no source gave it
    product_label: ProductLabel | None = None
    pci_vendor_id: str | None = None
    pci_device_ids: tuple[str, ...] = ()  # mig-parted device-filter values
    mig_geometry: str | None = None
    mig_profiles: dict[str, MigProfile] = field(default_factory=dict)
    hami: HamiUnits | None = None
    vnpu: VnpuGeometry | None = None
    sources: dict[str, str] = field(default_factory=dict)
    description: str = ""
    builtin: bool = False
    known: bool = True  # False for the stand-in of a model nobody declared (a GG055 finding)
    problems: tuple[tuple[tuple[Any, ...], str], ...] = ()  # (spec path, message): a GG056 finding

    @property
    def mig_capable(self) -> bool:
        return self.mig_geometry is not None

    @property
    def gfd_products(self) -> tuple[str, ...]:
        """The nvidia.com/gpu.product values GPU Feature Discovery writes for this model."""
        if self.product_label is None or self.product_label.key != GFD_PRODUCT:
            return ()
        return self.product_label.values

    @cached_property
    def partition_resources(self) -> dict[str, str]:
        """vNPU template name -> its resource name (MIG names come from mig_resource_name)."""
        return {t.name: t.resource for t in self.vnpu.templates.values()} if self.vnpu else {}


class CatalogError(RuntimeError):
    """The packaged catalog does not match its schema: a packaging bug, never user input."""


def _size(value: Any) -> Decimal:
    return parse_quantity(value)


def model_from_spec(name: str, spec: dict[str, Any], builtin: bool = False) -> AcceleratorModel:
    """The model of a schema-valid spec; what the schema cannot say lands in `problems`."""
    problems: list[tuple[tuple[Any, ...], str]] = []
    label = spec.get("productLabel")
    mig = spec.get("mig")
    profiles: dict[str, MigProfile] = {}
    if mig:
        slots = GEOMETRIES[mig["geometry"]][2]
        for profile, entry in mig["profiles"].items():
            if entry["slot"] not in slots:
                problems.append(
                    (("mig", "profiles", profile, "slot"),
                     Text("slot {slot} is not a placement class of geometry {geometry} (it has {slots})",
                          slot=repr(entry["slot"]), geometry=mig["geometry"], slots=", ".join(slots)))
                )
            profiles[profile] = MigProfile(profile, entry["slot"], entry["max"], media_extensions="+me" in profile)
    hami = spec.get("hami")
    units = None
    if hami:
        if ("memory" in hami) != ("memoryUnit" in hami):
            problems.append((("hami",), Text("hami.memory and hami.memoryUnit go together: the unit converts quotas")))
        if ("cores" in hami) != ("coresPerDevice" in hami):
            problems.append((("hami",), Text("hami.cores and hami.coresPerDevice go together")))
        units = HamiUnits(
            hami["count"],
            hami.get("memory"),
            _size(hami["memoryUnit"]) if "memoryUnit" in hami else None,
            hami.get("cores"),
            hami.get("coresPerDevice"),
        )
    vnpu = spec.get("vnpu")
    geometry = None
    if vnpu:
        templates = {
            key: VnpuTemplate(key, t["resource"], _size(t["memory"]), t.get("aiCores"), t.get("aiCpus"))
            for key, t in vnpu["templates"].items()
        }
        geometry = VnpuGeometry(templates, vnpu.get("aiCores"), vnpu.get("aiCpus"))
        resources = [t.resource for t in templates.values()]
        for key, template in templates.items():
            if template.resource == spec["resource"] or resources.count(template.resource) > 1:
                problems.append((("vnpu", "templates", key, "resource"),
                                 Text("template {template} needs a resource of its own, not {resource}",
                                      template=key, resource=template.resource)))
    return AcceleratorModel(
        name=name,
        vendor=spec["vendor"],
        resource=spec["resource"],
        memory=_size(spec["memory"]) if "memory" in spec else None,
        product_label=ProductLabel(label["key"], tuple(label["values"])) if label else None,
        pci_vendor_id=spec.get("pciVendorId"),
        pci_device_ids=tuple(spec.get("pciDeviceIds", ())),
        mig_geometry=mig["geometry"] if mig else None,
        mig_profiles=profiles,
        hami=units,
        vnpu=geometry,
        sources=dict(spec.get("sources") or {}),
        description=spec.get("description", ""),
        builtin=builtin,
        problems=tuple(problems),
    )


def unknown_model(name: str) -> AcceleratorModel:
    """Stands in for a model neither built in nor declared, so checks go on (GG055 reports it)."""
    return AcceleratorModel(name, "unknown", f"unknown.gpugov.io/{name}", known=False)


def _document_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": API_VERSION},
            "kind": {"const": KIND},
            "metadata": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
            "spec": ACCELERATOR_MODEL_SPEC,
        },
    }


def load_builtins(path: Path = BUILTIN_FILE) -> dict[str, AcceleratorModel]:
    validator = jsonschema_rs.validator_for(_document_schema())
    models: dict[str, AcceleratorModel] = {}
    for doc in parse_documents(path.read_text(encoding="utf-8"), path.name):
        errors = [str(error) for error in validator.iter_errors(doc.data)]
        if errors:
            raise CatalogError(f"{doc.origin}: {errors[0]}")
        name = doc.data["metadata"]["name"]
        model = model_from_spec(name, doc.data["spec"], builtin=True)
        if model.problems or name in models:
            problem = model.problems[0][1] if model.problems else "declared twice"
            raise CatalogError(f"{doc.origin}: {name}: {problem}")
        models[name] = model
    return models


MODELS: dict[str, AcceleratorModel] = load_builtins()


def lookup_model(name: str) -> AcceleratorModel | None:
    return MODELS.get(name)
