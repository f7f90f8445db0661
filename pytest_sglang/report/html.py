"""The HTML report (``--sglang-html``): ONE self-contained file, charts as inline SVG.

A Content-Security-Policy forbids every network load, so a report opened from a CI artifact can
neither fetch nor leak anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from pytest_sglang.redaction import clean_text, scrub
from pytest_sglang.report import fleet as fleet_text
from pytest_sglang.report import html_charts as charts
from pytest_sglang.report import text
from pytest_sglang.report.html_soak import soak_charts

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_CSS = """
body{font-family:sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
td.wrap{max-width:22em;overflow-wrap:anywhere;color:#444}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.ok{color:#17692a;font-weight:bold}.bad{color:#b00020;font-weight:bold}
.verdict{font-size:16px;padding:8px;border-radius:4px;display:inline-block}
.pass{background:#e6f4ea}.fail{background:#fce8e6}
code{font-size:12px;word-break:break-all}.charts svg{display:block;margin:12px 0}
.note{color:#555;font-size:13px;overflow-wrap:anywhere}
"""
MAX_SERIES = 8


def render(report: Mapping[str, Any]) -> str:
    """The whole page; escape sequences and control characters of server-provided text removed."""
    return clean_text(_render(report))


def _render(report: Mapping[str, Any]) -> str:
    failed = not text.verdict_line(report).startswith("PASSED")
    body = ["<h1>pytest-sglang gate report</h1>",
            f'<p class="verdict {"fail" if failed else "pass"}">{escape(text.verdict_line(report))}</p>',
            _server(report.get("server")), _fleet(report.get("fleet")), _baseline(report.get("baseline")),
            *(f'<p class="note">{escape(n)}</p>' for n in report.get("notes", [])),
            *(f'<p class="note"><code>{escape(t["nodeid"])}</code> baseline: {escape(n)}</p>'
              for t in report.get("tests", []) for n in text.passed_baseline_notes(t)),
            *(f'<p class="note"><code>{escape(t["nodeid"])}</code> not checked: {escape(n)}</p>'
              for t in report.get("tests", []) for n in text.unchecked_notes(t)),
            *(f'<p class="note"><code>{escape(t["nodeid"])}</code> {escape(n)}</p>'
              for t in report.get("tests", []) for n in text.profile_notes(t)),
            "<h2>Gates</h2>", _gates(report.get("records", [])), _images(report),
            '<h2>Throughput against concurrency</h2><div class="charts">', _throughput(report), "</div>",
            '<h2>Latency distributions</h2><div class="charts">', *_cdfs(report), "</div>",
            '<h2>Capacity and hicache</h2><div class="charts">', _capacity(report), "</div>",
            soak_charts(report),
            '<h2>Startup timeline</h2><div class="charts">', _startup(report.get("server")), "</div>",
            _footer(report)]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
            "<title>pytest-sglang report</title>"
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def _footer(report: Mapping[str, Any]) -> str:
    facts = (f"generated {report.get('generated_at', '')} by pytest-sglang "
             f"{report.get('pytest_sglang_version', '')}, schema {report.get('schema')}")
    return f'<p class="note">{escape(facts)}</p>'


def write_html(report: Mapping[str, Any], path: str | Path) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(scrub(render(report)), encoding="utf-8")
    return target


def _rows(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    head = f"<tr>{''.join(f'<th>{escape(h)}</th>' for h in header)}</tr>" if header else ""
    return f"<table>{head}" + "".join(f"<tr>{''.join(r)}</tr>" for r in rows) + "</table>"


def _td(value: Any, cls: str = "") -> str:
    return f'<td class="{cls}">{escape(str(value))}</td>' if cls else f"<td>{escape(str(value))}</td>"


def _server(server: Mapping[str, Any] | None) -> str:
    if not server:
        return '<p class="note">No server identity recorded.</p>'
    rows = [[_td("server"), _td(text.headline(server))], [_td("hardware"), _td(text.hardware(server))],
            [_td("launch args"), f"<td><code>{escape(' '.join(server.get('launch_args') or []))}</code>"],
            [_td("startup"), _td(text.phases_line(server))]]
    return "<h2>Server</h2>" + _rows(rows, [])


def _fleet(fleet: Mapping[str, Any] | None) -> str:
    """The workers behind the gateway, then each failover: a table row and a timeline chart."""
    if not fleet:
        return ""
    rows = [[_td(row["index"], "num"), _td(row["role"]), f"<td><code>{escape(str(row['url']))}</code></td>",
             _td(fleet_text.health(row), "bad" if "DOWN" in fleet_text.health(row) else ""),
             _td(row.get("sglang_version") or "?"), _td(fleet_text.capacity(row), "num"),
             _td(fleet_text.share(row), "num")] for row in fleet_text.rows(fleet)]
    header = ["worker", "role", "URL", "health", "SGLang", "KV capacity (tokens)", "share of requests"]
    parts = ["<h2>Fleet</h2>", f"<p>{escape(fleet_text.gateway_line(fleet))}</p>", _rows(rows, header) if rows else ""]
    failovers = fleet.get("failovers") or []
    if failovers:
        events = fleet_text.EVENTS
        frows = [[_td(f["nodeid"]), _td(f"{f.get('worker')} ({f.get('signal', '')})"),
                  _td(fleet_text.failover_summary(f), "wrap"),
                  *(_td(_seconds(f["timeline_s"].get(key)), "num") for key, _ in events)] for f in failovers]
        parts += ["<h3>Failover timeline (seconds from the start of the timed load)</h3>",
                  _rows(frows, ["test", "worker killed", "what clients and the gateway saw", *(e for _, e in events)]),
                  '<div class="charts">', *(_failover_chart(i, f) for i, f in enumerate(failovers[:MAX_SERIES])),
                  "</div>"]
    return "".join(parts)


def _seconds(value: object) -> str:
    return f"{value:.2f}" if _is_num(value) else "-"


def _failover_chart(i: int, failover: Mapping[str, Any]) -> str:
    """Bars: the load, the worker down (kill to restarted), clients' errors, undetected, recovering."""
    t = failover.get("timeline_s") or {}
    spans = (("load", 0.0, t.get("load_end")), ("worker down", t.get("kill"), t.get("restarted")),
             ("client errors", t.get("first_error"), t.get("last_error")),
             ("until detected", t.get("kill"), t.get("detected")),
             ("until serving again", t.get("restart"), t.get("recovered")))
    bars = [(label, a, b) for label, a, b in ((n, _float(x), _float(y)) for n, x, y in spans)
            if a is not None and b is not None]
    title = f"Failover {_short(str(failover.get('nodeid', '')))}: worker {failover.get('worker')} " \
            f"{failover.get('signal', '')}"
    return charts.gantt(f"failover-{i}", title, bars, x_label="seconds from the start of the timed load",
                        none="no failover event was recorded")


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _baseline(baseline: Mapping[str, Any] | None) -> str:
    if not baseline:
        return ""
    items = [f"<li>{escape(d)}</li>" for d in baseline.get("fingerprint_differences") or []]
    items += [f"<li>candidate vs baseline: {escape(c['field'])}: <code>{escape(c['baseline'])}</code> -&gt; "
              f"<code>{escape(c['candidate'])}</code></li>" for c in baseline.get("candidate_changes") or []]
    held = text.baseline_launches(baseline)
    items += [f"<li>{escape(held)}</li>"] if held else []
    return (f"<h2>Baseline</h2><p><code>{escape(str(baseline['path']))}</code>: "
            f"{escape(text.baseline_state(baseline))}</p><ul>{''.join(items)}</ul>")


def _gates(records: Sequence[Mapping[str, Any]]) -> str:
    if not records:
        return '<p class="note">No gate checks were recorded.</p>'
    rows = [[_td(r["nodeid"]), _td(r["gate"]), _td(r["metric"]),
             _td(text.value(r.get("measured"), r.get("unit", "")), "num"), _td(text.required(r), "num"),
             _td(text.verdict(r), "ok" if r.get("passed") else "bad"), _td(r.get("source", ""), "wrap"),
             _td(r.get("load_shape", "") or r.get("detail", ""), "wrap")] for r in records]
    header = ["test", "gate", "check", "measured", "required", "verdict", "source", "load / detail"]
    return _rows(rows, header)


def _images(report: Mapping[str, Any]) -> str:
    """Image loads: images and image tokens per request, TTFT with images (as the terminal and JSON)."""
    rows = [[_td(t["nodeid"]), *(_td(c, "wrap" if i == len(text.IMAGE_HEADER) - 1 else "num")
                                 for i, c in enumerate(text.image_cells(ld["images"])))]
            for t in report.get("tests", []) for ld in t.get("loads", []) if ld.get("images")]
    return "<h2>Image loads</h2>" + _rows(rows, ["test", *text.IMAGE_HEADER]) if rows else ""


def _loads(report: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(_short(t["nodeid"]), ld) for t in report.get("tests", []) for ld in t.get("loads", [])]


def _short(nodeid: str) -> str:
    return nodeid.rsplit("::", 1)[-1] if "::" in nodeid else nodeid


def _throughput(report: Mapping[str, Any]) -> str:
    series: dict[str, list[tuple[float, float]]] = {}
    skipped = 0
    for name, load in _loads(report):
        x = _concurrency(load)
        y = load.get("output_throughput")
        if (load.get("failed") or 0) > 0:
            skipped += 1  # a run with failed requests has no meaningful throughput
        elif x is not None and isinstance(y, (int, float)):
            series.setdefault(name, []).append((float(x), float(y)))
    title = "Output throughput against concurrency (each point = one load run)"
    chart = charts.line_chart("throughput", title,
                              [charts.Series(n, p) for n, p in list(series.items())[:MAX_SERIES]],
                              "concurrency (requests in flight; max-concurrency of the run)",
                              "output throughput (tok/s)")
    note = f'<p class="note">{skipped} load runs with failed requests are not plotted.</p>' if skipped else ""
    return chart + note


def _concurrency(load: Mapping[str, Any]) -> float | None:
    raw = load.get("spec")
    spec: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    for value in (spec.get("concurrency"), load.get("max_concurrency"), load.get("concurrency")):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


_CDFS = (("ttft", "Time to first token (TTFT)", "TTFT (ms)"),
         ("itl", "Inter-token latency (ITL)", "ITL (ms)"),
         ("e2e_latency", "End-to-end latency", "end-to-end latency (ms)"))
_PCTS = (("median", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99))


def _cdfs(report: Mapping[str, Any]) -> list[str]:
    loads = _loads(report)[:MAX_SERIES]
    out = []
    for metric, title, label in _CDFS:
        series = [_cdf_series(name, ld, metric) for name, ld in loads]
        series = [s for s in series if s.points]
        out.append(charts.line_chart(f"cdf-{metric}", f"{title}: cumulative distribution", series, label,
                                     "share of requests (%)", step=True, y_max=100.0))
    return out


def _load_label(test: str, load: Mapping[str, Any]) -> str:
    concurrency = _concurrency(load)
    return test + (f" (concurrency {concurrency:g})" if concurrency is not None else "")


def cdf_points(values: Sequence[float], max_points: int = 400) -> list[tuple[float, float]]:
    """Return the empirical CDF in percent, thinned to at most ``max_points`` evenly spaced ranks.

    The last, slowest value is always kept, so the file stays small and the tail stays visible.
    """
    ordered = sorted(values)
    n = len(ordered)
    ranks = range(n) if n <= max_points else sorted(
        {int(i * (n - 1) / (max_points - 1)) for i in range(max_points)})
    return [(ordered[i], (i + 1) / n * 100.0) for i in ranks]


def _cdf_series(test: str, load: Mapping[str, Any], metric: str) -> charts.Series:
    """Exact CDF from per-request records; else the percentiles bench_serving reports (as points)."""
    records = [r for r in load.get("records") or [] if not r.get("error_kind")]
    key = {"e2e_latency": "e2e"}.get(metric, metric)
    values: list[float] = []
    for r in records:
        v = r.get(key)
        values += [x * 1000.0 for x in v] if isinstance(v, list) else ([v * 1000.0] if v else [])
    if values:
        return charts.Series(_load_label(test, load), cdf_points(values))
    points = [(float(load[f"{p}_{metric}_ms"]), q * 100) for p, q in _PCTS
              if isinstance(load.get(f"{p}_{metric}_ms"), (int, float))]
    return charts.Series(_load_label(test, load) + " (p50/p90/p95/p99 only)", points, step=False)


def _capacity(report: Mapping[str, Any]) -> str:
    # A chart label has little room: cut a worker's URL, never the metric (the table below has it whole).
    items = [(_chart_name(r), float(r["measured"]), float(r["required"]), bool(r["passed"]),
              str(r.get("unit", ""))) for r in report.get("records", [])
             if r["gate"] in ("capacity", "hicache") and _is_num(r.get("measured"))
             and _is_num(r.get("required"))]
    return charts.measured_vs_required("capacity", "Capacity and hicache: measured against required", items)


def _chart_name(record: Mapping[str, Any]) -> str:
    name = f"{record['gate']} {record['metric']}"
    return text.fit_name(name, 36) or name


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _startup(server: Mapping[str, Any] | None) -> str:
    phases = [(str(p["name"]), float(p["start_s"]), float(p["end_s"]))
              for p in (server or {}).get("phases", [])]
    title = "Startup timeline (one bar per phase)"
    if server and server.get("ready_s") is not None:
        title += f": ready after {text.seconds(server['ready_s'])}"
    return charts.gantt("startup", title, phases)
