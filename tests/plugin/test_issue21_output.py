"""What the plugin prints around the tests: quiet CI logs, lines of their own, plain messages."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import SimFactory

ROOT = Path(__file__).resolve().parents[2]
#: A start-up line of the live display (or the line that says where the server serves).
STARTUP = re.compile(r"^(\[sglang [\d.hms]+\]|SGLang ready in|sglang: serving at)")
#: pytest's progress line: a test file, then its dots (and the percentage at the end of the line).
PROGRESS = re.compile(r"^\S+\.py [.FEsx]*\S")


def test_sglang_kill_prints_no_exit_exception(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--sglang-kill")
    assert result.ret == 0
    text = result.stdout.str() + result.stderr.str()
    assert "Exit" not in text and "_pytest.outcomes" not in text, text


def test_a_missing_api_key_is_not_called_none(pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    sim = sim_factory("--api-key", "sk-needed-9b2e")
    pytester.makepyfile("def test_x(sglang_server):\n    pass\n")
    result = pytester.runpytest_subprocess(f"--sglang-url={sim.url}", "-p", "no:cacheprovider")
    out = result.stdout.str()
    assert "=None" not in out, out
    assert "--sglang-api-key='(not set)': GET /server_info" in out and "needs a key and none was given" in out
    assert "server   could not be attached" in out and "FAILED: the server could not be attached;" in out
    assert "did not start" not in out


def test_plugin_lines_never_land_in_a_progress_line(pytester: pytest.Pytester) -> None:
    """Start-up lines of a launch in the middle of a test file start on a line of their own."""
    pytester.makepyfile(test_a="def test_1():\n    pass\n\ndef test_2(sglang_server):\n    pass\n\n"
                               "def test_3():\n    pass\n")
    result = pytester.runpytest_subprocess("--sglang-simulate", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    lines = result.stdout.str().splitlines()
    for line in lines:
        assert not (PROGRESS.match(line) and "sglang" in line.lower()), f"plugin text in a progress line: {line!r}"
    assert any(line.startswith("[sglang ") for line in lines)


@pytest.mark.slow
def test_the_readme_main_job_log_has_at_most_12_startup_lines(pytester: pytest.Pytester) -> None:
    """``.venv/bin/pytest examples/`` in CI (no tty): one line per phase that lasts, not one per weight shard."""
    shutil.copytree(ROOT / "examples", pytester.path / "examples")
    result = pytester.runpytest_subprocess("examples/")
    out = result.stdout.str()
    result.assert_outcomes(passed=6)
    startup = [line for line in out.splitlines() if STARTUP.match(line)]
    assert 0 < len(startup) <= 12, "\n".join(startup)
    assert not any("shards)" in line for line in startup)
