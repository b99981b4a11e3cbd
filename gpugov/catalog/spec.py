"""The JSON Schema of an AcceleratorModel's spec: one format for the built-in catalog
(models.yaml, checked when the package loads) and for the models users declare under
hardware/ (checked with every other declaration by `gpugov validate`).
"""

from __future__ import annotations

from typing import Any

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"
RESOURCE_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
LABEL_KEY_PATTERN = r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
LABEL_VALUE_PATTERN = r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
MIG_PROFILE_PATTERN = r"^[0-9]+g\.[0-9]+gb([+-][a-z.]+)?$"
VNPU_TEMPLATE_PATTERN = r"^vir[0-9]{2}(_[0-9a-z]+)*$"
SLOTS = ("1g", "1g_2mem", "2g", "3g", "4g", "7g")
SOURCE_FIELDS = ("resource", "memory", "productLabel", "pciVendorId", "pciDeviceIds", "mig", "hami", "vnpu", "notes")

_SIZE = {
    "description": 'A size: a Kubernetes quantity such as "80Gi" or "512Mi".',
    "anyOf": [
        {"type": "integer", "minimum": 1},
        {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|[kMGT])?$"},
    ],
}
_RESOURCE = {"type": "string", "pattern": RESOURCE_PATTERN, "description": "An extended resource name, e.g. nvidia.com/gpu."}
_COUNT = {"type": "integer", "minimum": 1, "maximum": 1024}


def _object(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "required": required or [], "properties": properties}


ACCELERATOR_MODEL_SPEC: dict[str, Any] = _object(
    {
        "description": {"type": "string"},
        "vendor": {"type": "string", "pattern": r"^[a-z0-9][a-z0-9-]*$", "description": "e.g. nvidia, huawei."},
        "resource": {**_RESOURCE, "description": "Whole-device resource of the vendor's device plugin."},
        "memory": {**_SIZE, "description": "Memory of one device (its nominal size)."},
        "productLabel": _object(
            {
                "key": {"type": "string", "pattern": LABEL_KEY_PATTERN},
                "values": {
                    "type": "array",
                    "minItems": 1,
                    "items": {"type": "string", "pattern": LABEL_VALUE_PATTERN},
                },
            },
            ["key", "values"],
        ),
        "pciVendorId": {"type": "string", "pattern": r"^0x[0-9A-F]{4}$", "description": "e.g. 0x10DE."},
        "pciDeviceIds": {
            "type": "array",
            "items": {"type": "string", "pattern": r"^0x[0-9A-F]{8}$"},
            "description": "Device then vendor id, as mig-parted's device-filter writes them (0x20B210DE).",
        },
        "mig": _object(
            {
                "geometry": {"enum": ["g7m8", "g4m4"], "description": "7 compute/8 memory slices, or 4/4 (A30)."},
                "profiles": {
                    "type": "object",
                    "minProperties": 1,
                    "propertyNames": {"pattern": MIG_PROFILE_PATTERN},
                    "additionalProperties": _object(
                        {
                            "slot": {"enum": list(SLOTS), "description": "Placement class in the geometry."},
                            "max": {"type": "integer", "minimum": 1, "maximum": 7},
                        },
                        ["slot", "max"],
                    ),
                },
            },
            ["geometry", "profiles"],
        ),
        "hami": _object(
            {
                "count": {**_RESOURCE, "description": "HAMi's virtual-device count resource."},
                "memory": {**_RESOURCE, "description": "HAMi's device-memory resource."},
                "memoryUnit": {**_SIZE, "description": "How much memory one unit of the memory resource is."},
                "cores": {**_RESOURCE, "description": "HAMi's compute resource."},
                "coresPerDevice": {**_COUNT, "description": "Units of the compute resource one device has."},
            },
            ["count"],
        ),
        "vnpu": _object(
            {
                "aiCores": {**_COUNT, "description": "AI cores of one device, where the model fixes it."},
                "aiCpus": {**_COUNT, "description": "AI CPUs of one device, where the model fixes it."},
                "templates": {
                    "type": "object",
                    "minProperties": 1,
                    "propertyNames": {"pattern": VNPU_TEMPLATE_PATTERN},
                    "additionalProperties": _object(
                        {"resource": _RESOURCE, "aiCores": _COUNT, "aiCpus": _COUNT, "memory": _SIZE},
                        ["resource", "memory"],
                    ),
                },
            },
            ["templates"],
        ),
        "sources": {
            "type": "object",
            "description": "Where each fact comes from (URL or reference file).",
            "propertyNames": {"enum": list(SOURCE_FIELDS)},
            "additionalProperties": {"type": "string"},
        },
    },
    ["vendor", "resource"],
)
