"""gpugov capacity on the fixture org (tests/fixtures/ledger/org): every number exact, computed by
hand from its declarations and its usage ledger, and checked against compile's own objects.
The page in a real browser: tests/unit/test_capacity_report_browser.py."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from gpugov.app.desired import desired_state
from gpugov.app.exit import ExitCode
from gpugov.capacity import cluster_report, load_ledger
from gpugov.capacity.html import _embedded, html
from gpugov.capacity.jsonout import report_json
from gpugov.capacity.ledger import LedgerError, parse_ledger
from gpugov.cli import main
from gpugov.kube.quantity import parse_quantity
from gpugov.kube.resources import NON_ACCELERATOR
from gpugov.sandbox.simulated import simulated_nodes
from tests.helpers.repos import FIXTURES

FIXTURES = FIXTURES / "ledger"
ORG = FIXTURES / "org"
WINDOW = FIXTURES / "lab-window.json"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["capacity", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def report(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = run(capsys, str(ORG), "--format", "json", *argv)
    assert code == ExitCode.OK, err
    (cluster,) = json.loads(out)["clusters"]
    return cluster


def rows(cluster: dict[str, Any], key: str, *fields: str) -> dict[tuple[str, ...], dict[str, Any]]:
    return {tuple(r[f] for f in fields): r for r in cluster[key]}


def test_pool_numbers_are_exact(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = report(capsys)
    assert (cluster["cluster"], cluster["backend"], cluster["live"]) == ("lab", "kueue", False)
    pools = {p["pool"]: p for p in cluster["pools"]}
    assert pools["h100"]["nodes"] == {"declared": 4, "live": None}
    assert pools["h100"]["gpus"] == {"declared": 32, "live_gfd": None}
    assert pools["a100"]["gpus"] == {"declared": 24, "live_gfd": None}
    lines = {(p["pool"], r["resource"]): r for p in cluster["pools"] for r in p["resources"]}
    # h100: 4 nodes x 8; research 4 + nlp 16 + vision 8 + archive 2 = 30 guaranteed; lendable:
    # research's shared 4, nlp's lendingLimit 8, vision's whole 8, archive's 2 = 22.
    assert lines[("h100", "nvidia.com/gpu")] == {
        "resource": "nvidia.com/gpu", "physical_declared": "32", "physical_live": None, "guaranteed": "30",
        "borrowable": "22", "unassigned": "2", "oversubscription_ratio": "0.9375", "ratio_limit": "1"}
    # a100: two nodes of 7 x 1g.10gb per GPU (2 x 7 x 8 = 112), one whole (8 GPUs); solo has no
    # department, so its 8 whole GPUs can be lent to nobody.
    assert lines[("a100", "nvidia.com/mig-1g.10gb")]["physical_declared"] == "112"
    assert lines[("a100", "nvidia.com/mig-1g.10gb")]["guaranteed"] == "56"
    assert lines[("a100", "nvidia.com/mig-1g.10gb")]["borrowable"] == "56"
    assert lines[("a100", "nvidia.com/mig-1g.10gb")]["oversubscription_ratio"] == "0.5"
    assert lines[("a100", "nvidia.com/gpu")]["borrowable"] == "0"
    assert lines[("a100", "nvidia.com/gpu")]["oversubscription_ratio"] == "1"
    assert set(lines) == {("h100", "nvidia.com/gpu"), ("a100", "nvidia.com/gpu"), ("a100", "nvidia.com/mig-1g.10gb")}
    assert pools["a100"]["mig"] == [{"profile": "1g.10gb", "resource": "nvidia.com/mig-1g.10gb", "declared": "112",
                                     "guaranteed": "56", "carvable": None}]


def test_tenant_ceilings_are_kueues_maximum(capsys: pytest.CaptureFixture[str]) -> None:
    """Kueue's potentialAvailable over compile's cohort tree (gpugov.reach), the number a never-fits
    reason names: only nominal quota can be borrowed, never capacity nobody holds (issue #23 item 4:
    capacity once offered every whole GPU of every pool of the queue)."""
    tenants = rows(report(capsys), "tenants", "tenant", "resource")
    gpu, mig = "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"
    expected = {
        # research's tree on h100: its own 4 + archive 2 + vision 8 + nlp 16 less the 8 its lendingLimit keeps = 22.
        ("nlp", gpu): ("16", "24", "8", "8"),  # borrowingLimit 8: 16 + 8, under its 8 kept + 22
        ("nlp", mig): ("0", "56", "56", "0"),  # vision's 56 slices on a100, nothing more: nobody else holds any
        ("vision", gpu): ("8", "22", "14", "8"),
        ("vision", mig): ("56", "56", "0", "56"),
        ("archive", gpu): ("2", "22", "20", "2"),
        ("archive", mig): ("0", "56", "56", "0"),
        ("solo", gpu): ("8", "8", "0", "0"),  # no department: its nominal, nothing more
    }
    got = {k: (v["nominal"], v["ceiling"], v["borrowable"], v["lendable"]) for k, v in tenants.items()}
    assert got == expected


def test_the_example_orgs_data_platform_cannot_borrow_whole_gpus() -> None:
    """The issue's case: product's tree holds no whole GPU anyone lends (inference lends 0), so
    data-platform's ceiling is 0, as Kueue says when its job asks for one."""
    from gpugov.capacity.report import cluster_report
    from gpugov.reach import Tree
    from tests.helpers.repos import REPO

    state = desired_state(REPO, cluster="east")
    lines = {(t.tenant, t.resource): t for t in cluster_report(state).tenants}
    line = lines[("data-platform", "nvidia.com/gpu")]
    assert (line.nominal, line.ceiling, line.borrowable) == (0, 0, 0)
    reach = Tree(state.objects)
    assert reach.maximum("data-platform")[("h100", "nvidia.com/gpu")] == 0
    # vision's 16 on h100 is the "at most 16 in pool h100" the real Kueue wrote in the README's example.
    assert reach.maximum("vision")[("h100", "nvidia.com/gpu")] == 16
    assert lines[("vision", "nvidia.com/gpu")].ceiling == 16


def test_guaranteed_is_what_compile_puts_in_nominal_quota(capsys: pytest.CaptureFixture[str]) -> None:
    state = desired_state(ORG, cluster="lab")
    compiled: dict[tuple[str, str], Decimal] = {}
    for obj in state.objects:
        if obj["kind"] in ("ClusterQueue", "Cohort"):
            for group in obj["spec"].get("resourceGroups", []):
                for flavor in group["flavors"]:
                    for resource in flavor["resources"]:
                        if resource["name"] not in NON_ACCELERATOR:
                            key = (flavor["name"], resource["name"])
                            compiled[key] = compiled.get(key, Decimal(0)) + parse_quantity(resource["nominalQuota"])
    cluster = report(capsys)
    reported = {(p["pool"], r["resource"]): Decimal(r["guaranteed"]) for p in cluster["pools"] for r in p["resources"]}
    # Compile lists every covered resource on every flavor (0 where only borrowing): compare the held ones.
    assert {k: v for k, v in reported.items() if v} == {k: v for k, v in compiled.items() if v}
    assert len(compiled) > len(reported)  # the zero entries were there to filter


def test_usage_window_numbers_and_advice(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = report(capsys, "--usage", str(WINDOW))
    assert cluster["window"] == {"since": "2026-11-01T00:00:00+00:00", "until": "2026-11-11T00:00:00+00:00",
                                 "hours": "240", "ledger": str(WINDOW)}
    usage = rows(cluster, "usage", "tenant", "pool", "resource")
    assert usage[("nlp", "h100", "nvidia.com/gpu")] == {
        "tenant": "nlp", "pool": "h100", "resource": "nvidia.com/gpu", "nominal": "16", "guaranteed_hours": "3840",
        "used_hours": "4800", "in_quota_hours": "3840", "borrowed_hours": "960", "idle_hours": "120",
        "guarantee_use": "1", "cost": "12000"}
    assert usage[("vision", "a100", "nvidia.com/mig-1g.10gb")]["guaranteed_hours"] == "13440"
    assert usage[("vision", "a100", "nvidia.com/mig-1g.10gb")]["guarantee_use"] == "0.5"
    # archive has no row at all: its guarantee is there, its use is zero.
    assert usage[("archive", "h100", "nvidia.com/gpu")]["guaranteed_hours"] == "480"
    assert usage[("archive", "h100", "nvidia.com/gpu")]["used_hours"] == "0"
    pools = rows(cluster, "pool_usage", "pool", "resource")
    assert pools[("h100", "nvidia.com/gpu")] == {
        "pool": "h100", "resource": "nvidia.com/gpu", "capacity_hours": "7680", "used_hours": "7200",
        "lent_hours": "2400", "idle_hours": "120", "unallocated_hours": "480", "utilisation": "0.9375"}
    assert pools[("a100", "nvidia.com/mig-1g.10gb")]["utilisation"] == "0.25"
    advice = [(a["kind"], a["subject"]) for a in cluster["advice"]]
    assert advice == [
        ("unassigned", "a100 nvidia.com/mig-1g.10gb"),
        ("unassigned", "h100 nvidia.com/gpu"),
        ("near-exhaustion", "a100 nvidia.com/gpu"),
        ("near-exhaustion", "h100 nvidia.com/gpu"),
        ("never-used", "archive h100 nvidia.com/gpu"),
        ("chronic-borrower", "vision h100 nvidia.com/gpu"),
        ("idle-over-policy", "solo"),  # 1900 of 1920 hours idle, no reclaim idle policy
    ]
    texts = {a["kind"] + " " + a["subject"]: a["text"] for a in cluster["advice"]}
    assert "borrowed 1440 of its 2400 nvidia.com/gpu-hours on h100 (60.0%), 6.00 on average" in texts[
        "chronic-borrower vision h100 nvidia.com/gpu"]
    assert "93.8% of its nvidia.com/gpu-hours" in texts["near-exhaustion h100 nvidia.com/gpu"]
    assert "2 of 32 nvidia.com/gpu are in nobody's nominal quota" in texts["unassigned h100 nvidia.com/gpu"]


def test_nlp_is_no_chronic_borrower_below_half(capsys: pytest.CaptureFixture[str]) -> None:
    # nlp borrowed 960 of 4800 hours (20%): under the 50% threshold; vision's 60% is over it.
    subjects = {a["subject"] for a in report(capsys, "--usage", str(WINDOW))["advice"] if a["kind"] == "chronic-borrower"}
    assert subjects == {"vision h100 nvidia.com/gpu"}


def test_an_incomplete_ledger_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, str(ORG), "--usage", str(FIXTURES / "lab-incomplete.json"))
    assert code == ExitCode.USAGE and out == ""
    assert err.startswith("gpugov: --usage: ") and 'the ledger is not complete ("complete": false)' in err
    assert "Traceback" not in err


@pytest.mark.parametrize("change, message", [
    (lambda d: d["rows"][0].update({"admitted_hours": 4800}), "rows[0].admitted_hours must be a decimal string, got 4800"),
    (lambda d: d["rows"][1].update({"borrowed_hours": "-1"}), "rows[1].borrowed_hours is negative"),
    (lambda d: d["rows"][2].pop("idle_hours"), "rows[2] lacks idle_hours"),
    (lambda d: d["window"].update({"until": "2026-10-01T00:00:00Z"}), "is not after window.since"),
    (lambda d: d["window"].update({"since": "2026-11-01T00:00:00"}), "has no time zone"),
    (lambda d: d.pop("complete"), "the ledger is not complete"),
    (lambda d: d["capacity"][0].update({"hours": "lots"}), "capacity[0].hours is not a decimal number"),
])
def test_a_ledger_not_in_the_documented_shape_is_refused(change: Any, message: str) -> None:
    data = json.loads(WINDOW.read_text())
    change(data)
    with pytest.raises(LedgerError, match=re.escape(message)):
        parse_ledger(data, "ledger.json")


def test_unreadable_ledger_and_other_cluster_are_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    code, _, err = run(capsys, str(ORG), "--usage", str(broken))
    assert code == ExitCode.USAGE and "is not JSON" in err
    other = tmp_path / "other.json"
    other.write_text(WINDOW.read_text().replace('"cluster": "lab"', '"cluster": "east"'))
    code, _, err = run(capsys, str(ORG), "--usage", str(other))
    assert code == ExitCode.USAGE and "ledger of cluster 'east'" in err
    code, _, err = run(capsys, str(ORG), "--cluster", "nowhere")
    assert code == ExitCode.USAGE and "unknown cluster 'nowhere'" in err


def _applied(state: Any) -> list[dict[str, Any]]:
    patches = {o["metadata"]["name"]: o for o in state.objects if o["kind"] == "Node"}
    nodes = simulated_nodes(state.model, state.cluster)
    for node in nodes:
        node["metadata"]["labels"].update(patches[node["metadata"]["name"]]["metadata"]["labels"])
    return nodes


def test_live_nodes_as_declared_report_the_same_numbers() -> None:
    state = desired_state(ORG, cluster="lab")
    result = cluster_report(state, _applied(state))
    assert result.live and not result.advice[2:]  # only the two unassigned lines
    for pool in result.pools:
        for line in pool.resources:
            assert line.live == line.declared, (pool.name, line.resource)
        assert pool.nodes_live == pool.nodes_declared and pool.gpus_live == pool.gpus_declared
        for mig in pool.mig:
            assert mig.carvable == mig.declared


def test_live_nodes_short_and_mig_relabelled_are_reported() -> None:
    state = desired_state(ORG, cluster="lab")
    nodes = [n for n in _applied(state) if n["metadata"]["name"] != "n4"]
    m2 = next(n for n in nodes if n["metadata"]["name"] == "m2")
    m2["metadata"]["labels"]["nvidia.com/mig.config"] = "all-disabled"
    m2["metadata"]["labels"]["nvidia.com/mig.config.state"] = "failed"
    result = cluster_report(state, nodes)
    h100 = next(p for p in result.pools if p.name == "h100")
    assert (h100.nodes_live, h100.gpus_live, h100.resources[0].live) == (3, 24, Decimal(24))
    a100 = next(p for p in result.pools if p.name == "a100")
    assert [(m.profile, m.declared, m.carvable) for m in a100.mig] == [("1g.10gb", Decimal(112), Decimal(56))]
    kinds = {(a.kind, a.subject): a.text for a in result.advice}
    assert "its nodes advertise 24 nvidia.com/gpu, the declarations 32" in kinds[("live-short", "h100 nvidia.com/gpu")]
    assert "carves 56 1g.10gb, the declared layouts 112 (56 guaranteed)" in kinds[("mig-carve", "a100 1g.10gb")]
    assert "m2 (failed)" in kinds[("mig-state", "a100")]
    m2["metadata"]["labels"]["nvidia.com/mig.config"] = "all-1g.10gb"  # the operator's default config, not gpugov's
    unknown = {a.kind: a.text for a in cluster_report(state, nodes).advice}
    assert "m2 (all-1g.10gb)" in unknown["mig-config"]


def test_every_cluster_of_the_example_org_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.helpers.repos import REPO

    code, out, _ = run(capsys, str(REPO), "--format", "json")
    assert code == ExitCode.OK
    clusters = json.loads(out)["clusters"]
    assert [(c["cluster"], c["backend"]) for c in clusters] == [("east", "kueue"), ("west", "volcano")]
    code, _, err = run(capsys, str(REPO), "--kubeconfig", "/nonexistent")
    assert code == ExitCode.USAGE and "choose which with --cluster" in err


def test_markdown_report(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(ORG), "--usage", str(WINDOW))
    assert code == ExitCode.OK
    assert "| h100 | H100-80GB | 4 / – | 32 / – | `nvidia.com/gpu` | 32 | – | 30 | 22 | 2 | 0.94 (≤ 1) |" in out
    assert "| a100 | 1g.10gb | 112 | 56 | – |" in out
    assert "| vision | h100 | `nvidia.com/gpu` | 1920 | 2400 | 960 | 1440 | 0 | 50.0% | 6000.00 |" in out
    assert "- **never-used**: archive holds 2 nvidia.com/gpu on h100" in out


def test_html_page_references_no_external_url_and_embeds_the_json(capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path) -> None:
    out = tmp_path / "capacity.html"
    code, printed, _ = run(capsys, str(ORG), "--usage", str(WINDOW), "--format", "html", "--out", str(out))
    assert code == ExitCode.OK and str(out) in printed
    page = out.read_text(encoding="utf-8")
    assert not re.search(r"(?i)\b(?:https?|ftp|wss?):", page)
    assert not re.search(r"(?i)\b(?:src|href|action|srcset)\s*=", page)
    assert not re.search(r"(?i)<(?:link|iframe|object|embed|img|base)\b|@import|url\(", page)
    assert "//" not in re.sub(r"(?s)<script>.*?</script>", "", page)  # no protocol-relative reference outside code
    embedded = re.search(r'<script type="application/json" id="capacity-data">(.*?)</script>', page, re.S)
    assert embedded is not None
    state = desired_state(ORG, cluster="lab")
    assert json.loads(embedded.group(1)) == report_json([cluster_report(state, None, load_ledger(WINDOW))])
    assert page == html([cluster_report(state, None, load_ledger(WINDOW))])  # deterministic


def test_embedded_json_cannot_close_its_script_element() -> None:
    text = _embedded({"name": "</script><script>alert(1)</script>"})
    assert "</" not in text and json.loads(text) == {"name": "</script><script>alert(1)</script>"}


def test_window_hours_are_rounded_for_people_and_exact_in_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #23 item 10: a window of 15 h 49 m 32 s read "15.825555555555555555555556 h"."""
    ledger = json.loads(WINDOW.read_text())
    ledger["window"]["until"] = "2026-11-01T15:49:32Z"
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps(ledger))
    code, out, err = run(capsys, str(ORG), "--usage", str(path))
    assert code == ExitCode.OK, err
    assert "### Usage (15.83 h window)" in out and "15.8255" not in out
    code, out, err = run(capsys, str(ORG), "--usage", str(path), "--format", "html")
    assert "<h3>Usage (15.83 h window)</h3>" in out and "in the 15.83 h window" in out
    assert "15.8255" not in out.split("<script")[0]  # the page's embedded data keeps the exact value
    code, out, err = run(capsys, str(ORG), "--usage", str(path), "--format", "json")
    assert "15.8255555" in out  # the exact value stays in the JSON


def test_a_pool_without_gfd_shows_no_gfd_count() -> None:
    """Issue #23 item 10: Ascend rows read "GPUs declared / GFD 32 / 0": GFD labels only NVIDIA nodes."""
    from gpugov.capacity.markdown import markdown
    from tests.helpers.repos import REPO

    state = desired_state(REPO, cluster="west")
    result = cluster_report(state, _applied(state))
    (pool,) = [p for p in result.pools if p.name == "ascend-910b"]
    assert (pool.gpus_declared, pool.gpus_live, pool.nodes_live) == (32, None, 4)
    assert "| ascend-910b | Ascend-910B | 4 / 4 | 32 / – |" in markdown([result])
