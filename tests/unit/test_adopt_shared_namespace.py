"""A namespace two ClusterQueues serve (both select it, LocalQueues of both in it) is refused on import with the
governance reason (issue #40), and validate's GG012 gives the same reason: access is per namespace."""

from __future__ import annotations

from pathlib import Path

import yaml

from gpugov.adopt import import_inventory
from gpugov.adopt.sources import read_folder
from gpugov.app.pipeline import validate_repo
from tests.helpers.adopt_shapes import GFD_NODE

SHARED = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: gpu}
spec: {nodeLabels: {node-pool: h100}}
""" + "".join(f"""---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {team}}}
spec:
  namespaceSelector:
    matchExpressions:
    - {{key: kubernetes.io/metadata.name, operator: In, values: [shared, {team}-own]}}
  flavorFungibility: {{whenCanBorrow: TryNextFlavor}}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: gpu
      resources:
      - {{name: cpu, nominalQuota: 32}}
      - {{name: memory, nominalQuota: 256Gi}}
      - {{name: nvidia.com/gpu, nominalQuota: 4}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: {team}-jobs, namespace: shared}}
spec: {{clusterQueue: {team}}}
""" for team in ("team-a", "team-b")) + "---" + GFD_NODE.format(name="h100-1", pool="h100",
                                                                  product="NVIDIA-H100-80GB-HBM3")
REASON = "two tenants' queues in one namespace would let each tenant's members spend the other's quota"


def _imported(tmp_path: Path):  # type: ignore[no-untyped-def]
    source = tmp_path / "cluster"
    source.mkdir()
    (source / "objects.yaml").write_text(SHARED)
    out = tmp_path / "repo"
    return out, import_inventory(read_folder(source), "lab", out)


def test_a_namespace_of_two_queues_is_refused_with_the_reason(tmp_path: Path) -> None:
    out, report = _imported(tmp_path)
    gaps = {(g.object, g.field): g.why for g in report.gaps}
    # team-a (first by name, its LocalQueue there) keeps it; team-b's claim is refused, saying why and what apply does
    why = gaps[("ClusterQueue team-b", "namespaces[shared]")]
    assert REASON in why and "gpugov-queue-access" in why and "Apply would drop shared" in why, why
    lq = gaps[("LocalQueue shared/team-b-jobs", "metadata.namespace")]
    assert "is ClusterQueue team-a's tenant's" in lq and REASON in lq and "not admitted" in lq, lq
    # the compiled-back comparison lists the same change
    assert ("ClusterQueue team-b", "spec.namespaceSelector") in gaps
    assert not report.complete
    tenants = {n: yaml.safe_load((out / "tenants" / f"{n}.yaml").read_text())["spec"] for n in ("team-a", "team-b")}
    assert (tenants["team-a"]["namespaces"], tenants["team-b"]["namespaces"]) == (
        ["shared", "team-a-own"], ["team-b-own"])
    assert not validate_repo(out).errors  # what is declared is one tenant's per namespace


def test_validate_refuses_two_tenants_in_a_namespace_with_the_reason(tmp_path: Path) -> None:
    out, _ = _imported(tmp_path)
    path = out / "tenants" / "team-b.yaml"
    path.write_text(path.read_text().replace("  - team-b-own\n", "  - shared\n  - team-b-own\n", 1))
    findings = [f for f in validate_repo(out).errors if f.rule == "GG012"]
    assert findings and all(REASON in f.hint and "gpugov-queue-access" in f.hint for f in findings)
