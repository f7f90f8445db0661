"""--sglang-kill and the start of a run stop servers left behind by a pytest that was SIGKILLed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from plugin_helpers import OWNER_ENV


def _leftover(pytester: pytest.Pytester) -> subprocess.Popen[bytes]:
    """A process tagged as a server of a pytest that no longer exists (a dead pid)."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    env = {**os.environ, OWNER_ENV: f"{dead.pid}:deadbeefdeadbeef"}
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env=env,
                            start_new_session=True)


def _run_with_orphan(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, int]:
    """Run pytest while an orphan exists. Other pytest-sglang runs on a shared machine reap
    orphans too, so retry (a few times) when ours vanished before our run saw it."""
    for _ in range(4):
        orphan = _leftover(pytester)
        try:
            result = pytester.runpytest_subprocess(*args)
            if f"stopped pid {orphan.pid} " in result.stdout.str():
                assert orphan.wait(timeout=30) is not None
                return result, orphan.pid
        finally:
            if orphan.poll() is None:
                orphan.kill()
    raise AssertionError(f"the orphan was never reported by pytest {' '.join(args)}")


def test_sglang_kill_reports_and_stops_leftovers(pytester: pytest.Pytester) -> None:
    result, pid = _run_with_orphan(pytester, "--sglang-kill")
    assert result.ret == 0
    # Other leftovers of dead runs on this machine may be listed (and stopped) too.
    result.stdout.fnmatch_lines(["sglang: * leftover(s) of earlier runs:",
                                 f"  stopped pid {pid} (left by pytest pid *"])


def test_sglang_kill_with_nothing_left(pytester: pytest.Pytester) -> None:
    """Sibling tests on other xdist workers plant orphans at any time; each run reaps what it saw, so
    the run after a reaping one finds nothing unless a new orphan appeared in between (retry a few)."""
    for _ in range(4):
        result = pytester.runpytest_subprocess("--sglang-kill")
        assert result.ret == 0
        if "leftover(s) of earlier runs:" not in result.stdout.str():
            break
    result.stdout.fnmatch_lines(["sglang: no leftover servers of earlier pytest-sglang runs found"])


def test_next_run_reaps_leftovers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(): pass")
    result, pid = _run_with_orphan(pytester, "--sglang-simulate")  # reaping happens before launches
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"sglang: earlier run left a server behind: stopped pid {pid} *"])
