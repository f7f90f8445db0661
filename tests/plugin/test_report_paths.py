"""Report and log paths are checked at configure time: a usage error naming the option, the path and the fix,
before any server starts, instead of a traceback that turns a green run red at its end (issue 11 item 9)."""

from __future__ import annotations

import json
import sys

import pytest
from plugin_helpers import SIM_LAUNCH

FIX_FILE = "Fix: give {where} a file path in a writable directory (it is where {what} is written at the end)"


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    # A launch configured too: the usage error must come before it (no "SGLang ready" line).
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--sglang-simulate",
                                         f"--sglang-launch={SIM_LAUNCH}", *args)


def _usage_error(result: pytest.RunResult, line: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    result.stderr.fnmatch_lines([line])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert "SGLang ready" not in result.stdout.str()


@pytest.mark.parametrize(("option", "what"), [("--sglang-report", "the JSON report"),
                                              ("--sglang-markdown", "the Markdown summary"),
                                              ("--sglang-html", "the HTML report")])
def test_a_report_under_a_file_is_a_usage_error(pytester: pytest.Pytester, option: str, what: str) -> None:
    blocker = pytester.path / "not-a-dir"
    blocker.write_text("")
    target = blocker / "out" / "report"
    result = _run(pytester, f"{option}={target}")
    _usage_error(result, f"ERROR: {option}='{target}': cannot be created: {blocker} is a file, not a directory. "
                         + FIX_FILE.format(where=option, what=what))


def test_a_report_path_that_is_a_directory_is_a_usage_error(pytester: pytest.Pytester) -> None:
    target = pytester.mkdir("reports")
    result = _run(pytester, f"--sglang-html={target}")
    _usage_error(result, f"ERROR: --sglang-html='{target}': is a directory, not a file. "
                         + FIX_FILE.format(where="--sglang-html", what="the HTML report"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc: a directory nobody can write, even root")
def test_a_report_in_an_unwritable_directory_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "--sglang-report=/proc/pytest-sglang/report.json")
    _usage_error(result, "ERROR: --sglang-report='/proc/pytest-sglang/report.json': cannot be written: "
                         "directory /proc is not writable (*). Fix: give --sglang-report a file path *")


def test_a_log_dir_that_is_a_file_is_a_usage_error(pytester: pytest.Pytester) -> None:
    target = pytester.path / "logs"
    target.write_text("")
    result = _run(pytester, f"--sglang-log-dir={target}")
    _usage_error(result, f"ERROR: --sglang-log-dir='{target}': is a file, not a directory. Fix: give "
                         "--sglang-log-dir a writable directory (or one that can be created) for the server logs")


def test_the_error_names_where_the_path_was_set(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    (pytester.path / "blocker").write_text("")
    monkeypatch.setenv("PYTEST_SGLANG_REPORT", str(pytester.path / "blocker" / "r.json"))
    result = _run(pytester)
    _usage_error(result, "ERROR: env PYTEST_SGLANG_REPORT='*': cannot be created: * Fix: give env "
                         "PYTEST_SGLANG_REPORT a file path *")
    monkeypatch.delenv("PYTEST_SGLANG_REPORT")
    pytester.makeini(f"[pytest]\nsglang_markdown = {pytester.path / 'blocker' / 'g.md'}\n")
    _usage_error(_run(pytester), "ERROR: ini option sglang_markdown='*': cannot be created: *")


def test_an_unwritable_github_step_summary_is_a_usage_error(pytester: pytest.Pytester,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.mkdir("summary-dir")))
    _usage_error(_run(pytester), "ERROR: env GITHUB_STEP_SUMMARY='*summary-dir': is a directory, not a file.*")


def test_good_paths_are_created_and_written(pytester: pytest.Pytester) -> None:
    out = pytester.path / "new" / "deeper"
    result = _run(pytester, f"--sglang-report={out / 'r.json'}", f"--sglang-log-dir={out / 'logs'}")
    result.assert_outcomes(passed=1)
    assert json.loads((out / "r.json").read_text())["summary"]["passed"] == 1


def test_collect_only_writes_nothing_so_checks_nothing(pytester: pytest.Pytester) -> None:
    (pytester.path / "blocker").write_text("")
    result = _run(pytester, "--collect-only", f"--sglang-report={pytester.path / 'blocker' / 'r.json'}")
    assert result.ret == pytest.ExitCode.OK


@pytest.mark.parametrize(("content", "problem"), [
    (None, "file not found"),
    ("{not json", "not a readable JSON report (Expecting property name enclosed in double quotes*"),
    ("[]", "not a pytest-sglang report (no 'tests'/'fingerprint')"),
])  # a directory is a baseline of several launches: tests/report/test_launches_with_simulator.py
def test_a_bad_baseline_is_a_usage_error(pytester: pytest.Pytester, content: str | None, problem: str) -> None:
    path = pytester.path / "base.json"
    if content is not None:
        path.write_text(content)
    result = _run(pytester, f"--sglang-baseline={path}")
    _usage_error(result, f"ERROR: --sglang-baseline='{path}': {problem}. Fix: point it to a JSON report "
                         "written with --sglang-report")


def test_a_report_that_cannot_be_written_at_the_end_fails_a_green_run(pytester: pytest.Pytester) -> None:
    # One rule with the suggested floors file: a green run whose output is missing is not green (CI reads it).
    # Writable when checked; replaced by a file during the run (as a full disk or a cleanup job might).
    out = pytester.mkdir("out")
    pytester.makepyfile(test_breaks_dir=f"""
        import shutil
        def test_breaks_the_report_dir():
            shutil.rmtree({str(out)!r})
            open({str(out)!r}, "w").close()
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--sglang-simulate",
                                           f"--sglang-launch={SIM_LAUNCH}", f"--sglang-report={out / 'r.json'}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines([f"sglang: could not write the JSON report to {out / 'r.json'}: *"])
    result.assert_outcomes(passed=1)  # the test itself passed: only the run's exit code says the report is missing
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
