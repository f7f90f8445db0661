"""Baseline verdicts on the simulator: false-alarm rate of A/A runs, detection rate of injected regressions.

Every comparison is a real run of the verdict engine (:func:`pytest_sglang.report.baseline.compare_test`,
the README's ``--sglang-max-regression 5%``) on real load results (``LoadResult.to_dict()``, with their
per-request samples) measured against simulators launched as subprocesses
(``python -m pytest_sglang.simulator``): one server (``single``), 2 workers behind smg with its default
policy (``fleet``: cache_aware) and with ``--policy round_robin`` (``fleet-rr``).

A "run" is what one gate session does: a **fresh launch** of the setup and ``--repeats`` loads of the
shape against it (the marker's ``repeats=``, each repeat with other prompts, seed + k, so that none hits
the prefix cache another filled). Every launch sends the same prompts, as two sessions of one suite do.
A run from one launch is never compared with a run from the same launch: a gateway's routing state
(smg's cache-aware tree) carries over from load to load, so repeats of one launch are not independent
of each other, and only separate launches show the variance a baseline and a candidate really differ by.
To stay affordable, runs are reused: ``--launches`` healthy runs are measured once, and the A/A
comparisons are distinct pairs of them (seeded draw); each detection comparison pairs a healthy run
with one of ``--bad-launches`` runs of the regressed server.

- **A/A**: ``--comparisons`` pairs of healthy runs. Goal: at most 1 % of comparisons fail. The pairs
  share runs (15 launches make 105 pairs), so the rate rests on fewer independent runs than pairs.
- **Detection**: a healthy run as the baseline, a run of the same setup with an injected regression as
  the candidate:
  - throughput: the whole simulated server 1/0.9 times slower (``--sim-time-scale``): output
    throughput -10 %;
  - p99 TTFT: the whole server 1.2 times slower: every latency, p99 TTFT included, +20 %.
  Slowing one phase only (prefill speed, say) moves TTFT by less than the factor, because under
  load a request's TTFT is mostly the wait for the running decode step; the time scale moves all.
  The injected change actually measured (means of the runs) is printed next to the rate. Goal: at
  least 95 % of comparisons fail on that metric.

Run: ``python benchmarks/bench_verdicts.py [--comparisons 100] [--repeats 3] [--launches 15] [--bad-launches 7]``.
With ``--runs-dir DIR`` each setup's runs are saved to ``DIR/SETUP.json``, and a later run with the same
``DIR`` judges those runs again instead of measuring (another verdict rule, another ``--seed``): the
measuring is 93 % of the wall time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
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


def measure(url: str, spec: LoadSpec, repeats: int) -> list[dict[str, Any]]:
    """One run: ``repeats`` loads of the shape, each with other prompts (as the marker's repeats)."""
    out = []
    for k in range(repeats):
        result = run_load(url, dataclasses.replace(spec, seed=spec.seed + k))
        if result.failed:
            raise SystemExit(f"a load failed requests ({result.errors}): the benchmark measures healthy runs")
        out.append(result.to_dict())
    return out


def runs(work: Path, name: str, setup_name: str, slower: float, spec: LoadSpec, launches: int,
         repeats: int) -> list[list[dict[str, Any]]]:
    """``launches`` runs, each from a fresh launch of the setup (``slower``: the injected slowdown)."""
    workers, scale, policy = SETUPS[setup_name]
    out = []
    for i in range(launches):
        with serving(work, f"{name}-{i}", workers, time_scale(scale, slower), policy) as url:
            out.append(measure(url, spec, repeats))
    return out


def failed_metrics(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> set[str]:
    """The verdict engine on one comparison (repeats against repeats): the metrics it judged regressed."""
    outcome = compare_test("bench::load", {"loads": old}, new, (), parse_limits(LIMITS))
    assert outcome is not None and outcome.checks, "nothing was compared"
    return {c.metric for c in outcome.checks if not c.passed}


def change_pct(old: list[list[dict[str, Any]]], new: list[list[dict[str, Any]]], metric: str) -> float:
    before = statistics.fmean(d[metric] for run in old for d in run)
    return (statistics.fmean(d[metric] for run in new for d in run) / before - 1) * 100


def pairs(rng: random.Random, count: int, left: int, right: int | None = None) -> list[tuple[int, int]]:
    """``count`` distinct pairs of run indices: (i, j), i < j, of one set, or one of each of two sets."""
    every = ([(i, j) for i in range(left) for j in range(i + 1, left)] if right is None
             else [(i, j) for i in range(left) for j in range(right)])
    return rng.sample(every, min(count, len(every)))


def setup(work: Path, name: str, spec: LoadSpec, opts: argparse.Namespace) -> dict[str, Any]:
    workers, scale, policy = SETUPS[name]
    started = time.perf_counter()
    saved = Path(opts.runs_dir, f"{name}.json") if opts.runs_dir else None
    if saved is not None and saved.exists():  # judge again the runs measured earlier (another rule, seed)
        stored = json.loads(saved.read_text())
        healthy, slower_10, slower_20 = stored["healthy"], stored["slower_10"], stored["slower_20"]
        measured_s = stored["measured_s"]
        print(f"[{name}] judging the runs saved in {saved} (measured earlier, in {measured_s:.1f} s)", flush=True)
    else:
        healthy = runs(work, f"{name}-a", name, 1.0, spec, opts.launches, opts.repeats)
        slower_10 = runs(work, f"{name}-tput", name, 1 / 0.9, spec, opts.bad_launches, opts.repeats)
        slower_20 = runs(work, f"{name}-ttft", name, 1.2, spec, opts.bad_launches, opts.repeats)
        measured_s = time.perf_counter() - started
        if saved is not None:
            saved.parent.mkdir(parents=True, exist_ok=True)
            saved.write_text(json.dumps({"healthy": healthy, "slower_10": slower_10, "slower_20": slower_20,
                                         "measured_s": measured_s}))
    started = time.perf_counter()
    rng = random.Random(opts.seed)
    alarms: dict[str, int] = {}
    aa = pairs(rng, opts.comparisons, len(healthy))
    false = 0
    for i, j in aa:
        failed = failed_metrics(healthy[i], healthy[j])
        false += bool(failed)
        for m in failed:
            alarms[m] = alarms.get(m, 0) + 1
    n = opts.comparisons
    tput = [failed_metrics(healthy[i], slower_10[j]) for i, j in pairs(rng, n, len(healthy), len(slower_10))]
    ttft = [failed_metrics(healthy[i], slower_20[j]) for i, j in pairs(rng, n, len(healthy), len(slower_20))]
    spread = [statistics.fmean(d["output_throughput"] for d in run) for run in healthy]
    return {
        "name": name, "scale": scale, "pairs": len(aa),
        "policy": policy or ("smg's default" if workers else "none (one server)"),
        "false": false, "alarms": alarms,
        "tput": (sum("output_throughput" in f for f in tput), len(tput),
                 change_pct(healthy, slower_10, "output_throughput")),
        "ttft": (sum("p99_ttft_ms" in f for f in ttft), len(ttft), change_pct(healthy, slower_20, "p99_ttft_ms")),
        "runs": (len(healthy), len(slower_10) + len(slower_20)), "spread": (min(spread), max(spread)),
        "loads": opts.repeats * (len(healthy) + len(slower_10) + len(slower_20)), "measured_s": measured_s,
        "judged_s": time.perf_counter() - started,
    }


def main() -> int:
    # SIGTERM unwinds like Ctrl-C, so every simulator and gateway started here is stopped.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--comparisons", "--runs", type=int, default=100,
                        help="A/A comparisons per setup, and as many per injected regression")
    parser.add_argument("--repeats", type=int, default=3, help="loads per run (the marker's repeats=)")
    parser.add_argument("--launches", type=int, default=15,
                        help="healthy runs per setup, each a fresh launch (A/A pairs: launches x (launches-1) / 2)")
    parser.add_argument("--bad-launches", type=int, default=7,
                        help="runs per injected regression, each a fresh launch (pairs: launches x bad-launches)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs-dir", default=None,
                        help="save each setup's measured runs here (SETUP.json); when the file exists, judge "
                             "its runs again instead of measuring (another verdict rule, another --seed)")
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
    if opts.repeats < 1 or opts.launches < 2 or opts.bad_launches < 1 or opts.comparisons < 1:
        parser.error("need --repeats >= 1, --launches >= 2 (a pair), --bad-launches >= 1 and --comparisons >= 1")
    fewest = min(opts.launches * (opts.launches - 1) // 2, opts.launches * opts.bad_launches)
    if fewest < opts.comparisons:
        parser.error(f"--launches {opts.launches} and --bad-launches {opts.bad_launches} make only {fewest} distinct "
                     f"pairs, fewer than --comparisons {opts.comparisons}: launch more or compare fewer")
    spec = LoadSpec(requests=opts.requests, concurrency=opts.concurrency, input_len=opts.input_len,
                    output_len=opts.output_len, model="sim/tiny-llama")
    print(f"load: {spec.shape()}; limits --sglang-max-regression {LIMITS}; runs of "
          f"{opts.repeats} repeats, each run a fresh launch: {opts.launches} healthy and {opts.bad_launches} "
          f"per injection per setup; {opts.comparisons} comparisons each")
    total = time.perf_counter()
    ok = True
    ruled_out: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-verdicts-") as tmp:
        for name in opts.setups.split(","):
            met = report(setup(Path(tmp), name, spec, opts))
            ok &= met is not False
            if met is None:
                ruled_out.append(name)
    verdict = "all goals met" if ok else "GOAL MISSED"
    if ruled_out:
        verdict += f" where they apply; not applicable to {', '.join(ruled_out)} (launches differ beyond the limit)"
    print(f"total wall time {time.perf_counter() - total:.1f} s: {verdict}")
    return 0 if ok else 1


def report(row: dict[str, Any]) -> bool | None:
    """Print one setup's rates as soon as it is measured; whether it met every goal (None: they do not apply).

    The goals apply when the setup's healthy launches agree within the limit: where two healthy
    launches already differ by more than the allowed regression (smg's cache-aware routing splits a
    load differently per launch: docs/fleet.md), no verdict on two launches can both stay quiet on
    them and catch a 10 % drop. Such a setup's rates are printed with the spread that rules them out.
    """
    ok = True
    low, high = row["spread"]
    apart = (high / low - 1) * 100
    goals = apart <= parse_limits(LIMITS).per_metric["output_throughput"]
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
    print(f"[{row['name']}] healthy runs' mean output throughput {low:,.1f}-{high:,.1f} tok/s "
          f"({apart:.1f}% apart) over {row['runs'][0]} launches")
    print(f"[{row['name']}] wall: {row['runs'][0] + row['runs'][1]} launches, {row['loads']} loads in "
          f"{row['measured_s']:.1f} s, "
          f"{row['pairs'] + row['tput'][1] + row['ttft'][1]} verdicts in {row['judged_s']:.1f} s", flush=True)
    if not goals:
        print(f"[{row['name']}] goals do not apply: healthy launches {apart:.1f}% apart, more than the {LIMITS} "
              f"limit: {'met anyway' if ok else 'missed'}, and no verdict on two launches could meet them "
              "(docs/fleet.md: where the split comes from)", flush=True)
        return None
    return ok


if __name__ == "__main__":
    raise SystemExit(main())
