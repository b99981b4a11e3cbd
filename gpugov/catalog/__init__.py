"""Accelerator facts: models (built in and declared), vendors' resource names, MIG, HAMi and vNPU units."""

from gpugov.catalog.accelerators import MODELS, AcceleratorModel, ProductLabel, lookup_model, model_from_spec
from gpugov.catalog.mig import MigProfile, layout_fits, mig_resource_name
from gpugov.catalog.virtual import HamiUnits, VnpuGeometry, VnpuTemplate, vnpu_layout_fits

__all__ = [
    "MODELS",
    "AcceleratorModel",
    "HamiUnits",
    "MigProfile",
    "ProductLabel",
    "VnpuGeometry",
    "VnpuTemplate",
    "layout_fits",
    "lookup_model",
    "mig_resource_name",
    "model_from_spec",
    "vnpu_layout_fits",
]
