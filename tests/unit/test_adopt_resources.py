"""gpugov import of quota on resources that are not accelerators (issue #40): pods, cpu and memory import as
quota keys; a resource of the node itself (ephemeral-storage, hugepages, a name without a domain) or a second
device resource on a pool is never declared as something the schema refuses: it is listed with the
governance reason, and the repository written validates."""

from __future__ import annotations

from pathlib import Path

import yaml

from gpugov.adopt import import_inventory, inventory
from gpugov.app.pipeline import validate_repo
from gpugov.cli import main

QUEUES = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: cpu-nodes}
spec: {nodeLabels: {pool: cpu}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: gpu-nodes}
spec: {nodeLabels: {pool: gpu}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: batch}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: batch}}
  flavorFungibility: {whenCanBorrow: TryNextFlavor}
  resourceGroups:
  - coveredResources: [cpu, memory, pods, ephemeral-storage, hugepages-2Mi, scratch]
    flavors:
    - name: cpu-nodes
      resources:
      - {name: cpu, nominalQuota: 100}
      - {name: memory, nominalQuota: 100Gi}
      - {name: pods, nominalQuota: 50}
      - {name: ephemeral-storage, nominalQuota: 1Ti}
      - {name: hugepages-2Mi, nominalQuota: 1Gi}
      - {name: scratch, nominalQuota: 3}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: train}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: train}}
  flavorFungibility: {whenCanBorrow: TryNextFlavor}
  resourceGroups:
  - coveredResources: [cpu, memory, pods, nvidia.com/gpu, example.com/fpga]
    flavors:
    - name: gpu-nodes
      resources:
      - {name: cpu, nominalQuota: 100}
      - {name: memory, nominalQuota: 100Gi}
      - {name: pods, nominalQuota: 50}
      - {name: nvidia.com/gpu, nominalQuota: 8}
      - {name: example.com/fpga, nominalQuota: 2}
"""


def test_quota_on_resources_that_are_not_accelerators_imports_or_says_why_not(tmp_path: Path) -> None:
    report = import_inventory(inventory(list(yaml.safe_load_all(QUEUES))), "lab", tmp_path / "repo")
    validation = validate_repo(tmp_path / "repo")
    assert not validation.errors, [f.message for f in validation.errors]
    batch = yaml.safe_load((tmp_path / "repo" / "tenants" / "batch.yaml").read_text())["spec"]
    assert batch["quotas"] == [{"pool": "cpu-nodes", "resources": {"cpu": 100, "memory": "100Gi", "pods": 50}}]
    train = yaml.safe_load((tmp_path / "repo" / "tenants" / "train.yaml").read_text())["spec"]
    assert train["quotas"] == [{"pool": "gpu-nodes", "resources": {"cpu": 100, "memory": "100Gi", "pods": 50,
                                                                    "accelerators": 8}}]
    models = (tmp_path / "repo" / "hardware" / "models.yaml").read_text()
    assert "ephemeral-storage" not in models and "hugepages" not in models and "scratch" not in models
    why: dict[str, str] = {}
    for gap in report.gaps:
        why.setdefault(gap.field.rsplit("[", 1)[-1].rstrip("]"), gap.why)  # the reason comes first
    for resource in ("ephemeral-storage", "hugepages-2Mi", "scratch"):
        assert why[resource].startswith("gpugov governs accelerators and the cpu, memory and pods"), why[resource]
        assert "Kueue admits no workload that requests it" in why[resource]
    assert why["example.com/fpga"].startswith("a pool holds one kind of device (here nvidia.com/gpu")
    assert "pods" not in why and "cpu" not in why


def test_cli_import_of_such_queues_exits_1_with_the_reasons(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    source = tmp_path / "cluster"
    source.mkdir()
    (source / "queues.yaml").write_text(QUEUES)
    assert main(["import", "--from", str(source), "--out", str(tmp_path / "repo")]) == 1
    out = capsys.readouterr().out
    assert "ClusterQueue batch: spec.resourceGroups.flavors[cpu-nodes].resources[ephemeral-storage]: gpugov " \
           "governs accelerators" in out
    assert main(["validate", str(tmp_path / "repo")]) == 0
