"""The process runner + diagnosis on real SGLang 0.5.23 output (replayed by a stand-in command)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from pytest_sglang.errors import ServerExited
from pytest_sglang.server import LaunchConfig, launch

CAPTURES = Path(__file__).resolve().parents[2] / "fixtures" / "captures-0.5.23"

# Writes a recorded server log and dies as real SGLang 0.5.23 does after a failed child: SIGKILL.
REPLAY = textwrap.dedent("""
    import os, signal, sys
    sys.stdout.write(open(sys.argv[1]).read())
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_real_hicache_crash_on_cpu(tmp_path: Path) -> None:
    log = CAPTURES / "hicache" / "server.log"
    config = LaunchConfig(command=(sys.executable, "-c", REPLAY, str(log)), log_dir=tmp_path,
                          startup_timeout_s=30, preflight=False,
                          args=("--enable-hierarchical-cache", "--hicache-size", "1"))
    with pytest.raises(ServerExited) as excinfo:
        launch(config)
    lines = str(excinfo.value).splitlines()
    assert ") exited before it was ready: killed by SIGKILL (SGLang kills its whole process tree when a " \
           "child process fails; see below), after " in lines[0]
    assert lines[1].startswith("Phase reached: allocating host pools (for ")
    assert lines[2] == "Known fatal line: AssertionError: Torch not compiled with CUDA enabled"
    assert lines[3].startswith("  this launch needs a CUDA GPU")
    assert lines[-1] == "Fix: see the explanation of the fatal line above, then read the log."
    assert any(line.startswith("Last 30 lines of ") for line in lines)
