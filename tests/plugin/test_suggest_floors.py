"""``--sglang-suggest-floors``: the floors it prints are floors a re-run passes."""

from __future__ import annotations

import json
import re

import pytest

from pytest_sglang.gates.suggest import suggest_floors
from tests.conftest import SimFactory

MARKED = """
import pytest

@pytest.mark.sglang_throughput(min_output_tok_s={tok_s}, min_request_s={req_s},
                               requests=48, concurrency=8, input_len=128, output_len=32)
def test_tp():
    pass
"""


def test_suggested_floors_hold_on_a_rerun(pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    sim = sim_factory()
    # Floors no server meets: measure-only does not judge them.
    pytester.makepyfile(test_tp=MARKED.format(tok_s=10**9, req_s=10**9))
    first = pytester.runpytest_subprocess(f"--sglang-url={sim.url}", "--sglang-suggest-floors",
                                          "-p", "no:cacheprovider")
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(["sglang suggested floors (the worst end of each figure's 95% interval, 50% margin*",
                                "  test_tp.py::test_tp: @pytest.mark.sglang_throughput(min_output_tok_s=*, "
                                "min_request_s=*, ...)",
                                f"sglang suggested floors JSON: {pytester.path / 'sglang-suggested-floors.json'}"])
    saved = json.loads((pytester.path / "sglang-suggested-floors.json").read_text())
    floors = saved["tests"]["test_tp.py::test_tp"]["floors"]
    printed = re.search(r"min_output_tok_s=([\d.e+]+), min_request_s=([\d.e+]+)", first.stdout.str())
    assert printed is not None and float(printed[1]) == floors["min_output_tok_s"]

    pytester.makepyfile(test_tp=MARKED.format(tok_s=floors["min_output_tok_s"], req_s=floors["min_request_s"]))
    second = pytester.runpytest_subprocess(f"--sglang-url={sim.url}", "-p", "no:cacheprovider")
    second.assert_outcomes(passed=1)
    second.stdout.fnmatch_lines(["*throughput output_throughput*ok"])


def test_without_the_option_the_same_floors_fail(pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    sim = sim_factory()
    pytester.makepyfile(test_tp=MARKED.format(tok_s=10**9, req_s=10**9))
    pytester.runpytest_subprocess(f"--sglang-url={sim.url}", "-p", "no:cacheprovider").assert_outcomes(failed=1)


def test_the_rule_takes_the_worst_figure_with_the_margin() -> None:
    assert suggest_floors({"min_output_tok_s": [1000.0, 800.0], "max_ttft_ms_p99": [10.0, 30.0]}, 0.25) == {
        "min_output_tok_s": 600.0, "max_ttft_ms_p99": 37.5}
    assert suggest_floors({"min_request_s": []}) == {}
    with pytest.raises(ValueError, match="margin=1"):
        suggest_floors({"min_request_s": [1.0]}, 1)
    with pytest.raises(ValueError, match="min_ or max_"):
        suggest_floors({"requests": [1.0]})


def test_the_option_reads_env_and_ini(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_SGLANG_SUGGEST_FLOORS", "maybe")
    result = pytester.runpytest("--sglang-url=http://127.0.0.1:9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*PYTEST_SGLANG_SUGGEST_FLOORS*maybe*"])


def test_the_margin_is_an_option_written_into_the_json_and_works_under_xdist(
        pytester: pytest.Pytester, sim_factory: SimFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    sim = sim_factory()
    pytester.makepyfile(test_tp=MARKED.format(tok_s=10**9, req_s=10**9))
    monkeypatch.setenv("PYTEST_SGLANG_SUGGEST_FLOORS_MARGIN", "15%")
    result = pytester.runpytest_subprocess(f"--sglang-url={sim.url}", "--sglang-suggest-floors", "-n", "2",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    # Before: the workers' suggestions never reached the controller, which printed "no sglang_throughput load
    # completed a request", and the margin was fixed at 50%.
    result.stdout.fnmatch_lines(["sglang suggested floors (the worst end of each figure's 95% interval, 15% margin*",
                                 "  test_tp.py::test_tp: @pytest.mark.sglang_throughput(min_output_tok_s=*"])
    assert "no sglang_throughput load completed" not in result.stdout.str()
    saved = json.loads((pytester.path / "sglang-suggested-floors.json").read_text())
    assert saved["margin"] == 0.15
    entry = saved["tests"]["test_tp.py::test_tp"]
    low = entry["plausible_range"]["min_output_tok_s"][0]
    assert entry["floors"]["min_output_tok_s"] == float(f"{low * 0.85:.3g}")


@pytest.mark.parametrize(("value", "problem"), [
    ("lots", "expected a number, e.g. 900 or 2.5"),
    ("0.2", "is ambiguous: 0.2% or 20%? Write the percent sign, e.g. 20%"),
    ("100%", "must be a percentage from 0% to below 100%, e.g. 20%"),
    ("-5%", "must be a percentage from 0% to below 100%, e.g. 20%"),
    ("nan", "expected a finite number, e.g. 900 or 2.5"),
])
@pytest.mark.parametrize("where", ["cli", "env", "ini"])
def test_a_bad_margin_is_a_usage_error_naming_where_it_came_from(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, value: str, problem: str, where: str) -> None:
    args = ["--sglang-url=http://127.0.0.1:9", "--sglang-suggest-floors"]
    shown = {"cli": "--sglang-suggest-floors-margin", "env": "env PYTEST_SGLANG_SUGGEST_FLOORS_MARGIN",
             "ini": "ini option sglang_suggest_floors_margin"}[where]
    if where == "cli":
        args.append(f"--sglang-suggest-floors-margin={value}")
    elif where == "env":
        monkeypatch.setenv("PYTEST_SGLANG_SUGGEST_FLOORS_MARGIN", value)
    else:
        pytester.makeini(f"[pytest]\nsglang_suggest_floors_margin = {value}\n")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {shown}='{value}': {problem}. Fix: *"])


def test_an_unwritable_floors_file_is_a_usage_error_before_the_run(pytester: pytest.Pytester) -> None:
    target = pytester.mkdir("sglang-suggested-floors.json")
    pytester.makepyfile(test_tp=MARKED.format(tok_s=1, req_s=1))
    result = pytester.runpytest_subprocess("--sglang-url=http://127.0.0.1:9", "--sglang-suggest-floors",
                                           "-p", "no:cacheprovider")
    # Before: nothing was checked; the end of the run said "could not write the suggested floors: ..." and exit 0.
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --sglang-suggest-floors='{target}': the suggested floors' file is a "
                                 "directory, not a file. Fix: start pytest in a writable directory, or give "
                                 "--sglang-report PATH (the floors go next to it, as PATH with the suffix "
                                 ".floors.json)"])


FOLDER_TAKEN = """
import os
import pytest

@pytest.mark.sglang_throughput(min_output_tok_s=10**9, requests=16, concurrency=4, input_len=32, output_len=8)
def test_tp():
    # After the configure-time check: the floors' file can no longer be written at the end.
    os.mkdir("sglang-suggested-floors.json")
"""


def test_a_floors_file_that_cannot_be_written_at_the_end_names_it_and_fails_the_run(
        pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    sim = sim_factory()
    pytester.makepyfile(test_tp=FOLDER_TAKEN)
    result = pytester.runpytest_subprocess(f"--sglang-url={sim.url}", "--sglang-suggest-floors",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"sglang: could not write the suggested floors to "
                                 f"{pytester.path / 'sglang-suggested-floors.json'}: Is a directory"])


def test_a_margin_without_suggested_floors_is_named_in_the_header(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest("--sglang-url=http://127.0.0.1:9", "--sglang-suggest-floors-margin=20%")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["sglang: not used without --sglang-suggest-floors: "
                                 "--sglang-suggest-floors-margin (cli)"])
