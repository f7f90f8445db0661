"""Verdicts across launches on the simulator: A/A false alarms, detection, "cannot judge", launches needed.

Every comparison is a real run of the interleaved A/B verdict
(:func:`pytest_sglang.gates.load.paired.judge_paired`, the README's 5 % limit) on per-launch figures of real
loads measured against simulators launched as subprocesses (``python -m pytest_sglang.simulator``), in
the issue's three setups: one server with ``--sim-launch-jitter 0.03`` (``single``: a speed drawn per
launch, as real GPUs differ across boots), 2 workers behind smg ``--policy round_robin`` (``fleet-rr``)
and behind smg's default policy (``fleet``: cache_aware). ``single-quiet`` (one server, no jitter) is
there for the steady-state window's measurement.

**Measuring: interleaved cycles.** A cycle is 4 fresh launches, one after the other: healthy, the
throughput injection, healthy, the p99 TTFT injection (:data:`CYCLE`). Each launch runs ``--repeats``
loads of the shape (each repeat other prompts, seed + k; every launch the same prompts), and its
figure is the mean over its repeats. A pair is two launches of one cycle, launched back to back:

- **A/A**: (healthy, healthy). Goal: at most 1 % of comparisons fail.
- **Detection**: (healthy, injected). The throughput injection is the whole simulated server 1/0.9
  times slower (``--sim-time-scale``: output throughput -10 %), the p99 TTFT one 1.2 times slower
  (every latency +20 %; slowing one phase only moves TTFT by less, since under load a request's TTFT
  is mostly the wait for the running decode step). Goal: at least 95 % of comparisons fail.
- **Cannot judge** is counted apart from both (goal: at most 5 % of the A/A comparisons).

A comparison with N launches per side draws N distinct cycles (seeded) and judges their pairs;
``--comparisons`` such draws per N (distinct draws, overlapping in cycles: the rates rest on fewer
independent launches than comparisons; the count of cycles is printed). The launches per side a setup
needed is the smallest N that met every goal, printed beside the statistical minimum for the noise
measured (paired differences' spread s: N = (z(1-alpha) + z(power))^2 s^2 / change^2, alpha 1 % one-sided,
power 0.95: about 3 per side for a 10 % change at a 3 % launch-to-launch CV). The wall time per verdict
is 2N launches with their loads, as a ratio to one load run.

**The load's shape** (measured, 2026-12-07: the p99 TTFT's spread over 6 repeats within one launch of
one server, no jitter): with every request 256+32 tokens at concurrency 16 all 16 finish in the same
decode step, so the load runs in lock-step waves; the client sends a wave's next 16 requests over
16-147 ms on a busy 2-core machine, and a request that misses the prefill batch the first ones started
waits for all of it (15 x 256 tokens, about 190 ms). The p99 is then the fate of a wave's last sender
(correlation 0.88 with how long the client took to send a wave): 47 % CV over 64-request loads. Lengths
drawn from [0.5 len, len] (``--range-ratio 0.5``, bench_serving's ``--random-range-ratio``) break the
waves: 10.5 % at 64 requests, 7.7 % at 256; Poisson arrivals (8/s) did not help (15.5 %). A p99 needs
at least 100 requests to be more than their maximum (:func:`pytest_sglang.loadgen.measure.intervals.min_samples`,
the rule of every comparison): so 128 requests, lengths drawn, by default.

Every launch is saved as soon as measured (``--runs-dir``, one JSON line per launch in ``SETUP.jsonl``,
per-request records included); a later run with the same directory resumes the measuring and judges
the saved launches again (another rule, ``--steady``, another ``--seed``) without relaunching.

Run: ``python benchmarks/bench_verdicts.py --runs-dir DIR [--cycles 15] [--setups single,fleet-rr,fleet]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
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

from pytest_sglang.errors import ConfigError
from pytest_sglang.fleet.gateway import GatewayMember, gateway_argv, resolve_command, start_gateway
from pytest_sglang.gates.load.paired import MIN_PAIRS, judge_paired
from pytest_sglang.loadgen import LoadSpec, run_load
from pytest_sglang.loadgen.measure.launch_noise import launches_needed
from pytest_sglang.loadgen.measure.record import RequestRecord
from pytest_sglang.loadgen.measure.steady import steady_metrics
from pytest_sglang.report.baseline import paired_limits
from pytest_sglang.simulator import Simulator
from pytest_sglang.sockets import free_port

LIMIT_PCT = 5.0  # the README's --sglang-max-regression 5%: every judged figure's limit unless --max-regression
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
    "single": (0, 1.0, None), "fleet": (2, 1.0, None), "fleet-rr": (2, 1.0, "round_robin"),
    "single-quiet": (0, 1.0, None)}
#: --sim-launch-jitter per setup: one server draws a speed per launch as real GPUs do across boots (2.8 %);
#: ``single-quiet`` is the same server without it (the steady-state window is measured on both).
JITTER = {"single": 0.03}
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


def measure(url: str, spec: LoadSpec, repeats: int, *, records: bool = False) -> list[dict[str, Any]]:
    """One run: ``repeats`` loads of the shape, each with other prompts (as the marker's repeats)."""
    out = []
    for k in range(repeats):
        result = run_load(url, dataclasses.replace(spec, seed=spec.seed + k))
        if result.failed:
            raise SystemExit(f"a load failed requests ({result.errors}): the benchmark measures healthy runs")
        out.append(result.to_dict(records=records))
    return out


#: One interleaved cycle: (role, injected slowdown). A healthy launch sits next to each launch it is
#: paired with: (healthy 0, healthy 1) is an A/A pair, (healthy 0, tput) and (healthy 1, ttft) the
#: detection pairs, so every pair was launched back to back and shares the machine's drift.
CYCLE = (("healthy", 1.0), ("tput", 1 / 0.9), ("healthy", 1.0), ("ttft", 1.2))


def interleaved(work: Path, setup_name: str, spec: LoadSpec, cycles: int, repeats: int,
                saved: Path) -> list[dict[str, Any]]:
    """``cycles`` cycles of :data:`CYCLE` launches, each saved to ``saved`` (JSON lines) as soon as measured.

    A file already there is resumed: its launches are kept, and only the missing cycles are measured.
    """
    workers, scale, policy = SETUPS[setup_name]
    jitter = ("--sim-launch-jitter", f"{JITTER[setup_name]}") if setup_name in JITTER else ()
    done = [json.loads(line) for line in saved.read_text().splitlines()] if saved.exists() else []
    saved.parent.mkdir(parents=True, exist_ok=True)
    for n in range(len(done), cycles * len(CYCLE)):
        cycle, (role, slower) = divmod(n, len(CYCLE))[0], CYCLE[n % len(CYCLE)]
        started = time.perf_counter()
        with serving(work, f"{setup_name}-{n}", workers, (*time_scale(scale, slower), *jitter), policy) as url:
            ready = time.perf_counter() - started
            loads = measure(url, spec, repeats, records=True)
        row = {"cycle": cycle, "slot": n % len(CYCLE), "role": role, "slower": slower, "ready_s": ready,
               "launch_s": time.perf_counter() - started, "loads": loads}
        with saved.open("a") as f:
            f.write(json.dumps(row) + "\n")
        done.append(row)
        print(f"[{setup_name}] launch {n + 1}/{cycles * len(CYCLE)} ({role}) in {row['launch_s']:.1f} s: "
              f"{statistics.fmean(d['output_throughput'] for d in loads):,.1f} tok/s", flush=True)
    return done[:cycles * len(CYCLE)]



#: The figures judged: (metric, higher is better, the injection that moves it, its size in percent).
JUDGED = (("output_throughput", True, "tput", 10.0), ("p99_ttft_ms", False, "ttft", 20.0))
CANNOT_JUDGE_GOAL = 0.05


def figure(load: dict[str, Any], metric: str, steady: bool) -> float:
    """One load's figure: bench_serving's, or inside its steady-state window (``--steady``)."""
    if not steady:
        return float(load[metric])
    records = [RequestRecord.from_dict(r) for r in load["records"]]
    _, trimmed = steady_metrics(records, load["duration"])
    return float(trimmed[metric]) if trimmed else float(load[metric])


def launch_figure(row: dict[str, Any], metric: str, steady: bool) -> float:
    """A launch's figure: the mean over its repeats."""
    return statistics.fmean(figure(d, metric, steady) for d in row["loads"])


def by_cycle(rows: list[dict[str, Any]]) -> list[dict[str, dict[str, Any]]]:
    """Complete cycles only: {"h0", "tput", "h1", "ttft"} -> the launch's row."""
    names = ("h0", "tput", "h1", "ttft")
    cycles: dict[int, dict[str, dict[str, Any]]] = {}
    for row in rows:
        cycles.setdefault(row["cycle"], {})[names[row["slot"]]] = row
    return [c for _, c in sorted(cycles.items()) if len(c) == len(names)]


def min_per_side(spread_pct: float, change_pct: float) -> int:
    """The issue's statistical minimum (normal approximation, one-sided 1 %, power 0.95) for the noise measured.

    The launch-to-launch CV is the paired differences' spread over the square root of 2 (two launches
    each contribute theirs); at least 2, as a paired verdict needs.
    """
    return max(MIN_PAIRS, launches_needed(change_pct, spread_pct / math.sqrt(2)))


def judge(cycles: list[dict[str, dict[str, Any]]], per_side: int, opts: argparse.Namespace) -> dict[str, Any]:
    """``--comparisons`` distinct draws of ``per_side`` cycles, each judged A/A and on both injections."""
    figs = [{k: {m: launch_figure(row, m, opts.steady) for m, *_ in JUDGED} for k, row in c.items()}
            for c in cycles]
    draws = distinct_draws(random.Random(opts.seed), len(cycles), per_side, opts.comparisons)
    out: dict[str, Any] = {"n": per_side, "draws": len(draws), "false": 0, "cannot": 0, "aa_by_metric": {},
                           "cannot_by_metric": {}}
    for _, _, inj, _ in JUDGED:
        out[inj] = 0
        out[f"{inj}_cannot"] = 0
    # The fewest requests any load completed: a percentile of fewer than it needs is not judged (paired.py).
    counts = [d["completed"] for c in cycles for row in c.values() for d in row["loads"] if "completed" in d]
    requests = min(counts) if counts else None
    for draw in draws:
        verdicts = []
        for metric, higher, inj, _ in JUDGED:
            a = [figs[i]["h0"][metric] for i in draw]
            b = [figs[i]["h1"][metric] for i in draw]
            limit = opts.limits[metric]
            v = judge_paired(a, b, limit_pct=limit, higher_is_better=higher, metric=metric, requests=requests)
            verdicts.append(v.verdict)
            if v.regressed:
                out["aa_by_metric"][metric] = out["aa_by_metric"].get(metric, 0) + 1
            elif v.verdict == "cannot judge":
                out["cannot_by_metric"][metric] = out["cannot_by_metric"].get(metric, 0) + 1
            base = "h0" if inj == "tput" else "h1"
            d = judge_paired([figs[i][base][metric] for i in draw], [figs[i][inj][metric] for i in draw],
                             limit_pct=limit, higher_is_better=higher, metric=metric, requests=requests)
            out[inj] += d.regressed
            out[f"{inj}_cannot"] += d.verdict == "cannot judge"
        out["false"] += "regressed" in verdicts
        out["cannot"] += "regressed" not in verdicts and "cannot judge" in verdicts
    return out


def distinct_draws(rng: random.Random, pool: int, k: int, count: int) -> list[tuple[int, ...]]:
    """Up to ``count`` distinct sorted ``k``-subsets of range(pool) (all of them when there are fewer)."""
    every = math.comb(pool, k)
    if every <= count:
        return list(itertools.combinations(range(pool), k))
    seen: set[tuple[int, ...]] = set()
    while len(seen) < count:
        seen.add(tuple(sorted(rng.sample(range(pool), k))))
    return sorted(seen)


def met(r: dict[str, Any]) -> bool:
    d = r["draws"]
    return bool(r["false"] / d <= FALSE_ALARM_GOAL and r["cannot"] / d <= CANNOT_JUDGE_GOAL
            and r["tput"] / d >= DETECTION_GOAL and r["ttft"] / d >= DETECTION_GOAL)


def paired_spread(cycles: list[dict[str, dict[str, Any]]], metric: str, steady: bool) -> float:
    """Spread (std, %) of the A/A pairs' relative differences: the noise a paired verdict sees through."""
    diffs = [(launch_figure(c["h1"], metric, steady) / launch_figure(c["h0"], metric, steady) - 1) * 100
             for c in cycles]
    return statistics.stdev(diffs) if len(diffs) > 1 else float("nan")


def judge_setup(name: str, rows: list[dict[str, Any]], opts: argparse.Namespace) -> dict[str, Any]:
    cycles = by_cycle(rows)
    if len(cycles) < 2:
        raise SystemExit(f"[{name}] {len(cycles)} complete cycle(s) measured: a paired verdict needs 2; "
                         "measure more (--cycles)")
    started = time.perf_counter()
    results = []
    for n in range(2, len(cycles) + 1):
        if opts.per_side and n not in opts.per_side:
            continue
        results.append(judge(cycles, n, opts))
        if not opts.per_side and met(results[-1]):
            break
    judged_s = time.perf_counter() - started
    spreads = {m: paired_spread(cycles, m, opts.steady) for m, *_ in JUDGED}
    minimum = max(min_per_side(spreads[m], change) for m, _, _, change in JUDGED)
    # What "cannot judge" asks: telling a change of the limit (not of the injection) from none.
    at_limit = max(min_per_side(spreads[m], opts.limits[m]) for m, *_ in JUDGED)
    one_load = statistics.fmean((r["launch_s"] - r["ready_s"]) / len(r["loads"]) for r in rows)
    per_launch = statistics.fmean(r["launch_s"] for r in rows)
    return {"name": name, "cycles": len(cycles), "results": results, "spreads": spreads, "minimum": minimum,
            "at_limit": at_limit,
            "one_load_s": one_load, "per_launch_s": per_launch, "judged_s": judged_s,
            "measured_s": sum(r["launch_s"] for r in rows), "launches": len(rows)}


def report(row: dict[str, Any], opts_comparisons: int, limits: dict[str, float]) -> bool:
    """Print one setup's rates per launches-per-side tried; whether some N met every goal with enough comparisons."""
    name = row["name"]
    workers, _, policy = SETUPS[name]
    what = (f"2 workers behind smg, policy {policy or 'cache_aware (its default)'}" if workers
            else f"one server, --sim-launch-jitter {JITTER.get(name, 0)}")
    print(f"[{name}] {what}: {row['cycles']} interleaved cycles ({row['launches']} launches, "
          f"{row['measured_s']:.0f} s measured); paired A/A differences spread "
          + ", ".join(f"{m} {s:.1f}%" for m, s in row["spreads"].items()))
    for r in row["results"]:
        d = r["draws"]
        by = f" (by metric {r['aa_by_metric']})" if r["aa_by_metric"] else ""
        few = (f" (fewer than --comparisons {opts_comparisons}: {d} distinct draws of {row['cycles']} cycles)"
               if d < opts_comparisons else "")
        print(f"[{name}] N={r['n']} per side, {d} comparisons{few}: A/A false alarms {r['false']}/{d} = "
              f"{r['false'] / d:.1%}{by}; cannot judge {r['cannot']}/{d} = {r['cannot'] / d:.1%}"
              f"{' (by metric ' + str(r['cannot_by_metric']) + ')' if r['cannot_by_metric'] else ''}; detection "
              f"throughput -10% {r['tput']}/{d} = {r['tput'] / d:.1%} (cannot judge {r['tput_cannot']}), "
              f"p99 TTFT +20% {r['ttft']}/{d} = {r['ttft'] / d:.1%} (cannot judge {r['ttft_cannot']})"
              f"{': all goals met' if met(r) else ''}")
    needed = next((r["n"] for r in row["results"] if met(r)), None)
    # The goals together ask for both: seeing the injected changes AND telling a change of the limit from
    # none ("cannot judge" at most 5 %), so their statistical minimum is the larger of the two.
    goals_min = max(row["minimum"], row["at_limit"])
    ratio = f"{needed / goals_min:.2f}x" if needed else "n/a"
    seen = f"; {needed / row['minimum']:.1f}x the first" if needed else ""
    verdict_s = 2 * (needed or row["results"][-1]["n"]) * row["per_launch_s"]
    print(f"[{name}] launches per side needed: {needed if needed else 'none of those tried met the goals'}; "
          f"statistical minimum for the noise measured: {row['minimum']} to see the injected changes, "
          f"{row['at_limit']} to tell a change of the limit ("
          + ", ".join(f"{m} {pct:g}%" for m, pct in limits.items()) + ") from none (what 'cannot judge' asks), "
          f"so {goals_min} for every goal: needed {ratio} of it (goal <= 1.5x{seen}); "
          f"wall time per verdict {verdict_s:.0f} s = {verdict_s / row['one_load_s']:.1f}x one load run "
          f"({row['one_load_s']:.1f} s; a launch with its loads {row['per_launch_s']:.1f} s)", flush=True)
    return needed is not None and needed <= 1.5 * goals_min


def cv_pct(values: Sequence[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values) * 100 if len(values) > 1 else float("nan")


def within_cv_pct(groups: Sequence[Sequence[float]]) -> float:
    """Pooled CV of the repeats of one launch around that launch's mean (the within-launch noise)."""
    dev = [(v / statistics.fmean(g) - 1) ** 2 for g in groups if len(g) > 1 for v in g]
    dof = sum(len(g) - 1 for g in groups if len(g) > 1)
    return math.sqrt(sum(dev) / dof) * 100 if dof else float("nan")


def steady_report(name: str, rows: list[dict[str, Any]]) -> None:
    """Whole-run against steady-state figures of the healthy launches: noise between and within launches."""
    healthy = [r for r in rows if r["role"] == "healthy"]
    if len(healthy) < 2:
        print(f"[{name}] steady-state window: {len(healthy)} healthy launch(es) saved, need 2")
        return
    windows = [steady_metrics([RequestRecord.from_dict(x) for x in d["records"]], d["duration"])[0]
               for r in healthy for d in r["loads"]]
    left = [w.requests - w.kept_requests for w in windows]
    ramp = [w.start for w in windows]
    drain = [w.duration - w.end for w in windows]
    print(f"[{name}] steady-state window over {len(windows)} loads of {len(healthy)} healthy launches: left out "
          f"{statistics.fmean(left):.1f} of {windows[0].requests} requests, {statistics.fmean(ramp):.2f} s ramp-up "
          f"and {statistics.fmean(drain):.2f} s drain of {statistics.fmean(w.duration for w in windows):.2f} s "
          f"(means); {sum(w.empty for w in windows)} loads without a steady state")
    for metric in ("output_throughput", "p99_ttft_ms", "median_ttft_ms"):
        cells = []
        for steady in (False, True):
            groups = [[figure(d, metric, steady) for d in r["loads"]] for r in healthy]
            between = cv_pct([statistics.fmean(g) for g in groups])
            cells.append(f"{'steady' if steady else 'whole run'}: between launches {between:.2f}%, "
                         f"within a launch {within_cv_pct(groups):.2f}%")
        print(f"[{name}]   {metric} CV: " + "; ".join(cells))


def main() -> int:
    # SIGTERM unwinds like Ctrl-C, so every simulator and gateway started here is stopped.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-dir", required=True,
                        help="each setup's launches are saved here (SETUP.jsonl) as measured; an existing file "
                             "is resumed and judged again without relaunching")
    parser.add_argument("--cycles", type=int, default=15, help="interleaved cycles per setup (4 launches each)")
    parser.add_argument("--comparisons", type=int, default=100, help="comparisons per launches-per-side tried")
    parser.add_argument("--per-side", default="",
                        help="comma-separated launches per side to judge (default: 2, 3, ... until the goals are met)")
    parser.add_argument("--repeats", type=int, default=1, help="loads per launch (the marker's repeats=)")
    parser.add_argument("--steady", action="store_true",
                        help="judge figures inside each load's steady-state window (loadgen/measure/steady.py)")
    parser.add_argument("--judge-only", action="store_true", help="judge what --runs-dir holds; launch nothing")
    parser.add_argument("--steady-report", action="store_true",
                        help="also print each setup's noise with and without the steady-state window")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--requests", type=int, default=128,
                        help="requests per load; a p99 needs at least 100 (below, it is not judged: paired.py)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--input-len", type=int, default=256)
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument("--range-ratio", type=float, default=0.5,
                        help="bench_serving's --random-range-ratio: lengths drawn from [ratio*len, len]; below 1 "
                             "the requests stop finishing together, so a burst does not arrive in lock-step waves")
    parser.add_argument("--request-rate", type=float, default=None,
                        help="requests per second (Poisson arrivals, at most --concurrency in flight); default: "
                             "all at once, as bench_serving's inf")
    parser.add_argument("--max-regression", default=f"{LIMIT_PCT:g}%",
                        help="the limit each figure is judged at, in the plugin's syntax: 5%% (every figure) or "
                             "output_throughput:5%%,p99_ttft_ms:10%% (default %(default)s, the README's)")
    parser.add_argument("--setups", default="single,fleet-rr,fleet",
                        help=f"comma-separated, from {', '.join(SETUPS)}")
    opts = parser.parse_args()
    unknown = sorted(set(opts.setups.split(",")) - set(SETUPS))
    if unknown:
        parser.error(f"--setups {opts.setups}: unknown {', '.join(unknown)}; choose from {', '.join(SETUPS)}")
    if opts.repeats < 1 or opts.cycles < 2 or opts.comparisons < 1:
        parser.error("need --repeats >= 1, --cycles >= 2 (a paired verdict needs 2 pairs) and --comparisons >= 1")
    if not 0 < opts.range_ratio <= 1:
        parser.error(f"--range-ratio {opts.range_ratio}: give a ratio in (0, 1], e.g. 0.5")
    if opts.request_rate is not None and not (math.isfinite(opts.request_rate) and opts.request_rate > 0):
        parser.error(f"--request-rate {opts.request_rate}: give requests per second > 0, e.g. 8, or leave it out")
    try:
        opts.per_side = sorted({int(v) for v in opts.per_side.split(",") if v.strip()})
    except ValueError:
        parser.error(f"--per-side {opts.per_side!r}: give whole numbers >= 2, e.g. 3,5,8")
    if any(n < 2 for n in opts.per_side):
        parser.error(f"--per-side {opts.per_side}: a paired verdict needs at least 2 launches per side")
    try:
        limits = paired_limits(opts.max_regression, [m for m, *_ in JUDGED], "--max-regression")
    except ConfigError as exc:
        parser.error(f"--max-regression {opts.max_regression}: {exc.problem}; {exc.fix}")
    missing = [m for m, *_ in JUDGED if m not in limits]
    if missing:
        parser.error(f"--max-regression {opts.max_regression}: no limit for {', '.join(missing)}; give one for "
                     f"each judged figure ({', '.join(m for m, *_ in JUDGED)}) or a bare percentage")
    opts.limits = {m: limits[m] for m, *_ in JUDGED}
    spec = LoadSpec(requests=opts.requests, concurrency=opts.concurrency, input_len=opts.input_len,
                    output_len=opts.output_len, range_ratio=opts.range_ratio, request_rate=opts.request_rate,
                    model="sim/tiny-llama")
    print(f"load: {spec.shape()} x {opts.repeats} repeats per launch; limits "
          + ", ".join(f"{m} {pct:g}%" for m, pct in opts.limits.items()) + "; "
          f"{'steady-state window' if opts.steady else 'whole-run (bench_serving)'} figures; "
          f"{opts.comparisons} comparisons per launches-per-side")
    total = time.perf_counter()
    ok = True
    with tempfile.TemporaryDirectory(prefix="bench-verdicts-") as tmp:
        for name in opts.setups.split(","):
            saved = Path(opts.runs_dir, f"{name}.jsonl")
            if opts.judge_only:
                if not saved.exists():
                    parser.error(f"--judge-only: no launches saved in {saved}; measure them first (the same "
                                 "command without --judge-only)")
                rows = [json.loads(line) for line in saved.read_text().splitlines()]
            else:
                rows = interleaved(Path(tmp), name, spec, opts.cycles, opts.repeats, saved)
            if opts.steady_report:
                steady_report(name, rows)
            ok &= report(judge_setup(name, rows, opts), opts.comparisons, opts.limits)
    print(f"total wall time {time.perf_counter() - total:.1f} s: {'all goals met' if ok else 'GOAL MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
