"""Offline smoke test of the Go-built Pulumi toolchain (see tools/pulumi/README.md).

Runs a Python Automation API *inline* program with the CLI and the Kubernetes
provider from tools/bin/ against a throw-away local control plane
(``gpugov.sandbox.ControlPlane``): ``up`` creates a ConfigMap, a second ``up``
must change nothing, ``destroy`` must remove it. Everything (PULUMI_HOME, the
file:// state backend) lives in a temporary directory; no network is needed.

Usage (repo root; needs PyPI ``pulumi`` and ``pulumi-kubernetes``, see README)::

    tools/build k8s pulumi pulumi-k8s
    python tools/pulumi/smoke.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "tools" / "bin"
STACK, PROJECT, NAME, NAMESPACE = "smoke", "gpugov-pulumi-smoke", "gpugov-pulumi-smoke", "default"


def offline_env(tmp: Path) -> dict[str, str]:
    """The environment the CLI needs to run with local state and no network."""
    return {
        "PULUMI_HOME": str(tmp / ".pulumi"),
        "PULUMI_BACKEND_URL": f"file://{tmp / 'state'}",
        "PULUMI_CONFIG_PASSPHRASE": "test",
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        # pulumi and pulumi-resource-kubernetes are found on PATH.
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def main() -> int:
    for binary in ("pulumi", "pulumi-resource-kubernetes"):
        if not os.access(BIN / binary, os.X_OK):
            sys.exit(f"{BIN / binary} missing: run tools/build pulumi pulumi-k8s")
    sys.path.insert(0, str(ROOT))
    import pulumi  # imported late: the checks above give a clearer error
    import pulumi_kubernetes as k8s
    from kubernetes import client
    from pulumi import automation as auto

    from gpugov.sandbox import ControlPlane

    with tempfile.TemporaryDirectory(prefix="gpugov-pulumi-smoke-") as tmp_name, ControlPlane(crd_dirs=[]) as cp:
        tmp = Path(tmp_name)
        (tmp / "state").mkdir()
        os.environ.update(offline_env(tmp))  # the Automation API runs `pulumi` with os.environ
        kubeconfig = cp.kubeconfig.read_text()
        data = {"owner": "gpugov"}

        def program() -> None:
            provider = k8s.Provider("local", kubeconfig=pulumi.Output.secret(kubeconfig), enable_server_side_apply=True)
            cm = k8s.core.v1.ConfigMap(
                "smoke",
                metadata={
                    "name": NAME,
                    "namespace": NAMESPACE,
                    # The provider deletes with propagationPolicy=Foreground by default; that
                    # sets a foregroundDeletion finalizer which only the garbage collector
                    # (kube-controller-manager) removes, and the test control plane runs none,
                    # so `destroy` would wait forever. Background deletes at once.
                    "annotations": {"pulumi.com/deletionPropagationPolicy": "background"},
                },
                data=data,
                opts=pulumi.ResourceOptions(provider=provider),
            )
            pulumi.export("uid", cm.metadata.uid)

        stack = auto.create_or_select_stack(
            STACK,
            project_name=PROJECT,
            program=program,
            opts=auto.LocalWorkspaceOptions(
                work_dir=str(tmp),
                pulumi_home=str(tmp / ".pulumi"),
                project_settings=auto.ProjectSettings(name=PROJECT, runtime="python"),
            ),
        )
        core = client.CoreV1Api(cp.api_client())
        sdks = ", ".join(f"{d} {metadata.version(d)}" for d in ("pulumi", "pulumi-kubernetes"))
        print(f"pulumi CLI {stack.workspace.pulumi_command.version}; PyPI {sdks}")

        t = time.monotonic()
        up = stack.up(on_output=print)
        print(f"up #1: {up.summary.resource_changes} in {time.monotonic() - t:.1f}s")
        assert up.summary.result == "succeeded", up.summary
        assert up.summary.resource_changes.get("create") == 3, up.summary.resource_changes  # stack, provider, cm
        cm = core.read_namespaced_config_map(NAME, NAMESPACE)
        assert cm.data == data, cm.data
        assert up.outputs["uid"].value == cm.metadata.uid
        managers = {m.manager for m in cm.metadata.managed_fields or []}
        assert any(m.startswith("pulumi") for m in managers), managers  # server-side apply by the provider
        print("ConfigMap created by", managers)

        t = time.monotonic()
        up = stack.up(on_output=print)
        print(f"up #2: {up.summary.resource_changes} in {time.monotonic() - t:.1f}s")
        assert set(up.summary.resource_changes) == {"same"}, up.summary.resource_changes

        t = time.monotonic()
        down = stack.destroy(on_output=print)
        print(f"destroy: {down.summary.resource_changes} in {time.monotonic() - t:.1f}s")
        assert down.summary.result == "succeeded", down.summary
        assert down.summary.resource_changes.get("delete") == 3, down.summary.resource_changes
        deadline = time.monotonic() + 30
        while NAME in {c.metadata.name for c in core.list_namespaced_config_map(NAMESPACE).items}:
            assert time.monotonic() < deadline, "ConfigMap still present after destroy"
            time.sleep(0.5)
        stack.workspace.remove_stack(STACK)
    print("pulumi smoke test: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
