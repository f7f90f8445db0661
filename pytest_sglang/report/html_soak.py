"""The soak charts of the HTML report: each ``sglang_soak`` test's series against time.

The series is the gate outcome's ``context["_soak"]`` (:data:`pytest_sglang.gates.production.soak.DATA_KEY`),
at most a few hundred points already (downsampled by the gate). Three charts per soak: resident
memory, free KV tokens as a share of the pool, and the requests (running, queued, completed a second).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_sglang.report import html_charts as charts

__all__ = ["completion_rate", "soak_charts"]

#: Soaks drawn at most (each draws three charts).
MAX_SOAKS = 8
_X = "seconds from the start of the soak"


def _soaks(report: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    found = []
    for test in report.get("tests", []):
        for gate in test.get("gates", []):
            data = (gate.get("context") or {}).get("_soak")
            if gate.get("gate") == "soak" and isinstance(data, Mapping) and isinstance(data.get("series"), list):
                found.append((str(test.get("nodeid", "")), data))
    return found[:MAX_SOAKS]


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _points(series: Sequence[Mapping[str, Any]], key: str, scale: float = 1.0) -> list[tuple[float, float]]:
    out = []
    for row in series:
        t, y = _num(row.get("t")), _num(row.get(key))
        if t is not None and y is not None:
            out.append((t, y * scale))
    return out


def _kv_share(series: Sequence[Mapping[str, Any]]) -> list[tuple[float, float]]:
    out = []
    for row in series:
        t, free, total = _num(row.get("t")), _num(row.get("kv_free")), _num(row.get("kv_total"))
        if t is not None and free is not None and total:
            out.append((t, 100.0 * free / total))
    return out


def completion_rate(series: Sequence[Mapping[str, Any]]) -> list[tuple[float, float]]:
    """Requests completed a second between consecutive samples (at the later sample's time).

    A gap far shorter than the others (the last sample, taken as an early stop ends the soak) is left
    out: a rate over a few milliseconds is noise.
    """
    spans = []
    for before, after in itertools.pairwise(series):
        t0, t1 = _num(before.get("t")), _num(after.get("t"))
        c0, c1 = _num(before.get("completed")), _num(after.get("completed"))
        if t0 is not None and t1 is not None and c0 is not None and c1 is not None and t1 > t0:
            spans.append((t1, t1 - t0, c1 - c0))
    if not spans:
        return []
    typical = statistics.median(dt for _, dt, _ in spans)
    return [(t, done / dt) for t, dt, done in spans if dt >= typical / 4]


def _charts(i: int, nodeid: str, data: Mapping[str, Any]) -> list[str]:
    series = data["series"]
    name = nodeid.rsplit("/", 1)[-1]
    warm = _num(data.get("warmup_s"))
    note = f" (slopes from {warm:g} s on)" if warm else ""
    requests = [charts.Series(label, pts) for label, pts in
                (("running", _points(series, "running")), ("queued", _points(series, "queued")),
                 ("completed per second", completion_rate(series))) if pts]
    return [
        charts.line_chart(f"soak-rss-{i}", f"Soak {name}: resident memory{note}",
                          [charts.Series("RSS (MB)", _points(series, "rss_mb"))], _X, "MB"),
        charts.line_chart(f"soak-kv-{i}", f"Soak {name}: free KV tokens{note}",
                          [charts.Series("free KV (% of the pool)", _kv_share(series))], _X, "% of the pool",
                          y_max=100.0),
        charts.line_chart(f"soak-requests-{i}", f"Soak {name}: requests", requests, _X, "requests"),
    ]


def soak_charts(report: Mapping[str, Any]) -> str:
    """The charts of every soak in ``report`` ("" when it has none: the section is then left out)."""
    found = _soaks(report)
    if not found:
        return ""
    body = [chart for i, (nodeid, data) in enumerate(found) for chart in _charts(i, nodeid, data)]
    return '<h2>Soak series</h2><div class="charts">' + "\n".join(body) + "</div>"
