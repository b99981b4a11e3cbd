"""Schema findings say in words what a field expects: no regular expression reaches a user."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.declarations.schema import PATTERN_WORDS, SPECS, kind_schema, pattern_words
from tests.helpers.repos import write

POOL = """\
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata: {name: extra}
spec:
  cluster: lab
  accelerator: {model: H100-80GB}
  acceleratorsPerNode: 8
  nodeResources: {cpu: 64, memory: 512Gi}
  nodes: [{name: extra-a}]
"""
TENANT = """\
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata: {name: extra}
spec:
  owners: {users: [e@example.com]}
  costCenter: CC-9
  namespaces: [extra]
"""
MODEL = """\
apiVersion: gpugov.io/v1alpha1
kind: AcceleratorModel
metadata: {name: X1}
spec:
  resource: example.com/x1
"""
GUARDRAILS = """\
apiVersion: gpugov.io/v1alpha1
kind: Guardrails
metadata: {name: default}
spec:
  platformTeam: ["@lab/platform"]
"""


@pytest.mark.parametrize(
    ("rel", "text", "where", "message"),
    [
        (
            "tenants/extra.yaml",
            TENANT + "  quotas: [{pool: h100, resources: {gpus: 1}}]\n",
            "8:37",
            "spec.quotas[0].resources: key 'gpus' is not a quota resource: accelerators, cpu, memory, pods, "
            "a MIG profile such as 1g.10gb, a vNPU template such as vir05_1c_16g, or acceleratorMemory / "
            "acceleratorCores",
        ),
        (
            "tenants/extra.yaml",
            TENANT.replace("users: [e@example.com]", "reviewers: [bob smith]"),
            "5:24",
            "spec.owners.reviewers[0]: 'bob smith' is not a code owner: @user, @org/team or an e-mail address",
        ),
        (
            "hardware/extra.yaml",
            POOL + "  migLayouts: {small: {1g10gb: 7}}\n",
            "10:24",
            "spec.migLayouts.small: key '1g10gb' is not a MIG profile name such as 1g.10gb, 3g.40gb or 1g.10gb+me",
        ),
        (
            "policies/guardrails.yaml",
            GUARDRAILS + "  idle: {window: 3 hours}\n",
            "6:18",
            "spec.idle.window: '3 hours' is not a duration: a whole number followed by s, m, h or d, such as 30m or 7d",
        ),
        (
            "hardware/extra.yaml",
            POOL.replace("cpu: 64", "cpu: lots"),
            "8:24",
            "spec.nodeResources.cpu: 'lots' is not a valid Kubernetes quantity",
        ),
        (
            "hardware/x1.yaml",
            MODEL + "  vendor: Example\n",
            "6:11",
            "spec.vendor: 'Example' is not lower-case letters, digits and '-', starting with a letter or digit, "
            "such as nvidia",
        ),
        (
            "hardware/x1.yaml",
            MODEL + "  vendor: example\n  pciVendorId: 10de\n",
            "7:16",
            "spec.pciVendorId: '10de' is not a PCI vendor id: 0x and 4 upper-case hex digits, such as 0x10DE",
        ),
    ],
    ids=["resource-key", "reviewer", "mig-profile-key", "window", "quantity", "model-vendor", "model-pci-vendor"],
)
def test_pattern_errors_say_what_is_expected(base_repo: Path, rel: str, text: str, where: str, message: str) -> None:
    write(base_repo, rel, text)
    findings = [f for f in validate_repo(base_repo).findings if f.rule == "GG003"]
    assert [(f"{f.location.line}:{f.location.col}", f.message) for f in findings if f.location] == [(where, message)]


def _patterns(schema: Any) -> Iterator[str]:
    if isinstance(schema, dict):
        if isinstance(schema.get("pattern"), str):
            yield schema["pattern"]
        for value in schema.values():
            yield from _patterns(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _patterns(value)


def test_every_schema_pattern_has_words() -> None:
    """A pattern added to a schema without words would get only the fallback's vague phrase:
    each needs an entry in PATTERN_WORDS."""
    patterns = {p for kind in SPECS for p in _patterns(kind_schema(kind))}
    assert len(patterns) >= 5
    assert sorted(patterns - set(PATTERN_WORDS)) == []


def test_pattern_words_never_show_a_regex() -> None:
    assert pattern_words(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$").startswith("a DNS-1123 label: lower-case letters")
    fallback = pattern_words(r"^x[0-9]+$")
    assert "^" not in fallback and "[" not in fallback and "gpugov schema" in fallback
    for words in PATTERN_WORDS.values():
        assert not any(c in words for c in "^$\\[]"), words
