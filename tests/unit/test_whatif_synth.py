"""Issue #23 item 6: the synthetic what-if trace gives every pool a tenant holds quota in some
work, and a tenant only the head has submits too, with no fake base row."""

from __future__ import annotations

from pathlib import Path

from gpugov.app.pipeline import validate_repo
from gpugov.whatif.replay import kueue_setup
from gpugov.whatif.synthetic import synthesize, tenant_streams
from tests.helpers.repos import REPO
from tests.unit.test_plan import git
from tests.unit.test_whatif_cli import move_8_gpus, run


def test_every_pool_a_tenant_holds_quota_in_gets_a_stream() -> None:
    model = validate_repo(REPO).model
    assert model is not None
    setup = kueue_setup(model, "east")
    streams = {(queue.split("/")[0], pool, resource) for queue, pool, resource, _, _ in tenant_streams(setup)}
    vision = {(pool, resource) for namespace, pool, resource in streams if namespace == "vision"}
    assert vision == {("h100", "nvidia.com/gpu"), ("a100-mig", "nvidia.com/mig-2g.20gb"),
                      ("a100-mig", "nvidia.com/mig-3g.40gb")}
    jobs = synthesize(setup, jobs=400, seed=1)
    assert {(j.pool, j.resource) for j in jobs if j.queue.startswith("vision/")} == vision
    assert len({j.id for j in jobs}) == len(jobs)


def add_speech(repo: Path) -> None:
    path = repo / "tenants/research.yaml"
    text = path.read_text()
    nlp, vision = text.split("name: vision")
    path.write_text(nlp + "name: vision" + vision.replace("accelerators: 24", "accelerators: 16") + """\
---
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata:
  name: speech
spec:
  department: research
  owners: {users: [speech@example.com]}
  costCenter: CC-SPEECH
  namespaces: [speech]
  queues: [{name: train, namespace: speech, priorityClasses: [batch]}]
  quotas:
    - pool: h100
      resources:
        accelerators: 8
""")
    git(repo, "commit", "-qam", "speech takes 8 of the H100s vision gained")


def test_a_new_tenant_submits_in_the_synthetic_trace_and_has_no_base_row(tmp_path: Path, capsys) -> None:
    import json

    repo = move_8_gpus(tmp_path)
    add_speech(repo)
    code, out, err = run(capsys, "whatif", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "json",
                         "--synthetic-jobs", "300", "--seed", "4")
    assert code == 0, err
    report = json.loads(out)
    assert "speech" not in report["base"]["tenants"]  # it did not exist there: no row of invented numbers
    speech = report["head"]["tenants"]["speech"]
    assert speech["jobs"] > 0 and speech["nominal_gpus"] == 8.0
    assert report["base"]["total"]["jobs"] == report["head"]["total"]["jobs"]
    assert any(never == {"outcome": "refused", "reason": never["reason"]} and "no LocalQueue for" in never["reason"]
               for never in report["base"]["never_admitted"].values())
    code, text, _ = run(capsys, "whatif", str(repo), "--base", "HEAD~1", "--head", "HEAD",
                        "--synthetic-jobs", "300", "--seed", "4")
    (row,) = [line for line in text.splitlines() if line.startswith("| `speech` |")]
    assert row.startswith(f"| `speech` | — → {speech['jobs']} |")
