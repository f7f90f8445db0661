"""``eval`` memory: peak RSS of the ``python -m pytest_sglang eval`` process at 1,000, 10,000 and 100,000 examples.

Before the bounded design every example was generated up front and was a task of one ``gather``, and
every outcome (with its output text) was kept: ``--num-examples 1000000000`` reached 3.7 GB in 69 s.
Now the arithmetic examples are generated as they are asked, ``concurrency`` workers take them in
turn, and the result keeps counts and the first wrong answers only: the peak must stay flat (about 1x)
when the examples grow 100x. Each size runs the real command in a fresh process against the
simulator (started once, in another process), and its RSS is sampled every 20 ms by this process.

Run: ``python benchmarks/bench_eval_memory.py [--sizes 1000 10000 100000 --concurrency 64]``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from typing import Any

import psutil

from pytest_sglang.simulator import Simulator

MB = 1e6
#: The tiny profile, with simulated durations scaled down so 100,000 answers take minutes, not hours.
SIM = ("--model-path", "sim/tiny-llama", "--sim-profile", "tiny", "--sim-time-scale", "0.001")


def measure(url: str, examples: int, concurrency: int) -> dict[str, Any]:
    """One ``eval`` run: its wall time, exit status and peak RSS (sampled from outside)."""
    argv = [sys.executable, "-m", "pytest_sglang", "eval", "--url", url, "--task", "arithmetic",
            "--num-examples", str(examples), "--concurrency", str(concurrency), "--max-tokens", "16"]
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watched = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        try:
            peak = max(peak, watched.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        time.sleep(0.02)
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"eval --num-examples {examples} exited {proc.returncode}:\n{err[-2000:]}")
    summary = next((line for line in out.splitlines() if line.startswith("arithmetic: score")), "")
    return {"examples": examples, "wall_s": time.perf_counter() - started, "peak_mb": peak / MB,
            "summary": summary[:60]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    p.add_argument("--concurrency", type=int, default=64)
    args = p.parse_args()
    print(f"bench_eval_memory: eval --task arithmetic --max-tokens 16 --concurrency {args.concurrency} against "
          "the simulator; peak RSS of the eval process")
    print(f"{'examples':>10} {'wall s':>8} {'ex/s':>8} {'peak MB':>8}  result", flush=True)
    runs = []
    with Simulator(list(SIM)) as sim:
        for n in args.sizes:  # each row as it is measured: a long run shows its progress
            run = measure(sim.url, n, args.concurrency)
            runs.append(run)
            print(f"{run['examples']:>10,} {run['wall_s']:>8.1f} {run['examples'] / run['wall_s']:>8.0f} "
                  f"{run['peak_mb']:>8.1f}  {run['summary']}", flush=True)
    small, large = runs[0], runs[-1]
    print(f"peak RSS ratio {large['examples']:,} / {small['examples']:,} examples: "
          f"{large['peak_mb'] / small['peak_mb']:.2f}x (target about 1x, flat in the examples)")


if __name__ == "__main__":
    main()
