"""History charts (issue #41) from fixed series, without Prometheus: buckets per window, gaps where nothing
was measured (never a bar of 0, never idle), axes and labels per window, the same bytes for the same answers,
Chinese labels, and the command and the HTML report that write them. tests/e2e/test_history_prometheus.py
draws them from a real Prometheus evaluating the compiled rules."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from gpugov import i18n
from gpugov.app.pipeline import validate_repo
from gpugov.capacity import charts
from gpugov.declarations.model import Model
from gpugov.monitoring.history import ACTIVITY, ALLOCATED, IDLE, REPORTING, HistoryError, history, read, span
from tests.helpers.repos import FIXTURES

ORG = FIXTURES / "ledger" / "org"
UNTIL = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def model() -> Model:
    found = validate_repo(ORG).model
    assert found is not None
    return found


@pytest.fixture
def chinese() -> Iterator[None]:
    before = i18n.current()
    i18n.use("zh_CN")
    yield
    i18n.use(before)


def matrix(label: str, values: dict[str, dict[int, str]]) -> list[dict[str, Any]]:
    return [{"metric": {label: name}, "values": [[t, v] for t, v in sorted(points.items())]}
            for name, points in values.items()]


class FakePrometheus:
    """Answers the history's four range queries from fixed per-instant values; records what was asked."""

    def __init__(self, reporting: dict[str, dict[int, str]], per: dict[str, dict[str, dict[str, dict[int, str]]]]):
        self.reporting, self.per, self.asked = reporting, per, []
        self.silent: set[tuple[str, str, int]] = set()  # (pool, node, instant) a node's exporter is not scraped

    def __call__(self, promql: str, start: datetime, end: datetime, step: int) -> list[dict[str, Any]]:
        self.asked.append((promql, start, end, step))
        low, high = start.timestamp(), end.timestamp()

        def within(values: dict[str, dict[int, str]]) -> dict[str, dict[int, str]]:
            return {k: {t: v for t, v in pts.items() if low <= t <= high} for k, pts in values.items()}

        if promql == REPORTING:  # every declared node of the pool reports what the test gives the pool
            nodes = {"h100": ["n1", "n2", "n3", "n4"], "a100": ["m1", "m2", "m3"]}
            given = within(self.reporting)
            return [{"metric": {"pool": pool, "node": node},
                     "values": [[t, v] for t, v in sorted(given.get(pool, {}).items())
                                if (pool, node, t) not in self.silent]}
                    for pool in sorted(given) for node in nodes[pool]]
        for kind in ("tenant", "pool"):
            for name, template in (("allocated", ALLOCATED), ("idle", IDLE), ("activity", ACTIVITY)):
                if promql == template.format(by=kind):
                    return matrix(kind, within(self.per[kind][name]))
        raise AssertionError(f"unexpected query {promql}")


def steady(start: int, end: int, step: int, value: str) -> dict[int, str]:
    return {t: value for t in range(start, end + 1, step)}


def lab_prometheus() -> FakePrometheus:
    """24 h at 60 s to 12:00: h100 reports all day but 20:00-22:00; a100 all day. nlp holds 2 GPUs until 00:00
    (1 idle, activity 0.5 summed over the two), then none; solo 1 MIG slice on a100 all day, idle."""
    end = int(UNTIL.timestamp())
    start = end - 86400 + 60
    outage = set(range(end - 16 * 3600 + 60, end - 14 * 3600 + 1, 60))  # 20:00 to 22:00 unmeasured on h100
    h100 = {t: "8" for t in range(start, end + 1, 60) if t not in outage}
    nlp_until = end - 12 * 3600  # nlp's pods end at 00:00
    nlp = {t: v for t, v in steady(start, nlp_until, 60, "2").items() if t not in outage}
    per = {
        "tenant": {"allocated": {"nlp": nlp, "solo": steady(start, end, 60, "1")},
                   "idle": {"nlp": {t: "1" for t in nlp}, "solo": steady(start, end, 60, "1")},
                   "activity": {"nlp": {t: "0.5" for t in nlp}, "solo": steady(start, end, 60, "0.01")}},
        "pool": {"allocated": {"h100": nlp, "a100": steady(start, end, 60, "1")},
                 "idle": {"h100": {t: "1" for t in nlp}, "a100": steady(start, end, 60, "1")},
                 "activity": {"h100": {t: "0.5" for t in nlp}, "a100": steady(start, end, 60, "0.01")}},
    }
    return FakePrometheus({"h100": h100, "a100": steady(start, end, 60, "56")}, per)


def by_name(found: list[Any], kind: str, name: str) -> Any:
    return next(h for h in found if h.kind == kind and h.name == name)


def buckets(text: str) -> list[dict[str, str]]:
    """Every drawn bucket's data-* attributes, gaps as {'gap': start}."""
    out = []
    for match in re.finditer(r'<(g class="bucket"|rect class="unknown")([^>]*)>', text):
        attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', match[2]))
        out.append({"gap": attrs["start"]} if "unknown" in match[1] else attrs)
    return out


def test_the_windows_are_cut_into_whole_buckets_of_whole_steps() -> None:
    assert [(s.buckets, s.bucket) for s in (span(w, UNTIL, 60) for w in ("24h", "7d", "30d"))] == [
        (96, 900), (84, 7200), (120, 21600)]
    odd = span("24h", UNTIL + timedelta(seconds=59), 60)
    assert odd.until == UNTIL  # rounded down to a whole step: the same window reads the same instants
    assert (span("90m", UNTIL, 60).buckets, span("30s", UNTIL, 1).bucket) == (45, 1)
    with pytest.raises(HistoryError, match="divides 900 s"):
        span("24h", UNTIL, 7)
    with pytest.raises(HistoryError, match="not a window"):
        span("a day", UNTIL, 60)


def test_unmeasured_time_is_a_gap_never_idle_or_zero(model: Model) -> None:
    prometheus = lab_prometheus()
    found = read(model, "lab", span("24h", UNTIL, 60), prometheus)
    assert [(h.kind, h.name) for h in found] == [("tenant", "archive"), ("tenant", "nlp"), ("tenant", "solo"),
                                                  ("tenant", "vision"), ("pool", "a100"), ("pool", "h100")]
    nlp = by_name(found, "tenant", "nlp")
    gaps = [b for b in nlp.buckets if b.devices is None]
    assert len(gaps) == 8 and gaps[0].start == UNTIL - timedelta(hours=16)  # 20:00-22:00, 8 buckets of 15 min
    assert all(b.idle is None and b.activity is None for b in gaps)
    # after 00:00 nlp holds nothing: measured as 0 (h100 reports), not unknown
    late = [b for b in nlp.buckets if b.start >= UNTIL - timedelta(hours=12)]
    assert {(b.devices, b.measured) for b in late} == {(Decimal(0), 15)}
    assert nlp.unknown_hours == 2
    assert nlp.device_hours == 2 * (12 - 2)  # 2 GPUs for the 10 measured hours of its 12
    assert (nlp.idle_device_hours, nlp.activity, nlp.idle_share) == (10, Decimal("0.25"), Decimal("0.5"))
    text = charts.svg(nlp)
    drawn = buckets(text)
    assert len(drawn) == 96
    assert next(d["gap"] for d in drawn if "gap" in d) == "2026-12-03T20:00:00Z"
    assert all("gap" in d for d in drawn[32:40])  # the outage: hatched, never bars of 0
    assert {d["devices"] for d in drawn[:32]} == {"2.000000"} and {d["devices"] for d in drawn[48:]} == {"0"}
    assert 'fill="url(#unknown-tenant-nlp-24h)"' in text and "unknown: no measurement" in text
    assert 'data-device-hours="20.000000"' in text and 'data-unknown-hours="2.000000"' in text
    # the activity line breaks at the gap: one polyline before it, another after it
    assert text.count('<polyline class="activity"') == 2
    # solo: its pool a100 is measured all day, though h100 is not; idle all day, never a gap
    solo = by_name(found, "tenant", "solo")
    assert (solo.unknown_hours, solo.device_hours, solo.idle_share) == (0, 24, 1)


def test_one_silent_node_leaves_its_pool_and_tenants_unknown(model: Model) -> None:
    prometheus = lab_prometheus()
    end = int(UNTIL.timestamp())
    hour = range(end - 3 * 3600 + 60, end - 2 * 3600 + 1, 60)  # 09:00 to 10:00
    prometheus.silent = {("a100", "m2", t) for t in hour}
    found = read(model, "lab", span("24h", UNTIL, 60), prometheus)
    a100, solo, h100 = by_name(found, "pool", "a100"), by_name(found, "tenant", "solo"), by_name(found, "pool", "h100")
    assert (a100.unknown_hours, solo.unknown_hours, h100.unknown_hours) == (1, 1, 2)
    assert next(b.start for b in a100.buckets if b.devices is None) == UNTIL - timedelta(hours=3)
    assert solo.device_hours == 23  # the silent hour is neither held nor idle: unknown


def test_axes_and_labels_follow_the_window(model: Model) -> None:
    prometheus = lab_prometheus()
    day = charts.svg(by_name(read(model, "lab", span("24h", UNTIL, 60), prometheus), "pool", "a100"))
    week = charts.svg(by_name(read(model, "lab", span("7d", UNTIL, 60), prometheus), "pool", "a100"))
    month = charts.svg(by_name(read(model, "lab", span("30d", UNTIL, 60), prometheus), "pool", "a100"))

    def ticks(text: str) -> list[str]:
        return re.findall(r'<text class="x"[^>]*>([^<]*)</text>', text)

    assert ticks(day) == ["12:00", "18:00", "00:00", "06:00", "12:00"]
    assert ticks(week) == ["11-28", "11-29", "11-30", "12-01", "12-02", "12-03", "12-04"]
    assert ticks(month)[0] == "11-08" and len(ticks(month)) == 6
    assert "Pool a100: GPU allocation and activity, last 24h" in day and "last 7d" in week and "last 30d" in month
    assert (len(buckets(day)), len(buckets(week)), len(buckets(month))) == (96, 84, 120)
    # the week before the fake's day is unmeasured: gaps, and counted unknown
    assert sum("gap" in b for b in buckets(week)) == 72 and 'data-unknown-hours="144.000000"' in week
    assert re.findall(r'<text class="y" [^>]*>([^<]*)</text>', day) == ["0", "0.5", "1"]
    assert "devices held" in day and "activity per held device" in day and "unknown (no data)" in day


def test_the_same_answers_give_the_same_bytes(model: Model) -> None:
    first = [charts.svg(h) for h in read(model, "lab", span("24h", UNTIL, 60), lab_prometheus())]
    again = [charts.svg(h) for h in read(model, "lab", span("24h", UNTIL + timedelta(seconds=30), 60),
                                         lab_prometheus())]
    assert first == again


def test_chinese_labels(model: Model, chinese: None) -> None:
    text = charts.svg(by_name(read(model, "lab", span("24h", UNTIL, 60), lab_prometheus()), "tenant", "nlp"))
    assert "租户 nlp" in text and "未知" in text and "设备" in text
    assert "GPU allocation" not in text and "unknown: no measurement" not in text


def test_a_chart_with_only_gaps_draws_no_bar() -> None:
    window = span("24h", UNTIL, 60)
    found = history("pool", "h100", window, set(), {}, {}, {})
    text = charts.svg(found)
    assert sum("gap" in b for b in buckets(text)) == 96 and 'class="bucket"' not in text
    assert found.device_hours == 0 and found.unknown_hours == 24 and found.activity is None


def test_the_command_writes_every_chart_and_the_html_report_draws_them(
        model: Model, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from gpugov.cli import main
    from gpugov.sources import prometheus as source

    fake = lab_prometheus()
    monkeypatch.setattr(source, "query_range", lambda url, promql, start, end, step, *a, **k: fake(promql, start, end, step))
    usage = FIXTURES / "ledger" / "lab-window.json"
    assert main(["history", str(ORG), "--prometheus", "http://prometheus.invalid", "--out", str(tmp_path),
                 "--windows", "24h", "--until", "2026-12-04T12:00:30Z", "--usage", str(usage)]) == 0
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.svg"))
    assert written == ["pools/a100-24h.svg", "pools/h100-24h.svg", "tenants/archive-24h.svg", "tenants/nlp-24h.svg", "tenants/solo-24h.svg",
                       "tenants/vision-24h.svg"]
    nlp = (tmp_path / "tenants" / "nlp-24h.svg").read_text()
    assert nlp == charts.svg(by_name(read(model, "lab", span("24h", UNTIL, 60), lab_prometheus()), "tenant", "nlp"),
                             charts.ledger_notes(by_name(read(model, "lab", span("24h", UNTIL, 60), lab_prometheus()),
                                                         "tenant", "nlp"), _report(usage)))
    assert '<text class="note"' in nlp and "h100 nvidia.com/gpu: used" in nlp
    assert main(["history", str(ORG), "--prometheus", "http://x", "--out", str(tmp_path), "--step", "7"]) == 2
    assert "divides" in capsys.readouterr().err
    page = tmp_path / "report.html"
    assert main(["capacity", str(ORG), "--format", "html", "--prometheus", "http://prometheus.invalid",
                 "--history-step", "60", "--out", str(page)]) == 0
    html = page.read_text()
    assert html.count('<div class="chart history"><svg ') == 18  # 6 subjects x 3 windows
    assert "http://" not in html.split("<script>")[0].split("<body>")[1]
    assert main(["capacity", str(ORG), "--prometheus", "http://x"]) == 2


def _report(usage: Path) -> Any:
    import argparse

    from gpugov.capacity import cluster_report, load_ledger
    from gpugov.cli.common import desired

    state = desired(argparse.Namespace(repo=str(ORG), cluster=None, backend=None, at=None))
    return cluster_report(state, None, load_ledger(usage))
