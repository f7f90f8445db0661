"""Baseline verdicts on the simulator: false-alarm rate of A/A runs, detection rate of injected regressions.

Every comparison is a real run of the verdict engine (:func:`pytest_sglang.report.baseline.compare_test`,
the README's ``--sglang-max-regression 5%``) on real load results (``LoadResult.to_dict()``, with their
per-request samples) measured against simulators launched as subprocesses
(``python -m pytest_sglang.simulator``): one server (``single``), 2 workers behind smg with its default
policy (``fleet``: cache_aware) and with ``--policy round_robin`` (``fleet-rr``).

A "run" is ``--repeats`` loads of the shape (the marker's ``repeats=``), each load with other prompts
(seed + k, as the marker's repeats do) so that none hits the prefix cache another filled: the loads
are independent samples of one configuration. To stay affordable the
comparisons reuse loads: ``--pool`` healthy loads are measured once, and each A/A comparison draws two
disjoint sets of ``--repeats`` loads from them (seeded), one the baseline, one the candidate.

- **A/A**: ``--comparisons`` draws. Goal: at most 1 % of comparisons fail.
- **Detection**: the same configuration with an injected regression (``--pool``/2 loads); each
  comparison draws ``--repeats`` healthy loads as the baseline and ``--repeats`` regressed ones:
  - throughput: the whole simulated server 1/0.9 times slower (``--sim-time-scale``): output
    throughput -10 %;
  - p99 TTFT: the whole server 1.2 times slower: every latency, p99 TTFT included, +20 %.
  Slowing one phase only (prefill speed, say) moves TTFT by less than the factor, because under
  load a request's TTFT is mostly the wait for the running decode step; the time scale moves all.
  The injected change actually measured (means of the runs) is printed next to the rate. Goal: at
  least 95 % of comparisons fail on that metric.

Run: ``python benchmarks/bench_verdicts.py [--comparisons 100] [--repeats 3] [--pool 12]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import signal
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from pytest_sglang.fleet.gateway import GatewayMember, gateway_argv, resolve_command, start_gateway
from pytest_sglang.loadgen import LoadSpec, run_load
from pytest_sglang.report.baseline import compare_test, parse_limits
from pytest_sglang.simulator import Simulator
from pytest_sglang.sockets import free_port

LIMITS = "5%"  # the README's recipe
FALSE_ALARM_GOAL = 0.01
DETECTION_GOAL = 0.95
DECODE_MS, PER_REQ_MS, PREFILL_TOK_S = 40.0, 0.2, 20_000.0
SPEED = ("--sim-decode-step-ms", f"{DECODE_MS}", "--sim-decode-step-per-req-ms", f"{PER_REQ_MS}",
         "--sim-prefill-tok-s", f"{PREFILL_TOK_S}")
#: Per setup: workers behind smg (0: one server), the simulated time scale, and smg's --policy (None: its
#: default, cache_aware). Full-scale steps (40 ms real per decode step) so that the simulated timing, not
#: the shared CPU, sets the figures: at a quarter scale the CPU capped a fleet's throughput (two
#: simulators, smg and the client on 2 cores) and put the client's jitter into one server's p99 TTFT.
SETUPS: dict[str, tuple[int, float, str | None]] = {
    "single": (0, 1.0, None), "fleet": (2, 1.0, None), "fleet-rr": (2, 1.0, "round_robin")}
SIM = ("--model-path", "sim/tiny-llama", "--sim-profile", "tiny")


def time_scale(scale: float, slower: float = 1.0) -> tuple[str, str]:
    """The launch args of a server ``slower`` times slower in every simulated duration (the injection)."""
    return ("--sim-time-scale", f"{scale * slower:.8f}")


def wait_until(url: str, what: str, *, workers: int | None = None, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if workers is None:
                if httpx.get(f"{url}/health", timeout=2, trust_env=False).status_code == 200:
                    return
            else:
                listed = httpx.get(f"{url}/workers", timeout=2, trust_env=False).json()["workers"]
                if len(listed) == workers and all(w["is_healthy"] for w in listed):
                    return
        except (httpx.HTTPError, ValueError, KeyError):
            pass
        time.sleep(0.1)
    raise SystemExit(f"timed out after {timeout_s:.0f} s waiting for {what}")


@contextmanager
def serving(work: Path, name: str, workers: int, extra: Sequence[str], policy: str | None = None) -> Iterator[str]:
    """One simulator (workers=0) or ``workers`` simulators behind smg; yields the URL to load."""
    sims = [Simulator([*SIM, *SPEED, *extra], log_path=work / f"{name}-sim{i}.log", wait="none").start()
            for i in range(max(workers, 1))]
    proc = None
    try:
        for sim in sims:
            wait_until(sim.url, f"simulator {sim.url}; see {sim.log_path}")
        if workers == 0:
            yield sims[0].url
            return
        port = free_port()
        argv = gateway_argv(resolve_command(None), host="127.0.0.1", port=port, metrics_port=free_port(),
                            members=[GatewayMember(s.url) for s in sims],
                            args=("--policy", policy) if policy else ())
        url = f"http://127.0.0.1:{port}"
        proc = start_gateway(argv, url=url, log_path=work / f"{name}-gateway.log", env={})
        wait_until(url, f"smg with {workers} workers; see {work / f'{name}-gateway.log'}", workers=workers)
        yield url
    finally:
        if proc is not None:
            proc.stop(1.0)
        for sim in sims:
            sim.stop()


def measure(url: str, spec: LoadSpec, runs: int) -> list[dict[str, Any]]:
    """``runs`` loads of the shape, each with other prompts (as the marker's repeats: a cold prefix cache)."""
    out = []
    for k in range(runs):
        result = run_load(url, dataclasses.replace(spec, seed=spec.seed + k))
        if result.failed:
            raise SystemExit(f"a load failed requests ({result.errors}): the benchmark measures healthy runs")
        out.append(result.to_dict())
    return out


def failed_metrics(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> set[str]:
    """The verdict engine on one comparison (repeats against repeats): the metrics it judged regressed."""
    outcome = compare_test("bench::load", {"loads": old}, new, (), parse_limits(LIMITS))
    assert outcome is not None and outcome.checks, "nothing was compared"
    return {c.metric for c in outcome.checks if not c.passed}


def change_pct(old: list[dict[str, Any]], new: list[dict[str, Any]], metric: str) -> float:
    before = statistics.fmean(d[metric] for d in old)
    return (statistics.fmean(d[metric] for d in new) / before - 1) * 100


def setup(work: Path, name: str, spec: LoadSpec, opts: argparse.Namespace) -> dict[str, Any]:
    workers, scale, policy = SETUPS[name]
    started = time.perf_counter()
    bad = max(opts.pool // 2, opts.repeats)
    with serving(work, f"{name}-a", workers, time_scale(scale), policy) as url:
        healthy = measure(url, spec, opts.pool)
    with serving(work, f"{name}-tput", workers, time_scale(scale, 1 / 0.9), policy) as url:
        slower_10 = measure(url, spec, bad)
    with serving(work, f"{name}-ttft", workers, time_scale(scale, 1.2), policy) as url:
        slower_20 = measure(url, spec, bad)
    measured_s = time.perf_counter() - started
    started = time.perf_counter()
    rng = random.Random(opts.seed)
    alarms: dict[str, int] = {}
    false = 0
    for _ in range(opts.comparisons):
        drawn = rng.sample(healthy, 2 * opts.repeats)
        failed = failed_metrics(drawn[:opts.repeats], drawn[opts.repeats:])
        false += bool(failed)
        for m in failed:
            alarms[m] = alarms.get(m, 0) + 1
    tput = [failed_metrics(rng.sample(healthy, opts.repeats), rng.sample(slower_10, opts.repeats))
            for _ in range(opts.comparisons)]
    ttft = [failed_metrics(rng.sample(healthy, opts.repeats), rng.sample(slower_20, opts.repeats))
            for _ in range(opts.comparisons)]
    return {
        "name": name, "scale": scale, "pairs": opts.comparisons,
        "policy": policy or ("smg's default" if workers else "none (one server)"),
        "false": false, "alarms": alarms,
        "tput": (sum("output_throughput" in f for f in tput), len(tput),
                 change_pct(healthy, slower_10, "output_throughput")),
        "ttft": (sum("p99_ttft_ms" in f for f in ttft), len(ttft), change_pct(healthy, slower_20, "p99_ttft_ms")),
        "loads": len(healthy) + len(slower_10) + len(slower_20), "measured_s": measured_s,
        "judged_s": time.perf_counter() - started,
    }


def main() -> int:
    # SIGTERM unwinds like Ctrl-C, so every simulator and gateway started here is stopped.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--comparisons", "--runs", type=int, default=100,
                        help="A/A comparisons per setup, and as many per injected regression")
    parser.add_argument("--repeats", type=int, default=3, help="loads per run (the marker's repeats=)")
    parser.add_argument("--pool", type=int, default=12, help="healthy loads measured per setup")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--requests", type=int, default=128)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--input-len", type=int, default=512)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--setups", default=",".join(SETUPS),
                        help="comma-separated: single, fleet (2 workers behind smg, its default policy), "
                             "fleet-rr (the same with --policy round_robin)")
    opts = parser.parse_args()
    unknown = sorted(set(opts.setups.split(",")) - set(SETUPS))
    if unknown:
        parser.error(f"--setups {opts.setups}: unknown {', '.join(unknown)}; choose from {', '.join(SETUPS)}")
    if opts.repeats < 1 or opts.pool < 2 * opts.repeats or opts.comparisons < 1:
        parser.error("need --repeats >= 1, --pool >= 2 * --repeats (two disjoint runs) and --comparisons >= 1")
    spec = LoadSpec(requests=opts.requests, concurrency=opts.concurrency, input_len=opts.input_len,
                    output_len=opts.output_len, model="sim/tiny-llama")
    print(f"load: {spec.shape()}; limits --sglang-max-regression {LIMITS}; runs of "
          f"{opts.repeats} repeats drawn from {opts.pool} healthy loads per setup; {opts.comparisons} comparisons each")
    total = time.perf_counter()
    ok = True
    with tempfile.TemporaryDirectory(prefix="bench-verdicts-") as tmp:
        for name in opts.setups.split(","):
            ok &= report(setup(Path(tmp), name, spec, opts))
    print(f"total wall time {time.perf_counter() - total:.1f} s: {'all goals met' if ok else 'GOAL MISSED'}")
    return 0 if ok else 1


def report(row: dict[str, Any]) -> bool:
    """Print one setup's rates as soon as it is measured; whether it met every goal."""
    ok = True
    rate: float = row["false"] / row["pairs"]
    ok &= rate <= FALSE_ALARM_GOAL
    print(f"[{row['name']}] time scale {row['scale']:g}, policy {row['policy']}; false alarms (A/A): "
          f"{row['false']}/{row['pairs']} = {rate:.1%} "
          f"(goal <= {FALSE_ALARM_GOAL:.0%}){'; by metric: ' + str(row['alarms']) if row['alarms'] else ''}")
    for key, metric, injected in (("tput", "output_throughput", "-10%"), ("ttft", "p99_ttft_ms", "+20%")):
        hit, n, change = row[key]
        ok &= hit / n >= DETECTION_GOAL
        print(f"[{row['name']}] detection of {metric} {injected} (measured {change:+.1f}%): {hit}/{n} = "
              f"{hit / n:.1%} (goal >= {DETECTION_GOAL:.0%})")
    print(f"[{row['name']}] wall: {row['loads']} loads in {row['measured_s']:.1f} s, "
          f"{row['pairs'] + row['tput'][1] + row['ttft'][1]} verdicts in {row['judged_s']:.1f} s", flush=True)
    return ok


if __name__ == "__main__":
    raise SystemExit(main())
