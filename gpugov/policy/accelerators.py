"""Accelerator models resolve and hold together: pools name a known model, declared models are
consistent, and a pool shared through HAMi has a model HAMi can share."""

from __future__ import annotations

from collections.abc import Iterator

from gpugov.catalog.suggest import suggest_model, unknown_model_text
from gpugov.declarations.model import Model
from gpugov.findings import Finding, Level, make, rule
from gpugov.i18n import Joined, Text
from gpugov.policy.checks import check

MODEL_UNKNOWN = rule(
    "GG046",
    "accelerator-model-unknown",
    Level.ERROR,
    "A pool names an accelerator model that is neither built in nor declared as an AcceleratorModel.",
    "Use a name from `gpugov catalog`, or declare the model (vendor, resource, memory...) in hardware/.",
)
MODEL_INVALID = rule(
    "GG047",
    "accelerator-model-invalid",
    Level.ERROR,
    "A declared AcceleratorModel contradicts itself: a MIG profile's slot outside its geometry, HAMi memory without "
    "its unit, a vNPU template without a resource of its own.",
    "Fix the model; the built-in models in gpugov/catalog/models.yaml are complete examples.",
)
HAMI_INVALID = rule(
    "GG048",
    "hami-sharing-invalid",
    Level.ERROR,
    "A pool shared through HAMi cannot be: its model has no HAMi resources, its device memory is unknown, or it also "
    "declares MIG or vNPU layouts (HAMi and mig-manager must never manage the same node).",
    "Declare an AcceleratorModel with spec.hami, set sharing.hami.deviceMemory, or split the pool.",
)


@check
def check_accelerator_models(model: Model) -> Iterator[Finding]:
    for pool in model.pools.values():
        if not pool.model.known:
            hint = suggest_model(pool.model_name, model.accelerator_models)  # family, variants, GFD and NVML names
            yield make(MODEL_UNKNOWN, unknown_model_text(pool.name, pool.model_name, hint), pool.at("accelerator", "model"))
    for declared in model.accelerator_models.values():
        for path, problem in declared.accelerator.problems if declared.accelerator else ():
            yield make(MODEL_INVALID, Text("AcceleratorModel '{model}': {problem}", model=declared.name, problem=problem),
                       declared.at(*path))


@check
def check_hami_sharing(model: Model) -> Iterator[Finding]:
    for pool in model.pools.values():
        if pool.hami is None or not pool.model.known:
            continue
        accelerator = pool.model
        where = pool.at("sharing", "hami")
        if accelerator.hami is None:
            yield make(HAMI_INVALID, Text("pool '{pool}': {model} has no HAMi resources in its model (spec.hami of an "
                                          "AcceleratorModel)", pool=pool.name, model=accelerator.name), where)
            continue
        if accelerator.hami.memory and pool.hami.device_memory is None and accelerator.memory is None:
            yield make(HAMI_INVALID, Text("pool '{pool}': the memory of {model} is unknown, so HAMi's {resource} "
                                          "capacity is too: set sharing.hami.deviceMemory", pool=pool.name,
                                          model=accelerator.name, resource=accelerator.hami.memory), where)
        layouts = [name for name, declared in (("migLayouts", pool.mig_layouts), ("vnpuLayouts", pool.vnpu_layouts))
                   if declared]
        if layouts:
            yield make(HAMI_INVALID, Text("pool '{pool}' is shared through HAMi and declares {layouts}: HAMi and the "
                                          "layouts' manager would both partition its devices", pool=pool.name,
                                          layouts=Joined(" and ", layouts)), where)
