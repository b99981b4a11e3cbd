"""JSON Schemas of every declaration kind (draft-07), and validation against them.

The schemas are defined here once and written out by `gpugov schema` for editors
(yaml-language-server). Validation asks jsonschema-rs (compiled, Rust) whether a document is
valid, which is fast on the common all-valid path, and falls back to jsonschema only for
documents that fail, to list every error with its path.
"""

from __future__ import annotations

import json
from functools import cache
from typing import TYPE_CHECKING, Any

import jsonschema_rs

from gpugov.catalog import MODELS
from gpugov.catalog.spec import ACCELERATOR_MODEL_SPEC, NAME_PATTERN, VNPU_TEMPLATE_PATTERN
from gpugov.catalog.suggest import closest, suggest_model, unknown_model_text
from gpugov.declarations.loader import SourceDoc
from gpugov.findings import Finding, Level, make, rule
from gpugov.i18n import Joined, Text

if TYPE_CHECKING:  # imported by _full, for the documents that fail: it takes longer to import than most validations
    import jsonschema

API_VERSION = "gpugov.io/v1alpha1"
SCHEMA_BASE = "https://gpugov.io/schemas/v1alpha1/"

# The scheduler objects a Cluster's spec.adopt may name: apply takes them over although they exist
# on the cluster without gpugov's mark (gpugov.cluster.ownership).
ADOPTABLE_KINDS = ("ClusterQueue", "Cohort", "ResourceFlavor", "LocalQueue", "WorkloadPriorityClass", "Topology",
                   "Queue", "ConfigMap", "PriorityClass")

FUNGIBILITY = ("MayStopSearch", "TryNextFlavor")  # Kueue's ClusterQueue flavorFungibility values
# What a SchedulingPolicy may say Volcano clusters do not keep (spec.volcano.notKept; GG064).
VOLCANO_NOT_KEPT = ("borrowWithinCohort", "fairSharing.weight")

SCHEMA = rule(
    "GG003",
    "schema",
    Level.ERROR,
    "A declaration does not match its kind's JSON Schema: unknown field, wrong type, missing field or unknown kind.",
    "Run `gpugov schema` for the schemas; editors check them through the yaml-language-server line.",
)

CREDENTIALS_IN_REPOSITORY = rule(
    "GG184",
    "credentials-in-repository",
    Level.ERROR,
    "A declaration folder holds a Secret or a kubeconfig: credentials (a fleet's worker kubeconfigs among them) "
    "would be in Git, readable by everyone who can read the repository.",
    "Delete the file and rotate what it held; a Fleet names the kubeconfig Secret of each worker "
    "(spec.workers[].kubeconfigSecret), which the platform team creates in the manager's Kueue namespace.",
)

_NAME = {"type": "string", "minLength": 1}
NAMESPACE_GLOB_PATTERN = r"^[a-z0-9*]([-a-z0-9*]*[a-z0-9*])?$"  # a namespace name, `*` a wildcard
_STRINGS = {"type": "array", "items": _NAME}
_DNS_NAME = {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 253}
_LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
_QUANTITY = {
    "description": 'A Kubernetes quantity: 8, "500m", "64Gi", "2Ti".',
    "anyOf": [
        {"type": "number", "minimum": 0},
        {
            "type": "string",
            "pattern": r"^\+?([0-9]+\.?[0-9]*|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$",
        },
    ],
}
_RESOURCE_QUOTA = {
    "description": "A quota; a bare quantity is the nominal (guaranteed) amount.",
    "anyOf": [
        _QUANTITY,
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["nominal"],
            "properties": {
                "nominal": {**_QUANTITY, "description": "Guaranteed amount (Kueue nominalQuota, Volcano deserved)."},
                "borrowingLimit": {**_QUANTITY, "description": "Extra amount that may be borrowed. Unset: unlimited."},
                "lendingLimit": {**_QUANTITY, "description": "Part of nominal that may be lent. Unset: all of it."},
            },
        },
    ],
}
RESOURCE_KEY_PATTERN = (
    r"^(accelerators|acceleratorMemory|acceleratorCores|cpu|memory|pods|[0-9]+g\.[0-9]+gb([+-][a-z.]+)?"
    r"|vir[0-9]{2}(_[0-9a-z]+)*)$"
)
_POOL_QUOTAS = {
    "type": "array",
    "description": "Quotas per GPU pool.",
    "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["pool", "resources"],
        "properties": {
            "pool": {**_NAME, "description": "Name of a GPUPool."},
            "resources": {
                "type": "object",
                "minProperties": 1,
                "description": "accelerators (whole devices of the pool's model; on a HAMi pool its vGPUs), a MIG "
                "profile such as 1g.10gb, an Ascend vNPU template such as vir05_1c_16g, acceleratorMemory (a "
                "size) and acceleratorCores on a HAMi pool, cpu, memory or pods.",
                "propertyNames": {"pattern": RESOURCE_KEY_PATTERN},
                "additionalProperties": _RESOURCE_QUOTA,
            },
        },
    },
}
_OWNERS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "users": {**_STRINGS, "description": "Kubernetes user names (RBAC subjects)."},
        "groups": {**_STRINGS, "description": "Kubernetes groups (RBAC subjects)."},
        "reviewers": {
            "type": "array",
            "items": {"type": "string", "pattern": r"^(@[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)?|[^@\s]+@[^@\s]+)$"},
            "description": "Code owners of the tenant's files: @user, @org/team or an e-mail (default: users).",
        },
    },
}
_SUBJECTS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "users": {**_STRINGS, "default": [], "description": "Kubernetes user names (RBAC subjects)."},
        "groups": {**_STRINGS, "default": [], "description": "Kubernetes groups (RBAC subjects)."},
    },
}
_MEMBERS = {
    **_SUBJECTS,
    "description": "Who submits and manages the tenant's workloads: the ClusterRole gpugov-tenant-member in each of "
    "its namespaces (no Secrets, no RBAC, no quota objects), plus read access to the queues.",
}
_VIEWERS = {
    **_SUBJECTS,
    "description": "Who only reads the tenant's workloads, queues, events and logs: the ClusterRole "
    "gpugov-tenant-viewer in each of its namespaces, plus read access to the queues.",
}
_FAIR_SHARING = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "weight": {
            "type": "integer",
            "minimum": 1,
            "maximum": 65535,
            "description": "Share of idle capacity relative to siblings (default 1).",
        }
    },
}
_TAINT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["key", "effect"],
    "properties": {
        "key": _NAME,
        "value": {"type": "string"},
        "effect": {"enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]},
    },
}
_ENUM_PREEMPTION = {
    "reclaimWithinCohort": {"enum": ["Never", "LowerPriority", "Any"], "default": "Any"},
    "withinClusterQueue": {"enum": ["Never", "LowerPriority", "LowerOrNewerEqualPriority"], "default": "LowerPriority"},
    "borrowWithinCohort": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "policy": {"enum": ["Never", "LowerPriority"], "default": "LowerPriority"},
            "maxPriorityThreshold": {"type": "integer"},
        },
    },
}


def _spec(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "required": required or [], "properties": properties}


# An object whose presence is itself the declaration (sharing.hami: the pool is shared through HAMi):
# its defaults fill it only where it is declared (defaulted() fills other absent objects as empty).
OPT_IN = "x-gpugov-opt-in"


def _opt_in(properties: dict[str, Any]) -> dict[str, Any]:
    return {**_spec(properties), OPT_IN: True}


# GPU-hour budgets (issue #27, gpugov.usage.budget): declaring one is the opt-in, its defaults fill it only then.
BUDGET_PERIODS = ("month", "week")
BUDGET_ACTIONS = ("none", "hold")
_BUDGET = {
    **_opt_in(
        {
            "acceleratorHours": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": "Accelerator-hours admitted per period (a MIG slice or a HAMi vGPU counts as its "
                "share of a device), from the usage ledger (`gpugov usage`).",
            },
            "cost": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": "Instead of acceleratorHours: money per period, in the currency of the holder's "
                "pools (GPUPool pricePerAcceleratorHour and currency), the usage ledger's cost of what was admitted.",
            },
            "period": {
                "enum": list(BUDGET_PERIODS),
                "default": "month",
                "description": "The calendar period the budget renews in, in UTC: month (from the 1st) or week "
                "(from Monday).",
            },
            "alerts": {
                "type": "array",
                "items": {"type": "integer", "minimum": 1, "maximum": 1000},
                "uniqueItems": True,
                "default": [80, 100],
                "description": "Percentages of the budget at which `gpugov budget --notify` alerts, each once a period.",
            },
            "action": {
                "enum": list(BUDGET_ACTIONS),
                "default": "none",
                "description": "At 100%: none (alerts only) or hold: `gpugov budget --apply` sets the tenant's "
                "ClusterQueues (a department's: those of its tenants) to stopPolicy Hold, so nothing new is "
                "admitted while what runs finishes; a new period releases them.",
            },
        }
    ),
    # exactly one unit: hours or money (_describe words a oneOf from the fields its branches require)
    "oneOf": [{"required": ["acceleratorHours"]}, {"required": ["cost"]}],
    "description": "A GPU-hour budget, in accelerator-hours or in money (cost): alerts at thresholds and an "
    "optional hold at 100%.",
}


# Guardrails.isolation: what the admission policies (compile.admission) and the tenant namespaces'
# Pod Security labels hold against a tenant who tries to escape its queues (README: Threat model).
# The cluster's admins (system:masters) are not among them: what they submit is checked like a tenant's.
TRUSTED_CONTROLLER_GROUPS = (
    "system:serviceaccounts:kube-system",
    "system:serviceaccounts:kueue-system",
    "system:serviceaccounts:jobset-system",
    "system:serviceaccounts:lws-system",
    "system:serviceaccounts:kubeflow",
    "system:serviceaccounts:kubeflow-system",
    "system:serviceaccounts:ray-system",
)
TRUSTED_CONTROLLER_USERS = ("system:kube-controller-manager",)
_ISOLATION = {
    **_spec(
        {
            "podSecurity": {
                "enum": ["privileged", "baseline", "restricted"],
                "default": "restricted",
                "description": "Pod Security Admission level enforced on every tenant namespace "
                "(pod-security.kubernetes.io/enforce). restricted (the default) also refuses running as root, "
                "privilege escalation and every volume but configMap, secret, emptyDir, downwardAPI, projected, "
                "csi, ephemeral and persistentVolumeClaim; baseline refuses privileged containers, hostPath "
                "volumes, host namespaces and added capabilities only. Anything but restricted needs "
                "podSecurityReason (GG102).",
            },
            "podSecurityReason": {
                "type": "string",
                "description": "Why tenant namespaces enforce less than restricted: required with podSecurity "
                "baseline or privileged (GG102), shown to the reviewers of the change.",
            },
            "trustedControllers": {
                **_spec(
                    {
                        "users": {**_STRINGS, "default": list(TRUSTED_CONTROLLER_USERS)},
                        "groups": {**_STRINGS, "default": list(TRUSTED_CONTROLLER_GROUPS)},
                    }
                ),
                "description": "The identities (request.userInfo) of the controllers that create the children of a "
                "checked parent (Job controller, Kueue, JobSet, KubeRay, Kubeflow, LeaderWorkerSet) and of the "
                "cluster's admins. Only they may create a workload naming an owner, clear `suspend`, remove Kueue's "
                "scheduling gates or change Kueue's own labels; everyone else is checked as a tenant. Never a "
                "namespace a tenant holds (GG100).",
            },
            "podPriorityClasses": {
                **_STRINGS,
                "default": [],
                "description": "Pod PriorityClasses a workload without a queue may name (priorityClassName); one with "
                "a queue may name only the classes its queue allows.",
            },
            "deviceRuntimeClasses": {
                **_STRINGS,
                "default": ["nvidia", "nvidia-cdi", "nvidia-legacy"],
                "description": "RuntimeClasses that hand devices to a container through its environment: only a "
                "workload that requests accelerators (through a queue) may name one.",
            },
            "maxTerminationGracePeriodSeconds": {
                "type": "integer",
                "minimum": 0,
                "default": 300,
                "description": "The longest terminationGracePeriodSeconds a workload that requests accelerators may "
                "set: when Kueue preempts, reclaims or deactivates it, its pods keep their devices that long, and a "
                "pod that ignores SIGTERM keeps them to the end.",
            },
        }
    ),
    "description": "How a tenant is kept inside its queues (see the README's threat model).",
}


# Tenant.allow: what the tenant's namespaces may do beyond gpugov's default (compile.admission refuses it
# otherwise), each widening a plan risk, always with the reason the reviewers read.
NETWORK_VOLUMES = (
    "awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "fc", "flexVolume", "flocker",
    "gcePersistentDisk", "gitRepo", "glusterfs", "hostPath", "iscsi", "nfs", "photonPersistentDisk",
    "portworxVolume", "quobyte", "rbd", "scaleIO", "storageos", "vsphereVolume",
)
# A claim that names its PersistentVolume (spec.volumeName of a PVC or of an ephemeral volume's template).
PREBOUND_CLAIM = "volumeName"
SERVICE_TYPES = ("NodePort", "LoadBalancer")
_TENANT_ALLOW = {
    **_spec(
        {
            "volumes": {
                "type": "array",
                "items": {"enum": [*NETWORK_VOLUMES, PREBOUND_CLAIM]},
                "default": [],
                "description": "Volume sources the tenant's pods may use beyond configMap, secret, emptyDir, "
                "downwardAPI, projected, persistentVolumeClaim, ephemeral, image and csi (network and node storage: "
                "nfs, iscsi, cephfs, rbd, hostPath...), and volumeName: a claim that names an existing "
                "PersistentVolume rather than getting its own.",
            },
            "csiDrivers": {
                **_STRINGS,
                "default": [],
                "description": "CSI drivers the tenant's pods may name in an inline csi volume (nfs.csi.k8s.io, "
                "secrets-store.csi.k8s.io...); no other inline CSI volume is admitted.",
            },
            "serviceTypes": {
                "type": "array",
                "items": {"enum": list(SERVICE_TYPES)},
                "default": [],
                "description": "Service types beyond ClusterIP the tenant may create (NodePort, LoadBalancer). "
                "externalIPs are never admitted.",
            },
            "reason": {"type": "string", "minLength": 1, "description": "Why the tenant needs it: shown in the plan."},
        },
        ["reason"],
    ),
    "description": "What the tenant's namespaces may do beyond gpugov's default: network volumes, inline CSI "
    "drivers, NodePort and LoadBalancer Services. Each addition is a plan risk (GP022).",
}


# The reclaim policy (issue #26, gpugov.reclaim): Guardrails.reclaim holds the organisation's defaults
# (declaring it is the opt-in), a Tenant's reclaim overrides them field by field. Only the Guardrails'
# copy carries defaults: a tenant's fields left out are the Guardrails' (or these defaults).
DURATION_PATTERN = r"^[0-9]+[smhd]$"
_DURATION = {"type": "string", "pattern": DURATION_PATTERN}
# Per-pod utilisation metrics gpugov reads: DCGM's graphics-engine activity (0..1, works on MIG), DCGM's
# GPU utilisation (percent, where profiling metrics are off), the Ascend npu-exporter's (percent).
RECLAIM_METRICS = ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL", "container_npu_utilization")


def _reclaim_spec(with_defaults: bool) -> dict[str, Any]:
    def d(prop: dict[str, Any], default: Any) -> dict[str, Any]:
        return {**prop, "default": default} if with_defaults else prop

    idle_props = {
        "metric": d({"enum": list(RECLAIM_METRICS), "description": "The per-pod utilisation metric: "
                     "DCGM_FI_PROF_GR_ENGINE_ACTIVE (also on MIG), DCGM_FI_DEV_GPU_UTIL (where DCGM's profiling "
                     "metrics are off) or container_npu_utilization (the Ascend npu-exporter, for NPU pools)."},
                    RECLAIM_METRICS[0]),
        "belowPercent": d({"type": "number", "minimum": 0, "maximum": 100,
                           "description": "A workload is idle while every one of its pods stays below this."}, 5),
        "window": d({**_DURATION, "description": "How long a workload must stay idle before it is warned."}, "2h"),
        "grace": d({**_DURATION, "description": "Time between the warning and the action."}, "1h"),
        "action": d({"enum": ["notify", "deactivate"], "description": "notify: warn only; deactivate: after the "
                     "grace, set the Workload's spec.active=false (Kueue frees its quota)."}, "notify"),
        "exempt": _spec(
            {
                "priorityClasses": d({**_STRINGS, "description": "Never reclaimed (e.g. serving)."}, []),
                "queues": d({**_STRINGS, "description": "LocalQueue names never reclaimed (e.g. interactive)."}, []),
                "nonPreemptible": d({"type": "boolean", "description": "Priority classes declared "
                                     "preemptible: false are never reclaimed."}, True),
            }
        ),
    }
    props = {
        "maxRuntime": {
            **_spec(
                {
                    "default": {**_DURATION, "description": "For a job whose priority class is not listed."},
                    "priorityClasses": {"type": "object", "additionalProperties": _DURATION,
                                        "description": "Priority class -> the longest runtime a job may ask for."},
                }
            ),
            "description": "The most a job may ask for through Kueue's kueue.x-k8s.io/max-exec-time-seconds label "
            "(refused at admission above it, or without it).",
        },
        "idle": {**(_opt_in(idle_props) if with_defaults else _spec(idle_props)),
                 "description": "Reclaiming idle accelerators (gpugov reclaim); declaring it is the opt-in."},
        "snooze": _spec({"maximum": d({**_DURATION, "description": "The furthest ahead a job owner may snooze "
                                       "reclaiming (annotation gpugov.io/reclaim-snooze-until)."}, "8h")}),
    }
    if with_defaults:
        return {**_opt_in(props), "description": "Reclaiming held accelerators, for every tenant (opt-in)."}
    return {**_spec(props), "description": "This tenant's reclaim policy, field by field over Guardrails.reclaim."}


# Quota over time (QuotaGrant, QuotaWindow): instants in RFC 3339 with a zone, local clock times, weekdays.
INSTANT_PATTERN = (r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]"
                   r"(:[0-5][0-9](\.[0-9]+)?)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$")
_INSTANT = {"type": "string", "pattern": INSTANT_PATTERN}
CLOCK_PATTERN = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
_CLOCK = {"type": "string", "pattern": CLOCK_PATTERN}
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_TIMELINE_RESOURCES = {
    "type": "object",
    "minProperties": 1,
    "propertyNames": {"pattern": RESOURCE_KEY_PATTERN},
    "additionalProperties": _QUANTITY,
}
_TIMELINE_HOLDER = {
    "type": "object",
    "additionalProperties": False,
    "minProperties": 1,
    "maxProperties": 1,
    "properties": {
        "tenant": {**_NAME, "description": "A Tenant."},
        "department": {**_NAME, "description": "A Department."},
    },
    "description": "Whose quota: exactly one of tenant or department.",
}


SPECS: dict[str, tuple[str, dict[str, Any]]] = {
    "GPUPool": (
        "A pool of identical accelerators on a set of nodes (hardware/).",
        _spec(
            {
                "description": {"type": "string"},
                "cluster": {**_NAME, "description": "The Cluster these nodes belong to."},
                "accelerator": _spec(
                    {
                        "model": {
                            # The enum lets editors complete the built-ins; the pattern admits declared models.
                            "anyOf": [{"enum": sorted(MODELS)}, {"type": "string", "pattern": NAME_PATTERN}],
                            "description": "An accelerator model: built in (`gpugov catalog`) or an AcceleratorModel "
                            "declared under hardware/.",
                        },
                        "productLabel": {
                            "type": "string",
                            "description": "Expected value of the model's product label (nvidia.com/gpu.product "
                            "on NVIDIA), where it differs from the catalog.",
                        },
                    },
                    ["model"],
                ),
                "acceleratorsPerNode": {"type": "integer", "minimum": 1, "maximum": 64},
                "nodeResources": _spec({"cpu": _QUANTITY, "memory": _QUANTITY}),
                "nodes": {
                    "type": "array",
                    "items": _spec(
                        {
                            "name": _NAME,
                            "labels": {**_LABELS, "description": "Labels the node must carry, e.g. topology values."},
                            "migLayout": {**_NAME, "description": "Name of a migLayout of this pool."},
                            "vnpuLayout": {**_NAME, "description": "Name of a vnpuLayout of this pool."},
                        },
                        ["name"],
                    ),
                },
                "nodeSelector": {
                    **_spec({"matchLabels": _LABELS}),
                    "description": "The labels that pick the pool's nodes (with nodeCount), where it does not list "
                    "them. Empty ({}): every node of the cluster, as a Kueue ResourceFlavor without nodeLabels "
                    "(validate says what gpugov cannot govern there, GG056).",
                },
                "nodeCount": {"type": "integer", "minimum": 0, "description": "Node count of a selector-only pool."},
                "taints": {"type": "array", "items": _TAINT},
                "topology": _spec(
                    {"levels": {"type": "array", "minItems": 1, "maxItems": 16, "items": _NAME}},
                    ["levels"],
                ),
                "pricePerAcceleratorHour": _QUANTITY,
                "currency": {
                    "type": "string",
                    "pattern": "^[A-Z]{3}$",
                    "description": "ISO 4217 code of pricePerAcceleratorHour, e.g. USD or CNY: usage shows costs in it.",
                },
                "migLayouts": {
                    "type": "object",
                    "description": "Named per-GPU MIG profile mixes, e.g. {1g.10gb: 7}.",
                    "additionalProperties": {
                        "type": "object",
                        "minProperties": 1,
                        "propertyNames": {"pattern": r"^[0-9]+g\.[0-9]+gb([+-][a-z.]+)?$"},
                        "additionalProperties": {"type": "integer", "minimum": 1, "maximum": 7},
                    },
                },
                "vnpuLayouts": {
                    "type": "object",
                    "description": "Named per-NPU Ascend static vNPU template mixes, e.g. {vir05_1c_16g: 4}.",
                    "additionalProperties": {
                        "type": "object",
                        "minProperties": 1,
                        "propertyNames": {"pattern": VNPU_TEMPLATE_PATTERN},
                        "additionalProperties": {"type": "integer", "minimum": 1, "maximum": 64},
                    },
                },
                "sharing": _spec(
                    {
                        "hami": _opt_in(
                            {
                                # HAMi's own defaults (its device plugin's flags)
                                "deviceSplitCount": {"type": "integer", "minimum": 1, "maximum": 1024, "default": 10},
                                "deviceMemoryScaling": {"type": "number", "exclusiveMinimum": 0, "default": 1},
                                "deviceCoreScaling": {"type": "number", "exclusiveMinimum": 0, "default": 1},
                                "deviceMemory": {
                                    **_QUANTITY,
                                    "description": "Memory of one device as NVML reports it; default: the model's.",
                                },
                            }
                        )
                    }
                ),
            },
            ["accelerator", "acceleratorsPerNode"],
        ),
    ),
    "AcceleratorModel": (
        "An accelerator model the built-in catalog lacks (hardware/); same fields as the catalog's.",
        ACCELERATOR_MODEL_SPEC,
    ),
    "Department": (
        "An org unit; departments nest and may hold a shared quota (tenants/).",
        _spec(
            {
                "description": {"type": "string"},
                "parent": {**_NAME, "description": "Parent Department."},
                "owners": _OWNERS,
                "costCenter": {"type": "string"},
                "quotas": _POOL_QUOTAS,
                "fairSharing": _FAIR_SHARING,
                "budget": _BUDGET,
            }
        ),
    ),
    "Tenant": (
        "A team that runs GPU workloads (tenants/).",
        _spec(
            {
                "description": {"type": "string"},
                "department": {**_NAME, "description": "Parent Department (its cohort)."},
                "owners": _OWNERS,
                "members": _MEMBERS,
                "viewers": _VIEWERS,
                "costCenter": {"type": "string"},
                "clusters": {**_STRINGS, "description": "Clusters to deploy to; default: those of the quota pools."},
                "namespaces": {
                    "type": "array",
                    "items": _NAME,
                    "description": "The tenant's namespaces: its queue admits workloads from these. Empty ([]): a "
                    "lending queue that admits none and holds quota its department's other queues borrow (Kueue's "
                    "slack ClusterQueue); it needs a department.",
                },
                "adoptNamespaces": {
                    "type": "array",
                    "items": _NAME,
                    "default": [],
                    "description": "Namespaces of spec.namespaces that already exist on the cluster without being "
                    "gpugov's (no app.kubernetes.io/managed-by: gpugov label) and that gpugov apply may take over. "
                    "Without it, apply refuses such a namespace. Adopting is a plan risk (GP013).",
                },
                "queues": {
                    "type": "array",
                    "items": _spec(
                        {
                            "name": _NAME,
                            "namespace": _NAME,
                            "priorityClasses": {**_STRINGS, "description": "Priority classes jobs here may use."},
                        },
                        ["name", "namespace"],
                    ),
                },
                "quotas": _POOL_QUOTAS,
                "fairSharing": _FAIR_SHARING,
                "flavorFungibility": {
                    **_spec(
                        {
                            "whenCanBorrow": {"enum": list(FUNGIBILITY)},
                            "whenCanPreempt": {"enum": list(FUNGIBILITY)},
                            "preference": {"enum": ["BorrowingOverPreemption", "PreemptionOverBorrowing"]},
                        }
                    ),
                    "description": "How the tenant's queue goes through its pools (its ClusterQueue's "
                    "flavorFungibility): where a pool's quota fits only by borrowing (whenCanBorrow) or by "
                    "preempting (whenCanPreempt), TryNextFlavor looks at the next pool first and MayStopSearch "
                    "takes that one. Unset: TryNextFlavor for both, so nominal quota on a later pool comes before "
                    "borrowing on an earlier one. gpugov import writes what a cluster's queue has.",
                },
                "reclaim": _reclaim_spec(with_defaults=False),
                "budget": _BUDGET,
                "allow": _TENANT_ALLOW,
            },
            ["namespaces"],
        )
        | {  # a lending queue (no namespaces) lends to its department's queues: without one it holds quota for nobody
            "if": {"properties": {"namespaces": {"maxItems": 0}}, "required": ["namespaces"]},
            "then": {"required": ["department"]},
        },
    ),
    # Quota over time (issue #27): declarations.timeline reads them, model_at applies them at an instant.
    "QuotaGrant": (
        "A temporary quota: resources added to a tenant's nominal quota in a pool from one instant until another "
        "(tenants/).",
        _spec(
            {
                "tenant": {**_NAME, "description": "The Tenant that receives the grant."},
                "pool": {**_NAME, "description": "Name of a GPUPool."},
                "resources": {**_TIMELINE_RESOURCES, "description": "Added to the tenant's nominal quota in the pool "
                              "while the grant holds (a quota key as in spec.quotas: accelerators, a MIG profile...)."},
                "from": {**_INSTANT, "description": "When the grant starts: RFC 3339 with a zone, e.g. "
                         "2025-03-01T09:00:00+08:00."},
                "until": {**_INSTANT, "description": "When it ends (exclusive). Without it the grant never ends "
                          "(a warning, GG172)."},
                "reason": {"type": "string", "minLength": 1, "description": "Why: shown in the plan."},
                "approvedBy": {**_STRINGS, "minItems": 1, "description": "Who approved it."},
            },
            ["tenant", "pool", "resources", "from", "reason", "approvedBy"],
        ),
    ),
    "QuotaWindow": (
        "A recurring window: while it is open, resources of a pool move from one tenant or department's nominal "
        "quota to another's (tenants/).",
        _spec(
            {
                "pool": {**_NAME, "description": "Name of a GPUPool."},
                "donor": _TIMELINE_HOLDER,
                "recipient": _TIMELINE_HOLDER,
                "resources": {**_TIMELINE_RESOURCES, "description": "Moved from the donor's nominal quota in the "
                              "pool to the recipient's while the window is open."},
                "weekdays": {
                    "type": "array",
                    "items": {"enum": list(WEEKDAYS)},
                    "uniqueItems": True,
                    "minItems": 1,
                    "default": list(WEEKDAYS),
                    "description": "The days the window opens on (it may close the next day).",
                },
                "start": {**_CLOCK, "description": "Local time it opens, HH:MM."},
                "end": {**_CLOCK, "description": "Local time it closes, HH:MM; at or before start: the next day."},
                "timeZone": {**_NAME, "description": "IANA time zone of start and end, e.g. Asia/Shanghai."},
                "reason": {"type": "string", "minLength": 1, "description": "Why: shown in the plan."},
                "approvedBy": {**_STRINGS, "minItems": 1, "description": "Who approved it."},
            },
            ["pool", "donor", "recipient", "resources", "start", "end", "timeZone", "reason", "approvedBy"],
        ),
    ),
    # A fleet (issue #43): several Kueue clusters as one pool through Kueue's MultiKueue.
    "Fleet": (
        "Clusters run as one pool by Kueue's MultiKueue (policies/): the manager admits a tenant's workload "
        "against its fleet quota and dispatches it to a worker with room; the workers run it under their own "
        "quotas.",
        _spec(
            {
                "description": {"type": "string"},
                "manager": {**_NAME, "description": "The Cluster (backend kueue) that admits and dispatches: it "
                            "holds the fleet's AdmissionCheck, MultiKueueConfig, MultiKueueClusters and each fleet "
                            "tenant's ClusterQueue with its fleet quota. It runs none of the fleet's jobs itself."},
                "kueueNamespace": {**_DNS_NAME, "default": "kueue-system",
                                   "description": "Kueue's namespace on the manager, where the workers' kubeconfig "
                                   "Secrets live."},
                "managerUser": {**_NAME, "default": "gpugov-multikueue",
                                "description": "The user the manager's kubeconfigs authenticate as on every worker "
                                "(a client certificate's CN, a ServiceAccount's system:serviceaccount:NS:NAME): each "
                                "worker grants it only what MultiKueue needs (watch workloads and jobs, create and "
                                "delete them in the fleet tenants' namespaces)."},
                "workers": {
                    "type": "array",
                    "minItems": 1,
                    "description": "The Clusters (backend kueue) that run the fleet's jobs.",
                    "items": _spec(
                        {
                            "cluster": {**_NAME, "description": "A declared Cluster."},
                            "kubeconfigSecret": {**_DNS_NAME, "description": "The NAME of the Secret (key "
                                                 "kubeconfig) in kueueNamespace on the manager that reaches this "
                                                 "worker. Only the name: the platform team creates the Secret; "
                                                 "its contents never enter Git (GG184)."},
                        },
                        ["cluster", "kubeconfigSecret"],
                    ),
                },
                "tenants": {
                    "type": "array",
                    "minItems": 1,
                    "description": "The tenants whose queues dispatch across the fleet, each with its quota on the "
                    "whole fleet (its per-cluster quotas on the workers stay in its Tenant).",
                    "items": _spec(
                        {
                            "tenant": {**_NAME, "description": "A declared Tenant."},
                            "quota": {
                                **_spec({"accelerators": _QUANTITY, "cpu": _QUANTITY, "memory": _QUANTITY},
                                        ["accelerators", "cpu", "memory"]),
                                "description": "What the tenant may hold on all workers together: the nominal "
                                "quota of its ClusterQueue on the manager.",
                            },
                        },
                        ["tenant", "quota"],
                    ),
                },
            },
            ["manager", "workers", "tenants"],
        ),
    ),
    "PriorityClass": (
        "A workload priority tier (policies/).",
        _spec(
            {
                "value": {"type": "integer", "minimum": -2147483648, "maximum": 1000000000},
                "preemptible": {
                    "type": "boolean",
                    "default": True,
                    "description": "May workloads of this class be preempted?",
                },
                "description": {"type": "string"},
            },
            ["value"],
        ),
    ),
    "SchedulingPolicy": (
        "Preemption and queueing policy (policies/); at most one.",
        _spec(
            {
                "queueingStrategy": {"enum": ["StrictFIFO", "BestEffortFIFO"], "default": "BestEffortFIFO"},
                "preemption": _spec(_ENUM_PREEMPTION),
                "volcano": _spec(
                    {
                        "plugin": {"enum": ["capacity", "proportion"], "default": "capacity"},
                        "notKept": {
                            "type": "array",
                            "items": {"enum": list(VOLCANO_NOT_KEPT)},
                            "uniqueItems": True,
                            "description": "Promises that Volcano clusters do not keep, said here so that the "
                            "declarations promise no more there (GG064 then stays silent on them): "
                            "borrowWithinCohort (under the capacity plugin a queue above its deserved never "
                            "preempts in another queue), fairSharing.weight (the capacity plugin shares by "
                            "deserved alone; the proportion plugin has no department queues).",
                        },
                    }
                ),
            }
        ),
    ),
    "Guardrails": (
        "Limits that every change must respect (policies/); at most one.",
        _spec(
            {
                "capacityRatio": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "default": 1,
                    "description": "Guaranteed/physical.",
                },
                "poolCapacityRatios": {
                    "type": "object",
                    "additionalProperties": {"type": "number", "exclusiveMinimum": 0},
                },
                "maxQuotaChangePerPullRequest": {"type": "integer", "minimum": 0},
                "requireOwner": {"type": "boolean", "default": True},
                "requireCostCenter": {"type": "boolean", "default": True},
                "platformTeam": {**_STRINGS, "description": "Code owners of every declaration file, tenant files included."},
                "reservedNamespaces": {
                    "type": "array",
                    "items": {"type": "string", "pattern": NAMESPACE_GLOB_PATTERN},
                    "description": "More namespaces no tenant may claim, `*` as a wildcard. Always reserved: "
                    "kube-*, default, gpu-operator, nvidia-gpu-operator, kueue-system, volcano-system and every "
                    "cluster's operations and migConfig namespaces.",
                },
                "idle": _spec(
                    {
                        "utilizationBelowPercent": {"type": "number", "minimum": 0, "maximum": 100, "default": 5},
                        "window": {"type": "string", "pattern": r"^[0-9]+[smhd]$", "default": "24h"},
                    }
                ),
                "isolation": _ISOLATION,
                "reclaim": _reclaim_spec(with_defaults=True),
                "profile": {
                    **_spec(
                        {
                            "lowActivityBelowPercent": {"type": "number", "minimum": 0, "maximum": 100,
                                                        "default": 30},
                            "adviseIdleSharePercent": {"type": "number", "minimum": 0, "maximum": 100,
                                                       "default": 25},
                            "hostIOBytesPerSecond": {"type": "number", "minimum": 0, "default": 1000000000},
                            "memoryHeadroomPercent": {"type": "number", "minimum": 0, "maximum": 100,
                                                      "default": 10},
                        }
                    ),
                    "description": "When `gpugov profile` gives advice: activity under lowActivityBelowPercent is "
                    "low, idle for at least adviseIdleSharePercent of the measured time is told, low activity "
                    "with at least hostIOBytesPerSecond of PCIe traffic from the host is data loading, and a MIG "
                    "or HAMi share must hold the memory peak plus memoryHeadroomPercent.",
                },
            }
        ),
    ),
    "Cluster": (
        "A Kubernetes cluster this repository drives (policies/).",
        _spec(
            {
                "description": {"type": "string"},
                "backend": {"enum": ["kueue", "volcano"]},
                "topologyAwareScheduling": {
                    "type": "boolean",
                    "default": True,
                    "description": "Kueue: make every pool's ResourceFlavor topology-aware (spec.topologyName and a "
                    "Topology per pool: the pool's topology levels, or kubernetes.io/hostname alone). Kueue's TAS then "
                    "places each pod set on nodes with room for it, so a job larger than its nodes waits although "
                    "its queue has quota. false: no Topology and no flavor topologyName in this cluster (what "
                    "`gpugov import` writes for a cluster whose flavors have none); a pool may then declare no "
                    "topology levels (GG058).",
                },
                "migConfig": _spec(
                    {
                        "name": {**_NAME, "default": "gpugov-mig-parted-config"},
                        "namespace": {**_NAME, "default": "gpu-operator"},
                    }
                ),
                "operations": _spec(
                    {
                        "image": {**_NAME, "description": "Image with gpugov and this repository at /config."},
                        "namespace": {**_NAME, "default": "gpugov-system"},
                        "driftSchedule": {
                            "type": "string",
                            "default": "*/30 * * * *",
                            "description": "Cron schedule of the drift CronJob.",
                        },
                        "agent": {"type": "boolean", "default": True, "description": "Run the NVML node agent on GPU nodes."},
                        "prometheus": {
                            "type": "string",
                            "pattern": "^https?://[^\\s]+$",
                            "description": "The Prometheus with the reclaim policy's metric (DCGM, the npu-exporter), as "
                            "the cluster's pods reach it. With it and a reclaim idle policy, compile emits the "
                            "gpugov-reclaim CronJob.",
                        },
                        "reclaimSchedule": {
                            "type": "string",
                            "default": "*/5 * * * *",
                            "description": "Cron schedule of the reclaim CronJob (gpugov reclaim --apply).",
                        },
                        "budgetSchedule": {
                            "type": "string",
                            "default": "*/10 * * * *",
                            "description": "Cron schedule of the budget CronJob (gpugov budget --apply): how soon a "
                            "spent hold budget stops new admissions.",
                        },
                    },
                    ["image"],
                ),
                "identity": {
                    **_spec(
                        {
                            "kubeSystemUID": {
                                **_NAME,
                                "description": "metadata.uid of the cluster's kube-system namespace "
                                "(`kubectl get namespace kube-system -o jsonpath='{.metadata.uid}'`): apply and "
                                "the Pulumi stack refuse any API server whose kube-system has another uid.",
                            },
                        },
                        ["kubeSystemUID"],
                    ),
                    "description": "Pin this declaration to one physical cluster. Unpinned, the first apply records "
                    "the cluster's identity in the ConfigMap kube-system/gpugov-cluster-identity and later applies of "
                    "another declared cluster are refused there.",
                },
                "gpuOperator": {
                    **_spec(
                        {
                            "clusterPolicy": {
                                **_NAME,
                                "description": "The name of the operator's ClusterPolicy (its Helm chart names it "
                                "cluster-policy). gpugov apply patches it; it never creates or deletes one.",
                            },
                            "deviceListStrategy": {
                                "enum": ["volume-mounts", "cdi"],
                                "default": "volume-mounts",
                                "description": "How the device plugin hands a container its allocated GPUs once the "
                                "toolkit refuses NVIDIA_VISIBLE_DEVICES: volume-mounts (the toolkit reads the list "
                                "from mounts only the device plugin makes) or cdi (CDI annotations and CRI fields, "
                                "the operator's cdi.enabled).",
                            },
                        },
                        ["clusterPolicy"],
                    ),
                    "description": "The platform team manages the NVIDIA GPU Operator on this cluster: compile emits "
                    "a patch of its ClusterPolicy that makes the device plugin the only way to a GPU "
                    "(toolkit.env ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED=false, and "
                    "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS=true with devicePlugin.env "
                    "DEVICE_LIST_STRATEGY=volume-mounts, or cdi.enabled with DEVICE_LIST_STRATEGY="
                    "cdi-annotations,cdi-cri). Every other env entry of the ClusterPolicy is kept. doctor DR018 "
                    "checks the result.",
                },
                "pruneLimit": {
                    **_spec(
                        {
                            "objects": {
                                "type": "integer",
                                "minimum": 0,
                                "default": 30,
                                "description": "Most objects one apply may delete or release without "
                                "--allow-mass-prune.",
                            },
                            "fraction": {
                                "type": "number",
                                "minimum": 0,
                                "maximum": 1,
                                "default": 0.5,
                                "description": "Largest share of the objects gpugov owns on the cluster that one "
                                "apply may delete or release without --allow-mass-prune.",
                            },
                        }
                    ),
                    "description": "A prune past either limit is refused (before any write) unless "
                    "--allow-mass-prune is given.",
                },
                "adopt": {
                    "type": "array",
                    "default": [],
                    "items": _spec(
                        {
                            "kind": {"enum": list(ADOPTABLE_KINDS)},
                            "name": _NAME,
                            "namespace": {**_NAME, "description": "The namespace of a LocalQueue or a ConfigMap (e.g. "
                                          "volcano-system for Volcano's scheduler configuration)."},
                        },
                        ["kind", "name"],
                    ),
                    "description": "Scheduler objects that already exist on this cluster without being gpugov's "
                    "(no app.kubernetes.io/managed-by: gpugov label), e.g. queues written by hand before "
                    "`gpugov import`, or the scheduler configuration Volcano's chart installed "
                    "(ConfigMap volcano-system/volcano-scheduler-configmap), that gpugov apply may take over. Each must be an object the declarations "
                    "compile to for this cluster (GG160). Once taken over they are gpugov's: removing one from the "
                    "declarations later makes prune delete it. Adding an entry is a plan risk (GP026).",
                },
            },
            ["backend"],
        ),
    ),
}


def kind_schema(kind: str) -> dict[str, Any]:
    description, spec = SPECS[kind]
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$id": f"{SCHEMA_BASE}{kind.lower()}.json",
        "title": f"gpugov {kind}",
        "description": description,
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": API_VERSION},
            "kind": {"const": kind},
            "metadata": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {"name": _NAME, "labels": _LABELS, "annotations": _LABELS},
            },
            "spec": spec,
        },
    }


def schema_files() -> dict[str, str]:
    """File name -> JSON text of every kind's schema (what `gpugov schema --out` writes)."""
    return {f"{kind.lower()}.json": json.dumps(kind_schema(kind), indent=2, sort_keys=True) + "\n" for kind in SPECS}



class _Nested(dict):  # type: ignore[type-arg]
    """The defaults inside an object property (as opposed to a default that is itself a mapping)."""

    opt_in = False


def _default_tree(schema: dict[str, Any]) -> _Nested:
    tree = _Nested()
    tree.opt_in = bool(schema.get(OPT_IN))
    for name, prop in schema.get("properties", {}).items():
        if "default" in prop:
            tree[name] = prop["default"]
        elif prop.get("type") == "object" and (inner := _default_tree(prop)):
            tree[name] = inner
    return tree


@cache
def _defaults_of(kind: str) -> _Nested:
    return _default_tree(SPECS[kind][1])


def _fill(tree: _Nested, data: dict[str, Any]) -> dict[str, Any]:
    filled = dict(data)
    for key, default in tree.items():
        if isinstance(default, _Nested):
            current = filled.get(key)
            if default.opt_in and not isinstance(current, dict):
                continue
            filled[key] = _fill(default, current if isinstance(current, dict) else {})
        elif key not in filled:
            filled[key] = default
    return filled


def defaulted_reclaim(spec: dict[str, Any]) -> dict[str, Any]:
    """A reclaim block (Guardrails' and a tenant's merged) with Guardrails.reclaim's defaults filled in."""
    return _fill(_defaults_of("Guardrails")["reclaim"], spec)


def defaulted(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A schema-valid spec with the schema's defaults filled in, at every depth (an absent
    object is filled as if declared empty). The schema is the one place defaults are written:
    editors show them, and the model reads them from here."""
    return _fill(_defaults_of(kind), spec)

@cache
def _fast(kind: str) -> Any:
    return jsonschema_rs.validator_for(kind_schema(kind))


@cache
def _full(kind: str) -> jsonschema.Draft7Validator:
    import jsonschema

    return jsonschema.Draft7Validator(kind_schema(kind))


def check_document(doc: SourceDoc) -> list[Finding]:
    data = doc.data
    if not isinstance(data, dict):
        return [make(SCHEMA, Text("a declaration must be a mapping with apiVersion, kind, metadata and spec"),
                     doc.locate())]
    kind = data.get("kind")
    if _is_credential(data):
        return [make(CREDENTIALS_IN_REPOSITORY,
                     Text("this document holds credentials ({kind}): they must never enter Git", kind=repr(kind)),
                     doc.locate(("kind",)) if "kind" in data else doc.locate())]
    if kind not in SPECS:
        known = ", ".join(sorted(SPECS))
        where = doc.locate(("kind",)) if "kind" in data else doc.locate()
        return [make(SCHEMA, Text("unknown kind {kind} (known kinds: {known})", kind=repr(kind), known=known), where)]
    if _fast(kind).is_valid(data):
        return []
    findings = []
    for error in sorted(_full(kind).iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        findings.extend(_describe(doc, kind, error))
    return findings


# What a kubeconfig or a Secret looks like: a fleet names the Secret that reaches a worker, never holds it.
_KUBECONFIG_KEYS = {"clusters", "users", "contexts"}


def _is_credential(data: dict[str, Any]) -> bool:
    if data.get("apiVersion") == "v1" and data.get("kind") in ("Secret", "Config"):
        return True
    return _KUBECONFIG_KEYS <= set(data)


def _misspelled(error: jsonschema.ValidationError) -> bool:
    """A missing required field that an unknown field of the same mapping most likely means."""
    allowed = set(error.schema.get("properties", {}))
    missing = [p for p in error.validator_value if p not in error.instance]
    unknown = [str(k) for k in error.instance if k not in allowed]
    meant = {closest(key, set(missing)) for key in unknown}
    return bool(missing) and all(p in meant for p in missing)


def _describe(doc: SourceDoc, kind: str, error: jsonschema.ValidationError) -> list[Finding]:
    path = tuple(error.absolute_path)
    dotted = _dotted(path) or Text("the document")
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties", {}))
        findings = []
        for key in sorted(set(error.instance) - allowed):
            meant = closest(str(key), allowed - set(error.instance))
            fields = {"key": key, "where": dotted, "kind": kind, "meant": meant, "allowed": ", ".join(sorted(allowed))}
            message = Text("unknown field '{key}' in {where} of {kind} (did you mean {meant}?; allowed: {allowed})",
                           **fields) if meant else \
                Text("unknown field '{key}' in {where} of {kind} (allowed: {allowed})", **fields)
            findings.append(make(SCHEMA, message, doc.locate((*path, key), key=True)))
        return findings
    if error.validator == "required":
        if isinstance(error.instance, dict) and _misspelled(error):
            return []  # the unknown field's finding names it ("did you mean ..."): one error per typo
        return [make(SCHEMA, Text("{field}: {error}", field=dotted, error=error.message), doc.locate(path))]
    if error.validator == "anyOf":
        if kind == "GPUPool" and path[-2:] == ("accelerator", "model") and isinstance(error.instance, str):
            hint = suggest_model(error.instance)  # an NVML name with spaces, say: the model it names
            if hint is not None:
                data = doc.data if isinstance(doc.data, dict) else {}
                pool = str((data.get("metadata") or {}).get("name") or "?")
                return [make(SCHEMA, unknown_model_text(pool, error.instance, hint), doc.locate(path))]
        message = Text("{field}: {value} is not a valid {name}", field=dotted, value=repr(error.instance),
                       name=_anyof_name(error))
        return [make(SCHEMA, message, doc.locate(path))]
    if error.validator == "oneOf" and all(set(branch) == {"required"} for branch in error.validator_value):
        fields = Joined(" or ", (name for branch in error.validator_value for name in branch["required"]))
        return [make(SCHEMA, Text("{field}: give exactly one of {fields}", field=dotted, fields=fields),
                     doc.locate(path))]
    if error.validator == "propertyNames":
        return [make(SCHEMA, Text("{field}: invalid key {key}", field=dotted, key=repr(error.instance)),
                     doc.locate(path))]
    if error.validator == "pattern":
        expected = pattern_words(str(error.validator_value))
        if "propertyNames" in list(error.schema_path)[-2:]:  # a mapping's key, not a value
            message = Text("{field}: key {key} is not {expected}", field=dotted, key=repr(error.instance),
                           expected=expected)
            return [make(SCHEMA, message, doc.locate((*path, error.instance), key=True))]
        return [make(SCHEMA, Text("{field}: {value} is not {expected}", field=dotted, value=repr(error.instance),
                                  expected=expected), doc.locate(path))]
    return [make(SCHEMA, Text("{field}: {error}", field=dotted, error=error.message), doc.locate(path))]


# What each pattern of the schemas accepts, in words: users read these, never the regex.
PATTERN_WORDS: dict[str, str] = {
    RESOURCE_KEY_PATTERN: Text(
        "a quota resource: accelerators, cpu, memory, pods, a MIG profile such as 1g.10gb, a vNPU template "
        "such as vir05_1c_16g, or acceleratorMemory / acceleratorCores"
    ),
    r"^[0-9]+g\.[0-9]+gb([+-][a-z.]+)?$": Text("a MIG profile name such as 1g.10gb, 3g.40gb or 1g.10gb+me"),
    r"^(@[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)?|[^@\s]+@[^@\s]+)$": Text("a code owner: @user, @org/team or an e-mail address"),
    r"^[0-9]+[smhd]$": Text("a duration: a whole number followed by s, m, h or d, such as 30m or 7d"),
    r"^https?://[^\s]+$": Text("a URL starting with http:// or https://, such as http://prometheus.monitoring:9090"),
    r"^\+?([0-9]+\.?[0-9]*|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$": Text(
        'a Kubernetes quantity such as 8, "500m", "64Gi" or "2Ti"'
    ),
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$": Text(
        "a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit"
    ),
    NAMESPACE_GLOB_PATTERN: Text("a namespace name or a pattern of one, '*' matching any run of characters, such as kube-*"),
    # AcceleratorModel (gpugov/catalog/spec.py)
    NAME_PATTERN: Text("a model name: up to 63 letters, digits, '.', '_' and '-', starting with a letter or digit"),
    VNPU_TEMPLATE_PATTERN: Text("an Ascend vNPU template name such as vir05_1c_16g"),
    r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$": Text(
        "an extended resource name: a domain, '/' and a name, such as nvidia.com/gpu"
    ),
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$": Text(
        "a label key: a name, optionally after a domain and '/', such as nvidia.com/gpu.product"
    ),
    r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$": Text(
        "a label value: up to 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
    ),
    r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|[kMGT])?$": Text('a size such as 80Gi or 512Mi'),
    r"^[a-z0-9][a-z0-9-]*$": Text("lower-case letters, digits and '-', starting with a letter or digit, such as nvidia"),
    r"^[A-Z]{3}$": Text("an ISO 4217 currency code: three upper-case letters, such as USD, EUR or CNY"),
    r"^0x[0-9A-F]{4}$": Text("a PCI vendor id: 0x and 4 upper-case hex digits, such as 0x10DE"),
    r"^0x[0-9A-F]{8}$": Text("a PCI id pair: 0x and 8 upper-case hex digits, device then vendor, such as 0x20B210DE"),
    # QuotaGrant and QuotaWindow (issue #27)
    INSTANT_PATTERN: Text("an RFC 3339 time with its zone, such as 2026-03-01T09:00:00+08:00 or 2026-03-01T01:00:00Z"),
    CLOCK_PATTERN: Text("a time of day HH:MM on a 24-hour clock, such as 08:00 or 20:30"),
}


def pattern_words(pattern: str) -> str:
    """What a value matching `pattern` looks like, for a finding's message."""
    return PATTERN_WORDS.get(pattern, Text("in the form this field expects (`gpugov schema` shows the schemas)"))


def _anyof_name(error: jsonschema.ValidationError) -> str:
    description = str(error.schema.get("description", "value"))
    name = description.split(":")[0].split(";")[0].rstrip(".")
    name = name[:1].lower() + name[1:]  # "Kubernetes" keeps its capital
    for article in ("a ", "an "):  # "is not a valid quota", never "a valid a quota"
        name = name.removeprefix(article)
    return name


def _dotted(path: tuple[Any, ...]) -> str:
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text
