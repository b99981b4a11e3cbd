"""Accelerator facts: models, vendors' device-plugin resource names and MIG geometry."""

from gpugov.catalog.accelerators import MODELS, AcceleratorModel, lookup_model
from gpugov.catalog.mig import MigProfile, layout_fits, mig_resource_name

__all__ = ["MODELS", "AcceleratorModel", "MigProfile", "layout_fits", "lookup_model", "mig_resource_name"]
