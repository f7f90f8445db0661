"""Launch args real SGLang 0.5.23 rejects, the simulator rejects with the same exit code and message.

Real SGLang fails at argument parsing (about 15 s of imports each, no model loaded, no port).
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from realsgl import CPU_ENV, RealSetup

pytestmark = pytest.mark.real_sglang

CASES = {
    "bogus-flag": ["--model-path", "M", "--bogus-flag", "x"],
    "no-model-path": ["--bogus-flag"],
    "bad-choice": ["--model-path", "M", "--attention-backend", "bogus"],
}


def _error(argv: list[str]) -> tuple[int, str]:
    """Exit code and the ``error: ...`` of the last stderr line (without the program name)."""
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env={**CPU_ENV, "PATH": "/usr/bin:/bin"})
    last = proc.stderr.strip().splitlines()[-1]
    return proc.returncode, last[last.index("error: "):]


@pytest.mark.parametrize("case", sorted(CASES))
def test_simulator_rejects_like_real_sglang(real_setup: RealSetup, case: str) -> None:
    real = _error([str(real_setup.python), "-m", "sglang.launch_server", *CASES[case]])
    sim = _error([sys.executable, "-m", "pytest_sglang.simulator", *CASES[case]])
    assert real[0] == 2
    assert sim == real
