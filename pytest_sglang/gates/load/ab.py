"""Interleaved A/B: launch two configurations in turn, one load per launch, judge the paired differences.

A configuration (:class:`ABSide`) is a :class:`LaunchConfig` (launch args, Docker image, the Python
of an SGLang version, Ray) and, for a fleet or a prefill-decode pair, a :class:`FleetSpec` (gateway
args). :func:`run_ab` makes ``launches`` pairs; in each pair A and B are launched one after the
other, each stopped before the next starts, and each runs the same load with the same prompts (the
load's seed is the pair's: pair ``i`` uses ``seed + i``). Pairs differ in their prompts, so no
prefix cache a launch filled can favour a later one.

The order within each pair is drawn per pair (seeded, reported), not strictly alternating: with a
fixed A-then-B order, whatever changes with the position (a machine that warms up over the pair, a
page cache the first launch fills) would be charged to B. Randomized interleaving is what Laaber et
al. (EMSE 2019) found to cut such bias on noisy cloud machines; ``order="alternate"`` (A B, then
B A, ...) is the deterministic choice, with the same balance over an even number of pairs.

One deadline covers the whole run: each launch's start-up wait and each load get what is left.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from pytest_sglang.errors import ConfigError, LoadGenError
from pytest_sglang.fleet.launch import FleetSpec, launch_fleet
from pytest_sglang.gates.base import Check, GateOutcome
from pytest_sglang.gates.load.paired import MIN_PAIRS, PairedVerdict, judge_paired
from pytest_sglang.loadgen import LoadResult, LoadSpec
from pytest_sglang.loadgen.measure.launch_noise import ALPHA, CANNOT_JUDGE, POWER
from pytest_sglang.server.config import LaunchConfig
from pytest_sglang.server.members import Handle
from pytest_sglang.server.start import launch

GATE = "ab"
ORDERS = ("random", "alternate")
#: What an A/B run judges by default, and which way is better (True: higher).
METRICS: dict[str, bool] = {"output_throughput": True, "median_ttft_ms": False, "p99_ttft_ms": False,
                            "median_itl_ms": False}
#: More launches per side than this is a typo, not a plan (each is a full server start).
MAX_LAUNCHES = 1000
#: Each launch's load unless the run gives one (the fixture's fields and the command's flags override
#: it field by field): the bench_serving shape (1024 in, 128 out). 128 requests: the default metrics
#: judge a p99, which needs at least 100 (below, it is "cannot judge" whatever its change). Lengths
#: drawn from [0.5 len, len] (bench_serving's --random-range-ratio): equal lengths finish together and
#: run a burst in lock-step waves, whose p99 TTFT is one request's fate (measured on the simulator: 47 %
#: CV over loads with equal lengths, 10.5 % drawn; docs/reports.md).
DEFAULT_LOAD: Mapping[str, int | float] = {"requests": 128, "concurrency": 8, "input_len": 1024,
                                           "output_len": 128, "range_ratio": 0.5}


def load_fields(given: Mapping[str, object]) -> dict[str, object]:
    """The ``LoadSpec`` fields of an A/B launch: :data:`DEFAULT_LOAD` with ``given`` over it.

    A request rate given without a concurrency sends at that rate uncapped (bench_serving's
    ``--request-rate`` without ``--max-concurrency``), not capped at the default's 8.
    """
    fields: dict[str, object] = {**DEFAULT_LOAD, **given}
    if given.get("request_rate") is not None and "concurrency" not in given:
        fields["concurrency"] = None
    return fields

#: ``load(handle, spec) -> LoadResult``: the plugin passes its run-wide-locked runner, the CLI run_load.
LoadFn = Callable[[Handle, LoadSpec], LoadResult]


@dataclass(frozen=True)
class ABSide:
    """One configuration: how to launch it, and (a fleet or a PD pair) its gateway and workers."""

    label: str
    config: LaunchConfig
    fleet: FleetSpec | None = None


@dataclass(frozen=True)
class LaunchFigures:
    """One launch of one side: where it ran, in which pair and position, and its figures."""

    side: str
    pair: int
    position: int  # 0: first in its pair
    figures: dict[str, float]
    sim_seed: int | None = None
    #: Requests the launch's load completed (its percentiles need enough: intervals.min_samples).
    requests: int | None = None


@dataclass
class ABRun:
    """Every launch of an A/B run, in the order run, with the plan that ordered them."""

    order: str
    seed: int
    launches: list[LaunchFigures] = field(default_factory=list)
    wall_s: float = 0.0

    def side(self, label: str) -> list[LaunchFigures]:
        """``label``'s launches by pair."""
        return sorted((f for f in self.launches if f.side == label), key=lambda f: f.pair)

    @property
    def orders(self) -> list[str]:
        """Per pair, the order run: ``"AB"`` or ``"BA"``."""
        pairs: dict[int, list[LaunchFigures]] = {}
        for f in self.launches:
            pairs.setdefault(f.pair, []).append(f)
        return ["".join(f.side for f in sorted(p, key=lambda f: f.position)) for _, p in sorted(pairs.items())]


def check_plan(launches: object, order: object, *, source: str = "launches", order_source: str = "order") -> None:
    """Refuse a plan that cannot judge anything (fewer than 2 pairs) or is not one (an unknown order)."""
    if isinstance(launches, bool) or not isinstance(launches, int) or not MIN_PAIRS <= launches <= MAX_LAUNCHES:
        raise ConfigError(source, launches, f"must be a whole number of launches per side from {MIN_PAIRS} to "
                          f"{MAX_LAUNCHES} (paired differences need at least {MIN_PAIRS} pairs to have a spread)",
                          "pass e.g. 5")
    if order not in ORDERS:
        raise ConfigError(order_source, order, "unknown order", f"pass one of {', '.join(ORDERS)}")


def pair_orders(launches: int, order: str, seed: int) -> list[str]:
    """Per pair ``"AB"`` or ``"BA"``: drawn per pair from ``seed`` (``random``) or alternating."""
    if order == "alternate":
        return ["AB" if i % 2 == 0 else "BA" for i in range(launches)]
    rng = random.Random(seed)
    return [rng.choice(("AB", "BA")) for _ in range(launches)]


def with_sim_seed(config: LaunchConfig, seed: int) -> tuple[LaunchConfig, int | None]:
    """A simulator launch drawing its own boot speed: ``--sim-launch-jitter`` without a seed gets ``seed``.

    So each launch of the run draws its own speed, reproducibly from the run's seed; a seed the
    user gave is kept (every launch then has that one speed).
    """
    args = config.args
    jitter = any(a == "--sim-launch-jitter" or a.startswith("--sim-launch-jitter=") for a in args)
    seeded = any(a == "--sim-launch-seed" or a.startswith("--sim-launch-seed=") for a in args)
    if config.runner != "simulator" or not jitter or seeded:
        return config, None
    return dataclasses.replace(config, args=(*args, "--sim-launch-seed", str(seed))), seed


def figures_of(result: LoadResult, metrics: Sequence[str]) -> dict[str, float]:
    """The judged figures of one load (a metric the load could not measure is left out)."""
    out = {}
    for name in metrics:
        value = getattr(result, name, None)
        if isinstance(value, (int, float)) and math.isfinite(value) and value > 0:
            out[name] = float(value)
    return out


@contextmanager
def launched(side: ABSide, config: LaunchConfig) -> Iterator[Handle]:
    """``config`` launched (as a fleet when ``side.fleet``), stopped on the way out whatever happened."""
    handle: Handle = launch_fleet(config, side.fleet) if side.fleet is not None else launch(config)
    try:
        yield handle
    finally:
        handle.stop()


def run_ab(a: ABSide, b: ABSide, spec: LoadSpec, load: LoadFn, *, launches: int, order: str = "random",
           seed: int = 0, deadline_s: float, metrics: Sequence[str] = tuple(METRICS),
           say: Callable[[str], None] | None = None) -> ABRun:
    """Launch A and B ``launches`` times each, interleaved, one load of ``spec`` per launch.

    ``deadline_s`` bounds the whole run (every start-up and load); ``say`` gets one line per launch.
    """
    check_plan(launches, order)
    started = time.monotonic()
    run = ABRun(order=order, seed=seed)
    sides = {"A": a, "B": b}
    for pair, sequence in enumerate(pair_orders(launches, order, seed)):
        pair_spec = spec.replace(seed=spec.seed + pair)  # the same prompts for both launches of the pair
        for position, label in enumerate(sequence):
            left = _left(deadline_s, started, len(run.launches), launches)
            side = sides[label]
            index = 2 * pair + position
            config, sim_seed = with_sim_seed(side.config, seed * 10_000 + index)
            config = dataclasses.replace(config, startup_timeout_s=min(config.startup_timeout_s, left))
            with launched(side, config) as handle:
                left = _left(deadline_s, started, len(run.launches), launches)
                timed = pair_spec.replace(load_timeout_s=min(pair_spec.load_timeout_s or left, left))
                result = load(handle, timed)
            figures = figures_of(result, metrics)
            run.launches.append(LaunchFigures(label, pair, position, figures, sim_seed, result.completed))
            if say is not None:
                shown = ", ".join(f"{k} {v:,.1f}" for k, v in figures.items())
                say(f"sglang ab: pair {pair + 1}/{launches} {label} ({position + 1} of {sequence}): {shown}")
    run.wall_s = time.monotonic() - started
    return run


def _left(deadline_s: float, started: float, done: int, launches: int) -> float:
    """Seconds left of the run's one deadline; past it, a :class:`LoadGenError` saying how far the run got."""
    left = deadline_s - (time.monotonic() - started)
    if left <= 0:
        raise LoadGenError(f"the A/B run's deadline ({deadline_s:g} s) passed after {done} of {2 * launches} "
                           "launches; give it more time (timeout_s=) or fewer launches per side")
    return left


def judge_run(run: ABRun, limits: Mapping[str, float], *, alpha: float = ALPHA,
              power: float = POWER) -> list[PairedVerdict]:
    """Each metric with a limit, judged on the run's paired launches (a metric missing in a pair is skipped)."""
    a, b = run.side("A"), run.side("B")
    verdicts = []
    for metric, limit in limits.items():
        pairs = [(x.figures[metric], y.figures[metric]) for x, y in zip(a, b, strict=True)
                 if metric in x.figures and metric in y.figures]
        if len(pairs) < MIN_PAIRS:
            continue
        counts = [f.requests for f in (*a, *b) if f.requests is not None]
        verdicts.append(judge_paired([p[0] for p in pairs], [p[1] for p in pairs], limit_pct=limit, alpha=alpha,
                                     power=power, higher_is_better=METRICS.get(metric, True), metric=metric,
                                     requests=min(counts) if counts else None))
    return verdicts


def outcome_of(run: ABRun, verdicts: Sequence[PairedVerdict], *, describe_a: str = "",
               describe_b: str = "") -> GateOutcome:
    """The run as a gate outcome: a check per metric (fails only on a real regression), "cannot judge" unchecked."""
    outcome = GateOutcome(GATE)
    for v in verdicts:
        if v.verdict == CANNOT_JUDGE:  # not a check that passed: a line every report shows, failed when strict
            outcome.unchecked.append(v.describe())
            continue
        outcome.add(Check(GATE, v.metric, round(v.change_pct, 2), v.limit_pct, "<=", unit="% regression",
                          source="paired launches, B vs A", passed=not v.regressed,
                          detail=f"interval [{v.low_pct:+.1f}%, {v.high_pct:+.1f}%], {v.pairs} pairs",
                          remedy="" if not v.regressed else "B is slower than A beyond the noise: keep A, or find "
                          "which difference of B's configuration costs it"))
    outcome.context.update({
        "A": describe_a, "B": describe_b, "launches per side": len(run.side("A")),
        "order": f"{run.order} (seed {run.seed}): {' '.join(run.orders)}",
        "wall time": f"{run.wall_s:.1f} s"})
    outcome.notes.extend(v.describe() for v in verdicts if v.verdict != CANNOT_JUDGE)
    return outcome
