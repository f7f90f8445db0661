"""The API key never appears in any output: terminal, JUnit XML, server logs, reports, error messages."""

from __future__ import annotations

from pathlib import Path

import pytest
from plugin_helpers import SIM_LAUNCH

KEY = "sk-never-shown-4b9e2a"
HF = "hf_never_shown_77d1c0"


def _all_text(root: Path) -> str:
    """Every file the run wrote, the server logs included: SGLang prints its server_args (api_key
    included) there while it runs, and the engine scrubs each log in place once the server stopped."""
    return "\n".join(path.read_text(errors="replace") for path in root.rglob("*") if path.is_file())


def test_api_key_in_no_output_file(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_server_basic.py")
    pytester.copy_example("test_capacity_marker.py")
    log_dir = pytester.path / "logs"
    result = pytester.runpytest_subprocess(
        "--sglang-simulate", f"--sglang-launch={SIM_LAUNCH} --api-key {KEY}", f"--sglang-api-key={KEY}",
        f"--sglang-env=HF_TOKEN={HF}", f"--sglang-log-dir={log_dir}", "--junitxml=junit.xml",
        "--sglang-report=report.json", "-v", "-rA", "-s")
    result.assert_outcomes(passed=3, failed=1)  # the unmet capacity gate prints its message too
    logs = list(log_dir.glob("sglang-*.log"))
    assert logs, "the server log must exist"
    # SGLang's own server_args line had the key while the server ran: masked in place after the stop.
    assert any("'api_key': '***'" in log.read_text() for log in logs)
    for text in (result.stdout.str(), result.stderr.str(), _all_text(pytester.path)):
        assert KEY not in text
        assert HF not in text


def test_api_key_not_in_start_failure(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_needs_server_twice.py")
    result = pytester.runpytest_subprocess(
        "--sglang-simulate", f"--sglang-launch={SIM_LAUNCH} --api-key {KEY} --sim-fault crash-at:weights",
        "--junitxml=junit.xml")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(["Last * lines of *sglang-*.log:"])  # the tail is shown, scrubbed
    assert KEY not in result.stdout.str() + result.stderr.str() + _all_text(pytester.path)
