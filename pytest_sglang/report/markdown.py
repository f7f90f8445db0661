"""The Markdown summary (``--sglang-markdown PATH``, default ``$GITHUB_STEP_SUMMARY`` when set)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_sglang.redaction import clean_text
from pytest_sglang.report import fleet as fleet_text
from pytest_sglang.report import text


def _cell(value: Any) -> str:
    # A pipe would end the cell; a newline would end the table.
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[Any]], align: str | None = None) -> list[str]:
    spec = align or "|".join("---" for _ in header)
    lines = ["| " + " | ".join(header) + " |", "|" + spec + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def render(report: Mapping[str, Any]) -> str:
    lines = ["## pytest-sglang gates", "", f"**{text.verdict_line(report)}**", ""]
    lines += _server(report.get("server"))
    lines += _fleet(report.get("fleet"))
    lines += _gates(report)
    lines += _images(report)
    lines += _failovers(report.get("fleet"))
    lines += _baseline(report.get("baseline"))
    lines += [f"> {n}" for n in report.get("notes", [])]
    lines += [f"> `{test['nodeid']}` baseline: {note}"
              for test in report.get("tests", []) for note in text.passed_baseline_notes(test)]
    lines += [f"> `{test['nodeid']}` not checked: {note}"
              for test in report.get("tests", []) for note in text.unchecked_notes(test)]
    lines += [f"> `{test['nodeid']}` {note}" for test in report.get("tests", []) for note in text.profile_notes(test)]
    # Server-provided text (model names, error bodies) must not smuggle escape sequences into a log.
    return clean_text("\n".join(lines).rstrip()) + "\n"


def _server(server: Mapping[str, Any] | None) -> list[str]:
    if not server:
        return ["_No server identity recorded._", ""]
    rows = [["server", text.headline(server)], ["hardware", text.hardware(server)]]
    if server.get("launch_args"):
        rows.append(["launch args", "`" + " ".join(server["launch_args"]).replace("`", "'") + "`"])
    rows.append(["startup", text.phases_line(server)])
    lines = [*_table(["", ""], rows), ""]
    phases = server.get("phases") or []
    if phases:
        lines += ["<details><summary>Startup phases</summary>", ""]
        lines += _table(["phase", "start", "end", "duration", "source"],
                        [[p["name"], text.seconds(p["start_s"]), text.seconds(p["end_s"]),
                          text.seconds(p["duration_s"]), p.get("source", "")] for p in phases],
                        "---|--:|--:|--:|---")
        lines += ["", "</details>", ""]
    return lines


def _fleet(fleet: Mapping[str, Any] | None) -> list[str]:
    if not fleet or not fleet.get("workers"):
        return []
    rows = [[row["index"], row["role"], _code(row["url"]), fleet_text.health(row), row.get("sglang_version") or "?",
             fleet_text.capacity(row), fleet_text.share(row)] for row in fleet_text.rows(fleet)]
    header = ["worker", "role", "URL", "health", "SGLang", "KV capacity (tokens)", "share of requests"]
    return [f"**Fleet**: {fleet_text.gateway_line(fleet)}", "",
            *_table(header, rows, "--:|---|---|---|---|--:|--:"), ""]


def _failovers(fleet: Mapping[str, Any] | None) -> list[str]:
    failovers = (fleet or {}).get("failovers") or []
    if not failovers:
        return []
    labels = [label for _, label in fleet_text.EVENTS]
    rows = [[f"`{f['nodeid']}`", f"{f.get('worker')} ({f.get('signal', '')})", fleet_text.failover_summary(f),
             *[_seconds(f["timeline_s"].get(key)) for key, _ in fleet_text.EVENTS]] for f in failovers]
    header = ["test", "worker killed", "what clients and the gateway saw", *labels]
    return ["**Failover timeline** (seconds from the start of the timed load)", "",
            *_table(header, rows, "---|---|---|" + "|".join("--:" for _ in labels)), ""]


def _seconds(value: object) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def _gates(report: Mapping[str, Any]) -> list[str]:
    rows = [[f"`{r['nodeid']}`", r["gate"], r["metric"], text.value(r.get("measured"), r.get("unit", "")),
             text.required(r), "✅ ok" if r.get("passed") else "❌ FAILED", r.get("load_shape", "")]
            for r in report.get("records", [])]
    if not rows:
        return ["_No gate checks were recorded._", ""]
    header = ["test", "gate", "check", "measured", "required", "verdict", "load"]
    return [*_table(header, rows, "---|---|---|--:|--:|---|---"), ""]


def _images(report: Mapping[str, Any]) -> list[str]:
    """Image loads: images and image tokens per request, TTFT with images (as the terminal and JSON)."""
    rows = [[f"`{test['nodeid']}`", *text.image_cells(load["images"])]
            for test in report.get("tests", []) for load in test.get("loads", []) if load.get("images")]
    if not rows:
        return []
    return ["**Image loads**", "", *_table(["test", *text.IMAGE_HEADER], rows, "---|--:|--:|--:|--:|---"), ""]


def _baseline(baseline: Mapping[str, Any] | None) -> list[str]:
    if not baseline:
        return []
    lines = [f"**Baseline** {_code(baseline['path'])}: {text.baseline_state(baseline)}", ""]
    lines += [f"- {_code(d)}" for d in baseline.get("fingerprint_differences") or []]
    lines += [f"- candidate vs baseline: {c['field']}: {_code(c['baseline'])} -> {_code(c['candidate'])}"
              for c in baseline.get("candidate_changes") or []]
    held = text.baseline_launches(baseline)
    return [*lines, *([f"- {held}"] if held else []), ""]


def _code(value: object) -> str:
    # A backtick would end the code span early.
    return "`" + str(value).replace("`", "'").replace("\n", " ") + "`"


def write_markdown(report: Mapping[str, Any], path: str | Path, *, append: bool) -> Path:
    """GitHub's step summary is shared by every step of a job, so it is appended to, never replaced."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a" if append else "w", encoding="utf-8") as fh:
        fh.write(render(report))
    return target
