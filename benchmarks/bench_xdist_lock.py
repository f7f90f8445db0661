"""The run-wide load lock under pytest-xdist, in figures: how far apart two workers start, how long the
second load waits for the first.

``tests/plugin/test_xdist.py`` checks the behaviour (the server never holds requests of both loads at
once); the timing lives here because a busy machine may start one worker late, which is no failure.
This runs ``tests/examples/test_lock_overlap.py`` with ``pytest -n 2 --dist each`` against the simulator
(a barrier makes both workers ask for their load together) and prints, per run and as medians:

* start skew: between the two ``sglang_load`` calls (the barrier keeps it small: ~0.01 s expected);
* the two calls' spans (call to return): the later one waits for the earlier one, so with the lock
  its span is about twice the earlier one's (ratio ~2), without it about the same (~1).

Run: ``python benchmarks/bench_xdist_lock.py [--runs 5]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "tests" / "examples" / "test_lock_overlap.py"
LAUNCH = "--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.05 --sim-decode-step-ms 20"


def one_run(workdir: Path) -> tuple[float, float, float]:
    """(start skew s, earlier call's span s, later call's span s) of one ``-n 2`` run."""
    shutil.copy(EXAMPLE, workdir / EXAMPLE.name)
    (workdir / "pytest.ini").write_text("[pytest]\n")
    env = {**os.environ, "LOCK_DIR": str(workdir)}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "each",
            "--sglang-simulate", f"--sglang-launch={LAUNCH}", EXAMPLE.name]
    done = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"pytest failed:\n{done.stdout}{done.stderr}")
    first, second = sorted((json.loads(p.read_text()) for p in workdir.glob("load-gw*.json")),
                           key=lambda load: load["returned"])
    skew = abs(first["called"] - second["called"])
    return skew, first["returned"] - first["called"], second["returned"] - second["called"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()
    rows = []
    for n in range(options.runs):
        with tempfile.TemporaryDirectory(prefix="bench-xdist-lock-") as tmp:
            rows.append(one_run(Path(tmp)))
        skew, earlier, later = rows[-1]
        print(f"run {n + 1}: start skew {skew:.3f} s, earlier call {earlier:.3f} s, later call {later:.3f} s "
              f"(later/earlier {later / earlier:.2f})")
    print(f"median start skew {statistics.median(r[0] for r in rows):.3f} s (target < 0.1 s); "
          f"median later/earlier {statistics.median(r[2] / r[1] for r in rows):.2f} (~2 with the lock, ~1 without)")


if __name__ == "__main__":
    main()
