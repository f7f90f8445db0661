"""The terminal summary section: one row per check, readable in an 80-column CI log."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

from pytest_sglang.loadgen.run.result import workload_context
from pytest_sglang.redaction import clean_text
from pytest_sglang.report import fleet as fleet_text
from pytest_sglang.report import text

WIDTH = 80
_NAME, _MEASURED, _REQUIRED = 36, 14, 17


def render(report: Mapping[str, Any], width: int = WIDTH) -> list[str]:
    """The section's lines (without the ``=== sglang gates ===`` separator pytest draws).

    Server-provided text (model names, error bodies, log lines) may carry escape sequences: none
    reaches the terminal.
    """
    lines = _identity(report.get("server"), width, failure=text.start_failure(report))
    lines += _fleet(report.get("fleet"), width)
    lines += _baseline(report.get("baseline"), width)
    for note in report.get("notes", []):
        lines += textwrap.wrap(note, width=width, initial_indent="note: ", subsequent_indent="      ")
    lines += _table(report)
    lines += _failovers(report.get("fleet"), width)
    lines += textwrap.wrap(text.verdict_line(report), width=width, subsequent_indent="  ")
    return [clean_text(line) for line in lines]


def _field(label: str, value: str, width: int) -> list[str]:
    return textwrap.wrap(value, width=width, initial_indent=f"{label:<9}", subsequent_indent=" " * 9,
                         break_on_hyphens=False, break_long_words=True) or [label]


def _identity(server: Mapping[str, Any] | None, width: int, failure: str | None = None) -> list[str]:
    if not server and failure:
        what = failure.removeprefix("the server ")
        return [f"server   {what}: the diagnosis is in the first error of this run"]
    if not server:
        return ["server   no server identity recorded (no test used the sglang_server fixture)"]
    lines = _field("server", text.headline(server), width)
    lines += _field("hardware", text.hardware(server), width)
    if server.get("url"):
        lines += _field("url", str(server["url"]), width)
    if server.get("launch_args"):
        lines += _field("launch", " ".join(server["launch_args"]), width)
    lines += _field("startup", text.phases_line(server), width)
    return lines


def _fleet(fleet: Mapping[str, Any] | None, width: int) -> list[str]:
    """The gateway, then one row per worker: index, role, health, SGLang version, KV capacity, share, URL."""
    if not fleet or not fleet.get("workers"):
        return []
    lines = _field("fleet", fleet_text.gateway_line(fleet), width)
    head = f"  {'#':>3} {'role':<8} {'health':<15} {'SGLang':<8} {'capacity':>10} {'share':>5} url"
    lines.append(head)
    for row in fleet_text.rows(fleet):
        cells = (f"  {row['index']:>3} {text.clip(str(row['role']), 8):<8} {fleet_text.health(row):<15} "
                 f"{text.clip(str(row.get('sglang_version') or '?'), 8):<8} {fleet_text.capacity(row):>10} "
                 f"{fleet_text.share(row):>5} ")
        lines.append(cells + text.clip(str(row["url"]), max(8, width - len(cells))))
    return lines


def _failovers(fleet: Mapping[str, Any] | None, width: int) -> list[str]:
    """Each failover: the test, what clients and the gateway showed, and its timeline (s from the load start)."""
    lines: list[str] = []
    for failover in (fleet or {}).get("failovers") or []:
        outcome = str(failover.get("outcome", "")).upper()
        head = text.clip(f"failover {failover['nodeid']}", width - len(outcome) - 1)
        lines.append(head.ljust(width - len(outcome) - 1) + " " + outcome)
        for part in (fleet_text.failover_head(failover), "timeline: " + fleet_text.timeline_text(failover)):
            lines += textwrap.wrap(part, width=width, initial_indent="  ", subsequent_indent="    ")
    return lines


def _baseline(baseline: Mapping[str, Any] | None, width: int) -> list[str]:
    if not baseline:
        return []
    lines = _field("baseline", text.baseline_state(baseline), width) + _field("", str(baseline["path"]), width)
    for item in baseline.get("fingerprint_differences") or []:
        lines += textwrap.wrap(item, width=width, initial_indent="  - ", subsequent_indent="    ")
    for item, change in zip(text.candidate_lines(baseline), baseline.get("candidate_changes") or [], strict=True):
        if len(item) + 2 <= width:
            lines.append(f"  {item}")
            continue
        # Too long for one line: the values on their own lines, so a flag stays next to its value.
        lines.append(f"  candidate vs baseline: {change['field']}:")
        lines += textwrap.wrap(f"{change['baseline']} -> {change['candidate']}", width=width,
                               initial_indent="    ", subsequent_indent="    ", break_on_hyphens=False)
    held = text.baseline_launches(baseline)
    if held:
        lines += textwrap.wrap(held, width=width, initial_indent="  ", subsequent_indent="    ")
    return lines


def _table(report: Mapping[str, Any]) -> list[str]:
    header = f"  {'check':<{_NAME}} {'measured':>{_MEASURED}} {'required':>{_REQUIRED}} verdict"
    lines = [header.rstrip()]
    for test in report.get("tests", []):
        if not test.get("gates"):
            continue
        outcome = str(test.get("outcome", "")).upper()
        lines.append(text.clip(str(test["nodeid"]), WIDTH - len(outcome) - 1).ljust(WIDTH - len(outcome) - 1)
                     + " " + outcome)
        for gate in test["gates"]:
            for check in gate["checks"]:
                lines += _row(gate["gate"], check)
        for note in text.passed_baseline_notes(test):
            lines += textwrap.wrap(note, width=WIDTH, initial_indent="    note: ", subsequent_indent="      ")
        for note in text.unchecked_notes(test):
            lines += textwrap.wrap(note, width=WIDTH, initial_indent="    not checked: ", subsequent_indent="      ")
        for note in text.profile_notes(test):
            lines += textwrap.wrap(note, width=WIDTH, initial_indent="    ", subsequent_indent="      ")
        lines += _workload_lines(test.get("loads") or [])
    if len(lines) == 1:
        lines.append("  (no gate checks were recorded)")
    return lines


#: Said of every load: where a sharded load ran (its figures are several nodes' clients, merged).
_ALWAYS = ("load shards", "steady state")


def _workload_lines(loads: list[Mapping[str, Any]]) -> list[str]:
    """Prefix-cache hit rate and replay timing of trace / multi-turn / file-dataset loads; any load's Ray nodes."""
    lines: list[str] = []
    for load in loads:
        random = load.get("dataset_name", "random-ids") == "random-ids"
        for label, value in workload_context(load.get("cache_report") or {}, load.get("workload") or {},
                                            load.get("prompt_tokens"), load.get("steady_state")).items():
            flagged = (label == "prompt tokens" and (load.get("prompt_tokens") or {}).get("flagged")) or (
                label == "vocabulary" and not (load.get("workload") or {}).get("vocab", {}).get("read", True))
            if random and label not in _ALWAYS and not flagged:
                continue
            lines += textwrap.wrap(f"{label}: {value}", width=WIDTH, initial_indent="    ", subsequent_indent="      ")
        if load.get("images"):
            lines += textwrap.wrap(f"images: {image_text(load['images'])}", width=WIDTH, initial_indent="    ",
                                   subsequent_indent="      ")
    return lines


def image_text(facts: Mapping[str, Any]) -> str:
    """An image load's figures in one line: images and image tokens per request, TTFT with images."""
    tokens = facts.get("image_tokens_per_request")
    counted = "image tokens not reported" if tokens is None else \
        f"{tokens:,.1f} image tokens per request ({facts.get('image_tokens_basis')})"
    return (f"{facts.get('images_per_request', 0):g} per request, {counted}; TTFT with images mean "
            f"{facts.get('mean_ttft_ms', 0):,.1f} ms, p99 {facts.get('p99_ttft_ms', 0):,.1f} ms")


#: Shorter units for the 80-column table ("32 c… requests" was unreadable), used only when needed.
SHORT_UNITS = {"concurrent requests": "concurrent", "requests": "req", "tokens": "tok"}


def _row(gate: str, check: Mapping[str, Any]) -> list[str]:
    """The check's row; a name or a figure too long for its column gets its own lines, never a cut.

    The metric name is never cut: it is what tells one failed check from another; nor is a figure
    ("failed 3 times in a row" cut to "fail… in a row" hid the count).
    """
    full = f"{gate} {check['metric']}"
    name = text.fit_name(full, _NAME)
    above: list[str] = []
    if name is None:
        above = textwrap.wrap(full, width=WIDTH - 2, initial_indent="  ", subsequent_indent="    ",
                              break_on_hyphens=False)
        name = ""
    measured_text, required_text = text.value(check.get("measured"), check.get("unit", "")), text.required(check)
    measured, required = _fit(measured_text, check, _MEASURED), _fit(required_text, check, _REQUIRED)
    below: list[str] = []
    if measured is None or required is None:  # both figures on the line below, whole
        below = textwrap.wrap(f"measured {measured_text}, required {required_text}", width=WIDTH - 4,
                              initial_indent="    ", subsequent_indent="      ", break_on_hyphens=False)
        measured, required = "(below)", ""
    row = f"  {name:<{_NAME}} {measured:>{_MEASURED}} {required:>{_REQUIRED}} {text.verdict(check)}"
    # A judged bound (accuracy's score_upper_bound) means little without the figure it bounds.
    if str(check["metric"]).endswith("_bound"):
        below += textwrap.wrap(str(check.get("source", "")), width=WIDTH - 4, initial_indent="    ",
                               subsequent_indent="    ")
    return [*above, row, *below]


def _fit(cell: str, check: Mapping[str, Any], width: int) -> str | None:
    """``cell`` within ``width`` (a long unit shortened), or None when only a cut would fit it."""
    unit = str(check.get("unit", ""))
    if len(cell) > width and unit in SHORT_UNITS and cell.endswith(" " + unit):
        cell = cell[: -len(unit)] + SHORT_UNITS[unit]
    return cell if len(cell) <= width else None
