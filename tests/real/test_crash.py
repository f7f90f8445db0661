"""A real launch that dies: HiCache on CPU. The scheduler fails ~25 s in, SGLang kills its own
process tree (launcher included, SIGKILL) and the port never opens."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from realsgl import CRASH_ARGS, RealSetup, launch_options

pytestmark = pytest.mark.real_sglang


def test_dying_real_launch_reports_server_exited(
    pytester: pytest.Pytester, inner_file: Callable[[str], Path], real_setup: RealSetup,
    leftover_check: None,
) -> None:
    inner_file("crash")
    started = time.monotonic()
    result = pytester.runpytest_subprocess(
        *launch_options(real_setup, pytester.path / "logs", *CRASH_ARGS), timeout=300)
    elapsed = time.monotonic() - started
    result.assert_outcomes(errors=2)  # every test needing the server errors; none runs
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "ServerExited: SGLang server http://127.0.0.1:* (mode=process, pid *) exited before it was ready: *",
        "Phase reached: allocating host pools*",  # read from the real log
        "Known fatal line: *Torch not compiled with CUDA enabled*",
        "Last probe: GET /health -> connection refused*",  # the port never opened
        "Last 30 lines of *sglang-*.log:",
        "*Received sigquit from a child process*",
        "Fix: *",
    ])
    # the full diagnosis is shown once; the second test points to it
    assert out.count("Last 30 lines of") == 1, out
    result.stdout.fnmatch_lines(["*full diagnosis in the first error*"])
    # SGLang SIGKILLs its own process tree after a child fails (log: "kill_process_tree called"):
    # blaming the out-of-memory killer would send the user the wrong way
    assert "out-of-memory" not in out, out
    # crash detection, not the 240 s startup deadline, ended the wait (loaded-machine tolerant)
    assert elapsed < 200, elapsed
