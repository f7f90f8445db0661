"""Trends over nightly history: how often ``python -m pytest_sglang trend`` finds a 10 % step, and stays quiet.

Every verdict is a real run of the trend engine (:func:`pytest_sglang.report.trend.analyse`, Apache Otava
with its defaults) on real JSON report files, one per generated nightly run (30 per history). Two noise
models for the launch-to-launch variation of a nightly figure:

- **cv3**: log-normal with a CV of 3 % (real GPUs: about 2.8 % across boots);
- **sim**: the simulator's own launches with ``--sim-launch-jitter 0.03``: ``--launches`` fresh launches,
  each measured with one small load (output throughput, median TTFT). A generated night draws one of those
  measured launches (with replacement), so the history carries the simulator's real noise, load noise
  included. Launches without jitter are measured too, to show what the jitter adds.

Per noise model and metric (output_throughput; with ``sim`` also median_ttft_ms):

- **step**: ``--series`` histories of 30 runs, the metric 10 % worse from run 20 on. *Located*: the full
  history shows a change point within 3 runs of run 20. *Nightly*: the history is replayed night by
  night (``trend`` with its defaults after each run is added), and the delay is the number of runs at
  the new level on the first night that fails (exit 1; 1 = the night of the step itself); the rate
  of delays <= 3 is printed.
- **A/A**: ``--series`` flat histories of 30 runs. *Clean*: the full history shows no change point. And
  the nightly false alarms: histories in which any night from the 6th to the 30th failed.

Goals: located >= 95 %, detected within 3 runs of the step (nightly) >= 90 %, A/A clean >= 95 %; they
apply to a metric whose measured noise (CV) is at most half the step: no detector finds a 10 % step
in 20 % noise within 3 runs.

Run: ``python benchmarks/bench_trend.py [--series 100] [--launches 20] [--noise cv3,sim]``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import signal
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pytest_sglang.loadgen import LoadSpec, run_load
from pytest_sglang.report.history import Run, in_order, read_run
from pytest_sglang.report.trend import NEW_REGRESSION, analyse
from pytest_sglang.simulator import Simulator

RUNS, STEP_AT, STEP, WITHIN = 30, 20, 0.10, 3
LOCATED_GOAL, NIGHTLY_GOAL, CLEAN_GOAL = 0.95, 0.90, 0.95
#: Full-scale simulated steps (40 ms per decode step, as bench_verdicts.py): at a fraction of that, the shared
#: CPU's own jitter (2 cores, other jobs) rather than the simulated timing sets the figures.
SIM = ("--model-path", "sim/tiny-llama", "--sim-profile", "tiny", "--sim-decode-step-ms", "40",
       "--sim-decode-step-per-req-ms", "0.2", "--sim-prefill-tok-s", "20000")
SPEC = LoadSpec(requests=48, concurrency=8, input_len=128, output_len=32, model="sim/tiny-llama")
#: The figures followed: a p99 of 48 requests is their maximum, too noisy to follow; the median is not.
SIM_METRICS = ("output_throughput", "median_ttft_ms")
NODEID = "test_nightly.py::test_throughput"
Draw = Callable[[random.Random], float]
#: Engine settings other than the command's defaults (--confirm).
KNOBS: dict[str, int] = {}


def measure_launches(launches: int, jitter: float, work: Path) -> dict[str, list[float]]:
    """One small load per fresh launch: each metric's figure per launch."""
    figures: dict[str, list[float]] = {m: [] for m in SIM_METRICS}
    for i in range(launches):
        sim = Simulator([*SIM, "--sim-launch-jitter", f"{jitter}"], log_path=work / f"sim-{jitter}-{i}.log",
                        timeout_s=120).start()
        try:
            result = run_load(sim.url, SPEC)
        finally:
            sim.stop()
        if result.failed:
            raise SystemExit(f"a load failed requests ({result.errors}); see {sim.log_path}")
        for metric in figures:
            figures[metric].append(float(getattr(result, metric)))
    return figures


def lognormal(rng: random.Random, cv_: float) -> float:
    """A draw with mean 1 and CV ``cv_``, as the simulator's --sim-launch-jitter draws its factor."""
    sigma = math.sqrt(math.log1p(cv_ * cv_))
    return rng.lognormvariate(-sigma * sigma / 2, sigma)


def cv(values: Sequence[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values)


def history(folder: Path, metric: str, values: Sequence[float]) -> list[Run]:
    """Write one report per night and read them back as the command does."""
    folder.mkdir(parents=True)
    for i, value in enumerate(values):
        report = {"generated_at": f"2026-11-{1 + i // 24:02d}T{i % 24:02d}:00:00+00:00", "run_label": f"n{i}",
                  "fingerprint": {"model": "m", "runner": "simulator", "launch_args": []},
                  "tests": [{"nodeid": NODEID, "loads": [{"max_concurrency": 8, "completed": 32, "failed": 0,
                                                           metric: value}]}]}
        (folder / f"{i}.json").write_text(json.dumps(report))
    return in_order([read_run(str(p), [metric]) for p in folder.glob("*.json")])


def nightly_delay(runs: Sequence[Run]) -> int | None:
    """Runs at the new level on the first night that fails (1: the night of the step; None: no night failed)."""
    for night in range(STEP_AT + 1, RUNS + 1):
        if analyse(runs[:night], **KNOBS).exit_code == NEW_REGRESSION:
            return night - STEP_AT
    return None


def false_alarm(runs: Sequence[Run]) -> bool:
    return any(analyse(runs[:night], **KNOBS).exit_code == NEW_REGRESSION for night in range(6, RUNS + 1))


def rates(work: Path, metric: str, draw: Draw, series: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    worse = 1 - STEP if metric == "output_throughput" else 1 + STEP
    located = within = clean = alarms = 0
    delays: list[int | None] = []
    for k in range(series):
        step = history(work / f"{metric}-step-{k}", metric,
                       [draw(rng) * (worse if i >= STEP_AT else 1.0) for i in range(RUNS)])
        found = analyse(step).findings
        position = {id(run): i for i, run in enumerate(step)}
        located += any(abs(position[id(f.run)] - STEP_AT) <= WITHIN and f.worse for f in found)
        delay = nightly_delay(step)
        delays.append(delay)
        within += delay is not None and delay <= WITHIN
        flat = history(work / f"{metric}-aa-{k}", metric, [draw(rng) for _ in range(RUNS)])
        clean += not analyse(flat).findings
        alarms += false_alarm(flat)
    seen = sorted(d for d in delays if d is not None)
    print(f"    runs at the new level on the first night that fails: "
          f"{', '.join(f'{d}: {seen.count(d)}' for d in sorted(set(seen)))}; never: {delays.count(None)}")
    return {"located": located / series, "within": within / series, "clean": clean / series,
            "alarms": alarms / series}


def show(name: str, metric: str, r: dict[str, float], noise: float) -> bool:
    """Print the rates; the goals apply while the step is at least 2 noise sigmas (``noise``: the CV)."""
    met = r["located"] >= LOCATED_GOAL and r["within"] >= NIGHTLY_GOAL and r["clean"] >= CLEAN_GOAL
    applies = noise <= STEP / 2
    verdict = ("met" if met else "MISSED") if applies else (
        f"goals do not apply: the noise (CV {noise:.1%}) is more than half the {STEP:.0%} step")
    print(f"  {name:<5} {metric:<18} step located {r['located']:6.1%} (goal >= {LOCATED_GOAL:.0%}), "
          f"nightly within {WITHIN} runs {r['within']:6.1%} (goal >= {NIGHTLY_GOAL:.0%}); "
          f"A/A clean {r['clean']:6.1%} (goal >= {CLEAN_GOAL:.0%}), nightly false alarms {r['alarms']:5.1%}: "
          f"{verdict}")
    return met or not applies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=100, help="histories per kind (step, A/A)")
    parser.add_argument("--launches", type=int, default=20, help="simulator launches measured per jitter setting")
    parser.add_argument("--noise", default="cv3,sim", help="comma-separated: cv3, sim")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--confirm", type=int, default=None, help="runs at the new level a change point needs "
                        "before it fails a night (default the command's)")
    opts = parser.parse_args()
    if opts.series < 1 or opts.launches < 3:
        parser.error("need --series >= 1 and --launches >= 3")
    if opts.confirm is not None:
        KNOBS["confirm"] = opts.confirm
    # A SIGTERM unwinds like Ctrl-C, so the simulator being measured is stopped (finally), not left behind.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    ok, started = True, time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-trend-") as tmp:
        work = Path(tmp)
        print(f"{opts.series} step and {opts.series} A/A histories of {RUNS} runs per model; step {STEP:.0%} worse "
              f"from run {STEP_AT}")
        if "cv3" in opts.noise.split(","):
            ok &= show("cv3", "output_throughput", rates(work / "cv3", "output_throughput",
                                                          lambda rng: 1000 * lognormal(rng, 0.03), opts.series,
                                                          opts.seed), 0.03)
        if "sim" in opts.noise.split(","):
            t0 = time.perf_counter()
            calm = measure_launches(max(3, opts.launches // 2), 0.0, work)
            jittered = measure_launches(opts.launches, 0.03, work)
            print(f"  simulator, {SPEC.shape()}: launch-to-launch CV without jitter "
                  f"{', '.join(f'{m} {cv(v):.2%}' for m, v in calm.items())} ({len(calm[SIM_METRICS[0]])} launches); "
                  f"with --sim-launch-jitter 0.03 {', '.join(f'{m} {cv(v):.2%}' for m, v in jittered.items())} "
                  f"({opts.launches} launches, {time.perf_counter() - t0:.0f} s)")
            for metric, measured in jittered.items():
                ok &= show("sim", metric, rates(work / "sim", metric, lambda rng, m=measured: rng.choice(m),
                                                opts.series, opts.seed), cv(measured))
    print(f"total wall time {time.perf_counter() - started:.1f} s: {'all goals met' if ok else 'GOAL MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
