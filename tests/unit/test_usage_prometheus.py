"""DCGM utilisation over a range, for idle hours: a real HTTP server on 127.0.0.1 speaking
Prometheus' /api/v1/query_range, answering from tests/fixtures/dcgm (the e2e usage test serves
the same fixture for the pods it runs)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlparse

import pytest

from gpugov.sources import prometheus
from gpugov.sources.prometheus import PrometheusError, query_range, utilisation_series
from tests.helpers.local_http import serving
from tests.helpers.repos import FIXTURES

FIXTURES = FIXTURES / "dcgm"


def load_fixture(name: str, **names: str) -> dict[str, list[dict[str, Any]]]:
    text = (FIXTURES / name).read_text()
    for key, value in names.items():
        text = text.replace("{" + key + "}", value)
    data = json.loads(text)
    data.pop("_comment", None)
    return data


class FakeRangePrometheus(BaseHTTPRequestHandler):
    """Answers query_range with each fixture series' value at every step of the asked range, up to the
    series' "until" (epoch seconds) where it has one: the exporter lost it then. An instant query
    (`max_over_time(...[window])`) answers each series' value, as Prometheus does for any series with a
    sample in the window, however early it stopped."""

    series: ClassVar[dict[str, list[dict[str, Any]]]] = {}
    requests: ClassVar[list[dict[str, str]]] = []
    answer: ClassVar[tuple[int, str, bytes] | None] = None  # (status, content type, body) instead

    def do_GET(self) -> None:
        url = urlparse(self.path)
        params = {k: v[0] for k, v in parse_qs(url.query).items()}
        type(self).requests.append(params)
        if self.answer is not None:
            status, content_type, body = self.answer
        else:
            metric = "DCGM_FI_DEV_GPU_UTIL" if "GPU_UTIL" in params["query"] else "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
            status, content_type = 200, "application/json"
            if url.path == "/api/v1/query":
                result = [{"metric": s["metric"], "value": [0, s["value"]]} for s in self.series.get(metric, [])]
                data = {"resultType": "vector", "result": result}
            else:
                start, end, step = float(params["start"]), float(params["end"]), float(params["step"])
                times = [start + i * step for i in range(int((end - start) // step) + 1)]
                result = [{"metric": s["metric"], "values": [[t, s["value"]] for t in times
                                                             if t <= s.get("until", end)]}
                          for s in self.series.get(metric, [])]
                data = {"resultType": "matrix", "result": [r for r in result if r["values"]]}
            body = json.dumps({"status": "success", "data": data}).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def fake_prometheus(series: dict[str, list[dict[str, Any]]]) -> Iterator[str]:
    FakeRangePrometheus.series, FakeRangePrometheus.requests, FakeRangePrometheus.answer = series, [], None
    with serving(FakeRangePrometheus) as url:
        yield url


T0 = datetime(2026, 11, 1, tzinfo=UTC)


def test_utilisation_series_of_whole_gpus_and_mig_pods() -> None:
    series = load_fixture("idle-and-busy.json", busy_namespace="alpha", busy_pod="train-abc12", idle_namespace="beta",
                          idle_pod="infer-xyz98")
    with fake_prometheus(series) as url:
        found = utilisation_series(url, T0, T0 + timedelta(seconds=120), 60)
    assert found == {("alpha", "train-abc12"): [(T0 + timedelta(seconds=s), 87.0) for s in (0, 60, 120)],
                     ("beta", "infer-xyz98"): [(T0 + timedelta(seconds=s), 0.4) for s in (0, 60, 120)]}
    queries = [r["query"] for r in FakeRangePrometheus.requests]
    assert any("DCGM_FI_DEV_GPU_UTIL" in q and "[60s]" in q for q in queries)
    assert any(q.startswith("100 * ") and "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in q for q in queries)


def test_long_ranges_are_read_in_chunks_and_merged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prometheus, "MAX_POINTS", 5)
    series = {"DCGM_FI_DEV_GPU_UTIL": [{"metric": {"exported_namespace": "a", "exported_pod": "p"}, "value": "3"}]}
    with fake_prometheus(series) as url:
        result = query_range(url, "DCGM_FI_DEV_GPU_UTIL", T0, T0 + timedelta(seconds=11), 1)
    assert len(FakeRangePrometheus.requests) == 3  # 5 + 5 + 2 points
    [merged] = result
    assert [v[0] for v in merged["values"]] == [T0.timestamp() + s for s in range(12)]


@pytest.mark.parametrize(("answer", "words"), [
    ((200, "application/json", b'{"status": "error", "error": "query timed out"}'), "query timed out"),
    ((200, "application/json", b'{"status": "success", "data": {"resultType": "vector", "result": []}}'), "not a matrix"),
    ((200, "text/html", b"<html>login</html>"), "JSONDecodeError"),
    ((503, "text/plain", b"down"), "503"),
])
def test_an_answer_that_is_not_a_range_is_incomplete(answer: tuple[int, str, bytes], words: str) -> None:
    with fake_prometheus({}) as url:
        FakeRangePrometheus.answer = answer
        with pytest.raises(PrometheusError, match=words):
            utilisation_series(url, T0, T0 + timedelta(seconds=60), 60)


def test_unreachable_prometheus_is_incomplete() -> None:
    with pytest.raises(PrometheusError):
        query_range("http://127.0.0.1:9", "up", T0, T0 + timedelta(seconds=60), 60)
