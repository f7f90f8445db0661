"""Report rendering fixed by issue 21: metric names are never cut, a failed attach says so."""

from __future__ import annotations

from typing import Any

from pytest_sglang.report import terminal, text
from pytest_sglang.report.records import START_NODEID

METRIC = "disaggregation_mode of decode worker 1 (http://10.200.30.41:30001)"


def _report(records: list[dict[str, Any]], *, start: str | None = None) -> dict[str, Any]:
    tests = [{"nodeid": r["nodeid"], "outcome": "failed", "gates": [{"gate": r["gate"], "checks": [r]}]}
             for r in records]
    failed = sum(1 for r in records if not r["passed"])
    return {"server": None, "records": records, "tests": tests, "notes": [],
            "summary": {"tests": 1, "passed": 0, "failed": 1, "error": 0, "skipped": 0, "checks": len(records),
                        "checks_failed": failed, "server_start": start, "interrupted": False}}


def _check(gate: str, metric: str, nodeid: str = "test_pd.py::test_pd") -> dict[str, Any]:
    return {"nodeid": nodeid, "gate": gate, "metric": metric, "measured": False, "required": True, "op": "==",
            "unit": "", "passed": False}


def test_a_long_metric_keeps_its_name_and_cuts_the_url() -> None:
    lines = terminal.render(_report([_check("pd", METRIC)]))
    row = next(line for line in lines if "disaggregation_mode" in line or "pd disagg" in line)
    assert "pd disaggregation_mode of decode worker 1 (" in " ".join(lines)
    assert "FAILED" in lines[lines.index(row)] or "FAILED" in lines[lines.index(row) + 1]


def test_a_name_that_cannot_fit_gets_its_own_line() -> None:
    metric = "a very long metric name that explains exactly which check failed here"
    lines = terminal.render(_report([_check("acceptance", metric)]))
    assert f"acceptance {metric}" in " ".join(line.strip() for line in lines)  # wrapped, never cut
    assert all(len(line) <= terminal.WIDTH for line in lines)


def test_fit_name_cuts_only_the_url() -> None:
    assert text.fit_name("short", 36) == "short"
    fitted = text.fit_name(f"pd {METRIC}", 56)
    assert fitted is not None and fitted.startswith("pd disaggregation_mode of decode worker 1 (htt")
    assert len(fitted) == 56 and "…" in fitted
    assert text.fit_name("no url here but far too long for the column", 20) is None


def test_a_failed_attach_is_not_called_a_failed_start() -> None:
    attach = _check("attach", "reachable", nodeid=START_NODEID)
    report = _report([attach], start="error")
    assert text.verdict_line(report).startswith("FAILED: the server could not be attached;")
    assert "server   could not be attached: the diagnosis is in the first error of this run" in terminal.render(report)
    start = _report([_check("startup", "ready", nodeid=START_NODEID)], start="error")
    assert text.verdict_line(start).startswith("FAILED: the server did not start;")


def test_a_load_over_several_ray_nodes_says_so_under_its_test() -> None:
    report = _report([_check("throughput", "output_tok_s")])
    shards = [{"shard": k, "node_id": node * 4, "address": f"10.0.0.{k + 1}"} for k, node in enumerate(("ab", "cd"))]
    report["tests"][0]["loads"] = [{"dataset_name": "random-ids", "workload": {"nodes": shards}}]
    lines = terminal.render(report)
    at = lines.index("    load shards: 2 shards over 2 Ray nodes: abababab (10.0.0.1), cdcdcdcd")
    assert lines[at + 1] == "      (10.0.0.2)"


def test_a_figure_too_long_for_its_column_is_shown_whole() -> None:
    """Issue 34: "failed 3 times in a row" was cut to "fail… in a row", hiding the count."""
    probe = {**_check("probes", "readiness probe GET /health"), "measured": "failed 3 times in a row",
             "required": "held"}
    lines = terminal.render(_report([probe]))
    assert not any("…" in line for line in lines), lines
    assert "    measured failed 3 times in a row, required == held" in lines, lines
    assert all(len(line) <= terminal.WIDTH for line in lines)
    fits = terminal.render(_report([{**probe, "measured": "held"}]))  # a figure that fits stays in its column
    assert any(line.startswith("  probes readiness probe GET /health") and " held " in line for line in fits), fits
