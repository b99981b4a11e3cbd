"""Compiled monitoring, without Prometheus: the rules and dashboards are deterministic, attribute by the
declarations (a tenant's cost centre inherited from its department, as the ledger's), and come as a plain
rule file, a PrometheusRule and Grafana's provisioning files. tests/e2e/test_monitoring_rules.py loads and
evaluates them in a real Prometheus."""

from __future__ import annotations

import json

import yaml

from gpugov.app.pipeline import validate_repo
from gpugov.monitoring.dashboards import dashboards, provisioning
from gpugov.monitoring.rules import declared, prometheus_rule, recording_rules
from tests.helpers.repos import FIXTURES


def test_rules_and_dashboards_come_from_the_declarations_deterministically() -> None:
    model = validate_repo(FIXTURES / "ledger" / "org").model
    assert model is not None
    namespaces, nodes = declared(model, "lab")
    assert namespaces[1] == {"namespace": "nlp", "tenant": "nlp", "department": "research", "cost_center": "CC-110"}
    assert [n["node"] for n in nodes] == ["m1", "m2", "m3", "n1", "n2", "n3", "n4"]
    first = yaml.safe_dump(recording_rules(model, "lab"))
    assert first == yaml.safe_dump(recording_rules(model, "lab"))
    rule = prometheus_rule(model, "lab")
    assert (rule["apiVersion"], rule["kind"], rule["metadata"]["namespace"]) == (
        "monitoring.coreos.com/v1", "PrometheusRule", "monitoring")
    records = [r["record"] for r in rule["spec"]["groups"][0]["rules"]]
    assert "gpugov:pod_idle_devices:count" in records and "gpugov:cost_center_activity:avg" in records
    idle = next(r["expr"] for r in rule["spec"]["groups"][0]["rules"] if r["record"] == "gpugov:pod_idle_devices:count")
    assert idle.endswith("(gpugov:pod_activity:max < 0.05)")  # Guardrails.idle.utilizationBelowPercent 5
    boards = dashboards(model, "lab")
    assert json.dumps(boards, sort_keys=True) == json.dumps(dashboards(model, "lab"), sort_keys=True)
    assert boards["gpugov-tenant-nlp.json"]["uid"] == "gpugov-tenant-nlp"
    assert provisioning()["providers"][0]["type"] == "file"


def test_the_command_writes_the_rules_the_rule_object_and_grafanas_files(tmp_path) -> None:
    from gpugov.cli import main

    assert main(["monitoring", str(FIXTURES / "ledger" / "org"), "--out", str(tmp_path), "--namespace", "obs"]) == 0
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == ["grafana/dashboards/gpugov-platform-lab.json", "grafana/dashboards/gpugov-tenant-archive.json",
                       "grafana/dashboards/gpugov-tenant-nlp.json", "grafana/dashboards/gpugov-tenant-solo.json",
                       "grafana/dashboards/gpugov-tenant-vision.json", "grafana/provisioning/dashboards/gpugov.yaml",
                       "prometheusrule.yaml", "rules/gpugov.rules.yaml"]
    rule = yaml.safe_load((tmp_path / "prometheusrule.yaml").read_text())
    assert rule["metadata"]["namespace"] == "obs"
    assert rule["spec"] == yaml.safe_load((tmp_path / "rules" / "gpugov.rules.yaml").read_text())
