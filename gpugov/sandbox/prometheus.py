"""A real Prometheus for the living sandbox, scraping a DCGM-shaped exporter of gpugov's own.

The exporter stands in for NVIDIA's dcgm-exporter (the GPU Operator's DaemonSet, one per GPU node): for
every simulated node it serves the node's GPUs at ``/nodes/<node>/metrics`` with the fields and labels the
real exporter carries (``gpu``, ``UUID``, ``pci_bus_id``, ``device``, ``modelName``, ``Hostname``, and for a
GPU a pod holds ``pod``, ``namespace``, ``container``; MIG instances add ``GPU_I_PROFILE`` and ``GPU_I_ID``
and report no ``DCGM_FI_DEV_GPU_UTIL``, as on real MIG). Which pod holds which GPU follows the running pods
(their ``nvidia.com/gpu`` and ``nvidia.com/mig-*`` limits, in order of creation); what each pod does on it
is its declared activity profile, in annotations:

- ``sandbox.gpugov.io/gpu-activity``: ``PERCENT[@DURATION],...``: e.g. ``90@30s,2`` is 90 % busy for the
  first 30 s after the pod started, then 2 % (the last phase lasts); none: 0 %, an allocated idle card.
- ``sandbox.gpugov.io/gpu-memory``: framebuffer used per device, in MiB (``30000``) or of the card
  (``40%``); none: 0.
- ``sandbox.gpugov.io/host-io``: PCIe bytes per second from the host (``DCGM_FI_PROF_PCIE_RX_BYTES``,
  data loading); none: 0.
- ``sandbox.gpugov.io/dcgm-lost-after``: the exporter loses the pod's series that long after it started
  (the pod runs on): the partial data no reader may call idle.

Prometheus scrapes each node as the GPU Operator's ServiceMonitor does (``honor_labels: false``, the
exporter pod's own ``namespace``/``pod`` as target labels), so the workload's pod arrives as
``exported_pod``/``exported_namespace`` exactly as on a real cluster.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gpugov.sandbox.components import Component

PROMETHEUS_BINARY = "prometheus"
PROMETHEUS_TOOL = "prometheus"  # tools/build prometheus
ACTIVITY_ANNOTATION = "sandbox.gpugov.io/gpu-activity"
MEMORY_ANNOTATION = "sandbox.gpugov.io/gpu-memory"
HOST_IO_ANNOTATION = "sandbox.gpugov.io/host-io"
LOST_ANNOTATION = "sandbox.gpugov.io/dcgm-lost-after"
EXPORTER_NAMESPACE = "gpu-operator"  # where the GPU Operator runs nvidia-dcgm-exporter
DRIVER_VERSION = "580.95.05"
_DURATION = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}

# The fields served, in dcgm-exporter's words (etc/default-counters.csv): name -> (type, help).
FIELDS = {
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)."),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gauge", "Ratio of time the graphics engine is active."),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("counter", "The rate of data received over the PCIe bus, including both "
                                              "protocol headers and data payloads, in bytes per second."),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB)."),
    "DCGM_FI_DEV_FB_FREE": ("gauge", "Framebuffer memory free (in MiB)."),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W)."),
}
Pods = Callable[[], list[dict[str, Any]]]  # the pods as the Kubernetes API serves them
Nodes = Callable[[], list[dict[str, Any]]]


class ActivityError(ValueError):
    """A pod's activity annotation cannot be read."""


def duration(text: str) -> float:
    """A Go-style duration with one unit (``90s``, ``2m``, ``1.5h``) in seconds."""
    match = _DURATION.match(text.strip())
    if not match:
        raise ActivityError(f"{text!r} is not a duration such as 30s, 2m or 1h")
    return float(match.group(1)) * _UNITS[match.group(2)]


def activity(profile: str | None, elapsed: float) -> float:
    """The percent busy ``elapsed`` seconds after the pod started, by its profile (``90@30s,2``)."""
    if not profile:
        return 0.0
    at = 0.0
    percent = 0.0
    for phase in profile.split(","):
        value, _, length = phase.strip().partition("@")
        try:
            percent = float(value)
        except ValueError:
            raise ActivityError(f"{phase!r} is not PERCENT[@DURATION]") from None
        if not 0 <= percent <= 100:
            raise ActivityError(f"{phase!r}: the percent must be within 0..100")
        if not length:
            return percent
        at += duration(length)
        if elapsed < at:
            return percent
    return percent


def memory_used(text: str | None, card_mib: int) -> int:
    """Framebuffer MiB a pod uses per device: ``30000`` (MiB) or ``40%`` of the card."""
    if not text:
        return 0
    text = text.strip()
    value = card_mib * float(text[:-1]) / 100 if text.endswith("%") else float(text)
    return max(0, min(card_mib, int(value)))


@dataclass(frozen=True)
class Device:
    """One GPU or MIG instance of a node and what it reports."""

    node: str
    gpu: int
    model: str
    card_mib: int
    profile: str = ""  # MIG profile, e.g. 1g.10gb; "" for a whole GPU
    instance: int = 0  # GPU_I_ID of a MIG instance
    namespace: str = ""
    pod: str = ""
    container: str = ""
    percent: float = 0.0
    used_mib: int = 0
    host_io: float = 0.0

    def labels(self) -> dict[str, str]:
        card = uuid.uuid5(uuid.NAMESPACE_URL, f"gpugov-sandbox/{self.node}/{self.gpu}")
        labels = {"gpu": str(self.gpu), "UUID": f"GPU-{card}", "pci_bus_id": f"00000000:{self.gpu + 0x18:02X}:00.0",
                  "device": f"nvidia{self.gpu}", "modelName": self.model, "Hostname": self.node,
                  "DCGM_FI_DRIVER_VERSION": DRIVER_VERSION}
        if self.profile:
            labels |= {"GPU_I_PROFILE": self.profile, "GPU_I_ID": str(self.instance)}
        if self.pod:
            labels |= {"container": self.container, "namespace": self.namespace, "pod": self.pod}
        return labels

    def values(self) -> dict[str, float]:
        ratio = self.percent / 100
        out = {"DCGM_FI_PROF_GR_ENGINE_ACTIVE": ratio, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ratio * 0.6,
               "DCGM_FI_PROF_PCIE_RX_BYTES": self.host_io, "DCGM_FI_DEV_FB_USED": float(self.used_mib),
               "DCGM_FI_DEV_FB_FREE": float(self.card_mib - self.used_mib)}
        if not self.profile:  # DEV_*_UTIL and power are not produced for MIG instances
            out["DCGM_FI_DEV_GPU_UTIL"] = float(round(self.percent))
            out["DCGM_FI_DEV_POWER_USAGE"] = round(70 + 6.3 * self.percent, 3)
        return out


def _limits(pod: dict[str, Any]) -> list[tuple[str, str, int]]:
    """(container, resource, count) of every NVIDIA device a pod's containers hold."""
    out = []
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        for resource, amount in {**(resources.get("requests") or {}), **(resources.get("limits") or {})}.items():
            if resource == "nvidia.com/gpu" or resource.startswith("nvidia.com/mig-"):
                out.append((container.get("name", ""), resource, int(str(amount))))
    return out


def _started(pod: dict[str, Any]) -> datetime | None:
    stamp = (pod.get("status") or {}).get("startTime") or (pod.get("metadata") or {}).get("creationTimestamp")
    if not stamp:
        return None
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))


def devices(node: dict[str, Any], pods: Sequence[dict[str, Any]], now: datetime) -> list[Device]:
    """The devices of ``node`` at ``now``: its GPUs (allocatable ``nvidia.com/gpu``) and MIG instances
    (``nvidia.com/mig-*``), given to its running pods in order of creation (then name), each reporting
    its pod's declared activity; a pod whose series the exporter lost reports nothing."""
    name = node["metadata"]["name"]
    labels = node["metadata"].get("labels") or {}
    model = labels.get("nvidia.com/gpu.product", "NVIDIA GPU").replace("-", " ")
    card_mib = int(labels.get("nvidia.com/gpu.memory", "81559"))
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    free: dict[str, list[Device]] = {}
    whole = int(str(allocatable.get("nvidia.com/gpu", "0")))
    free["nvidia.com/gpu"] = [Device(name, i, model, card_mib) for i in range(whole)]
    # MIG instances spread over the node's cards (GFD's nvidia.com/gpu.count), instance ids 1.. per card
    mig = {r: int(str(a)) for r, a in sorted(allocatable.items()) if r.startswith("nvidia.com/mig-")}
    cards = max(1, int(labels.get("nvidia.com/gpu.count", "0")) - whole) if mig else 1
    per_card = math.ceil(sum(mig.values()) / cards) if mig else 1
    k = 0
    for resource, amount in mig.items():
        profile = resource.removeprefix("nvidia.com/mig-")
        share = _mig_share(profile, card_mib)
        free[resource] = []
        for _ in range(amount):
            free[resource].append(Device(name, whole + k // per_card, model, share, profile, 1 + k % per_card))
            k += 1
    running = [p for p in pods if (p.get("spec") or {}).get("nodeName") == name
               and (p.get("status") or {}).get("phase") == "Running"]
    running.sort(key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"].get("namespace", ""),
                                p["metadata"]["name"]))
    held: list[Device] = []
    for pod in running:
        meta = pod["metadata"]
        notes = meta.get("annotations") or {}
        started = _started(pod) or now
        elapsed = max(0.0, (now - started).total_seconds())
        gone = LOST_ANNOTATION in notes and elapsed >= duration(notes[LOST_ANNOTATION])
        for container, resource, count in _limits(pod):
            pool = free.get(resource, [])
            for _ in range(min(count, len(pool))):
                device = pool.pop(0)
                if gone:  # the device is held, but the exporter no longer reports it
                    continue
                held.append(Device(
                    device.node, device.gpu, device.model, device.card_mib, device.profile, device.instance,
                    meta.get("namespace", ""), meta["name"], container,
                    activity(notes.get(ACTIVITY_ANNOTATION), elapsed),
                    memory_used(notes.get(MEMORY_ANNOTATION), device.card_mib),
                    float(notes.get(HOST_IO_ANNOTATION) or 0)))
    idle = [d for pool in free.values() for d in pool]
    return sorted(held + idle, key=lambda d: (d.gpu, d.instance))


def _mig_share(profile: str, card_mib: int) -> int:
    """A MIG instance's framebuffer in MiB from its profile name (``3g.40gb``: 40 GiB), at most the card."""
    match = re.search(r"\.([0-9]+)gb", profile)
    return min(card_mib, int(match.group(1)) * 1024) if match else card_mib


def exposition(found: Sequence[Device]) -> str:
    """The Prometheus text format of ``found``, field by field as dcgm-exporter writes it."""
    lines = []
    for field, (kind, text) in FIELDS.items():
        samples = [(d.labels(), d.values()[field]) for d in found if field in d.values()]
        if not samples:
            continue
        lines += [f"# HELP {field} {text}", f"# TYPE {field} {kind}"]
        for labels, value in samples:
            pairs = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
            lines.append(f"{field}{{{pairs}}} {_number(value)}")
    return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isfinite(value) and value == int(value):
        return str(int(value))
    return repr(value)


class DcgmExporter:
    """The exporter's HTTP server on 127.0.0.1: ``/nodes/<node>/metrics`` per node, ``/healthz``."""

    def __init__(self, nodes: Nodes, pods: Pods, clock: Callable[[], datetime] | None = None) -> None:
        self._nodes, self._pods = nodes, pods
        self._clock = clock or (lambda: datetime.now(UTC))
        self._cache: tuple[float, list[dict[str, Any]], list[dict[str, Any]]] | None = None
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def state(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Nodes and pods, read at most every half second (every node is scraped each interval)."""
        with self._lock:
            if self._cache is None or time.monotonic() - self._cache[0] > 0.5:
                self._cache = (time.monotonic(), self._nodes(), self._pods())
            return self._cache[1], self._cache[2]

    def metrics(self, node_name: str) -> str | None:
        nodes, pods = self.state()
        node = next((n for n in nodes if n["metadata"]["name"] == node_name), None)
        return None if node is None else exposition(devices(node, pods, self._clock()))

    def start(self) -> str:
        """Serve on a free loopback port; the base URL."""
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = self.path.strip("/").split("/")
                body: str | None = "ok\n" if self.path == "/healthz" else None
                if len(parts) == 3 and parts[0] == "nodes" and parts[2] == "metrics":
                    body = exporter.metrics(parts[1])
                data = (body or "not found\n").encode()
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None


def scrape_config(exporter_url: str, node_names: Sequence[str], interval: str = "1s",
                  rule_files: Sequence[Path] = ()) -> str:
    """prometheus.yml: one target per node at the exporter, labelled like the GPU Operator's ServiceMonitor
    (the exporter pod's namespace and name as target labels, honor_labels false)."""
    import yaml

    host = exporter_url.removeprefix("http://")
    targets = [{"targets": [host], "labels": {"__metrics_path__": f"/nodes/{name}/metrics",
                                               "namespace": EXPORTER_NAMESPACE,
                                               "pod": f"nvidia-dcgm-exporter-{name}", "node": name}}
               for name in node_names]
    config = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval, "scrape_timeout": interval},
        "scrape_configs": [{"job_name": "nvidia-dcgm-exporter", "honor_labels": False,
                            "static_configs": targets}],
    }
    if rule_files:
        config["rule_files"] = [str(p) for p in rule_files]
    return yaml.safe_dump(config, sort_keys=False)


def prometheus(workdir: Path, binary: Path, port: int, config: str, version: str = "") -> Component:
    """The Prometheus server as a sandbox component (its TSDB, config and log under ``workdir``)."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "prometheus.yml").write_text(config)
    return Component(
        name="prometheus",
        binary=binary,
        args=[f"--config.file={workdir / 'prometheus.yml'}", f"--storage.tsdb.path={workdir / 'data'}",
              f"--web.listen-address=127.0.0.1:{port}", "--web.enable-lifecycle", "--log.level=warn",
              "--storage.tsdb.retention.time=1d"],
        log_path=workdir / "prometheus.log",
        health_url=f"http://127.0.0.1:{port}/-/ready",
        version=version,
        cwd=workdir,
    )


def prometheus_binary(build: bool = True) -> Path:
    """The Prometheus server: $GPUGOV_PROMETHEUS_BIN, else ``tools/build prometheus`` (when Go is installed)
    and its ``tools/bin/prometheus`` link."""
    from gpugov.sandbox import tools

    override = os.environ.get(tools.binary_env(PROMETHEUS_BINARY))
    if override:
        if not os.access(override, os.X_OK):
            raise tools.ToolUnavailableError(f"{tools.binary_env(PROMETHEUS_BINARY)}={override} is not executable")
        return Path(override)
    root = tools.repo_root()
    if build and shutil.which("go"):
        tools._run_build(root, PROMETHEUS_TOOL)
    link = root / "tools" / "bin" / PROMETHEUS_BINARY
    if link.exists() and os.access(link, os.X_OK):
        return link
    raise tools.ToolUnavailableError(f"{PROMETHEUS_BINARY} is not built: run tools/build {PROMETHEUS_TOOL} "
                                     f"(or set {tools.binary_env(PROMETHEUS_BINARY)})")


@contextlib.contextmanager
def monitoring(workdir: Path, binary: Path, nodes: Nodes, pods: Pods, interval: str = "1s",
               rule_files: Sequence[Path] = (), timeout: float = 60.0) -> Iterator[str]:
    """The exporter and a Prometheus scraping it, until the block ends; yields Prometheus' base URL."""
    from gpugov.sandbox.processes import free_ports

    exporter = DcgmExporter(nodes, pods)
    url = exporter.start()
    server: Component | None = None
    try:
        [port] = free_ports(1)
        names = [n["metadata"]["name"] for n in nodes()]
        server = prometheus(workdir, binary, port, scrape_config(url, names, interval, rule_files))
        server.start()
        server.wait_healthy(timeout)
        yield f"http://127.0.0.1:{port}"
    finally:
        if server is not None:
            server.stop()
        exporter.stop()


def kube_source(api: Any) -> tuple[Nodes, Pods]:
    """Nodes and pods of a sandbox's API server (a kubernetes ApiClient), as the API serves them."""
    from kubernetes import client

    core = client.CoreV1Api(api)

    def nodes() -> list[dict[str, Any]]:
        return [api.sanitize_for_serialization(n) for n in core.list_node().items]

    def pods() -> list[dict[str, Any]]:
        return [api.sanitize_for_serialization(p) for p in core.list_pod_for_all_namespaces().items]

    return nodes, pods
