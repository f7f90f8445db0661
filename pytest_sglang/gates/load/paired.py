"""The verdict of an interleaved A/B run: paired differences between launches of A and of B.

Launch ``i`` of A and launch ``i`` of B ran one after the other, on the same machine, with the same
prompts. The figure judged is the paired relative difference ``(B_i - A_i) / A_i``, signed so that a
positive value is a regression, and its one-sided Student-t bound over the pairs. Pairing cancels what
two neighbouring launches share (the machine's state, its drift over the run), which is most of the
between-launch noise on a shared machine (Bulej et al., ICPE 2020, "duet benchmarking").

The three verdicts and the power calculation are :mod:`pytest_sglang.loadgen.measure.launch_noise`'s (one rule
for every launch verdict of the project):

- **regressed**: the mean regression is beyond the limit AND the one-sided ``1 - alpha`` bound lies
  beyond zero (an effect AND a confidence, as Datadog's regression detector asks);
- **cannot judge**: not regressed, but the spread of the paired differences is too large for this many
  pairs to see a change of the limit at ``power``: the verdict says how many launches per side would;
- **passed**: otherwise.

Everything here is a plain function of numbers (no pytest, no server): the benchmark calls
:func:`judge_paired` directly.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_sglang.loadgen.measure.launch_noise import (
    ALPHA,
    CANNOT_JUDGE,
    POWER,
    REGRESSED,
    Verdict,
    launches_needed,
    t_quantile,
    verdict,
)

#: A paired t-interval needs at least two pairs (one difference has no spread).
MIN_PAIRS = 2


@dataclass(frozen=True)
class PairedVerdict:
    """One metric's A/B verdict; percentages are regressions (positive = B worse than A)."""

    metric: str
    verdict: Verdict
    #: Mean paired regression of B against A, in percent.
    change_pct: float
    #: The two-sided ``1 - 2*alpha`` t-interval of the mean regression (its low end is the one-sided bound).
    low_pct: float
    high_pct: float
    limit_pct: float
    pairs: int
    #: Standard deviation of the paired differences (percent): the noise the verdict had to see through.
    spread_pct: float
    #: Launches per side that would see a change of the limit at this noise (launch_noise's power calculation).
    needed_per_side: int
    alpha: float
    power: float

    @property
    def regressed(self) -> bool:
        return self.verdict == REGRESSED

    def describe(self) -> str:
        """One line: the metric, the change with its interval, and the verdict in words."""
        head = (f"{self.metric}: B vs A {self.change_pct:+.1f}% regression, interval [{self.low_pct:+.1f}%, "
                f"{self.high_pct:+.1f}%] over {self.pairs} pairs (paired differences spread {self.spread_pct:.1f}%)")
        if self.verdict == REGRESSED:
            return f"{head}: beyond the {self.limit_pct:g}% limit and beyond the noise"
        if self.verdict == CANNOT_JUDGE:
            return (f"{head}: cannot judge a {self.limit_pct:g}% change at this noise; about {self.needed_per_side} "
                    f"launches per side would (power {self.power:g}, one-sided {self.alpha:.0%})")
        return f"{head}: within the {self.limit_pct:g}% limit"


def regressions_pct(a: Sequence[float], b: Sequence[float], *, higher_is_better: bool) -> list[float]:
    """Per pair, B's regression against A in percent (a throughput drop and a latency rise are positive)."""
    out = []
    for x, y in zip(a, b, strict=True):
        change = (y - x) / x * 100
        out.append(-change if higher_is_better else change)
    return out


def _check(a: Sequence[float], b: Sequence[float], limit_pct: float, alpha: float, power: float) -> None:
    if len(a) != len(b):
        raise ValueError(f"judge_paired needs one figure of A and one of B per pair, got {len(a)} and {len(b)}")
    if len(a) < MIN_PAIRS:
        raise ValueError(f"judge_paired needs at least {MIN_PAIRS} pairs (one difference has no spread), "
                         f"got {len(a)}")
    for side, values in (("A", a), ("B", b)):
        for v in values:
            if not math.isfinite(v) or v <= 0:
                raise ValueError(f"judge_paired: {side}'s figure {v!r} is not a positive finite number")
    if not math.isfinite(limit_pct) or limit_pct <= 0:
        raise ValueError(f"judge_paired: limit_pct={limit_pct!r} must be a positive percentage, e.g. 5")
    if not 0 < alpha < 0.5:
        raise ValueError(f"judge_paired: alpha={alpha!r} must be between 0 and 0.5, e.g. 0.01")
    if not 0.5 < power < 1:
        raise ValueError(f"judge_paired: power={power!r} must be between 0.5 and 1, e.g. 0.95")


#: Beyond this many launches per side the count is "far too many" (each is a full server start).
MAX_NEEDED = 10_000


def pairs_needed(spread_pct: float, limit_pct: float, *, alpha: float = ALPHA, power: float = POWER) -> int:
    """Launches per side whose paired differences of this spread would see a ``limit_pct`` change at ``power``.

    launch_noise's calculation is for two independent sides of CV ``c`` (a difference of spread
    ``c * sqrt(2)``); a paired difference's spread is measured directly, so it enters as
    ``spread / sqrt(2)``. Its t quantiles take the degrees of freedom of the run that would be made
    (``m - 1`` for ``m`` pairs), not of the few pairs that measured the spread: the smallest ``m`` that
    is enough at its own degrees of freedom.
    """
    cv = spread_pct / math.sqrt(2)
    m = max(MIN_PAIRS, launches_needed(limit_pct, cv, alpha=alpha, power=power))
    while m < MAX_NEEDED and launches_needed(limit_pct, cv, alpha=alpha, power=power, df=m - 1) > m:
        m += 1
    return m


def judge_paired(a: Sequence[float], b: Sequence[float], *, limit_pct: float, alpha: float = ALPHA,
                 power: float = POWER, higher_is_better: bool = True, metric: str = "") -> PairedVerdict:
    """Judge B against A from their per-launch figures, pair ``i`` being A's and B's ``i``-th launch.

    ``limit_pct`` is the regression that matters (5 for 5 %); ``alpha`` the one-sided false-alarm
    rate; ``power`` the chance wanted of seeing a change of the limit. Raises ``ValueError`` for
    figures or parameters that cannot be judged (fewer than 2 pairs, a non-positive figure).
    """
    _check(a, b, limit_pct, alpha, power)
    diffs = regressions_pct(a, b, higher_is_better=higher_is_better)
    n = len(diffs)
    mean = statistics.fmean(diffs)
    spread = statistics.stdev(diffs)
    half = t_quantile(1 - alpha, n - 1) * spread / math.sqrt(n)
    low, high = mean - half, mean + half
    needed = pairs_needed(spread, limit_pct, alpha=alpha, power=power)
    judged = verdict(mean > limit_pct and low > 0, needed, n)
    return PairedVerdict(metric=metric, verdict=judged, change_pct=mean, low_pct=low, high_pct=high,
                         limit_pct=limit_pct, pairs=n, spread_pct=spread, needed_per_side=needed, alpha=alpha,
                         power=power)
