"""`gpugov agent`: NVML reading (against tests/helpers/fake_nvml.py), snapshot JSON, metrics, HTTP server, CLI."""

from __future__ import annotations

import argparse
import ctypes
import inspect
import json
import socket
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from gpugov.agent import cli as agent_cli
from gpugov.agent.nvml import NvmlReader, NvmlUnavailable, _flag, import_nvml, mig_memory_gb, mig_profile_name
from gpugov.agent.server import SnapshotCache, make_server, parse_listen
from gpugov.agent.snapshot import KIND, SCHEMA_VERSION, Snapshot
from tests.helpers import fake_nvml
from tests.helpers.fake_nvml import (
    A100_80GB_PROFILES,
    GIB,
    MIB,
    FakeMig,
    FakeNVML,
    a100_mig,
    a100_profile,
    h100,
    l4,
    mig_pending,
)

prometheus_parser = pytest.importorskip("prometheus_client.parser")
from gpugov.agent.metrics import CONTENT_TYPE, render  # noqa: E402

WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def read(fake: FakeNVML, node: str = "gpu-node-1") -> Snapshot:
    with NvmlReader(fake, clock=lambda: WHEN) as reader:
        return reader.snapshot(node)


@pytest.fixture
def fake() -> FakeNVML:
    return FakeNVML(gpus=[h100(), a100_mig(), mig_pending(), l4()])


# --- the fake follows pynvml -----------------------------------------------------------------------


def test_fake_functions_match_pynvml_names_and_parameters():
    real = pytest.importorskip("pynvml")
    for name in fake_nvml.public_functions():
        assert hasattr(real, name), f"pynvml has no {name}"
        ours = list(inspect.signature(getattr(FakeNVML(), name)).parameters)
        theirs = list(inspect.signature(getattr(real, name)).parameters)
        if theirs == ["args", "kwargs"]:  # @convertStrBytes wraps with functools.wraps
            theirs = list(inspect.signature(inspect.unwrap(getattr(real, name))).parameters)
        assert ours == theirs, name


def test_fake_raises_pynvml_exception_classes():
    real = pytest.importorskip("pynvml")
    fake = FakeNVML()
    assert fake.NVMLError is real.NVMLError
    with pytest.raises(real.NVMLError_Uninitialized):
        fake.nvmlDeviceGetCount()
    fake.nvmlInit()
    with pytest.raises(real.NVMLError_NotSupported):
        fake.nvmlDeviceGetUtilizationRates(fake.nvmlDeviceGetHandleByIndex(1))
    with pytest.raises(real.NVMLError_NotFound):
        fake.nvmlDeviceGetMigDeviceHandleByIndex(fake.nvmlDeviceGetHandleByIndex(1), 5)
    with pytest.raises(real.NVMLError_InvalidArgument):
        fake.nvmlDeviceGetMigDeviceHandleByIndex(fake.nvmlDeviceGetHandleByIndex(1), 7)
    assert isinstance(fake.nvmlDeviceIsMigDeviceHandle(fake.nvmlDeviceGetHandleByIndex(0)), ctypes.c_uint)


def test_fake_local_structs_have_pynvml_fields():
    real = pytest.importorskip("pynvml")
    for name, local in fake_nvml.LOCAL_STRUCTS.items():
        assert [f[0] for f in local._fields_] == [f[0] for f in getattr(real, name)._fields_], name


def test_mig_handle_flag_is_a_c_uint():
    assert _flag(ctypes.c_uint(0)) is False
    assert _flag(ctypes.c_uint(1)) is True
    assert _flag(1) is True


# --- profile names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("total_mib", "mig_mib", "gb"),
    [
        (81920, 9728, 10),  # A100-80GB 1g.10gb
        (81920, 19968, 20),  # A100-80GB 2g.20gb / 1g.20gb
        (81920, 40192, 40),  # A100-80GB 3g.40gb / 4g.40gb
        (81920, 80384, 80),  # A100-80GB 7g.80gb
        (40960, 4864, 5),  # A100-40GB 1g.5gb
        (40960, 9984, 10),  # A100-40GB 2g.10gb
        (40960, 20096, 20),  # A100-40GB 3g.20gb
        (81559, 9984, 10),  # H100 80GB HBM3 1g.10gb
        (143771, 16384, 18),  # H200 1g.18gb: 141/8 = 17.6
        (143771, 69632, 71),  # H200 3g.71gb: 141*4/8 = 70.5 rounds half away from zero, as Go does
        (143771, 143360, 141),  # H200 7g.141gb
    ],
)
def test_mig_memory_gb_matches_go_nvlib(total_mib, mig_mib, gb):
    assert mig_memory_gb(total_mib * MIB, mig_mib) == gb


def test_profile_name_spells_compute_instances_and_attributes():
    assert mig_profile_name(3, 3, 40) == "3g.40gb"
    assert mig_profile_name(3, 1, 40) == "1c.3g.40gb"
    assert mig_profile_name(1, 1, 10, "+me") == "1g.10gb+me"
    assert mig_profile_name(1, 1, 24, "-me") == "1g.24gb-me"


# --- reading --------------------------------------------------------------------------------------


def test_plain_h100(fake):
    gpu = read(fake).gpus[0]
    assert (gpu.index, gpu.uuid, gpu.name) == (0, "GPU-11111111-1111-1111-1111-111111111111", "NVIDIA H100 80GB HBM3")
    assert gpu.pci_device_id == "0x233010DE"
    assert gpu.pci_bus_id == "00000000:18:00.0"
    assert (gpu.memory_total_bytes, gpu.memory_used_bytes) == (81559 * MIB, 30 * GIB + 512 * MIB)
    assert (gpu.mig_enabled, gpu.mig_pending, gpu.mig_pending_change) == (False, False, False)
    assert gpu.utilization is not None and (gpu.utilization.gpu_ratio, gpu.utilization.memory_ratio) == (0.87, 0.41)
    assert [(p.pid, p.used_memory_bytes) for p in gpu.processes or []] == [(4242, 20 * GIB), (4343, 10 * GIB)]
    assert gpu.mig_devices == [] and gpu.unavailable == {}


def test_a100_in_mig_mode(fake):
    gpu = read(fake).gpus[1]
    assert gpu.mig_enabled is True and gpu.mig_pending is True
    assert gpu.utilization is None and gpu.unavailable == {"utilization": "NotSupported"}
    assert [m.profile for m in gpu.mig_devices] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert [m.slot for m in gpu.mig_devices] == [0, 1, 2, 3]  # slots 4-6 are empty: NotFound, skipped
    assert {m.profile_source for m in gpu.mig_devices} == {"gpu-instance-profile"}
    first = gpu.mig_devices[0]
    assert first.uuid == "MIG-aaaaaaaa-0000-0000-0000-000000000001"
    assert (first.gpu_instance_id, first.compute_instance_id) == (2, 0)
    assert (first.memory_total_bytes, first.memory_used_bytes) == (40192 * MIB, 8 * GIB)
    assert first.utilization is None and first.unavailable == {"utilization": "NotSupported"}
    assert [p.pid for p in first.processes or []] == [5151]
    assert [p.pid for p in gpu.processes or []] == [5151, 5252]  # the parent sees every instance's processes


def test_mig_pending_change(fake):
    gpu = read(fake).gpus[2]
    assert (gpu.mig_enabled, gpu.mig_pending, gpu.mig_pending_change) == (False, True, True)
    assert gpu.mig_devices == [] and gpu.processes == []
    assert gpu.utilization is not None and gpu.utilization.gpu_ratio == 0.0


def test_gpu_without_mig(fake):
    gpu = read(fake).gpus[3]
    assert gpu.mig_enabled is None and gpu.mig_pending is None and not gpu.mig_pending_change
    assert gpu.unavailable == {"mig_mode": "NotSupported"}


def test_media_extension_and_compute_instance_profiles():
    gpu = a100_mig()
    gpu.migs = {
        0: FakeMig(a100_profile("1g.10gb+me"), "MIG-me", 7),
        2: FakeMig(a100_profile("3g.40gb"), "MIG-ci", 1, compute_slices=1),
        5: FakeMig(a100_profile("1g.20gb"), "MIG-2m", 3),
    }
    migs = read(FakeNVML(gpus=[gpu])).gpus[0].mig_devices
    assert [(m.slot, m.profile) for m in migs] == [(0, "1g.10gb+me"), (2, "1c.3g.40gb"), (5, "1g.20gb")]


def test_profile_falls_back_to_attributes_without_gpu_instance_access():
    gpu = a100_mig()
    gpu.migs[1] = FakeMig(a100_profile("1g.10gb+me"), "MIG-me", 7)
    fake = FakeNVML(gpus=[gpu], failures={"nvmlDeviceGetGpuInstanceById": "NoPermission"})
    migs = read(fake).gpus[0].mig_devices
    assert [m.profile for m in migs] == ["3g.40gb", "1g.10gb", "1g.10gb", "1g.10gb"]  # +me cannot be seen
    assert {m.profile_source for m in migs} == {"attributes"}
    assert migs[0].unavailable["gpu_instance"] == "NoPermission"


def test_profile_enum_lookup_skips_profiles_the_product_lacks():
    gpu = a100_mig()
    gpu.gi_profiles = [p for p in A100_80GB_PROFILES if p.slices != 4]  # 4g answers NotSupported
    migs = read(FakeNVML(gpus=[gpu])).gpus[0].mig_devices
    assert [m.profile for m in migs] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert "gpu_instance_profiles" not in read(FakeNVML(gpus=[gpu])).gpus[0].unavailable


def test_mig_slot_errors_other_than_empty_are_recorded():
    fake = FakeNVML(gpus=[a100_mig()], failures={"nvmlDeviceGetMigDeviceHandleByIndex": "NoPermission"})
    gpu = read(fake).gpus[0]
    assert gpu.mig_devices == []
    assert gpu.unavailable["mig_devices[0]"] == "NoPermission" and len(gpu.unavailable) == 8


def test_per_gpu_failures_do_not_stop_the_snapshot():
    fake = FakeNVML(
        gpus=[h100()],
        failures={"nvmlDeviceGetComputeRunningProcesses": "NoPermission", "nvmlDeviceGetPciInfo": "GpuIsLost"},
    )
    gpu = read(fake).gpus[0]
    assert gpu.processes is None and gpu.pci_device_id is None
    assert gpu.unavailable == {"processes": "NoPermission", "pci": "GpuIsLost"}
    lost = read(FakeNVML(gpus=[h100()], failures={"nvmlDeviceGetHandleByIndex": "GpuIsLost"})).gpus[0]
    assert lost.uuid is None and lost.unavailable == {"handle": "GpuIsLost"}


def test_a_missing_function_reads_as_function_not_found():
    class Old(FakeNVML):
        nvmlDeviceGetMigMode = None  # nvidia-ml-py from before MIG

    gpu = read(Old(gpus=[h100()])).gpus[0]
    assert gpu.unavailable == {"mig_mode": "FunctionNotFound"} and gpu.mig_enabled is None


@pytest.mark.parametrize(
    ("error", "words"),
    [
        ("LibraryNotFound", "libnvidia-ml.so.1 not found"),
        ("DriverNotLoaded", "driver is not loaded"),
        ("NoPermission", "no permission"),
        ("Unknown", "(Unknown)"),
    ],
)
def test_init_failures_raise_nvml_unavailable(error, words):
    fake = FakeNVML(init_error=error)
    with pytest.raises(NvmlUnavailable, match="NVML initialisation failed") as caught:
        NvmlReader(fake).open()
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_missing_bindings_raise_nvml_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # what `import pynvml` sees without nvidia-ml-py
    with pytest.raises(NvmlUnavailable, match="nvidia-ml-py is not installed"):
        import_nvml()


def test_device_count_failure_is_nvml_unavailable():
    fake = FakeNVML(failures={"nvmlDeviceGetCount": "Unknown"})
    with pytest.raises(NvmlUnavailable, match="cannot count"), NvmlReader(fake) as reader:
        reader.snapshot("n")
    assert fake.initialised == 0  # nvmlShutdown ran on the way out


# --- snapshot JSON ----------------------------------------------------------------------------------


def test_snapshot_json(fake):
    data = json.loads(read(fake, "node-7").to_json())
    assert data["kind"] == KIND and data["schema_version"] == SCHEMA_VERSION == 1
    assert data["node"] == "node-7" and data["timestamp"] == "2026-01-02T03:04:05Z"
    assert data["driver_version"] == "580.82.07"
    assert [g["index"] for g in data["gpus"]] == [0, 1, 2, 3]
    mig = data["gpus"][1]
    assert mig["mig_enabled"] is True and mig["utilization"] is None
    assert mig["unavailable"] == {"utilization": "NotSupported"}
    assert [d["profile"] for d in mig["mig_devices"]] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert mig["mig_devices"][0]["processes"] == [{"pid": 5151, "used_memory_bytes": 8 * GIB}]
    assert data["gpus"][2]["mig_pending_change"] is True
    assert data["gpus"][0]["utilization"] == {"gpu_ratio": 0.87, "memory_ratio": 0.41}


# --- metrics ----------------------------------------------------------------------------------------


def samples(text: str) -> dict[str, list]:
    found: dict[str, list] = {}
    for family in prometheus_parser.text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append(sample)
    return found


def test_metrics_text_parses_back(fake):
    got = samples(render(read(fake)).decode())
    info = {s.labels["uuid"]: s.labels for s in got["gpugov_gpu_info"]}
    assert info["GPU-22222222-2222-2222-2222-222222222222"] == {
        "node": "gpu-node-1",
        "gpu": "1",
        "uuid": "GPU-22222222-2222-2222-2222-222222222222",
        "model": "NVIDIA A100-SXM4-80GB",
        "pci_device_id": "0x20B210DE",
        "pci_bus_id": "00000000:3B:00.0",
    }
    used = {s.labels["gpu"]: s.value for s in got["gpugov_gpu_memory_used_bytes"]}
    assert used["0"] == 30 * GIB + 512 * MIB
    util = {s.labels["gpu"]: s.value for s in got["gpugov_gpu_utilization_ratio"]}
    assert util == {"0": 0.87, "2": 0.0, "3": 0.05}  # the MIG GPU has no series, not a fake 0
    assert {s.labels["gpu"]: s.value for s in got["gpugov_gpu_processes"]} == {"0": 2, "1": 2, "2": 0, "3": 0}
    on = {s.labels["gpu"]: s.value for s in got["gpugov_gpu_mig_enabled"]}
    pending = {s.labels["gpu"]: s.value for s in got["gpugov_gpu_mig_pending_enabled"]}
    assert [g for g in on if on[g] != pending[g]] == ["2"]  # the alert: MIG mode waits for a reset
    migs = got["gpugov_mig_device_info"]
    assert sorted(s.labels["profile"] for s in migs) == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    assert {s.labels["parent_uuid"] for s in migs} == {"GPU-22222222-2222-2222-2222-222222222222"}
    assert {s.labels["gpu_instance_id"] for s in migs} == {"2", "3", "9", "10"}
    assert sum(s.value for s in got["gpugov_mig_device_processes"]) == 2
    assert got["gpugov_snapshot_timestamp_seconds"][0].value == WHEN.timestamp()
    assert got["gpugov_node_info"][0].labels["driver_version"] == "580.82.07"


def test_metrics_escape_odd_label_values():
    gpu = h100()
    gpu.name = 'NVIDIA "Quoted"\\Name\nX'
    got = samples(render(read(FakeNVML(gpus=[gpu]))).decode())
    assert got["gpugov_gpu_info"][0].labels["model"] == gpu.name


# --- HTTP server ------------------------------------------------------------------------------------


@pytest.fixture
def serve(fake) -> Iterator[tuple[str, FakeNVML, SnapshotCache]]:
    reader = NvmlReader(fake).open()
    cache = SnapshotCache(lambda: reader.snapshot("node-http"), ttl=60)
    server = make_server("127.0.0.1:0", cache)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", fake, cache
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
        reader.close()


def get(url: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_http_metrics(serve):
    base, _, _ = serve
    status, headers, body = get(base + "/metrics")
    assert status == 200 and headers["Content-Type"] == CONTENT_TYPE
    got = samples(body.decode())
    assert {s.labels["node"] for s in got["gpugov_gpu_info"]} == {"node-http"}
    assert len(got["gpugov_mig_device_info"]) == 4


def test_http_snapshot_and_health(serve):
    base, _, _ = serve
    status, headers, body = get(base + "/snapshot.json")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert json.loads(body)["node"] == "node-http"
    assert get(base + "/healthz")[:3:2] == (200, b"ok\n")
    status, headers, body = get(base + "/metrics", "HEAD")
    assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0


def test_http_unknown_path_is_404(serve):
    base, _, _ = serve
    status, _, body = get(base + "/nope")
    assert status == 404 and b"/metrics" in body


def test_http_scrapes_share_one_nvml_read(serve):
    base, fake, _ = serve
    for _ in range(3):
        assert get(base + "/metrics")[0] == 200
    assert get(base + "/snapshot.json")[0] == 200
    assert fake.calls.count("nvmlDeviceGetCount") == 1


def test_http_nvml_failure_is_503_and_unhealthy(serve):
    base, fake, _ = serve
    fake.failures["nvmlDeviceGetCount"] = "GpuIsLost"
    status, _, body = get(base + "/metrics")
    assert status == 503 and b"GpuIsLost" in body
    assert get(base + "/healthz")[0] == 503
    del fake.failures["nvmlDeviceGetCount"]
    assert get(base + "/metrics")[0] == 200 and get(base + "/healthz")[0] == 200


def test_cache_refreshes_after_ttl():
    now = [0.0]
    reads = []
    cache = SnapshotCache(lambda: reads.append(1) or Snapshot("n", WHEN, None, []), ttl=2, clock=lambda: now[0])
    cache.get()
    now[0] = 1.9
    cache.get()
    now[0] = 2.0
    cache.get()
    assert len(reads) == 2


@pytest.mark.parametrize(
    ("listen", "expected"),
    [
        ("0.0.0.0:9402", ("0.0.0.0", 9402)),
        (":9402", ("0.0.0.0", 9402)),
        ("[::]:9402", ("::", 9402)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
    ],
)
def test_parse_listen(listen, expected):
    assert parse_listen(listen) == expected


@pytest.mark.parametrize("listen", ["9402", "host:", "host:http", "host:70000"])
def test_parse_listen_rejects(listen):
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_listen(listen)


# --- CLI --------------------------------------------------------------------------------------------


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gpugov")
    agent_cli.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["agent", *argv])


def test_cli_defaults():
    args = parse()
    assert (args.listen, args.once, args.node, args.func) == ("0.0.0.0:9402", False, None, agent_cli.cmd_agent)


def test_cli_once_prints_snapshot(monkeypatch, capsys):
    fake = FakeNVML()
    monkeypatch.setitem(sys.modules, "pynvml", fake)  # what `import pynvml` returns inside the agent
    assert parse("--once", "--node", "n1").func(parse("--once", "--node", "n1")) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data["node"] == "n1" and len(data["gpus"]) == 3 and err == ""
    assert fake.initialised == 0


def test_cli_node_defaults_to_node_name_env(monkeypatch, capsys):
    monkeypatch.setenv("NODE_NAME", "from-downward-api")
    assert agent_cli.cmd_agent(parse("--once"), nvml=FakeNVML()) == 0
    assert json.loads(capsys.readouterr().out)["node"] == "from-downward-api"


@pytest.mark.parametrize("error", ["LibraryNotFound", "DriverNotLoaded"])
def test_cli_without_driver_exits_3_with_one_line(error, capsys):
    assert agent_cli.cmd_agent(parse("--once"), nvml=FakeNVML(init_error=error)) == 3
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("gpugov agent: NVML initialisation failed")
    assert "Traceback" not in err


def test_cli_without_bindings_exits_3(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert agent_cli.cmd_agent(parse("--once")) == 3
    assert "nvidia-ml-py is not installed" in capsys.readouterr().err


def test_cli_count_failure_exits_3(capsys):
    assert agent_cli.cmd_agent(parse("--once"), nvml=FakeNVML(failures={"nvmlDeviceGetCount": "Unknown"})) == 3
    assert "cannot count the GPUs" in capsys.readouterr().err


def test_bad_listen_is_bad_usage_even_without_a_driver(capsys):
    """A typo in --listen is the caller's mistake (2), not a missing driver (3)."""
    assert agent_cli.cmd_agent(parse("--listen", "nonsense"), nvml=FakeNVML(init_error="LibraryNotFound")) == 2
    assert "expected HOST:PORT" in capsys.readouterr().err


def test_cli_serve_reports_bad_listen_and_busy_port(capsys):
    fake = FakeNVML()
    assert agent_cli.cmd_agent(parse("--listen", "nonsense"), nvml=fake) == 2
    assert "HOST:PORT" in capsys.readouterr().err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert agent_cli.cmd_agent(parse("--listen", f"127.0.0.1:{port}"), nvml=fake) == 2
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err
    assert fake.initialised == 0
