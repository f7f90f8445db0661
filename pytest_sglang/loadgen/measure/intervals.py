"""Noise of load figures: intervals of a figure and of the change between two runs (plain Python).

A load figure (a throughput, a percentile) has two sources of noise that one number hides:

- **within a run**: which requests happened to be slow. Measured by a bootstrap of the per-request
  samples (:class:`Samples`): resample the requests with replacement, recompute the figure.
- **between runs** of the same load shape (repeats): the machine, caches, scheduling. Measured by the
  spread of the per-repeat figures.

Each side's noise is the larger of the two (on the log scale, so a change is a ratio), and the
interval of the change ``new / old`` is ``exp(mean log new - mean log old +- z * se)``. Deterministic
given ``seed``. No pytest, no I/O.
"""

from __future__ import annotations

import functools
import math
import random
import statistics
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pytest_sglang.loadgen.measure.launch_noise import cannot_judge_within, count_needed, judgeable, two_sided
from pytest_sglang.loadgen.measure.stats import percentile

#: Two-sided confidence of every interval.
CONFIDENCE = 0.95
#: Bootstrap resamples per figure: enough for a variance within a few percent.
ROUNDS = 300
#: Per-request samples a load keeps for its interval (uniform, deterministic): bounds a report's size.
MAX_SAMPLES = 1000
SEED = 20261204
_TINY = 1e-9
#: Field names of :class:`Samples` in a report's ``samples`` object.
FIELDS = ("ttft_ms", "e2e_ms", "output_len", "itl_ms")


def min_samples(q: float) -> int:
    """Samples a ``q``-th percentile needs to be more than the sample's extreme: 100 for p99, 20 for p95."""
    if q <= 50:
        return 2
    return math.ceil(100.0 / (100.0 - q))


def metric_percentile(metric: str) -> float | None:
    """The percentile a bench_serving metric name reports (``p99_ttft_ms`` -> 99, ``median_*`` -> 50)."""
    head = metric.split("_", 1)[0]
    if head == "median":
        return 50.0
    if head.startswith("p") and head[1:].isdigit():
        return float(head[1:])
    return None


def reliable(metric: str, samples: int) -> bool:
    """Whether ``samples`` values are enough for ``metric``'s percentile (True for non-percentiles)."""
    q = metric_percentile(metric)
    return q is None or samples >= min_samples(q)


def unreliable_note(metric: str, samples: int, *, noise_pct: float | None = None, limit_pct: float | None = None,
                    repeats: int = 1) -> str | None:
    """A line saying why a figure cannot judge (None when it can).

    A percentile from too few requests is not a measurement. A figure whose noise (``noise_pct``, the
    half-width of its change's interval) exceeds ``limit_pct`` cannot detect a change of the limit's
    size: the line says how many requests or repeats would, the half-width shrinking as one over the
    square root of either (an estimate: the load's own noise, measured once).
    """
    q = metric_percentile(metric)
    if q is not None and samples < min_samples(q):
        return (f"{metric} from {samples} requests is unreliable: a p{q:g} needs at least {min_samples(q)} "
                f"(from {samples} it is about their {'maximum' if q >= 99 else 'largest few'}); raise requests=")
    if noise_pct is None or limit_pct is None or judgeable(count_needed(1, noise_pct, limit_pct), 1):
        return None
    return cannot_judge_within(metric, limit_pct, noise_pct, samples, repeats)


@dataclass(frozen=True)
class Samples:
    """Per-request samples of one or more load runs (ms; ``itl_ms`` is its own, token-level sample)."""

    ttft_ms: tuple[float, ...] = ()
    e2e_ms: tuple[float, ...] = ()
    output_len: tuple[float, ...] = ()
    itl_ms: tuple[float, ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Sequence[float]] | None) -> Samples:
        data = data or {}
        return cls(*(tuple(float(v) for v in data.get(name, ())) for name in FIELDS))

    def to_dict(self) -> dict[str, list[float]]:
        return {name: [round(v, 4) for v in getattr(self, name)] for name in FIELDS}

    def __add__(self, other: Samples) -> Samples:
        return Samples(*(getattr(self, n) + getattr(other, n) for n in FIELDS))

    @property
    def requests(self) -> int:
        return len(self.ttft_ms)


def thin(values: Sequence[float], limit: int = MAX_SAMPLES) -> list[float]:
    """At most ``limit`` values, evenly spaced in the sorted order (keeps every quantile's place)."""
    ordered = sorted(values)
    if len(ordered) <= limit:
        return ordered
    step = (len(ordered) - 1) / (limit - 1)
    return [ordered[round(i * step)] for i in range(limit)]


#: Figure -> (statistic of the per-request samples, whether the requests must stay paired).
#: Throughputs use Little's law: at the run's concurrency, tokens per second move as
#: ``sum(output_len) / sum(e2e)``; its bootstrap is the within-run noise of the throughput.
def _pct(field: str, q: float) -> Callable[[Samples], float]:
    return lambda s: percentile(getattr(s, field), q)


def _ratio(s: Samples) -> float:
    return math.fsum(s.output_len) / max(math.fsum(s.e2e_ms), 1e-9)


def _rate(s: Samples) -> float:
    return len(s.e2e_ms) / max(math.fsum(s.e2e_ms), 1e-9)


STATISTICS: dict[str, tuple[str, Callable[[Samples], float]]] = {
    "output_throughput": ("requests", _ratio),
    "request_throughput": ("requests", _rate),
    **{f"{name}_ttft_ms": ("requests", _pct("ttft_ms", q)) for name, q in
       (("median", 50), ("p90", 90), ("p95", 95), ("p99", 99))},
    **{f"{name}_e2e_latency_ms": ("requests", _pct("e2e_ms", q)) for name, q in
       (("median", 50), ("p90", 90), ("p95", 95), ("p99", 99))},
    **{f"{name}_itl_ms": ("itl", _pct("itl_ms", q)) for name, q in
       (("median", 50), ("p90", 90), ("p95", 95), ("p99", 99))},
}


def _resample(s: Samples, kind: str, rng: random.Random) -> Samples:
    # choices draws an index per value from one random() each: 3x faster than randrange per value.
    if kind == "itl":
        return Samples(itl_ms=tuple(rng.choices(s.itl_ms, k=len(s.itl_ms))))
    n = s.requests
    picks = rng.choices(range(n), k=n)
    out = s.output_len if len(s.output_len) == n else (1.0,) * n
    e2e = s.e2e_ms if len(s.e2e_ms) == n else (1.0,) * n
    return Samples(ttft_ms=tuple(s.ttft_ms[i] for i in picks), e2e_ms=tuple(e2e[i] for i in picks),
                   output_len=tuple(out[i] for i in picks))


def bootstrap_log_var(metric: str, samples: Samples, *, rounds: int = ROUNDS, seed: int = SEED) -> float | None:
    """Variance of ``log(metric)`` over bootstrap resamples of the requests; None: no statistic or samples."""
    return _bootstrap_log_var(metric, samples, rounds, seed)


@functools.lru_cache(maxsize=256)  # one load is compared with several (repeats, benchmarks): bootstrap it once
def _bootstrap_log_var(metric: str, samples: Samples, rounds: int, seed: int) -> float | None:
    found = STATISTICS.get(metric)
    if found is None:
        return None
    kind, stat = found
    size = len(samples.itl_ms) if kind == "itl" else samples.requests
    if size < 2:
        return None
    rng = random.Random(seed ^ zlib.crc32(metric.encode()))
    logs = []
    for _ in range(rounds):
        value = stat(_resample(samples, kind, rng))
        logs.append(math.log(max(value, 1e-12)))
    return statistics.pvariance(logs)


@dataclass(frozen=True)
class Side:
    """One run's view of a figure: its per-repeat values and its within-run (bootstrap) log variance."""

    figures: tuple[float, ...]
    boot_var: float | None = None

    @property
    def center(self) -> float:
        """Geometric mean of the repeats (the repeat itself for one)."""
        return math.exp(statistics.fmean(math.log(max(f, 1e-12)) for f in self.figures))

    @property
    def between_var(self) -> float | None:
        """Variance of the mean log figure from the repeats' spread (None for one repeat)."""
        if len(self.figures) < 2:
            return None
        logs = [math.log(max(f, 1e-12)) for f in self.figures]
        return statistics.variance(logs) / len(logs)

    @property
    def var(self) -> float | None:
        """The larger noise estimate (None: nothing measured the noise)."""
        known = [v for v in (self.between_var, self.boot_var) if v is not None]
        return max(known) if known else None

    @property
    def measured_by(self) -> str:
        parts = []
        if self.boot_var is not None:
            parts.append("per-request bootstrap")
        if len(self.figures) >= 2:
            parts.append(f"{len(self.figures)} repeats")
        return " and ".join(parts) or "nothing (one repeat, no per-request samples)"


def side(metric: str, figures: Sequence[float], samples: Samples | Sequence[Samples] | None, *,
         seed: int = SEED) -> Side:
    """The :class:`Side` of ``metric`` for the repeats ``figures`` and each repeat's ``samples``.

    The within-run noise of the repeats' mean log figure is the mean of each repeat's bootstrap
    variance over the number of repeats (each repeat bootstrapped once: cached).
    """
    if samples is None:
        return Side(tuple(float(f) for f in figures))
    each = [samples] if isinstance(samples, Samples) else list(samples)
    found = [bootstrap_log_var(metric, one, seed=seed) for one in each]
    known = [v for v in found if v is not None]
    boot = statistics.fmean(known) / len(known) if known else None
    return Side(tuple(float(f) for f in figures), boot)


def z_value(confidence: float = CONFIDENCE, df: int | None = None) -> float:
    """The interval's two-sided multiplier: Student's t for a spread from ``df`` degrees of freedom, else normal.

    Few repeats estimate their spread loosely: t widens the interval for it (:func:`.launch_noise.two_sided`).
    """
    return two_sided(confidence, df)


def simultaneous(count: int, confidence: float = CONFIDENCE) -> float:
    """Each interval's confidence so that ``count`` of them hold together with ``confidence`` (Bonferroni).

    A baseline judges several metrics of one load and fails on any: at 95% each, 7 metrics of a noisy
    fleet raised false alarms in 5% of A/A comparisons (``benchmarks/bench_verdicts.py``).
    """
    return 1 - (1 - confidence) / max(count, 1)


def _df(*sides: Side) -> int | None:
    """Degrees of freedom of the repeats' spread, when it is the noise that counts (else None: normal)."""
    spread = [s for s in sides if s.between_var is not None and s.var == s.between_var]
    return sum(len(s.figures) - 1 for s in spread) or None


@dataclass(frozen=True)
class Interval:
    """A point estimate and its two-sided interval (``low <= point <= high``)."""

    point: float
    low: float
    high: float
    #: False: no noise was measured; the interval is the point.
    measured: bool = True


def figure_interval(s: Side, confidence: float = CONFIDENCE) -> Interval:
    """The interval of one run's figure (for a floor)."""
    var = s.var
    center = s.center
    if var is None:
        return Interval(center, center, center, measured=False)
    half = z_value(confidence, _df(s)) * math.sqrt(var)
    return Interval(center, center * math.exp(-half), center * math.exp(half))


def ratio_interval(old: Side, new: Side, confidence: float = CONFIDENCE) -> Interval:
    """The interval of ``new / old`` (1.0 = unchanged) from both sides' noise."""
    if old.center <= _TINY and new.center <= _TINY:  # both zero (e.g. no ITL gaps): unchanged
        return Interval(1.0, 1.0, 1.0, measured=False)
    point = new.center / old.center if old.center > _TINY else math.inf
    known = [v for v in (old.var, new.var) if v is not None]
    if not known or not math.isfinite(point):
        return Interval(point, point, point, measured=False)
    # A side whose noise is unmeasured counts with the other side's: the same shape on the same setup.
    var = (old.var if old.var is not None else max(known)) + (new.var if new.var is not None else max(known))
    half = z_value(confidence, _df(old, new)) * math.sqrt(var)
    return Interval(point, point * math.exp(-half), point * math.exp(half))


def regression_interval(ratio: Interval, higher_is_better: bool) -> Interval:
    """The interval of the regression in percent (positive = worse) from the interval of ``new / old``."""
    if higher_is_better:
        return Interval((1 - ratio.point) * 100, (1 - ratio.high) * 100, (1 - ratio.low) * 100, ratio.measured)
    return Interval((ratio.point - 1) * 100, (ratio.low - 1) * 100, (ratio.high - 1) * 100, ratio.measured)


def regressed(change: Interval, allowed_pct: float) -> bool:
    """Regressed when the change is beyond the allowed regression *and* beyond the noise.

    Beyond the noise: the interval of the regression excludes "no change" (``low > 0``). Asking the
    whole interval to clear the limit instead would prove a regression larger than the limit: on
    this machine that detected a 10% drop at a 5% limit in 41% of runs (``bench_verdicts.py``),
    while the point-and-noise rule keeps A/A false alarms within the same 1% goal.
    """
    if not change.measured:
        return change.point > allowed_pct
    return change.point > allowed_pct and change.low > 0.0


#: Repeats each run needs before :func:`every_pair_regressed` can decide: with 3 against 3, the 9
#: pairs all fall one way in 1 of 20 orderings of exchangeable repeats, before each pair must also
#: clear the limit and its own noise.
MIN_REPEATS_EVERY_PAIR = 3


def repeat_sides(metric: str, figures: Sequence[float], samples: Sequence[Samples] | None, *,
                 seed: int = SEED) -> list[Side]:
    """One :class:`Side` per repeat (its figure and its own bootstrap); [] when figures and samples differ."""
    if samples is None or len(samples) != len(figures):
        return []
    return [side(metric, [figure], one, seed=seed) for figure, one in zip(figures, samples, strict=True)]


def every_pair_regressed(old: Sequence[Side], new: Sequence[Side], allowed_pct: float, higher_is_better: bool,
                         confidence: float = CONFIDENCE) -> Interval | None:
    """The weakest pair's regression when every repeat of ``new`` regressed against every repeat of ``old``.

    The mean's interval takes the repeats' spread as noise, so one wild repeat widens it until it
    cannot exclude "no change" even when every repeat of the candidate is worse than every repeat
    of the baseline: a +20 % p99 TTFT behind a gateway, one of whose 21 repeats doubled, was judged
    not regressed in 15 of 100 comparisons (``benchmarks/bench_verdicts.py``). Judged pair by pair
    (each pair's interval from the two repeats' bootstraps, :func:`regressed`), that run is a
    regression; a pair that is not, or fewer than :data:`MIN_REPEATS_EVERY_PAIR` repeats a side,
    returns None. The returned interval is the pair with the smallest regression.
    """
    if min(len(old), len(new)) < MIN_REPEATS_EVERY_PAIR:
        return None
    weakest: Interval | None = None
    for before in old:
        for after in new:
            change = regression_interval(ratio_interval(before, after, confidence), higher_is_better)
            if not change.measured or not regressed(change, allowed_pct):
                return None
            if weakest is None or change.point < weakest.point:
                weakest = change
    return weakest
