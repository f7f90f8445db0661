"""The API key never appears in any output: terminal, JUnit XML, server logs, reports, error messages."""

from __future__ import annotations

import sys
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


ABBREVIATED = "sk-abbrev-never-shown-90e1"
PWD_VALUE = "pwd-never-shown-3c7d"
CONFIG_REPR_TEST = """
def test_config_in_a_failing_assertion(sglang_server):
    assert sglang_server.config.runner == "docker", sglang_server.config
"""


def test_abbreviated_launch_key_is_masked_everywhere_and_authenticates(pytester: pytest.Pytester) -> None:
    """SGLang reads ``--api-ke K`` as ``--api-key K``: so does the plugin (masking, and the Bearer token)."""
    pytester.copy_example("test_server_basic.py")
    pytester.makepyfile(test_config_repr=CONFIG_REPR_TEST)
    log_dir = pytester.path / "logs"
    result = pytester.runpytest_subprocess(
        "--sglang-simulate", f"--sglang-launch={SIM_LAUNCH} --api-ke {ABBREVIATED}",
        f"--sglang-env=MYSQL_PWD={PWD_VALUE}", f"--sglang-log-dir={log_dir}", "--junitxml=junit.xml",
        "--sglang-report=report.json", "-v", "-rA")
    # The server enforces the key: the two server tests pass only if the plugin sends it.
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["sglang: launch args: --model-path sim/tiny-llama * --api-ke ***",
                                 "*AssertionError: LaunchConfig(runner='simulator', args=(*'--api-ke', '***')*"])
    logs = list(log_dir.glob("sglang-*.log"))
    assert any("'api_key': '***'" in log.read_text() for log in logs)  # SGLang's server_args line, after stop
    for text in (result.stdout.str(), result.stderr.str(), _all_text(pytester.path)):
        assert ABBREVIATED not in text
        assert PWD_VALUE not in text


def test_key_given_only_in_the_command_is_masked_and_used(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_server_basic.py")
    log_dir = pytester.path / "logs"
    result = pytester.runpytest_subprocess(
        "--sglang-simulate", f"--sglang-launch={SIM_LAUNCH}",
        f"--sglang-command={sys.executable} -m pytest_sglang.simulator --api-key={ABBREVIATED}",
        f"--sglang-log-dir={log_dir}", "--junitxml=junit.xml", "-v", "-rA")
    result.assert_outcomes(passed=2)
    assert any("'api_key': '***'" in log.read_text() for log in log_dir.glob("sglang-*.log"))
    assert ABBREVIATED not in result.stdout.str() + result.stderr.str() + _all_text(pytester.path)
