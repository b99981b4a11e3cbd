"""The real Kueue controller (v0.17.0) out of cluster, wired into the sandbox apiserver.

What an in-cluster install gets from its Deployment, Service and cert-manager,
the sandbox sets up by hand, as Kueue's own integration tests do:

- Kueue's own CRDs (from ``tools/build kueue``'s copy of the module's
  ``config/components/crd/bases``), with the conversion webhook of the five
  CRDs that have one pointed at ``https://127.0.0.1:<port>/convert``;
- its webhook server on 127.0.0.1 with a serving cert from the sandbox CA, and
  the module's webhook manifests reduced to Kueue's own kinds, batch/v1 Jobs and
  Pods, each rewritten to that URL with the CA as caBundle (the Pod webhooks skip
  kube-system and kueue-system, as upstream's default install does);
- the visibility API (an aggregated API server on 127.0.0.1) behind an
  APIService and an ExternalName Service, reached through the apiserver's
  front-proxy (requestheader) flags;
- integrations batch/job and pod; fair sharing on (so ClusterQueue weights act); no leader
  election; internal cert management off; the feature gate TASReplaceNodeOnNodeTaints off (gpugov's
  tainted topology-aware pools: doctor DR022);
- ``manageJobsWithoutQueueName: true`` with ``managedJobsNamespaceSelector`` on gpugov's tenant
  label: in a tenant namespace a Job or Pod without a queue label is held, never run (the
  second line behind gpugov's admission policies, README "Threat model");
- its own identity: the user and groups of Kueue's ServiceAccount in an in-cluster install
  (``system:serviceaccount:kueue-system:kueue-controller-manager``), a client cert from the
  sandbox CA, which gpugov's admission policies trust as a controller while the sandbox admin
  is checked like a tenant.

Kueue v0.17.0 reads two certificate pairs from fixed paths when its internal cert
management is off: ``/etc/kueue/metrics/certs`` (metrics) and ``/visibility``
(visibility server). Nobody verifies those (the APIService skips TLS verification,
as upstream's own manifests do), so the sandbox writes a self-signed pair there
once, when missing, and shares it between sandboxes.
"""

from __future__ import annotations

import base64
import copy
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpugov.kube.names import KUEUE_CONFIG_API, KUEUE_GROUP, VISIBILITY_GROUP
from gpugov.kube.objects import LABEL_TENANT
from gpugov.sandbox import crds as crd_mod
from gpugov.sandbox.components import Component, ComponentError
from gpugov.sandbox.controlplane import ControlPlane
from gpugov.sandbox.pki import identity_kubeconfig, issue_serving_cert, self_signed_pair

NAMESPACE = "kueue-system"
FIELD_MANAGER = "gpugov-sandbox"
VISIBILITY_SERVICE = "visibility-server"
VISIBILITY_VERSIONS = ("v1beta1", "v1beta2")
FIXED_CERT_DIRS = (Path("/etc/kueue/metrics/certs"), Path("/visibility"))
# The CRDs whose conversion upstream serves by webhook (config/components/crd/kustomization.yaml).
CONVERTED_CRDS = frozenset(
    f"{plural}.{KUEUE_GROUP}" for plural in ("localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters")
)
# Webhooks kept from the module's manifests: Kueue's own kinds, Jobs and Pods.
KEPT_API_GROUPS = frozenset({KUEUE_GROUP, "batch", ""})
SYSTEM_NAMESPACES = ("kube-system", NAMESPACE)
# Who Kueue is in an in-cluster install (its Deployment's ServiceAccount); system:masters for its
# permissions, since the sandbox installs no RBAC of Kueue's.
KUEUE_USER = f"system:serviceaccount:{NAMESPACE}:kueue-controller-manager"
KUEUE_GROUPS = ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:masters"]
# Kueue's feature gates the sandbox sets, as a cluster with tainted topology-aware pools must (DR022).
FEATURE_GATES = {"TASReplaceNodeOnNodeTaints": False}
# The namespaces whose queue-less jobs and pods Kueue holds: gpugov's tenant namespaces.
MANAGED_JOBS_NAMESPACE_SELECTOR = {"matchExpressions": [{"key": LABEL_TENANT, "operator": "Exists"}]}


def configuration(workdir: Path, ports: dict[str, int], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Kueue's v1beta2 Configuration for an out-of-cluster controller on loopback; `extra`: top-level
    fields added (a fleet's manager: its multiKueue block)."""
    return {
        "apiVersion": KUEUE_CONFIG_API,
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['health']}"},
        "metrics": {"bindAddress": f"127.0.0.1:{ports['metrics']}"},
        "webhook": {"host": "127.0.0.1", "port": ports["webhook"], "certDir": str(workdir / "certs")},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "visibilityServer": {"bindAddress": "127.0.0.1", "bindPort": ports["visibility"]},
        "manageJobsWithoutQueueName": True,
        "managedJobsNamespaceSelector": MANAGED_JOBS_NAMESPACE_SELECTOR,
        "integrations": {"frameworks": ["batch/job", "pod"]},
        # What gpugov's fairSharing.weight needs: without this block Kueue ignores the weights.
        "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
        # What gpugov's tainted topology-aware pools need (doctor DR022): v0.17's node health check judges a
        # node's taints against the Workload's pod sets, never the ResourceFlavor's tolerations, and evicts a
        # running workload (NodeFailures) once no pod of it is left on a node of such a pool.
        "featureGates": dict(FEATURE_GATES),
        **(extra or {}),
    }


def ensure_fixed_certs(dirs: Iterable[Path] = FIXED_CERT_DIRS) -> None:
    """Write the self-signed pairs Kueue reads from fixed paths, where missing."""
    for directory in dirs:
        crt, key = directory / "tls.crt", directory / "tls.key"
        if crt.is_file() and key.is_file():
            continue
        cert_pem, key_pem = self_signed_pair("kueue-sandbox")
        try:
            directory.mkdir(parents=True, exist_ok=True)
            for path, data in ((crt, cert_pem), (key, key_pem)):
                tmp = path.with_name(f".{path.name}.{os.getpid()}")
                tmp.write_bytes(data)
                tmp.chmod(0o600 if path is key else 0o644)
                os.replace(tmp, path)
        except OSError as exc:
            raise ComponentError(
                f"Kueue v0.17.0 reads a certificate pair from {directory}, which cannot be written ({exc}); "
                f"run the sandbox as root once, or create {crt} and {key} (any self-signed pair) yourself"
            ) from exc


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def patched_crds(config_dir: Path, webhook_url: str, ca_bundle: str) -> list[dict[str, Any]]:
    """Kueue's CRDs, with webhook conversion on the CRDs upstream converts."""
    crds = crd_mod.load_crds([config_dir / "crd"])
    for crd in crds:
        if crd["metadata"]["name"] in CONVERTED_CRDS:
            crd["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {"url": f"{webhook_url}/convert", "caBundle": ca_bundle},
                    "conversionReviewVersions": ["v1"],
                },
            }
    return crds


def _kept(webhook: dict[str, Any]) -> bool:
    groups = {group for rule in webhook.get("rules", []) for group in rule.get("apiGroups", [])}
    return bool(groups) and groups <= KEPT_API_GROUPS


def webhook_configurations(config_dir: Path, webhook_url: str, ca_bundle: str) -> list[dict[str, Any]]:
    """The module's webhook manifests, reduced and pointed at the local webhook server."""
    docs = yaml.safe_load_all((config_dir / "webhook" / "manifests.yaml").read_text())
    result = []
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        config = copy.deepcopy(doc)
        config["metadata"] = {"name": "kueue-" + doc["metadata"]["name"]}
        webhooks = []
        for webhook in doc.get("webhooks", []):
            if not _kept(webhook):
                continue
            webhook = copy.deepcopy(webhook)
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {"url": webhook_url + path, "caBundle": ca_bundle}
            if any("pods" in rule.get("resources", []) for rule in webhook.get("rules", [])):
                webhook["namespaceSelector"] = {
                    "matchExpressions": [
                        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(SYSTEM_NAMESPACES)}
                    ]
                }
            webhooks.append(webhook)
        config["webhooks"] = webhooks
        result.append(config)
    return result


def visibility_objects(port: int) -> list[dict[str, Any]]:
    """The ExternalName Service and APIServices that put the visibility API behind the apiserver."""
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": VISIBILITY_SERVICE, "namespace": NAMESPACE},
        # The aggregator resolves an ExternalName Service to host:port itself; no kube-proxy needed.
        "spec": {"type": "ExternalName", "externalName": "127.0.0.1"},
    }
    services = [
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": f"{version}.{VISIBILITY_GROUP}"},
            "spec": {
                "group": VISIBILITY_GROUP,
                "version": version,
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
                "insecureSkipTLSVerify": True,
                "service": {"name": VISIBILITY_SERVICE, "namespace": NAMESPACE, "port": port},
            },
        }
        for version in VISIBILITY_VERSIONS
    ]
    return [service, *services]


def _apply(cp: ControlPlane, objects: Iterable[dict[str, Any]]) -> None:
    dynamic = cp.dynamic_client()
    for obj in objects:
        api = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        namespace = obj["metadata"].get("namespace")
        api.server_side_apply(body=obj, namespace=namespace, field_manager=FIELD_MANAGER, force_conflicts=True)


class Kueue:
    """Sets up and supervises the Kueue controller of one sandbox."""

    def __init__(self, cp: ControlPlane, binary: Path, config_dir: Path, ports: dict[str, int], version: str,
                 extra_config: dict[str, Any] | None = None) -> None:
        self._cp = cp
        self._extra_config = extra_config
        self._config_dir = config_dir
        self._ports = ports
        self.workdir = cp.workdir / "kueue"
        self.webhook_url = f"https://127.0.0.1:{ports['webhook']}"
        self.component = Component(
            name="kueue",
            binary=binary,
            args=[
                f"--config={self.workdir / 'config.yaml'}",
                f"--kubeconfig={self.workdir / 'kubeconfig'}",
                f"--visibility-server-port={ports['visibility']}",
            ],
            log_path=self.workdir / "kueue.log",
            health_url=f"http://127.0.0.1:{ports['health']}/readyz",
            version=version,
        )

    def prepare(self) -> list[str]:
        """Config, certs, namespace and CRDs: everything the controller needs before it starts."""
        ensure_fixed_certs()
        self.workdir.mkdir(parents=True, exist_ok=True)
        issue_serving_cert(self._cp.pki.ca_cert.parent, self.workdir / "certs", ["localhost"], ["127.0.0.1"])
        config = configuration(self.workdir, self._ports, self._extra_config)
        (self.workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        identity_kubeconfig(self._cp.kubeconfig, self._cp.pki.ca_cert.parent, self.workdir / "kubeconfig",
                            KUEUE_USER, KUEUE_GROUPS)
        try:
            client.CoreV1Api(self._cp.api_client()).create_namespace({"metadata": {"name": NAMESPACE}})
        except ApiException as exc:
            if exc.status != 409:
                raise
        crds = patched_crds(self._config_dir, self.webhook_url, _b64(self._cp.pki.ca_cert))
        names = crd_mod.apply_crds(self._cp.dynamic_client(), crds)
        crd_mod.wait_established(self._cp.api_client(), names)
        return names

    def start(self, timeout: float, detach: bool = False) -> None:
        self.component.start(detach=detach)
        self.component.wait_healthy(timeout)
        ca = _b64(self._cp.pki.ca_cert)
        _apply(self._cp, webhook_configurations(self._config_dir, self.webhook_url, ca))
        _apply(self._cp, visibility_objects(self._ports["visibility"]))
        self._wait_visibility_available(timeout)

    def _wait_visibility_available(self, timeout: float) -> None:
        """The aggregator reports the APIServices Available once it reaches Kueue through them."""
        registration = client.ApiregistrationV1Api(self._cp.api_client())
        deadline = time.monotonic() + timeout
        message = "no status yet"
        while time.monotonic() < deadline:
            if not self.component.alive():
                raise ComponentError(self.component.death_report())
            pending = []
            for version in VISIBILITY_VERSIONS:
                status = registration.read_api_service(f"{version}.{VISIBILITY_GROUP}").status
                available = [c for c in (status.conditions if status else None) or [] if c.type == "Available"]
                if not available or available[0].status != "True":
                    pending.append(version)
                    message = available[0].message if available else message
            if not pending:
                return
            time.sleep(0.5)
        raise ComponentError(f"Kueue's visibility API not Available after {timeout:.0f}s: {message}")
