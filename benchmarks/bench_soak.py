"""The soak gate's two promises, measured against the simulator (issue 20, piece 3).

(a) A 10 MB/min leak (``--sim-fault leak:10``, the simulator's real RSS) is caught by a soak with
    ``max_rss_growth_mb_per_min=5`` within 10 minutes: prints the time to detection (target <= 600 s).
(b) Healthy soaks (a fresh simulator each, start-up growth included) are never failed: prints how many of
    ``--healthy N`` failed (target 0).

The soak is the gate's own engine (``run_soak``, ``stop_reason``, ``judge``) with the marker's defaults
(warm-up a tenth of the soak, about 120 samples, stop early once proven). Run with
``nice -n 10 python benchmarks/bench_soak.py [--healthy 20] [--healthy-duration 60] [--skip-leak]``.
"""

from __future__ import annotations

import argparse
import time

from pytest_sglang.gates.base import GateOutcome
from pytest_sglang.gates.production.soak import Limits, default_interval, default_warmup, judge, stop_reason
from pytest_sglang.loadgen.soak.run import SoakRun, SoakSpec, process_tree_rss_mb, run_soak
from pytest_sglang.simulator import Simulator

DETECT_TARGET_S = 600.0
LIMIT_MB_PER_MIN = 5.0
SIM = ("--model-path", "sim/tiny-llama", "--enable-metrics")


def soak(extra: tuple[str, ...], limits: Limits, duration_s: float, concurrency: int) -> tuple[SoakRun, GateOutcome]:
    warm = default_warmup(duration_s)
    spec = SoakSpec(duration_s, concurrency=concurrency, input_len=256, output_len=64,
                    sample_interval_s=default_interval(duration_s))
    with Simulator([*SIM, *extra]) as sim:
        assert sim.proc is not None
        pid = sim.proc.pid
        run = run_soak(sim.url, spec, rss=lambda: process_tree_rss_mb(pid), rss_source=f"pid {pid}",
                       stop_when=lambda r: stop_reason(r, limits, warm))
    return run, judge(run, limits, warm)


def leak(concurrency: int) -> None:
    limits = Limits(max_rss_growth_mb_per_min=LIMIT_MB_PER_MIN)
    started = time.monotonic()
    run, outcome = soak(("--sim-fault", "leak:10"), limits, DETECT_TARGET_S, concurrency)
    caught = not outcome.checks[0].passed
    print(f"(a) leak:10 MB/min, limit {LIMIT_MB_PER_MIN:g} MB/min, soak {DETECT_TARGET_S:g} s: "
          f"{'caught' if caught else 'NOT caught'} after {run.duration_s:.1f} s of load "
          f"({time.monotonic() - started:.1f} s wall, stopped early: {run.stopped_early or 'no'})")
    print(f"    {outcome.checks[0].describe()}")
    for note in outcome.notes:
        print(f"    {note}")
    print(f"    time to detection {run.duration_s:.1f} s (target <= {DETECT_TARGET_S:g} s): "
          f"{'OK' if caught and run.duration_s <= DETECT_TARGET_S else 'MISSED'}")


def healthy(n: int, duration_s: float, concurrency: int) -> None:
    limits = Limits(max_rss_growth_mb_per_min=LIMIT_MB_PER_MIN, max_kv_free_drift=0.01, max_stall_s=10.0)
    failed, lows = 0, []
    for i in range(n):
        _, outcome = soak((), limits, duration_s, concurrency)
        rss = outcome.checks[0]
        lows.append(rss.measured if isinstance(rss.measured, float) else float("nan"))
        if not outcome.passed:
            failed += 1
            print(f"    healthy soak {i + 1} FAILED: {outcome.message().splitlines()[0]}")
    print(f"(b) healthy soaks of {duration_s:g} s (fresh simulator each), limits rss {LIMIT_MB_PER_MIN:g} MB/min, "
          f"kv drift 0.01/min, stall 10 s: {failed} of {n} failed (target 0); RSS growth lower bounds "
          f"min {min(lows):.3f} / max {max(lows):.3f} MB/min")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--healthy", type=int, default=20, help="healthy soaks to run (default 20)")
    parser.add_argument("--healthy-duration", type=float, default=60.0, help="seconds per healthy soak")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--skip-leak", action="store_true", help="only the healthy soaks")
    args = parser.parse_args()
    if not args.skip_leak:
        leak(args.concurrency)
    if args.healthy:
        healthy(args.healthy, args.healthy_duration, args.concurrency)


if __name__ == "__main__":
    main()
