"""Issue #40 on the living sandbox: the example org's cluster east, as `gpugov apply` left it (the
``living_org`` fixture: a MIG pool with two layouts and a whole-GPU node, an H100 pool in racks, cohorts,
non-preemptible inference), imported with `gpugov import --kubeconfig` validates, compiles back to the same
scheduler objects, node labels and mig-parted config, and `gpugov drift` and `apply --dry-run` of the
imported repository find nothing to change on them.

The tenants' owners, members and viewers come back from gpugov's tenant RoleBindings, the platform team from
gpugov's admission messages and the Cluster's operations from its CronJob and agent DaemonSet: drift finds
nothing on any object of the org, and apply --dry-run would delete none of them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.cli import main
from gpugov.compile import compile
from gpugov.kube.objects import LABEL_TENANT, object_key
from gpugov.sandbox.cluster import Sandbox
from tests.unit.test_adopt_mig import kept

pytestmark = pytest.mark.e2e



def shown(key: tuple[str, str, str, str]) -> str:
    """An object as drift and apply name it: `Kind namespace/name`."""
    _, kind, namespace, name = key
    return f"{kind} {namespace + '/' if namespace else ''}{name}"


def gpugov(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_import_of_the_example_org_validates_and_changes_nothing(living: Sandbox, living_org: list[dict[str, Any]],
                                                                 tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig, repo = str(living.cp.kubeconfig), tmp_path / "imported"
    code, out, err = gpugov(capsys, "import", "--kubeconfig", kubeconfig, "--cluster", "east", "--out", str(repo),
                            "--format", "json")
    report = json.loads(out) if out.strip() else {}
    org = {shown(object_key(o)) for o in living_org}
    # Other modules may leave queues of their own on the shared sandbox: only the org's objects must be expressed.
    gaps = [g for g in report.get("notExpressed", []) if g["object"] in org]
    assert code in (0, 1) and gaps == [], out + err
    code, out, err = gpugov(capsys, "validate", str(repo))
    assert code == 0, out + err

    # The MIG pool stays a MIG pool: layouts and per-node layouts read back from nvidia.com/mig.config.
    validation = validate_repo(repo)
    assert validation.model is not None and not validation.errors
    pool = validation.model.pools["a100-mig"]
    assert pool.mig_layouts == {"small": {"1g.10gb": 7}, "balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}
    assert [(n.name, n.mig_layout) for n in pool.nodes] == [
        ("a100-01", "small"), ("a100-02", "small"), ("a100-03", "balanced"), ("a100-04", None)]

    # Compiled back: the same scheduler objects, node labels and mig-parted config as the org's own.
    again = kept(compile(validation.model, backend="kueue", cluster="east"))
    original = kept(living_org)
    assert {k: again.get(k) for k in original} == original

    # The cluster agrees: drift finds nothing on what schedules, apply --dry-run changes none of it.
    code, out, err = gpugov(capsys, "drift", str(repo), "--cluster", "east", "--kubeconfig", kubeconfig,
                            "--format", "json")
    bindings = {shown(object_key(o)) for o in living_org if o["kind"] in ("RoleBinding", "ClusterRoleBinding")
                and o["metadata"]["name"].startswith("gpugov-tenant-")}
    assert len(bindings) > 10
    watched = {shown(key) for key in original} | {shown(object_key(o)) for o in living_org if o["kind"] == "Namespace"
                                                   and LABEL_TENANT in (o["metadata"].get("labels") or {})} | bindings
    findings = [f for f in json.loads(out)["findings"] if f["level"] != "info"]
    assert [f for f in findings if f.get("object") in watched] == []
    # Nothing else of the org either: the admission policies name the same platform team, the operations (drift
    # CronJob, agent DaemonSet, their ServiceAccounts and RBAC) are declared as they run.
    assert [f for f in findings if f.get("object") in org] == [], findings
    code, out, err = gpugov(capsys, "apply", str(repo), "--cluster", "east", "--kubeconfig", kubeconfig, "--dry-run")
    assert code == 0, out + err
    verbs = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) >= 3 and words[0] in ("unchanged", "would"):
            verb, kind, name = (words[0], words[1], words[2]) if words[0] == "unchanged" else (
                " ".join(words[:2]), words[2], words[3])
            verbs[f"{kind} {name.rstrip(':')}"] = verb
    # Every scheduling object, node and the mig-parted config: written as they are. Cohorts and priority classes
    # only differ in gpugov.io/source (the line of the imported file), which apply rewrites.
    for key in original:
        allowed = ("unchanged", "would configure") if key[1] in ("Cohort", "WorkloadPriorityClass") else ("unchanged",)
        assert verbs.get(shown(key)) in allowed, (shown(key), verbs.get(shown(key)), out)
    # The tenants' bindings: the same subjects and roles; at most gpugov.io/source (the imported tenant file's line).
    for name in bindings:
        assert verbs.get(name) in ("unchanged", "would configure"), (name, verbs.get(name), out)
    # Nothing of the org is deleted or released (before #40's read-back: the tenants' bindings and the operations).
    assert [line for line in out.splitlines() if line.startswith(("would delete", "would release"))
            and any(f" {name.split(' ', 1)[1]}" in line for name in org)] == [], out
