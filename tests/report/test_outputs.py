"""Renderers: terminal (80 columns), JSON schema, Markdown, self-contained HTML, compare CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
import sample

from pytest_sglang.__main__ import main as dispatch
from pytest_sglang.gates.base import GateOutcome, compare
from pytest_sglang.report import html, json_report, markdown, records, terminal


@pytest.fixture
def report() -> dict[str, object]:
    return json_report.build_report(sample.tests(), sample.identity(), duration_s=3.0, exitstatus=1)


def test_schema_is_valid_and_versioned() -> None:
    schema = json_report.load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$id"] == json_report.SCHEMA_ID and schema["properties"]["schema_version"] == {"const": 2}


def test_report_validates_and_a_broken_one_is_reported_by_path(report: dict[str, object]) -> None:
    assert json_report.validation_errors(report) == []
    broken = json.loads(json.dumps(report))
    broken["records"][0]["op"] = "~"
    broken["tests"][0]["outcome"] = "maybe"
    assert json_report.validation_errors(broken) == [
        "$.records[0].op: '~' is not one of ['>=', '<=', '==', 'in']",
        "$.tests[0].outcome: 'maybe' is not one of ['passed', 'failed', 'error', 'skipped']",
    ]


def test_report_without_server_validates() -> None:
    assert json_report.validation_errors(json_report.build_report([], None)) == []


def test_terminal_fits_80_columns_and_names_everything(report: dict[str, object]) -> None:
    lines = terminal.render(report)
    assert max(len(line) for line in lines) <= 80
    text = "\n".join(lines)
    assert lines[:2] == [
        "server   SGLang 0.5.23 | simulator | meta-llama/Llama-3.1-8B-Instruct",
        "         (tp=2,dp=1)",
    ]
    for needle in (
        "GPU 2 x H100 80GB (simulated); host ci-1, 2 CPUs, 24.0 GB RAM",
        "--api-key ***",
        "load weights 16.8 s",
        "cuda graph capture 7.5 s",
        "hicache host_pool_tokens                  8,192 tok     >= 12,000 tok FAILED",
    ):
        assert needle in text


def test_terminal_shortens_long_units_only_when_the_column_is_too_narrow() -> None:
    slo = GateOutcome("slo", [compare("slo", "max_concurrency_meeting_slo", 32, ">=", 1,
                                      unit="concurrent requests", source="load run")])
    cap = GateOutcome("capacity", [compare("capacity", "max_total_num_tokens", 61472, ">=", 1, unit="tokens")])
    lines = terminal.render(json_report.build_report([records.TestRecord("t::slo", gates=[slo, cap])], None))
    assert "  slo max_concurrency_meeting_slo       32 concurrent   >= 1 concurrent ok" in lines
    assert "  capacity max_total_num_tokens         61,472 tokens       >= 1 tokens ok" in lines


def test_markdown_has_tables(report: dict[str, object], tmp_path: Path) -> None:
    md = markdown.render(report)
    assert md.startswith("## pytest-sglang gates\n\n**FAILED: 5/6 checks ok in 4 tests")
    assert "| test | gate | check | measured | required | verdict | load |" in md
    assert "| load weights | 1.2 s | 18.0 s | 16.8 s | log |" in md
    assert "SGLang 0.5.23 \\| simulator" in md  # pipes escaped inside cells
    path = markdown.write_markdown(report, tmp_path / "s.md", append=True)
    markdown.write_markdown(report, path, append=True)
    assert path.read_text().count("## pytest-sglang gates") == 2


def test_html_is_self_contained(report: dict[str, object], tmp_path: Path) -> None:
    page = html.write_html(report, tmp_path / "r.html").read_text()
    assert "<script" not in page and "@import" not in page and "url(" not in page
    assert not re.search(r'(src|href)="(?!#)', page)  # nothing to fetch
    assert "default-src 'none'" in page
    charts = re.findall(r'data-chart="([^"]+)"', page)
    assert charts == ["throughput", "cdf-ttft", "cdf-itl", "cdf-e2e_latency", "capacity", "startup"]
    for label in (
        "output throughput (tok/s)",
        "TTFT (ms)",
        "share of requests (%)",
        "seconds since launch",
        "test_slo_curve (concurrency 32)",
        "16.8 s",
        "8,192 tok (required 12,000)",
        "measured (failed)",
    ):
        assert label in page


def test_html_cdf_falls_back_to_percentiles_and_skips_failed_runs() -> None:
    tests = sample.tests()
    tests[2].loads = [sample.load(8, 900.0, records=False), sample.load(16, 50.0, failed=4)]
    page = html.render(json_report.build_report(tests, None))
    assert "1 load runs with failed requests are not plotted." in page
    assert "No server identity recorded." in page and "no startup phases recorded" in page


def _write(tmp_path: Path, name: str, tput: float, gpu: str = "H100", **identity: object) -> Path:
    tests = sample.tests()
    tests[2].loads = [sample.load(8, tput)]
    path = tmp_path / name
    json_report.write_json(json_report.build_report(tests, sample.identity(gpu_model=gpu, **identity)), path)
    return path


def test_compare_cli_ok_regression_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, same, slow = (
        _write(tmp_path, "old.json", 900.0),
        _write(tmp_path, "same.json", 905.0),
        _write(tmp_path, "slow.json", 700.0),
    )
    assert dispatch(["compare", str(old), str(same), "--max-regression", "output_throughput:5%"]) == 0
    out = capsys.readouterr().out
    assert "fingerprint matches" in out and "0 regression(s) in 7 comparisons" in out
    assert dispatch(["compare", str(old), str(slow), "--max-regression", "output_throughput:5%"]) == 1
    out = capsys.readouterr().out
    assert "tests/test_gate.py::test_throughput" in out
    assert re.search(r"output_throughput +900\.0 -> 700\.0 \(-22\.2%\) +>= 855\.0 REGRESSED", out), out
    assert dispatch(["compare", str(old), str(tmp_path / "nope.json")]) == 2
    assert capsys.readouterr().err.startswith(
        f"error: NEW.json='{tmp_path / 'nope.json'}': file not found. Fix:"
    )
    assert dispatch(["compare", str(old), str(same), "--max-regression", "lots"]) == 2
    assert "error: --max-regression='lots': cannot read 'lots'" in capsys.readouterr().err


def test_compare_cli_compares_capacity_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = _write(tmp_path, "old.json", 900.0)
    tests = sample.tests()
    tests[0].gates = [sample.capacity_outcome(tokens=3000)]
    small = tmp_path / "small.json"
    json_report.write_json(json_report.build_report(tests, sample.identity(gpu_model="H100")), small)
    assert dispatch(["compare", str(old), str(small), "--max-regression", "max_total_num_tokens:10%"]) == 1
    out = capsys.readouterr().out
    assert re.search(
        r"tests/test_gate.py::test_capacity\n  max_total_num_tokens +4,096 -> 3,000 \(-26\.8%\) +>= 3,686\.4 "
        r"REGRESSED\n",
        out,
    ), out
    assert "1 regression(s) in 1 comparisons" in out


def test_compare_cli_fingerprint_warns_or_fails_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, other = _write(tmp_path, "old.json", 900.0), _write(tmp_path, "a100.json", 500.0, gpu="A100")
    assert dispatch(["compare", str(old), str(other)]) == 0  # 44% slower, but on another GPU: not compared
    out = capsys.readouterr().out
    assert out.endswith(
        "NOT COMPARED: measured on another setup (warning):\n  - gpu_model: 'H100' (baseline) != 'A100' (this run)\n")
    assert dispatch(["compare", str(old), str(other), "--strict"]) == 1


def test_compare_cli_compares_a_candidate_and_names_what_it_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = _write(tmp_path, "old.json", 900.0)
    args = ["--model-path", "m", "--tp", "2", "--api-key", "***", "--sim-time-scale", "3"]
    slow = _write(tmp_path, "slow.json", 300.0, launch_args=args, sglang_version="0.5.24")
    assert dispatch(["compare", str(old), str(slow), "--max-regression", "output_throughput:5%"]) == 1
    out = capsys.readouterr().out
    assert "candidate vs baseline: sglang_version: 0.5.23 -> 0.5.24\n" in out
    assert "candidate vs baseline: launch_args: (none) -> --sim-time-scale 3\n" in out
    assert re.search(r"output_throughput +900\.0 -> 300\.0 \(-66\.7%\) +>= 855\.0 REGRESSED", out), out


def test_cdf_points_are_percent_ranks_and_long_runs_are_thinned() -> None:
    points = html.cdf_points([3.0, 1.0, 2.0])
    assert [x for x, _ in points] == [1.0, 2.0, 3.0]
    assert [y for _, y in points] == pytest.approx([100 / 3, 200 / 3, 100.0])
    thinned = html.cdf_points([float(v) for v in range(10_000)])
    assert len(thinned) == 400
    assert thinned[0] == (0.0, 0.01) and thinned[-1] == (9999.0, 100.0)
    assert [x for x, _ in thinned] == sorted(x for x, _ in thinned)


def _passing() -> list[records.TestRecord]:
    return [t for t in sample.tests() if t.outcome == "passed"]


def test_candidate_changes_are_shown_in_every_output(tmp_path: Path) -> None:
    from pytest_sglang.report.baseline import BaselineContext, parse_limits
    from pytest_sglang.report.fingerprint import fingerprint

    base = BaselineContext("prod.json", {"tests": [], "fingerprint": fingerprint(sample.identity())},
                           parse_limits(None))
    candidate = sample.identity(launch_args=["--tp", "2", "--api-key", "***", "--page-size", "64"])
    report = json_report.build_report(_passing(), candidate, baseline=base.summary(fingerprint(candidate)))
    assert json_report.validation_errors(report) == []
    assert report["baseline"]["candidate_changes"] == [
        {"field": "launch_args", "baseline": "(none)", "candidate": "--page-size 64"}]
    line = "candidate vs baseline: launch_args: (none) -> --page-size 64"
    assert ["baseline candidate compared (same model, GPU and host)", "         prod.json", f"  {line}"] == [
        ln for ln in terminal.render(report) if "baseline" in ln or "prod.json" in ln][:3]
    assert "- candidate vs baseline: launch_args: `(none)` -> `--page-size 64`" in markdown.render(report)
    assert ("<li>candidate vs baseline: launch_args: <code>(none)</code> -&gt; <code>--page-size 64</code></li>"
            in html.render(report))


def test_an_interrupted_run_never_says_passed(tmp_path: Path) -> None:
    report = json_report.build_report(_passing(), sample.identity(), exitstatus=2, interrupted=True)
    assert json_report.validation_errors(report) == [] and report["summary"]["interrupted"] is True
    verdict = "INTERRUPTED: the run was stopped before it finished; 4/4 checks ok in 3 tests"
    lines = terminal.render(report)
    assert lines[-2].startswith(verdict) and not any(ln.startswith("PASSED") for ln in lines), lines[-2:]
    assert f"**{verdict}" in markdown.render(report)
    page = html.render(report)
    assert f'<p class="verdict fail">{verdict}' in page
    failed = json_report.build_report(sample.tests(), sample.identity(), exitstatus=2, interrupted=True)
    assert "FAILED, interrupted: the run was stopped before it finished; 5/6 checks ok" in markdown.render(failed)
    finished = json_report.build_report(_passing(), sample.identity(), exitstatus=0)
    assert finished["summary"]["interrupted"] is False and "**PASSED: 4/4" in markdown.render(finished)


def test_the_headline_counts_what_could_not_be_judged() -> None:
    tests = _passing()
    undecided = GateOutcome("ab", checks=[compare("ab", "output_throughput", 0.6, "<=", 5.0)],
                            unchecked=["p99_ttft_ms: cannot judge a 5% change at this noise",
                                       "median_itl_ms: cannot judge a 5% change at this noise"])
    tests.append(records.TestRecord("t::ab", outcome="skipped", gates=[undecided]))
    report = json_report.build_report(tests, sample.identity(), exitstatus=0)
    verdict = "; 2 not checked"
    shown = " ".join(" ".join(terminal.render(report)).split())  # the terminal wraps the line
    assert "PASSED: 5/5 checks ok in 4 tests (3 passed, 0 failed, 0 errors, 1 skipped)" + verdict in shown
    assert verdict in markdown.render(report) and verdict in html.render(report)
    plain = json_report.build_report(_passing(), sample.identity(), exitstatus=0)
    assert "not checked" not in "\n".join(terminal.render(plain))


def test_escape_sequences_from_the_server_reach_no_output(tmp_path: Path) -> None:
    hostile = "\x1b]0;pwned\x07\x1b[2J\x1b[31mevil/model\x1b[0m\x00\x08\u202e"
    tests = _passing()
    tests.append(records.TestRecord("t::x", outcome="failed", message=f"server said: {hostile}",
                                    gates=[GateOutcome("throughput", [compare("throughput", "error_rate", 1.0,
                                                                              "<=", 0.0, detail=hostile)])]))
    report = json_report.build_report(tests, sample.identity(model=hostile), notes=[f"note {hostile}"])
    outputs = {"terminal": "\n".join(terminal.render(report)), "markdown": markdown.render(report),
               "html": html.render(report)}
    for name, text in outputs.items():
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", text), name
        assert "evil/model" in text, name


def test_compare_cli_never_cuts_a_figure(capsys: pytest.CaptureFixture[str]) -> None:
    """A limit wider than its column used to be cut ("…"): both figures then go whole on the line below."""
    from pytest_sglang.cli.compare import _print_outcomes

    check = compare("baseline", "max_total_num_tokens", 1_000_000_000, ">=", 1_800_000_000,
                    detail="baseline 2,000,000,000, this run 1,000,000,000 (-50.0%)")
    _print_outcomes([GateOutcome("baseline", [check], context={"test": "t.py::test_capacity"})])
    out = capsys.readouterr().out
    assert "…" not in out, out
    assert "2,000,000,000 -> 1,000,000,000 (-50.0%), limit >= 1,800,000,000" in out, out


def test_what_a_passing_gate_could_not_check_is_in_every_report() -> None:
    from pytest_sglang.gates.base import GateOutcome, compare
    from pytest_sglang.report import html, markdown, terminal
    from pytest_sglang.report.json_report import build_report, validation_errors
    from pytest_sglang.report.records import TestRecord

    outcome = GateOutcome("fleet", [compare("fleet", "differing_fields", "none", "==", "none")],
                          unchecked=["worker 1 (http://w1): weights not compared (GET /weights_checker answered 401)"])
    report = build_report([TestRecord("t.py::test_fleet", gates=[GateOutcome.from_dict(outcome.to_dict())])], None)
    assert not validation_errors(report)
    line = "fleet: worker 1 (http://w1): weights not compared (GET /weights_checker answered 401)"
    lines = terminal.render(report)
    assert lines[lines.index("    not checked: fleet: worker 1 (http://w1): weights not compared (GET") + 1] == (
        "      /weights_checker answered 401)")
    assert f"<code>t.py::test_fleet</code> not checked: {line}" in html.render(report)
    assert f"> `t.py::test_fleet` not checked: {line}" in markdown.render(report)
    strict = outcome.strict("drop strict")
    assert not strict.passed and strict.failed[0].metric == "not checked" and strict.failed[0].remedy == "drop strict"
    assert "  not checked: worker 1 (http://w1)" in outcome.message()
