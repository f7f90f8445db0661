"""The HTML report in a real headless browser (Debian's chromium), as CI runs it.

Checks: the page makes no network request (only the file itself is loaded), the console stays
empty, and a full-page screenshot shows every chart with data drawn in it (colored pixels
counted inside each chart's box, decoded with a pure-Python PNG decoder).
"""

from __future__ import annotations

from pathlib import Path

import browser
import pytest
import sample

from pytest_sglang.report import html, json_report

pytestmark = pytest.mark.skipif(
    not browser.chromium_available(),
    reason="needs Debian's chromium at /usr/bin/chromium (apt-get install -y chromium)",
)

#: Minimum colored (data) pixels per chart: lines, points, bars; axis text alone is grey.
MIN_COLORED = {
    "throughput": 400,
    "cdf-ttft": 800,
    "cdf-itl": 800,
    "cdf-e2e_latency": 800,
    "capacity": 3000,
    "startup": 3000,
}


def test_html_report_loads_offline_without_console_errors_and_draws_charts(tmp_path: Path) -> None:
    report = json_report.build_report(sample.tests(), sample.identity(), duration_s=3.0, exitstatus=1)
    page = html.write_html(report, tmp_path / "report.html")
    result = browser.open_page(page, tmp_path / "chromium.log")
    assert result.requests == [page.resolve().as_uri()], "the report must not load anything else"
    assert result.console == []
    assert set(result.boxes) == set(MIN_COLORED)
    width, height, rows = browser.decode_png(result.png)
    (tmp_path / "report.png").write_bytes(result.png)  # kept in pytest's basetemp for people to look at
    assert (width, height) == (result.width, result.height)
    for name, box in result.boxes.items():
        assert box["y"] + box["h"] <= height, f"chart {name} is outside the screenshot"
        dark, colored = browser.ink(rows, box)
        assert colored >= MIN_COLORED[name], f"chart {name} looks empty: {colored} colored pixels"
        assert dark < box["w"] * box["h"] * 0.6, f"chart {name} is mostly ink: {dark} pixels"


def test_the_checks_can_fail_empty_charts_and_a_blocked_fetch_are_seen(tmp_path: Path) -> None:
    """Proof that the browser checks discriminate: no data means no colored pixels, and a
    fetch smuggled into the page is blocked by the report's CSP and shows up on the console."""
    report = json_report.build_report([], None)
    text = html.render(report).replace("</body>", '<img src="http://127.0.0.1:9/x.png"></body>')
    page = tmp_path / "tampered.html"
    page.write_text(text, encoding="utf-8")
    result = browser.open_page(page, tmp_path / "chromium.log")
    assert any("Content Security Policy" in line for line in result.console), result.console
    _, _, rows = browser.decode_png(result.png)
    for name in ("throughput", "cdf-ttft", "startup"):
        assert browser.ink(rows, result.boxes[name])[1] < MIN_COLORED[name]
