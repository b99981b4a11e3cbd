"""The capacity page in a real headless browser (Debian's chromium): the inline script draws every
chart offline, the bars carry the report's exact numbers at one scale, and the screenshot is not
blank. Skipped with the reason when chromium is absent (CI installs it: see .ci/run)."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from pathlib import Path

import pytest

from gpugov.app.desired import desired_state
from gpugov.capacity import cluster_report, load_ledger
from gpugov.capacity.html import COLOURS, html
from gpugov.capacity.jsonout import report_json
from tests.helpers.repos import FIXTURES

FIXTURES = FIXTURES / "ledger"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]
WIDTH, HEIGHT = 1280, 2400


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        reason = "no chromium on PATH (as root: apt-get install -y chromium)"
        if os.environ.get("GPUGOV_REQUIRE_E2E") == "1":
            pytest.fail(f"{reason}; GPUGOV_REQUIRE_E2E=1 forbids skipping", pytrace=False)
        pytest.skip(reason)
    return found


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    state = desired_state(FIXTURES / "org", cluster="lab")
    reports = [cluster_report(state, None, load_ledger(FIXTURES / "lab-window.json"))]
    path = tmp_path_factory.mktemp("capacity") / "capacity.html"
    path.write_text(html(reports), encoding="utf-8")
    return path, report_json(reports)


def browse(page: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "profile"
    profile.mkdir()
    command = [chromium(), *FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_the_script_draws_every_bar_with_the_reports_numbers(page: tuple[Path, dict], tmp_path: Path) -> None:
    path, data = page
    dom = browse(path, tmp_path, "--dump-dom").stdout
    assert 'id="chart-status">3 charts drawn<' in dom  # the inline script ran, offline
    bars = re.findall(r'<rect x="[\d.]+" y="[\d.]+" width="([\d.]+)" height="14" fill="(#[0-9a-f]{6})" '
                      r'data-series="(\w+)" data-row="([^"]+)" data-value="([^"]+)">', dom)
    (cluster,) = data["clusters"]
    expected = []
    for pool in cluster["pools"]:
        for r in pool["resources"]:
            expected += [("physical", f"{pool['pool']} {r['resource']}", r["physical_declared"]),
                         ("guaranteed", f"{pool['pool']} {r['resource']}", r["guaranteed"]),
                         ("borrowable", f"{pool['pool']} {r['resource']}", r["borrowable"])]
    for u in cluster["usage"]:
        row = f"{u['tenant']} {u['pool']} {u['resource']}"
        expected += [(s, row, u[k]) for s, k in (("guaranteed", "guaranteed_hours"), ("in_quota", "in_quota_hours"),
                                                  ("borrowed", "borrowed_hours"), ("idle", "idle_hours"))]
    for p in cluster["pool_usage"]:
        row = f"{p['pool']} {p['resource']}"
        expected += [(s, row, p[k]) for s, k in (("physical", "capacity_hours"), ("used", "used_hours"),
                                                  ("borrowed", "lent_hours"), ("idle", "idle_hours"))]
    assert [(s, r, v) for _, _, s, r, v in bars] == expected
    assert all(colour == COLOURS[series] for _, colour, series, _, _ in bars)
    # One scale per chart: the longest bar spans the bar column (the chart less its label and value
    # columns, sized to their text), the others in proportion.
    charts = [bars[:9], bars[9:29], bars[29:]]
    for chart in charts:
        top = max(float(v) for *_, v in chart)
        span = max(float(w) for w, *_ in chart)
        assert span > 300
        for width, _, _, _, value in chart:
            assert abs(float(width) - float(value) * span / top) < 0.02
    assert len(bars) == 9 + 20 + 12
    assert "1440" in dom and "chronic-borrower" in dom


def _png_rows(data: bytes) -> tuple[int, int, int, list[bytes]]:
    """Width, height, bytes per pixel and the unfiltered rows of an 8-bit RGB(A) PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, bpp = 8, [], 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and colour in (2, 6), (depth, colour)
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat.append(chunk)
        pos += 12 + length
    raw, stride = zlib.decompress(b"".join(idat)), width * bpp
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up, corner = previous[i], previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                estimate = left + up - corner
                pa, pb, pc = abs(estimate - left), abs(estimate - up), abs(estimate - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, bpp, rows


def test_the_screenshot_shows_the_charts(page: tuple[Path, dict], tmp_path: Path) -> None:
    path, _ = page
    shot = tmp_path / "capacity.png"
    browse(path, tmp_path, f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={shot}")
    width, height, bpp, rows = _png_rows(shot.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT)
    pixels: Counter[tuple[int, int, int]] = Counter()
    for row in rows:
        for x in range(0, width * bpp, bpp * 2):  # every other pixel is plenty
            pixels[(row[x], row[x + 1], row[x + 2])] += 1
    total = sum(pixels.values())
    assert pixels[(255, 255, 255)] < 0.97 * total  # not a blank page
    for series in ("physical", "guaranteed", "borrowable", "in_quota", "borrowed", "idle", "used"):
        rgb = tuple(int(COLOURS[series][i:i + 2], 16) for i in (1, 3, 5))
        assert pixels[rgb] > 100, f"no {series} bar in the screenshot"


# Measured in the page by the browser itself, after the charts are drawn: every text's box against
# every bar's and every other text's, and against the chart's width.
MEASURE = """<script>
(function () {
  var out = [];
  function box(e) { var b = e.getBBox(); return [b.x, b.y, b.x + b.width, b.y + b.height]; }
  function hit(a, b) { return a[0] < b[2] - 0.5 && b[0] < a[2] - 0.5 && a[1] < b[3] - 0.5 && b[1] < a[3] - 0.5; }
  var charts = document.querySelectorAll('svg');
  charts.forEach(function (svg, n) {
    var texts = Array.prototype.slice.call(svg.querySelectorAll('text'));
    var rects = Array.prototype.slice.call(svg.querySelectorAll('rect'));
    var width = svg.width.baseVal.value;
    texts.forEach(function (t, i) {
      var a = box(t);
      if (a[2] > width) { out.push([n, 'past the chart', t.textContent]); }
      rects.forEach(function (r) { if (hit(a, box(r))) { out.push([n, 'over a bar', t.textContent]); } });
      texts.slice(i + 1).forEach(function (u) { if (hit(a, box(u))) { out.push([n, 'over a text', t.textContent]); } });
    });
  });
  var pre = document.createElement('pre');
  pre.id = 'overlaps';
  pre.textContent = JSON.stringify({charts: charts.length, overlaps: out});
  document.body.appendChild(pre);
})();
</script>"""


@pytest.mark.parametrize("names", [{}, {"vision": "autonomous-driving-perception", "a100": "a100-mig-inference-east",
                                        "nlp": "natural-language-processing-research"}])
def test_no_label_overlaps_a_bar_or_another_label(page: tuple[Path, dict], tmp_path: Path, names: dict) -> None:
    """Issue #23 item 10: long tenant and pool names ran over the bars (a fixed 260 px label column)."""
    import json

    path, _ = page
    text = path.read_text(encoding="utf-8")
    for old, new in names.items():
        text = text.replace(f'"{old}"', f'"{new}"')  # in the embedded report the script draws from
    measured = tmp_path / "measured.html"
    measured.write_text(text.replace("</body>", MEASURE + "\n</body>"), encoding="utf-8")
    dom = browse(measured, tmp_path, "--dump-dom").stdout
    found = re.search(r'<pre id="overlaps">(.*?)</pre>', dom, re.S)
    assert found is not None, dom[-500:]
    result = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert result == {"charts": 3, "overlaps": []}
    for new in names.values():
        assert new in dom
