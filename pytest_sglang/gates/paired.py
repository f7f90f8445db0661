"""The verdict of an interleaved A/B run: paired differences between launches of A and of B.

Launch ``i`` of A and launch ``i`` of B ran one after the other, on the same machine, with the same
prompts. The figure judged is the paired relative difference ``(B_i - A_i) / A_i``, signed so that a
positive value is a regression, and its one-sided Student-t bound over the pairs. Pairing cancels what
two neighbouring launches share (the machine's state, its drift over the run), which is most of the
between-launch noise on a shared machine (Bulej et al., ICPE 2020, "duet benchmarking").

Three verdicts, as Datadog's regression detector and the issue ask (an effect AND a confidence):

- **fail**: the mean regression is beyond the limit AND the interval lies beyond zero;
- **cannot judge**: not a failure, but the noise measured is too large for this many pairs to tell a
  change of the limit from none (the detectable change at ``alpha`` and ``power`` exceeds the limit):
  the verdict says how many launches per side would;
- **pass**: otherwise.

Everything here is a plain function of numbers (no pytest, no server): the benchmark calls
:func:`judge_paired` directly.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Verdict = Literal["pass", "fail", "cannot judge"]

#: A paired t-interval needs at least two pairs (one difference has no spread).
MIN_PAIRS = 2
#: Beyond this many launches per side the answer is "too noisy to judge by launching more".
MAX_NEEDED = 1000


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
    #: Launches per side that would judge a change of the limit at this noise (None when not computed).
    needed_per_side: int | None
    alpha: float
    power: float

    @property
    def failed(self) -> bool:
        return self.verdict == "fail"

    def describe(self) -> str:
        """One line: the metric, the change with its interval, and the verdict in words."""
        head = (f"{self.metric}: B vs A {self.change_pct:+.1f}% regression, interval [{self.low_pct:+.1f}%, "
                f"{self.high_pct:+.1f}%] over {self.pairs} pairs (paired differences spread {self.spread_pct:.1f}%)")
        if self.verdict == "fail":
            return f"{head}: beyond the {self.limit_pct:g}% limit and beyond the noise"
        if self.verdict == "cannot judge":
            more = ("" if self.needed_per_side is None else
                    f"; more than {self.needed_per_side - 1} launches per side would be needed" if
                    self.needed_per_side >= MAX_NEEDED else
                    f"; about {self.needed_per_side} launches per side would (power {self.power:g})")
            return f"{head}: cannot judge a {self.limit_pct:g}% change at this noise{more}"
        return f"{head}: within the {self.limit_pct:g}% limit"


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile (exact for 1 and 2 degrees of freedom, Cornish-Fisher beyond: < 0.5 % off at 3)."""
    if not 0 < p < 1 or df < 1:
        raise ValueError(f"t_quantile needs 0 < p < 1 and df >= 1, got p={p!r}, df={df!r}")
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    z = statistics.NormalDist().inv_cdf(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


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
        raise ValueError(f"judge_paired: alpha={alpha!r} must be between 0 and 0.5, e.g. 0.05")
    if not 0.5 <= power < 1:
        raise ValueError(f"judge_paired: power={power!r} must be from 0.5 to below 1, e.g. 0.95")


def judge_paired(a: Sequence[float], b: Sequence[float], *, limit_pct: float, alpha: float = 0.05,
                 power: float = 0.95, higher_is_better: bool = True, metric: str = "") -> PairedVerdict:
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
    needed = launches_needed(spread, limit_pct, alpha=alpha, power=power)
    if mean > limit_pct and low > 0:
        verdict: Verdict = "fail"
    elif needed > n:
        verdict = "cannot judge"
    else:
        verdict = "pass"
    return PairedVerdict(metric=metric, verdict=verdict, change_pct=mean, low_pct=low, high_pct=high,
                         limit_pct=limit_pct, pairs=n, spread_pct=spread, needed_per_side=needed, alpha=alpha,
                         power=power)


def launches_needed(spread_pct: float, limit_pct: float, *, alpha: float, power: float) -> int:
    """Pairs a one-sided paired t-test needs to see a ``limit_pct`` change at ``power``, given the spread."""
    if spread_pct == 0:
        return MIN_PAIRS
    n = MIN_PAIRS
    while n < MAX_NEEDED:
        df = n - 1
        if (t_quantile(1 - alpha, df) + t_quantile(power, df)) * spread_pct / math.sqrt(n) <= limit_pct:
            return n
        n += 1
    return n
