"""The CLI starts at once: building gpugov's parser (every command's options, what `gpugov --help`
and the completion scripts need) imports no command's heavy modules; each command imports
them when it runs (issue #29)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers.repos import REPO

# What the parser must not import: the cluster client, YAML and schema libraries, and the modules
# of the commands themselves (the compiler, the simulators, the readers of a cluster).
HEAVY = (
    "kubernetes", "urllib3", "requests", "yaml", "jsonschema", "jsonschema_rs", "shtab", "pynvml",
    "prometheus_client", "pulumi",
    "gpugov.app.desired", "gpugov.app.revision", "gpugov.app.pipeline", "gpugov.declarations",
    "gpugov.compile", "gpugov.compile.admission", "gpugov.policy", "gpugov.manifests", "gpugov.plan",
    "gpugov.drift", "gpugov.queueing", "gpugov.whatif", "gpugov.capacity", "gpugov.usage", "gpugov.doctor",
    "gpugov.cluster", "gpugov.sources", "gpugov.adopt", "gpugov.rules", "gpugov.catalog", "gpugov.agent.nvml",
    "gpugov.agent.server", "gpugov.sandbox.cluster", "gpugov.sandbox.controlplane",
)


def loaded_after(code: str) -> set[str]:
    """The modules (and their packages' submodules) in sys.modules after `code`, in a fresh interpreter."""
    program = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True, cwd=REPO)
    return set(json.loads(done.stdout.splitlines()[-1]))


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(h for h in HEAVY if any(m == h or m.startswith(h + ".") for m in modules))


def test_building_the_parser_imports_no_heavy_module() -> None:
    modules = loaded_after("from gpugov.cli import build_parser\nbuild_parser()")
    assert "gpugov.cli.whatif" in modules and "gpugov.sandbox.cli" in modules  # every command registered
    assert heavy_in(modules) == []


def test_help_reads_only_its_own_commands_choices() -> None:
    top = loaded_after("from gpugov.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n")
    assert heavy_in(top) == []
    queue = loaded_after("from gpugov.cli import main\ntry:\n    main(['queue', '--help'])\nexcept SystemExit:\n"
                         "    pass\n")
    # queue's own help lists its --format and --backend choices, read from where they are defined...
    assert {"gpugov.queueing", "gpugov.compile"} <= set(heavy_in(queue))
    # ...and nothing of the other commands, nor the cluster client
    assert {"kubernetes", "urllib3", "gpugov.whatif", "gpugov.capacity", "gpugov.cluster", "gpugov.doctor",
            "gpugov.agent.nvml"}.isdisjoint(heavy_in(queue))


def test_the_check_can_fail() -> None:
    # A command that imports its modules at registration is caught: the parser loads the simulator.
    modules = loaded_after("from gpugov.cli import build_parser\nbuild_parser()\nimport gpugov.whatif.replay")
    assert "gpugov.whatif" in heavy_in(modules)


def test_validate_does_not_import_the_cluster_client_nor_other_commands() -> None:
    modules = loaded_after(
        "from gpugov.cli import main\n"
        f"main(['validate', {str(REPO)!r}, '--format', 'json'])\n"
    )
    assert "gpugov.declarations" in modules  # it did validate
    assert {"kubernetes", "urllib3", "jsonschema", "gpugov.whatif", "gpugov.queueing", "gpugov.capacity",
            "gpugov.cluster", "gpugov.agent.nvml"}.isdisjoint(heavy_in(modules))
